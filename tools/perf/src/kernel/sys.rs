//! The few Linux system calls the kernel adapter needs, each wrapped once with its safety
//! argument; everything above works with `OwnedFd`/`RawFd` and `io::Result`.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn check_size(rc: isize) -> io::Result<usize> {
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

fn sockaddr(addr: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

fn from_sockaddr(sa: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)), u16::from_be(sa.sin_port))
}

/// Takes ownership of a descriptor a system call just returned.
fn owned(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful socket/accept4/epoll_create1 call, so it is
    // open and owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `socket(AF_INET, kind | SOCK_CLOEXEC, 0)`.
pub fn socket(kind: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments.
    check(unsafe { libc::socket(libc::AF_INET, kind | libc::SOCK_CLOEXEC, 0) }).map(owned)
}

/// `setsockopt` with an `int` value.
pub fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as u32,
        )
    };
    check(rc).map(|_| ())
}

/// `getsockopt` with an `int` value.
pub fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and writable; `len` holds the size of `value`.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) };
    check(rc).map(|_| value)
}

/// Sets or clears `O_NONBLOCK`.
pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: F_GETFL takes no argument.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: F_SETFL takes an int of flags.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }).map(|_| ())
}

/// Whether `O_NONBLOCK` is set.
pub fn is_nonblocking(fd: RawFd) -> io::Result<bool> {
    // SAFETY: F_GETFL takes no argument.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    Ok(flags & libc::O_NONBLOCK != 0)
}

/// `bind`.
pub fn bind(fd: RawFd, addr: SocketAddrV4) -> io::Result<()> {
    let sa = sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in and the length passed is its size.
    let rc = unsafe {
        libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32)
    };
    check(rc).map(|_| ())
}

/// `connect`.
pub fn connect(fd: RawFd, addr: SocketAddrV4) -> io::Result<()> {
    let sa = sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in and the length passed is its size.
    let rc = unsafe {
        libc::connect(fd, (&sa as *const libc::sockaddr_in).cast(), size_of::<libc::sockaddr_in>() as u32)
    };
    check(rc).map(|_| ())
}

/// `listen`.
pub fn listen(fd: RawFd, backlog: usize) -> io::Result<()> {
    let backlog = libc::c_int::try_from(backlog).unwrap_or(libc::c_int::MAX);
    // SAFETY: plain system call on a descriptor we own.
    check(unsafe { libc::listen(fd, backlog) }).map(|_| ())
}

/// `accept4(SOCK_CLOEXEC)`: the connection and its peer.
pub fn accept(fd: RawFd) -> io::Result<(OwnedFd, SocketAddrV4)> {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sa` is writable for `len` bytes; `len` is live.
    let rc = unsafe {
        libc::accept4(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len, libc::SOCK_CLOEXEC)
    };
    let conn = check(rc).map(owned)?;
    Ok((conn, from_sockaddr(&sa)))
}

/// `getsockname` (`peer == false`) or `getpeername`.
pub fn name(fd: RawFd, peer: bool) -> io::Result<SocketAddrV4> {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let p = (&mut sa as *mut libc::sockaddr_in).cast();
    // SAFETY: `sa` is writable for `len` bytes; `len` is live.
    let rc = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    };
    check(rc).map(|_| from_sockaddr(&sa))
}

/// `shutdown`.
pub fn shutdown(fd: RawFd, how: libc::c_int) -> io::Result<()> {
    // SAFETY: plain system call on a descriptor we own.
    check(unsafe { libc::shutdown(fd, how) }).map(|_| ())
}

/// `send(MSG_NOSIGNAL)`.
pub fn send(fd: RawFd, data: &[u8]) -> io::Result<usize> {
    // SAFETY: `data` is readable for its length.
    check_size(unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) })
}

/// `recv`.
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length.
    check_size(unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) })
}

/// `sendto(MSG_NOSIGNAL)`: one datagram to `dst`.
pub fn send_to(fd: RawFd, data: &[u8], dst: SocketAddrV4) -> io::Result<usize> {
    let sa = sockaddr(dst);
    // SAFETY: `data` is readable for its length; `sa` is a valid sockaddr_in and the length
    // passed is its size.
    check_size(unsafe {
        libc::sendto(
            fd,
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_NOSIGNAL,
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })
}

/// `recvfrom`: one datagram (truncated to `buf`) and its source.
pub fn recv_from(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, SocketAddrV4)> {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `buf` is writable for its length; `sa` is writable for `len` bytes; `len` is live.
    let n = check_size(unsafe {
        libc::recvfrom(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            (&mut sa as *mut libc::sockaddr_in).cast(),
            &mut len,
        )
    })?;
    Ok((n, from_sockaddr(&sa)))
}

/// `epoll_create1(EPOLL_CLOEXEC)`.
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with a constant flag.
    check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }).map(owned)
}

/// `epoll_ctl`.
pub fn epoll_ctl(ep: RawFd, op: libc::c_int, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: `ev` is a valid, writable epoll_event for the duration of the call.
    check(unsafe { libc::epoll_ctl(ep, op, fd, &mut ev) }).map(|_| ())
}

/// `epoll_wait` into `out` (reused between calls); returns how many are ready.
pub fn epoll_wait(
    ep: RawFd,
    out: &mut Vec<libc::epoll_event>,
    max: usize,
    timeout_ms: i32,
) -> io::Result<usize> {
    out.resize(max.max(1), libc::epoll_event { events: 0, u64: 0 });
    let n = libc::c_int::try_from(out.len()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `out` holds at least `n` writable epoll_event slots.
    match check(unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), n, timeout_ms) }) {
        Ok(ready) => Ok(usize::try_from(ready).unwrap_or(0)),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}
