//! The daemon's signals as file-descriptor events: SIGTERM and SIGINT (stop, draining every
//! tenant) and SIGHUP (read the config file again) are blocked in the calling thread, which
//! every thread spawned afterwards inherits, and read from a signalfd(2) by the control loop.
//! No handler runs in an arbitrary thread.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Errors setting the signals up.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    /// The signals could not be blocked.
    #[error("blocking SIGTERM, SIGINT and SIGHUP")]
    Block(#[source] std::io::Error),
    /// The signalfd could not be made.
    #[error("creating a signalfd")]
    SignalFd(#[source] std::io::Error),
}

/// The signals the daemon handles.
pub const HANDLED: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// A signalfd for [`HANDLED`] (see the module documentation).
#[derive(Debug)]
pub struct Signals {
    fd: OwnedFd,
}

impl Signals {
    /// Blocks [`HANDLED`] in the calling thread (call it before spawning threads) and opens a
    /// non-blocking signalfd for them.
    pub fn block_and_open() -> Result<Self, SignalError> {
        // SAFETY: an all-zero sigset_t is a valid value to initialise with sigemptyset.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t owned by this frame; the signal numbers are valid.
        unsafe {
            libc::sigemptyset(&mut set);
            for s in HANDLED {
                libc::sigaddset(&mut set, s);
            }
        }
        // SAFETY: `set` is initialised; the old mask is not wanted (null).
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(SignalError::Block(std::io::Error::from_raw_os_error(rc)));
        }
        // SAFETY: -1 asks for a new descriptor; `set` is initialised; the flags are valid.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(SignalError::SignalFd(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a new descriptor this process owns and nothing else closes.
        Ok(Signals { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// The next pending signal, if any.
    pub fn next(&self) -> Option<libc::c_int> {
        // SAFETY: an all-zero signalfd_siginfo is a valid buffer for read.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let len = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: `info` is a writable buffer of `len` bytes; the descriptor is open.
        let n = unsafe {
            libc::read(self.fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), len)
        };
        (n == len as isize).then_some(info.ssi_signo as libc::c_int)
    }
}

impl AsRawFd for Signals {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A signal's name, for the log.
pub fn name(signal: libc::c_int) -> &'static str {
    match signal {
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
