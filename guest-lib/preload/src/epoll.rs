//! epoll sets that hold SlimTCP sockets beside kernel descriptors.
//!
//! The application's epoll descriptor stays a real kernel epoll set: kernel descriptors are
//! registered in it as usual. A SlimTCP socket added to it goes instead into an epoll set of
//! the library on the socket's queue pair (the library keeps level, edge and one-shot
//! semantics), and the pair's interrupt descriptor joins the kernel set, tagged
//! [`WAKER`], so one kernel sleep wakes for either. `epoll_wait` collects the library's events
//! (their data translated back to the application's), then the kernel's, without the tagged
//! ones.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libc::{c_int, epoll_event, sigset_t};
use slimtcp_api::{EpollEvent, EpollFd, EpollOp, Ready, SocketApi};

use crate::device::lock;
use crate::errno::{Errno, Sys};
use crate::net::dev;
use crate::socket::{Slim, SOCKETS};
use crate::table::Table;
use crate::wait::{Backoff, Idled};

/// The data of a queue pair's interrupt descriptor in a kernel epoll set: a non-canonical
/// x86-64 address and no descriptor number, so no application's own data is mistaken for it.
pub const WAKER: u64 = 0xffff_0000_5117_7c90;

/// Epoll flags SlimTCP understands (`EPOLLPRI`, `EPOLLEXCLUSIVE`, `EPOLLWAKEUP` are dropped).
const KNOWN: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP)
    as u32
    | libc::EPOLLONESHOT as u32
    | libc::EPOLLET as u32;

#[derive(Debug, Default)]
struct Inner {
    /// The library's set on each pair used.
    sets: Vec<(usize, EpollFd)>,
    /// Registered SlimTCP sockets: number -> (socket, the application's data).
    members: BTreeMap<c_int, (Slim, u64)>,
    /// Pairs whose interrupt descriptor is in the kernel set.
    wakers: Vec<usize>,
}

/// The SlimTCP side of one kernel epoll set.
#[derive(Debug, Default)]
pub struct Side(Mutex<Inner>);

/// Kernel epoll sets that have (or had) SlimTCP members.
pub static EPOLLS: Table<Side> = Table::new();

/// `epoll_ctl(epfd, op, fd, event)` for SlimTCP socket `fd`.
///
/// # Safety
/// `event` NULL (`EPOLL_CTL_DEL`) or valid, as for `epoll_ctl(2)`.
pub unsafe fn ctl(epfd: c_int, op: c_int, fd: c_int, event: *mut epoll_event) -> Sys<c_int> {
    let entry = SOCKETS.get(fd).ok_or(Errno(libc::EBADF))?;
    let slim = entry.slim_or_make()?;
    let (op, ev) = match op {
        libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD if event.is_null() => return Err(Errno(libc::EFAULT)),
        libc::EPOLL_CTL_ADD | libc::EPOLL_CTL_MOD => {
            // SAFETY: non-null and valid (contract); the struct may be packed: read unaligned.
            let ev: epoll_event = unsafe { std::ptr::read_unaligned(event) };
            (if op == libc::EPOLL_CTL_ADD { EpollOp::Add } else { EpollOp::Modify }, Some(ev))
        }
        libc::EPOLL_CTL_DEL => (EpollOp::Delete, None),
        _ => return Err(Errno(libc::EINVAL)),
    };
    let dev = dev()?;
    let side = match EPOLLS.get(epfd) {
        Some(s) => s,
        None => {
            let s = std::sync::Arc::new(Side::default());
            if !EPOLLS.insert(epfd, s.clone()) {
                return Err(Errno(libc::EMFILE));
            }
            s
        }
    };
    let mut inner = lock(&side.0);
    if !inner.wakers.contains(&slim.pair) {
        if let Some(wfd) = dev.with_pair(slim.pair, |api| api.wait_fd())? {
            let mut w = epoll_event { events: libc::EPOLLIN as u32, u64: WAKER };
            // SAFETY: a valid event for the duration of the call.
            let rc = unsafe { crate::real::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, wfd, &mut w) };
            if rc < 0 && Errno::last().0 != libc::EEXIST {
                return Err(Errno::last());
            }
        }
        inner.wakers.push(slim.pair);
    }
    let ep = match inner.sets.iter().find(|(p, _)| *p == slim.pair) {
        Some((_, ep)) => *ep,
        None => {
            let ep = dev.with_pair(slim.pair, |api| api.epoll_create())??;
            inner.sets.push((slim.pair, ep));
            ep
        }
    };
    let interest = ev.map_or(0, |e| e.events & KNOWN);
    let number = u64::try_from(fd).map_err(|_| Errno(libc::EBADF))?;
    dev.with_pair(slim.pair, |api| {
        api.epoll_ctl(ep, op, slim.fd, EpollEvent { events: Ready(interest), data: number })
    })??;
    match ev {
        Some(e) => {
            inner.members.insert(fd, (slim, e.u64));
        }
        None => {
            inner.members.remove(&fd);
        }
    }
    Ok(0)
}

/// `epoll_wait`/`epoll_pwait` on a set with SlimTCP members. `timeout` `None`: for ever.
///
/// # Safety
/// `events` valid for `max` entries, as for `epoll_wait(2)`.
pub unsafe fn wait(
    epfd: c_int,
    side: &Side,
    events: *mut epoll_event,
    max: c_int,
    timeout: Option<Duration>,
    mask: *const sigset_t,
) -> Sys<c_int> {
    let max = usize::try_from(max).ok().filter(|&m| m > 0).ok_or(Errno(libc::EINVAL))?;
    if events.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    let dev = dev()?;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut backoff = Backoff::default();
    let mut found = vec![EpollEvent { events: Ready::empty(), data: 0 }; max];
    loop {
        let sets = lock(&side.0).sets.clone();
        let pairs: Vec<usize> = sets.iter().map(|(p, _)| *p).collect();
        let mut n = 0;
        let mut progressed = false;
        for (pair, ep) in sets {
            if n == max {
                break;
            }
            let got = dev.with_pair(pair, |api| {
                progressed |= api.progress().unwrap_or(false);
                api.epoll_wait(ep, &mut found[..max - n], 0)
            })??;
            let inner = lock(&side.0);
            for e in &found[..got] {
                let number = c_int::try_from(e.data).unwrap_or(-1);
                if let Some((_, data)) = inner.members.get(&number) {
                    let out = epoll_event { events: e.events.0, u64: *data };
                    // SAFETY: `n < max` and `events` is valid for `max` entries (contract).
                    unsafe { events.add(n).write_unaligned(out) };
                    n += 1;
                }
            }
        }
        if n < max {
            // SAFETY: `events + n` is valid for `max - n` entries (contract).
            n += unsafe { kernel_events(epfd, events.add(n), max - n, 0, std::ptr::null()) }?;
        }
        if n > 0 || timeout == Some(Duration::ZERO) || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(n as c_int);
        }
        if progressed {
            backoff.reset();
        }
        let mut woke = 0;
        let idled = backoff.idle(dev, &pairs, deadline, |_, slice| {
            let ms = c_int::try_from(slice.as_millis().max(1)).unwrap_or(c_int::MAX);
            // SAFETY: `events` is valid for `max` entries (contract).
            woke = unsafe { kernel_events(epfd, events, max, ms, mask) }?;
            Ok(woke > 0)
        })?;
        if idled == (Idled::Slept { kernel: true }) {
            return Ok(woke as c_int);
        }
    }
}

/// The kernel set's own events, without the tagged interrupt descriptors.
///
/// # Safety
/// `events` valid for `max` entries.
unsafe fn kernel_events(
    epfd: c_int,
    events: *mut epoll_event,
    max: usize,
    ms: c_int,
    mask: *const sigset_t,
) -> Sys<usize> {
    let max = c_int::try_from(max).unwrap_or(c_int::MAX);
    // SAFETY: forwarded contract.
    let rc = unsafe { crate::real::epoll_pwait(epfd, events, max, ms, mask) };
    let got = usize::try_from(rc).map_err(|_| Errno::last())?;
    let mut kept = 0;
    for i in 0..got {
        // SAFETY: the kernel wrote `got` entries.
        let e = unsafe { events.add(i).read_unaligned() };
        if e.u64 != WAKER {
            // SAFETY: `kept <= i < got`.
            unsafe { events.add(kept).write_unaligned(e) };
            kept += 1;
        }
    }
    Ok(kept)
}

/// Forgets SlimTCP socket `fd` (closed) in every set, as the kernel does for its descriptors.
pub fn forget(fd: c_int) {
    for (_, side) in EPOLLS.all() {
        lock(&side.0).members.remove(&fd);
    }
}

/// `close` of an epoll descriptor: drops its SlimTCP side.
pub fn close(epfd: c_int) {
    let Some(side) = EPOLLS.remove(epfd) else { return };
    let Ok(dev) = dev() else { return };
    for (pair, ep) in lock(&side.0).sets.drain(..) {
        let _ = dev.with_pair(pair, |api| api.epoll_close(ep));
    }
}
