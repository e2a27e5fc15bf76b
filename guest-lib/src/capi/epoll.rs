//! Readiness: `slim_epoll_create`, `slim_epoll_ctl`, `slim_epoll_wait`, `slim_epoll_close`,
//! with Linux's flag values (`SLIM_EPOLLIN` = `EPOLLIN`, ...) and timeout rules. Epoll
//! descriptors are numbered apart from socket descriptors.

use std::ffi::c_int;

use slimtcp_api::{EpollEvent, EpollOp, SocketApi};

use super::args;
use super::device::{api, SlimCtx};
use super::entry::guarded;
use super::error::CapiError;
use super::types::{SlimEpollEvent, SLIM_EPOLL_CTL_ADD, SLIM_EPOLL_CTL_DEL, SLIM_EPOLL_CTL_MOD};

/// The most reports one `slim_epoll_wait` returns (more wait for the next call, as in Linux
/// when `maxevents` is small); they are gathered on the stack.
const WAIT_BATCH: usize = 64;

/// A new readiness set of this context; returns its descriptor or a negative errno.
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_epoll_create(ctx: *mut SlimCtx) -> c_int {
    guarded("slim_epoll_create", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let ep = api.epoll_create().map_err(CapiError::socket("epoll_create"))?;
        args::to_c(ep.0)
    })
}

/// Adds (`SLIM_EPOLL_CTL_ADD`), changes (`_MOD`) or removes (`_DEL`, `event` may be NULL) the
/// registration of socket `fd` in set `ep`.
///
/// # Safety
/// `event` is NULL or a valid `struct slim_epoll_event`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_epoll_ctl(
    ctx: *mut SlimCtx,
    ep: c_int,
    op: c_int,
    fd: c_int,
    event: *const SlimEpollEvent,
) -> c_int {
    guarded("slim_epoll_ctl", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let op = match op {
            SLIM_EPOLL_CTL_ADD => EpollOp::Add,
            SLIM_EPOLL_CTL_MOD => EpollOp::Modify,
            SLIM_EPOLL_CTL_DEL => EpollOp::Delete,
            _ => {
                let expected = "SLIM_EPOLL_CTL_ADD, _MOD or _DEL";
                return Err(CapiError::BadArgument { arg: "op", value: op.into(), expected });
            }
        };
        let event = match op {
            // SAFETY: the caller guarantees `event` is NULL or valid.
            EpollOp::Delete => unsafe { event.as_ref() }.copied().unwrap_or_default(),
            // SAFETY: as above.
            _ => *unsafe { args::get(event, "event") }?,
        };
        let (ep, fd) = (args::epoll_fd(ep, "epoll_ctl")?, args::fd(fd, "epoll_ctl")?);
        api.epoll_ctl(ep, op, fd, event.into()).map_err(CapiError::socket("epoll_ctl"))?;
        Ok(0)
    })
}

/// Waits until a socket of `ep` is ready and stores up to `maxevents` reports in `events`;
/// returns how many (0 when `timeout_ms` passed; at most 64 per call). `timeout_ms`: 0 polls, -1 waits without
/// limit, otherwise milliseconds.
///
/// # Safety
/// `events` is NULL or writable for `maxevents` `struct slim_epoll_event`s; for `ctx`, see
/// `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_epoll_wait(
    ctx: *mut SlimCtx,
    ep: c_int,
    events: *mut SlimEpollEvent,
    maxevents: c_int,
    timeout_ms: c_int,
) -> c_int {
    guarded("slim_epoll_wait", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let max = match args::count(maxevents, "maxevents")? {
            0 => return Err(CapiError::BadArgument { arg: "maxevents", value: 0, expected: "at least 1" }),
            n => n,
        };
        if events.is_null() {
            return Err(CapiError::Null("events"));
        }
        let mut batch = [EpollEvent::default(); WAIT_BATCH];
        let got = &mut batch[..max.min(WAIT_BATCH)];
        let ep = args::epoll_fd(ep, "epoll_wait")?;
        let n = api.epoll_wait(ep, got, timeout_ms).map_err(CapiError::socket("epoll_wait"))?;
        for (i, e) in got.iter().take(n).enumerate() {
            // SAFETY: `events` is not NULL and has room for `maxevents` > i entries (the
            // caller's guarantee); `write` needs no initialized or aligned-for-read target.
            unsafe { events.add(i).write(SlimEpollEvent::from(*e)) };
        }
        Ok(c_int::try_from(n).unwrap_or(c_int::MAX))
    })
}

/// Releases readiness set `ep`.
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_epoll_close(ctx: *mut SlimCtx, ep: c_int) -> c_int {
    guarded("slim_epoll_close", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        api.epoll_close(args::epoll_fd(ep, "epoll_close")?).map_err(CapiError::socket("epoll_close"))?;
        Ok(0)
    })
}
