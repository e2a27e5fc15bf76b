//! The control calls on SlimTCP sockets: `socket`, `bind`, `listen`, `accept4`, `connect`,
//! `shutdown`, `getsockname`, `getpeername`; and the blocking rule they share with the data
//! calls ([`blocking`]).

use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use libc::{c_int, sockaddr, socklen_t};
use slimtcp_api::{Proto, Ready, Shutdown, SocketApi, SocketError};
use slimtcp_guest::GuestSockets;

use crate::device::{self, Device};
use crate::errno::{Errno, Sys};
use crate::socket::{self, Entry, Slim};
use crate::{addr, real, wait};

/// The attached device (every SlimTCP socket implies one).
pub fn dev() -> Sys<&'static Device> {
    device::attached().ok_or(Errno(libc::ENETDOWN))
}

/// Runs `op` on `slim`'s pair; while it says `EAGAIN` and the call blocks, waits (without the
/// lock) for `want` and tries again, up to `timeout` (then `EAGAIN`, as Linux's
/// `SO_RCVTIMEO`/`SO_SNDTIMEO`).
pub fn blocking<T>(
    slim: Slim,
    want: Ready,
    nonblocking: bool,
    timeout: Option<Duration>,
    mut op: impl FnMut(&mut GuestSockets) -> Result<T, SocketError>,
) -> Sys<T> {
    let dev = dev()?;
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        match dev.with_pair(slim.pair, &mut op)? {
            Err(SocketError::WouldBlock) if !nonblocking => wait::until_ready(dev, slim, want, deadline)?,
            r => return r.map_err(Errno::from),
        }
    }
}

/// Whether the call on `entry` blocks (`MSG_DONTWAIT` in `flags` makes it not).
pub fn blocks(entry: &Entry, flags: c_int) -> bool {
    !entry.nonblocking.load(Ordering::Relaxed) && flags & libc::MSG_DONTWAIT == 0
}

/// `socket(AF_INET, SOCK_STREAM | SOCK_DGRAM, ..)`: `None` when the kernel should make it
/// (fallback).
pub fn socket(ty: c_int) -> Sys<Option<c_int>> {
    let proto = match ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) {
        libc::SOCK_STREAM => Proto::Tcp,
        _ => Proto::Udp,
    };
    match device::attach() {
        Ok(_) if device::forked() => {
            crate::logger::warn_once("forked-new".into(), || {
                format!("process {}: a forked child cannot make SlimTCP sockets (its parent attached the device): ENETDOWN", std::process::id())
            });
            Err(Errno(libc::ENETDOWN))
        }
        Ok(_) => socket::open(proto, ty).map(Some),
        Err(e) => {
            let fallback = e.fallback();
            crate::logger::warn_once("attach".into(), || {
                if fallback {
                    format!("{e}; SLIMTCP_FALLBACK=1: every socket goes to the kernel")
                } else {
                    format!("{e}; AF_INET sockets fail with ENETDOWN (SLIMTCP_FALLBACK=1 would give them to the kernel)")
                }
            });
            if fallback {
                Ok(None)
            } else {
                Err(Errno(libc::ENETDOWN))
            }
        }
    }
}

/// Whether a local address belongs to the kernel rather than the tenant.
fn kernel_local(dev: &Device, a: SocketAddrV4) -> bool {
    !(a.ip().is_unspecified() || *a.ip() == dev.local_ip())
}

/// `bind`.
///
/// # Safety
/// `addr` valid for `len` bytes, as for `bind(2)`.
pub unsafe fn bind(fd: c_int, entry: &Entry, addr: *const sockaddr, len: socklen_t) -> Sys<c_int> {
    // SAFETY: forwarded contract.
    let a = unsafe { addr::read(addr, len) }?;
    let dev = dev()?;
    match entry.decide(fd, kernel_local(dev, a))? {
        // SAFETY: forwarded contract; `fd` is a kernel socket now.
        None => kernel(unsafe { real::bind(fd, addr, len) }),
        Some(s) => dev.with_pair(s.pair, |api| api.bind(s.fd, a))?.map(|()| 0).map_err(Errno::from),
    }
}

/// `listen`.
pub fn listen(entry: &Entry, backlog: c_int) -> Sys<c_int> {
    let s = entry.slim_or_make()?;
    let backlog = usize::try_from(backlog).unwrap_or(0).max(1);
    dev()?.with_pair(s.pair, |api| api.listen(s.fd, backlog))?.map(|()| 0).map_err(Errno::from)
}

/// `accept4`.
///
/// # Safety
/// `addr`/`len` as for `accept4(2)` (NULL allowed).
pub unsafe fn accept4(entry: &Entry, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> Sys<c_int> {
    if flags & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return Err(Errno(libc::EINVAL));
    }
    let s = entry.slim()?;
    let (nfd, peer) = blocking(s, Ready::IN, !blocks(entry, 0), None, |api| {
        let (nfd, peer) = api.accept(s.fd)?;
        api.setsockopt(nfd, slimtcp_api::SockOpt::NonBlocking(true))?;
        Ok((nfd, peer))
    })?;
    let conn = Slim { pair: s.pair, fd: nfd };
    let number = match socket::adopt(conn, flags) {
        Ok(n) => n,
        Err(e) => {
            let _ = dev()?.with_pair(s.pair, |api| api.close(nfd));
            return Err(e);
        }
    };
    // SAFETY: forwarded contract.
    unsafe { addr::write(peer, addr, len) };
    Ok(number)
}

/// `connect`.
///
/// # Safety
/// `addr` valid for `len` bytes, as for `connect(2)`.
pub unsafe fn connect(fd: c_int, entry: &Entry, addr: *const sockaddr, len: socklen_t) -> Sys<c_int> {
    // SAFETY: forwarded contract.
    let a = unsafe { addr::read(addr, len) }?;
    let dev = dev()?;
    let Some(s) = entry.decide(fd, dev.config.kernel_owns(*a.ip()))? else {
        // SAFETY: forwarded contract; `fd` is a kernel socket now.
        return kernel(unsafe { real::connect(fd, addr, len) });
    };
    let nonblocking = !blocks(entry, 0);
    let mut waited = false;
    loop {
        match dev.with_pair(s.pair, |api| api.connect(s.fd, a))? {
            Ok(()) => return Ok(0),
            Err(SocketError::IsConnected) if waited => return Ok(0),
            Err(SocketError::InProgress) if nonblocking => return Err(Errno(libc::EINPROGRESS)),
            Err(SocketError::InProgress | SocketError::Already) if !nonblocking => {
                wait::until_ready(dev, s, Ready::OUT, None)?;
                waited = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// `shutdown`.
pub fn shutdown(entry: &Entry, how: c_int) -> Sys<c_int> {
    let how = match how {
        libc::SHUT_RD => Shutdown::Read,
        libc::SHUT_WR => Shutdown::Write,
        libc::SHUT_RDWR => Shutdown::Both,
        _ => return Err(Errno(libc::EINVAL)),
    };
    let s = entry.slim()?;
    dev()?.with_pair(s.pair, |api| api.shutdown(s.fd, how))?.map(|()| 0).map_err(Errno::from)
}

/// `getsockname` (true) or `getpeername` (false).
///
/// # Safety
/// `addr`/`len` as for `getsockname(2)`.
pub unsafe fn name(entry: &Entry, local: bool, addr: *mut sockaddr, len: *mut socklen_t) -> Sys<c_int> {
    if addr.is_null() || len.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    let a = match (entry.slim(), local) {
        (Err(Errno(libc::ENOTCONN)), true) => SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, 0),
        (Err(e), _) => return Err(e),
        (Ok(s), true) => dev()?.with_pair(s.pair, |api| api.local_addr(s.fd))??,
        (Ok(s), false) => dev()?.with_pair(s.pair, |api| api.peer_addr(s.fd))??,
    };
    // SAFETY: forwarded contract (non-null checked).
    unsafe { addr::write(a, addr, len) };
    Ok(0)
}

/// A kernel call's `int` result as [`Sys`].
pub fn kernel(rc: c_int) -> Sys<c_int> {
    if rc < 0 {
        Err(Errno::last())
    } else {
        Ok(rc)
    }
}
