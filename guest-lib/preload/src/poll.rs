//! `poll`/`ppoll` and `select`/`pselect` over sets that hold SlimTCP sockets (sets without
//! any go straight to the kernel).
//!
//! SlimTCP sockets are answered from the library's readiness (after applying the device's
//! news); the other descriptors are asked of the kernel with a zero timeout; when nothing is
//! ready the wait sleeps in the kernel on those descriptors and on the queue pairs' interrupt
//! descriptors together ([`wait`](crate::wait)).

use std::time::{Duration, Instant};

use libc::{c_int, c_short, pollfd, sigset_t};
use slimtcp_api::{Proto, Ready};

use crate::errno::{Errno, Sys};
use crate::net::dev;
use crate::socket::{Slim, SOCKETS};
use crate::wait::{Backoff, Idled};

/// What one entry of the set is.
enum Member {
    Kernel,
    Slim(Slim),
    /// A socket not yet bound or connected: Linux's answer for it.
    Pending(c_short),
    /// Closed meanwhile.
    Gone,
}

/// Whether any descriptor of `fds` is a SlimTCP socket.
pub fn has_slim(fds: &[pollfd]) -> bool {
    fds.iter().any(|p| SOCKETS.marked(p.fd))
}

/// `poll` over `fds`, which hold at least one SlimTCP socket. `timeout` `None`: for ever.
///
/// # Safety
/// `mask` NULL or a valid signal set (as for `ppoll(2)`).
pub unsafe fn poll(fds: &mut [pollfd], timeout: Option<Duration>, mask: *const sigset_t) -> Sys<c_int> {
    let dev = dev()?;
    let members: Vec<Member> = fds
        .iter()
        .map(|p| match SOCKETS.get(p.fd) {
            None => Member::Kernel,
            Some(e) if e.pending() => Member::Pending(match e.proto {
                Proto::Tcp => libc::POLLOUT | libc::POLLHUP,
                Proto::Udp => libc::POLLOUT,
            }),
            Some(e) => e.slim().map_or(Member::Gone, Member::Slim),
        })
        .collect();
    let mut pairs: Vec<usize> =
        members.iter().filter_map(|m| if let Member::Slim(s) = m { Some(s.pair) } else { None }).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut kernel: Vec<pollfd> = fds
        .iter()
        .zip(&members)
        .map(|(p, m)| match m {
            Member::Kernel => pollfd { fd: p.fd, events: p.events, revents: 0 },
            _ => pollfd { fd: -1, events: 0, revents: 0 },
        })
        .collect();
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut backoff = Backoff::default();
    loop {
        let mut progressed = false;
        let mut slim_ready: Vec<c_short> = vec![0; fds.len()];
        for &pair in &pairs {
            dev.with_pair(pair, |api| {
                progressed |= api.progress().unwrap_or(false);
                for (i, m) in members.iter().enumerate() {
                    if let Member::Slim(s) = m {
                        if s.pair == pair {
                            slim_ready[i] = match api.readiness(s.fd) {
                                Ok(r) => revents(r, fds[i].events),
                                Err(_) => libc::POLLNVAL,
                            };
                        }
                    }
                }
            })?;
        }
        // SAFETY: `kernel` is a valid array of pollfds; a zero timeout never blocks.
        let rc = unsafe { crate::real::poll(kernel.as_mut_ptr(), kernel.len() as libc::nfds_t, 0) };
        if rc < 0 {
            return Err(Errno::last());
        }
        let mut count = 0;
        for (i, p) in fds.iter_mut().enumerate() {
            p.revents = match &members[i] {
                Member::Kernel => kernel[i].revents,
                Member::Slim(_) => slim_ready[i],
                Member::Pending(r) => r & (p.events | libc::POLLHUP),
                Member::Gone => libc::POLLNVAL,
            };
            count += c_int::from(p.revents != 0);
        }
        if count > 0 || timeout == Some(Duration::ZERO) || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(count);
        }
        if progressed {
            backoff.reset();
        }
        let idled = backoff.idle(dev, &pairs, deadline, |wake, slice| {
            let mut all = kernel.clone();
            all.extend(wake.iter().map(|&fd| pollfd { fd, events: libc::POLLIN, revents: 0 }));
            let ts = libc::timespec {
                tv_sec: slice.as_secs() as libc::time_t,
                tv_nsec: slice.subsec_nanos().into(),
            };
            // SAFETY: `all` is a valid array of pollfds; `ts` lives for the call; `mask` is the
            // caller's (NULL or a valid sigset).
            let rc = unsafe { crate::real::ppoll(all.as_mut_ptr(), all.len() as libc::nfds_t, &ts, mask) };
            if rc < 0 {
                return Err(Errno::last());
            }
            Ok(all[..kernel.len()].iter().any(|p| p.revents != 0))
        })?;
        if idled == (Idled::Slept { kernel: true }) {
            backoff.reset();
        }
    }
}

/// The `revents` of readiness `r` for interest `events` (errors and hang-ups always).
fn revents(r: Ready, events: c_short) -> c_short {
    let wanted = i32::from(events as u16) | libc::POLLERR as i32 | libc::POLLHUP as i32;
    (r.readiness().0 as i32 & wanted) as c_short
}

/// `select` as `poll`: the three sets become poll entries and back.
///
/// # Safety
/// The sets are NULL or valid `fd_set`s covering `nfds` descriptors; `mask` as for [`poll`].
pub unsafe fn select(
    nfds: c_int,
    read: *mut libc::fd_set,
    write: *mut libc::fd_set,
    except: *mut libc::fd_set,
    timeout: Option<Duration>,
    mask: *const sigset_t,
) -> Sys<c_int> {
    let n = nfds.clamp(0, libc::FD_SETSIZE as c_int);
    let has = |set: *mut libc::fd_set, fd: c_int| {
        !set.is_null() && {
            // SAFETY: `set` non-null and valid (contract); `fd` < FD_SETSIZE.
            unsafe { libc::FD_ISSET(fd, set) }
        }
    };
    let mut fds = Vec::new();
    for fd in 0..n {
        let mut events = 0;
        if has(read, fd) {
            events |= libc::POLLIN;
        }
        if has(write, fd) {
            events |= libc::POLLOUT;
        }
        if has(except, fd) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            fds.push(pollfd { fd, events, revents: 0 });
        }
    }
    // SAFETY: forwarded contract.
    unsafe { poll(&mut fds, timeout, mask) }?;
    for set in [read, write, except] {
        if !set.is_null() {
            // SAFETY: non-null, valid (contract).
            unsafe { libc::FD_ZERO(set) };
        }
    }
    let mut count = 0;
    for p in &fds {
        if p.revents & libc::POLLNVAL != 0 {
            return Err(Errno(libc::EBADF));
        }
        let marks = [
            (
                read,
                p.events & libc::POLLIN != 0
                    && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0,
            ),
            (write, p.events & libc::POLLOUT != 0 && p.revents & (libc::POLLOUT | libc::POLLERR) != 0),
            (except, p.events & libc::POLLPRI != 0 && p.revents & libc::POLLPRI != 0),
        ];
        for (set, on) in marks {
            if on {
                // SAFETY: `set` is non-null when its bit was asked for; `p.fd` < FD_SETSIZE.
                unsafe { libc::FD_SET(p.fd, set) };
                count += 1;
            }
        }
    }
    Ok(count)
}

/// Whether any descriptor below `nfds` in the sets is a SlimTCP socket.
///
/// # Safety
/// As for [`select`].
pub unsafe fn select_has_slim(nfds: c_int, sets: [*mut libc::fd_set; 3]) -> bool {
    (0..nfds.clamp(0, libc::FD_SETSIZE as c_int)).any(|fd| {
        SOCKETS.marked(fd)
            && sets.iter().any(|&s| {
                // SAFETY: `s` non-null and valid (contract); `fd` < FD_SETSIZE.
                !s.is_null() && unsafe { libc::FD_ISSET(fd, s) }
            })
    })
}
