//! A SlimTCP socket as the application sees it: a kernel descriptor number naming an
//! [`Entry`].
//!
//! The number belongs to an eventfd this library opens for each socket, so it can never
//! collide with a descriptor the kernel hands out, `dup`, `fcntl(F_SETFD)` and `close` work on
//! it, and one `poll` or epoll set can hold it beside kernel descriptors.
//!
//! A socket starts **pending**: `socket()` cannot know where it will talk. The first `bind`,
//! `connect`, `listen` or `sendto` decides: loopback, `SLIMTCP_KERNEL` networks and local
//! addresses other than the tenant's go to the **kernel** (a real socket is made, the options
//! set so far are applied to it, and it replaces the eventfd under the same number with
//! `dup3`; from then on the library never sees it again); everything else becomes a
//! **SlimTCP** socket on the calling thread's queue pair.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use libc::c_int;
use slimtcp_api::{Fd, Proto, SockOpt, SocketApi};

use crate::device::{self, lock};
use crate::errno::{Errno, Sys};
use crate::options::{self, Mapped};
use crate::real;
use crate::table::Table;

/// Every SlimTCP socket by number.
pub static SOCKETS: Table<Entry> = Table::new();

/// Where a SlimTCP socket lives: its queue pair and its descriptor in that pair's library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slim {
    /// The queue pair.
    pub pair: usize,
    /// The library's descriptor.
    pub fd: Fd,
}

#[derive(Debug)]
enum State {
    Pending,
    Slim(Slim),
    Closed,
}

/// Options set on a socket: kept to be applied to a kernel socket later, to answer
/// `getsockopt` for options SlimTCP accepts without acting on them, and the timeouts the
/// library's blocking honours.
#[derive(Debug, Default)]
pub struct Options {
    raw: Vec<(c_int, c_int, Vec<u8>)>,
    /// `SO_RCVTIMEO`.
    pub recv_timeout: Option<Duration>,
    /// `SO_SNDTIMEO`.
    pub send_timeout: Option<Duration>,
}

impl Options {
    /// Records an option's value.
    pub fn record(&mut self, level: c_int, name: c_int, value: &[u8]) {
        match self.raw.iter_mut().find(|(l, n, _)| *l == level && *n == name) {
            Some(slot) => slot.2 = value.to_vec(),
            None => self.raw.push((level, name, value.to_vec())),
        }
    }

    /// A recorded value.
    pub fn recorded(&self, level: c_int, name: c_int) -> Option<&[u8]> {
        self.raw.iter().find(|(l, n, _)| *l == level && *n == name).map(|(_, _, v)| v.as_slice())
    }
}

/// One socket (see the module documentation).
#[derive(Debug)]
pub struct Entry {
    /// TCP or UDP.
    pub proto: Proto,
    state: Mutex<State>,
    /// The application's `O_NONBLOCK` (the library's own socket is always non-blocking).
    pub nonblocking: AtomicBool,
    /// Descriptor numbers naming this socket (`dup`).
    names: AtomicUsize,
    /// Options set so far.
    pub options: Mutex<Options>,
    /// Bytes read ahead by `MSG_PEEK`, returned before anything else.
    pub peeked: Mutex<Vec<u8>>,
}

impl Entry {
    fn new(proto: Proto, state: State, nonblocking: bool) -> Entry {
        Entry {
            proto,
            state: Mutex::new(state),
            nonblocking: AtomicBool::new(nonblocking),
            names: AtomicUsize::new(1),
            options: Mutex::new(Options::default()),
            peeked: Mutex::new(Vec::new()),
        }
    }

    /// The SlimTCP socket behind this entry, for calls that need one.
    pub fn slim(&self) -> Sys<Slim> {
        if device::forked() {
            return Err(inherited());
        }
        match *lock(&self.state) {
            State::Slim(s) => Ok(s),
            State::Pending => Err(Errno(libc::ENOTCONN)),
            State::Closed => Err(Errno(libc::EBADF)),
        }
    }

    /// Whether the socket is still pending.
    pub fn pending(&self) -> bool {
        matches!(*lock(&self.state), State::Pending)
    }

    /// The SlimTCP socket, made now on the calling thread's pair when still pending (`listen`
    /// without `bind`, a datagram socket's first receive, an epoll registration).
    pub fn slim_or_make(&self) -> Sys<Slim> {
        if device::forked() {
            return Err(inherited());
        }
        let mut state = lock(&self.state);
        match *state {
            State::Slim(s) => Ok(s),
            State::Closed => Err(Errno(libc::EBADF)),
            State::Pending => {
                let s = self.make_slim()?;
                *state = State::Slim(s);
                Ok(s)
            }
        }
    }

    /// Decides a pending socket named `fd`: to the kernel (`Ok(None)`: the number is a kernel
    /// socket now) or to SlimTCP. A socket already decided stays as it is.
    pub fn decide(&self, fd: c_int, kernel: bool) -> Sys<Option<Slim>> {
        if device::forked() {
            return Err(inherited());
        }
        let mut state = lock(&self.state);
        match *state {
            State::Slim(s) => Ok(Some(s)),
            State::Closed => Err(Errno(libc::EBADF)),
            State::Pending if kernel => {
                self.make_kernel(fd)?;
                *state = State::Closed;
                SOCKETS.remove(fd);
                Ok(None)
            }
            State::Pending => {
                let s = self.make_slim()?;
                *state = State::Slim(s);
                Ok(Some(s))
            }
        }
    }

    fn make_slim(&self) -> Sys<Slim> {
        let dev = device::attached().ok_or(Errno(libc::ENETDOWN))?;
        let pair = dev.thread_pair();
        let options = lock(&self.options);
        let fd = dev.with_pair(pair, |api| -> Sys<Fd> {
            let fd = api.socket(self.proto)?;
            api.setsockopt(fd, SockOpt::NonBlocking(true))?;
            for (level, name, value) in &options.raw {
                if let Mapped::Opt(opt) = options::map_set(*level, *name, value, self.proto) {
                    if let Err(e) = api.setsockopt(fd, opt) {
                        log::debug!("option {opt:?} set before the socket was made: {e}");
                    }
                }
            }
            Ok(fd)
        })??;
        Ok(Slim { pair, fd })
    }

    /// Makes a kernel socket with this entry's type and options and puts it under `fd`.
    fn make_kernel(&self, fd: c_int) -> Sys<()> {
        let ty = match self.proto {
            Proto::Tcp => libc::SOCK_STREAM,
            Proto::Udp => libc::SOCK_DGRAM,
        };
        // SAFETY: plain system calls on descriptors this function owns or the entry names.
        unsafe {
            let k = real::socket(libc::AF_INET, ty | libc::SOCK_CLOEXEC, 0);
            if k < 0 {
                return Err(Errno::last());
            }
            for (level, name, value) in &lock(&self.options).raw {
                let len = libc::socklen_t::try_from(value.len()).unwrap_or(0);
                if real::setsockopt(k, *level, *name, value.as_ptr().cast(), len) < 0 {
                    log::debug!("kernel socket: option {level}/{name} not applied: {}", Errno::last().0);
                }
            }
            if self.nonblocking.load(Ordering::Relaxed) {
                real::fcntl(k, libc::F_SETFL, libc::O_NONBLOCK as libc::c_ulong);
            }
            let cloexec = real::fcntl(fd, libc::F_GETFD, 0) & libc::FD_CLOEXEC != 0;
            let rc = real::dup3(k, fd, if cloexec { libc::O_CLOEXEC } else { 0 });
            let err = Errno::last();
            real::close(k);
            if rc < 0 {
                return Err(err);
            }
        }
        log::debug!("socket {fd}: to the kernel");
        Ok(())
    }

    /// Drops one name; the last one closes the SlimTCP socket.
    fn release(&self) {
        if self.names.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let old = std::mem::replace(&mut *lock(&self.state), State::Closed);
        if let (State::Slim(s), false) = (old, device::forked()) {
            if let Some(dev) = device::attached() {
                if let Err(e) = dev.close_socket(s.pair, s.fd, self.proto) {
                    log::debug!("close: {e}");
                }
            }
        }
    }
}

/// The error of a socket a forked child inherited.
fn inherited() -> Errno {
    crate::logger::warn_once("forked".into(), || {
        format!(
            "process {}: SlimTCP sockets and the device belong to the process that attached (a parent \
             of this forked child); they fail here with ENETDOWN",
            std::process::id()
        )
    });
    Errno(libc::ENETDOWN)
}

/// A descriptor number of our own: an eventfd.
fn new_number(cloexec: bool) -> Sys<c_int> {
    let flags = if cloexec { libc::EFD_CLOEXEC } else { 0 };
    // SAFETY: creates a new descriptor; no pointers.
    let fd = unsafe { libc::eventfd(0, flags) };
    if fd < 0 {
        return Err(Errno::last());
    }
    Ok(fd)
}

fn register(entry: Entry, cloexec: bool) -> Sys<c_int> {
    let fd = new_number(cloexec)?;
    if !SOCKETS.insert(fd, std::sync::Arc::new(entry)) {
        // SAFETY: closes the eventfd just made.
        unsafe { real::close(fd) };
        log::warn!("descriptor {fd} is beyond the {} this library can name", crate::table::MAX_FDS);
        return Err(Errno(libc::EMFILE));
    }
    Ok(fd)
}

/// A new pending socket (`socket()`), with the `SOCK_NONBLOCK`/`SOCK_CLOEXEC` of `ty`.
pub fn open(proto: Proto, ty: c_int) -> Sys<c_int> {
    register(Entry::new(proto, State::Pending, ty & libc::SOCK_NONBLOCK != 0), ty & libc::SOCK_CLOEXEC != 0)
}

/// A number for an accepted connection, with the `SOCK_*` flags of `accept4`.
pub fn adopt(slim: Slim, flags: c_int) -> Sys<c_int> {
    register(
        Entry::new(Proto::Tcp, State::Slim(slim), flags & libc::SOCK_NONBLOCK != 0),
        flags & libc::SOCK_CLOEXEC != 0,
    )
}

/// `close(fd)` of a SlimTCP socket: forgets the number, closes the socket with its last
/// name, then closes the number.
pub fn close(fd: c_int) -> Sys<c_int> {
    if let Some(e) = SOCKETS.remove(fd) {
        crate::epoll::forget(fd);
        e.release();
    }
    // SAFETY: closes the eventfd behind the number.
    match unsafe { real::close(fd) } {
        0 => Ok(0),
        _ => Err(Errno::last()),
    }
}

/// Names `entry` also by `to`, a number the caller just duplicated onto.
pub fn add_name(entry: std::sync::Arc<Entry>, to: c_int) {
    entry.names.fetch_add(1, Ordering::AcqRel);
    if !SOCKETS.insert(to, entry.clone()) {
        entry.release();
    }
}

/// Forgets `fd` (about to be replaced by `dup2`/`dup3`), closing its socket with its last name.
pub fn drop_name(fd: c_int) {
    if let Some(e) = SOCKETS.remove(fd) {
        crate::epoll::forget(fd);
        e.release();
    }
}

/// At exit: closes every SlimTCP socket still open, as the kernel would (the numbers go with
/// the process).
pub fn close_all_at_exit() {
    for (fd, _) in SOCKETS.all() {
        if let Some(e) = SOCKETS.remove(fd) {
            e.names.store(1, Ordering::Relaxed);
            e.release();
        }
    }
}
