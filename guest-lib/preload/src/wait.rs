//! Waiting without holding a queue pair: blocked calls, `poll`, `select` and `epoll_wait` take
//! a pair's lock only for short steps (apply the device's news, look at readiness) and sleep
//! with no lock held, so other threads sharing the pair keep going.
//!
//! A wait spins, then yields, then sleeps: it arms the interrupts of the pairs it watches
//! ([`GuestSockets::sleep_begin`](slimtcp_guest::GuestSockets::sleep_begin)) and sleeps in the
//! kernel on their interrupt descriptors together with the caller's own kernel descriptors, for
//! at most [`SLEEP_SLICE`]: threads sharing a pair also share its interrupt, so a wake-up one
//! of them consumed costs the others at most one slice.

use std::time::{Duration, Instant};

use libc::c_int;
use slimtcp_api::Ready;

use crate::device::Device;
use crate::errno::{Errno, Sys};
use crate::socket::Slim;

/// Longest sleep before looking again.
pub const SLEEP_SLICE: Duration = Duration::from_millis(1);
/// Idle steps spent spinning, then yielding, before sleeping.
const SPIN_STEPS: u32 = 64;
const YIELD_STEPS: u32 = 512;

/// Where a wait is in its spin-yield-sleep progression.
#[derive(Debug, Default)]
pub struct Backoff(u32);

/// What the idle step did.
#[derive(Debug, PartialEq, Eq)]
pub enum Idled {
    /// Spun or yielded.
    Spun,
    /// Slept (or found news instead); `kernel`: the sleep function said kernel descriptors
    /// are ready.
    Slept {
        /// Kernel descriptors are ready.
        kernel: bool,
    },
}

impl Backoff {
    /// Progress was made: spin again next time.
    pub fn reset(&mut self) {
        self.0 = 0;
    }

    /// One idle step over `pairs`. When it is time to sleep, `sleep(interrupt fds, timeout)`
    /// sleeps in the kernel (returning whether kernel descriptors of the caller's are ready).
    pub fn idle(
        &mut self,
        dev: &Device,
        pairs: &[usize],
        deadline: Option<Instant>,
        sleep: impl FnOnce(&[c_int], Duration) -> Sys<bool>,
    ) -> Sys<Idled> {
        self.0 = self.0.saturating_add(1);
        if self.0 < SPIN_STEPS {
            std::hint::spin_loop();
            return Ok(Idled::Spun);
        }
        if self.0 < YIELD_STEPS {
            std::thread::yield_now();
            return Ok(Idled::Spun);
        }
        let mut armed = Vec::with_capacity(pairs.len());
        let mut fds = Vec::with_capacity(pairs.len());
        let mut news = false;
        for &p in pairs {
            match dev.with_pair(p, |api| api.sleep_begin().map(|sleep| (sleep, api.wait_fd())))? {
                Ok((true, fd)) => {
                    armed.push(p);
                    fds.extend(fd);
                }
                Ok((false, _)) => {
                    news = true;
                    break;
                }
                Err(e) => {
                    end(dev, &armed);
                    return Err(e.into());
                }
            }
        }
        let mut kernel = false;
        if !news {
            let slice = deadline
                .map_or(SLEEP_SLICE, |d| d.saturating_duration_since(Instant::now()).min(SLEEP_SLICE));
            let slept = sleep(&fds, slice);
            end(dev, &armed);
            kernel = slept?;
        } else {
            end(dev, &armed);
        }
        Ok(Idled::Slept { kernel })
    }
}

fn end(dev: &Device, pairs: &[usize]) {
    for &p in pairs {
        let _ = dev.with_pair(p, |api| api.sleep_end());
    }
}

/// Sleeps in `poll` on `fds` (readable) for up to `timeout`; `EINTR` ends the sleep early.
pub fn sleep_on(fds: &[c_int], timeout: Duration) -> Sys<bool> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ms = c_int::try_from(timeout.as_millis().max(1)).unwrap_or(c_int::MAX);
    // SAFETY: `pfds` is a valid array of `pfds.len()` pollfds for the duration of the call.
    let rc = unsafe { crate::real::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if rc < 0 && Errno::last().0 != libc::EINTR {
        return Err(Errno::last());
    }
    Ok(false)
}

/// Blocks until `slim` is ready for `want` (or has an error or hang-up) or `deadline` passes
/// (`EAGAIN`). A socket closed meanwhile ends the wait (the caller's retry reports it).
pub fn until_ready(dev: &Device, slim: Slim, want: Ready, deadline: Option<Instant>) -> Sys<()> {
    let mut backoff = Backoff::default();
    let wanted = Ready(want.0 | Ready::ERR.0 | Ready::HUP.0);
    loop {
        let (progressed, ready) = dev.with_pair(slim.pair, |api| {
            let progressed = api.progress()?;
            Ok::<_, slimtcp_api::SocketError>((progressed, api.readiness(slim.fd)))
        })??;
        match ready {
            Ok(r) if r.intersects(wanted) => return Ok(()),
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Errno(libc::EAGAIN));
        }
        if progressed {
            backoff.reset();
        }
        backoff.idle(dev, &[slim.pair], deadline, sleep_on)?;
    }
}
