//! The C library's own functions, looked up once with `dlsym(RTLD_NEXT, name)`: every call
//! this library does not serve itself goes to them unchanged.
//!
//! Each wrapper resolves its symbol on first use and keeps the address in an atomic (a race
//! resolves it twice, to the same address). A symbol the C library lacks aborts the process
//! with a message: the application would call into nothing otherwise.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{
    c_int, c_uint, c_ulong, c_void, epoll_event, fd_set, iovec, msghdr, nfds_t, off_t, pollfd, sigset_t,
    size_t, sockaddr, socklen_t, ssize_t, timespec, timeval,
};

/// The address of `name` (NUL-terminated) in the objects loaded after this one.
fn lookup(slot: &AtomicUsize, name: &'static str) -> usize {
    let cached = slot.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: `name` is NUL-terminated (the macro appends the NUL); RTLD_NEXT is a valid handle.
    let addr = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if addr == 0 {
        let msg =
            format!("slimtcp-preload: the C library has no {}; aborting\n", name.trim_end_matches('\0'));
        // SAFETY: writes a buffer we own to stderr; then aborts.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::abort();
        }
    }
    slot.store(addr, Ordering::Relaxed);
    addr
}

macro_rules! real {
    ($( $(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty; )*) => {
        $(
            $(#[$doc])*
            /// The C library's own function of this name.
            ///
            /// # Safety
            /// The C function's own contract.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static SLOT: AtomicUsize = AtomicUsize::new(0);
                let addr = lookup(&SLOT, concat!(stringify!($name), "\0"));
                // SAFETY: `addr` is the C library's definition of this symbol, whose C
                // prototype is the one written here.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(addr) };
                // SAFETY: the caller keeps the function's contract.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

/// The C library's `_exit`.
///
/// # Safety
/// The C function's contract (it does not return).
pub unsafe fn _exit(status: c_int) -> ! {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let addr = lookup(&SLOT, "_exit\0");
    // SAFETY: the C library's `_exit`, whose prototype this is.
    let f: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(addr) };
    // SAFETY: the caller's call.
    unsafe { f(status) }
}

/// The C library's `_Exit`.
///
/// # Safety
/// The C function's contract (it does not return).
#[allow(non_snake_case)] // the C name
pub unsafe fn _Exit(status: c_int) -> ! {
    static SLOT: AtomicUsize = AtomicUsize::new(0);
    let addr = lookup(&SLOT, "_Exit\0");
    // SAFETY: the C library's `_Exit`, whose prototype this is.
    let f: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(addr) };
    // SAFETY: the caller's call.
    unsafe { f(status) }
}

real! {
    fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int;
    fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fn listen(fd: c_int, backlog: c_int) -> c_int;
    fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    fn shutdown(fd: c_int, how: c_int) -> c_int;
    fn close(fd: c_int) -> c_int;
    fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    fn setsockopt(fd: c_int, level: c_int, name: c_int, val: *const c_void, len: socklen_t) -> c_int;
    fn getsockopt(fd: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int;
    fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t;
    fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t;
    fn recvfrom(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    fn sendto(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
    fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    fn sendfile(out: c_int, input: c_int, offset: *mut off_t, count: size_t) -> ssize_t;
    fn sendfile64(out: c_int, input: c_int, offset: *mut off_t, count: size_t) -> ssize_t;
    fn pread(fd: c_int, buf: *mut c_void, n: size_t, offset: off_t) -> ssize_t;
    fn lseek(fd: c_int, offset: off_t, whence: c_int) -> off_t;
    fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int;
    fn ioctl(fd: c_int, request: c_ulong, arg: c_ulong) -> c_int;
    fn dup(fd: c_int) -> c_int;
    fn dup2(fd: c_int, to: c_int) -> c_int;
    fn dup3(fd: c_int, to: c_int, flags: c_int) -> c_int;
    fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int;
    fn ppoll(fds: *mut pollfd, n: nfds_t, timeout: *const timespec, mask: *const sigset_t) -> c_int;
    fn select(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *mut timeval) -> c_int;
    fn pselect(n: c_int, r: *mut fd_set, w: *mut fd_set, e: *mut fd_set, timeout: *const timespec, mask: *const sigset_t) -> c_int;
    fn epoll_create(size: c_int) -> c_int;
    fn epoll_create1(flags: c_int) -> c_int;
    fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> c_int;
    fn epoll_wait(epfd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int) -> c_int;
    fn epoll_pwait(epfd: c_int, events: *mut epoll_event, max: c_int, timeout: c_int, mask: *const sigset_t) -> c_int;
    fn epoll_pwait2(epfd: c_int, events: *mut epoll_event, max: c_int, timeout: *const timespec, mask: *const sigset_t) -> c_int;
    fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int;
    fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
    fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t;
    fn __recvfrom_chk(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;


}
