//! Socket options as integers: `slim_setsockopt(ctx, fd, SLIM_OPT_*, value)` and
//! `slim_getsockopt(ctx, fd, SLIM_OPT_*, &value)`; the context's send budget
//! (`slim_set_send_budget`, `slim_send_budget`).

use std::ffi::c_int;

use slimtcp_api::{SockOpt, SockOptName, SocketApi};

use super::args;
use super::device::{api, SlimCtx};
use super::entry::guarded;
use super::error::CapiError;
use super::types::{
    SLIM_OPT_BURST, SLIM_OPT_ERROR, SLIM_OPT_KEEPALIVE, SLIM_OPT_KEEPCNT, SLIM_OPT_KEEPIDLE,
    SLIM_OPT_KEEPINTVL, SLIM_OPT_MSS, SLIM_OPT_NODELAY, SLIM_OPT_NONBLOCK, SLIM_OPT_RCVBUF, SLIM_OPT_SNDBUF,
    SLIM_OPT_USER_TIMEOUT, SLIM_OPT_WINDOW_SCALE,
};

const OPTIONS: &str = "one of SLIM_OPT_*";

fn name(opt: c_int) -> Result<SockOptName, CapiError> {
    Ok(match opt {
        SLIM_OPT_NONBLOCK => SockOptName::NonBlocking,
        SLIM_OPT_NODELAY => SockOptName::NoDelay,
        SLIM_OPT_RCVBUF => SockOptName::RecvBuffer,
        SLIM_OPT_SNDBUF => SockOptName::SendBuffer,
        SLIM_OPT_MSS => SockOptName::Mss,
        SLIM_OPT_WINDOW_SCALE => SockOptName::WindowScale,
        SLIM_OPT_BURST => SockOptName::Burst,
        SLIM_OPT_ERROR => SockOptName::Error,
        SLIM_OPT_KEEPALIVE => SockOptName::KeepAlive,
        SLIM_OPT_KEEPIDLE => SockOptName::KeepIdle,
        SLIM_OPT_KEEPINTVL => SockOptName::KeepInterval,
        SLIM_OPT_KEEPCNT => SockOptName::KeepCount,
        SLIM_OPT_USER_TIMEOUT => SockOptName::UserTimeout,
        _ => return Err(CapiError::BadArgument { arg: "opt", value: opt.into(), expected: OPTIONS }),
    })
}

/// The option `name` set to `value`.
fn option(name: SockOptName, value: i64) -> Result<SockOpt, CapiError> {
    let bad = |expected| CapiError::BadArgument { arg: "value", value, expected };
    let flag = || match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(bad("0 or 1")),
    };
    let size = || usize::try_from(value).map_err(|_| bad("a byte count"));
    let count = || u32::try_from(value).map_err(|_| bad("0..=4294967295"));
    Ok(match name {
        SockOptName::NonBlocking => SockOpt::NonBlocking(flag()?),
        SockOptName::NoDelay => SockOpt::NoDelay(flag()?),
        SockOptName::RecvBuffer => SockOpt::RecvBuffer(size()?),
        SockOptName::SendBuffer => SockOpt::SendBuffer(size()?),
        SockOptName::Mss => SockOpt::Mss(u16::try_from(value).map_err(|_| bad("an MSS in 0..=65535"))?),
        SockOptName::WindowScale => SockOpt::WindowScale(match value {
            -1 => None,
            v => Some(u8::try_from(v).map_err(|_| bad("-1 or a shift"))?),
        }),
        SockOptName::Burst => SockOpt::Burst(size()?),
        SockOptName::KeepAlive => SockOpt::KeepAlive(flag()?),
        SockOptName::KeepIdle => SockOpt::KeepIdle(count()?),
        SockOptName::KeepInterval => SockOpt::KeepInterval(count()?),
        SockOptName::KeepCount => SockOpt::KeepCount(count()?),
        SockOptName::UserTimeout => SockOpt::UserTimeout(count()?),
        SockOptName::Error => return Err(bad("nothing: SLIM_OPT_ERROR is read-only")),
    })
}

/// The integer form of an option's value.
fn value(opt: SockOpt) -> i64 {
    let size = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    match opt {
        SockOpt::NonBlocking(b) | SockOpt::NoDelay(b) => i64::from(b),
        SockOpt::RecvBuffer(n) | SockOpt::SendBuffer(n) | SockOpt::Burst(n) => size(n),
        SockOpt::Mss(m) => i64::from(m),
        SockOpt::WindowScale(s) => s.map_or(-1, i64::from),
        SockOpt::Error(e) => e.map_or(0, |e| i64::from(e.errno())),
        SockOpt::KeepAlive(b) => i64::from(b),
        SockOpt::KeepIdle(v) | SockOpt::KeepInterval(v) | SockOpt::KeepCount(v) | SockOpt::UserTimeout(v) => {
            i64::from(v)
        }
    }
}

/// Sets option `opt` (`SLIM_OPT_*`) of `fd` to `value`. Returns 0 or a negative errno
/// (`-EINVAL` for an unknown option or a value out of range).
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_setsockopt(ctx: *mut SlimCtx, fd: c_int, opt: c_int, value: i64) -> c_int {
    guarded("slim_setsockopt", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let opt = option(name(opt)?, value)?;
        api.setsockopt(args::fd(fd, "setsockopt")?, opt).map_err(CapiError::socket("setsockopt"))?;
        Ok(0)
    })
}

/// Reads option `opt` (`SLIM_OPT_*`) of `fd` into `*value`. Returns 0 or a negative errno.
///
/// # Safety
/// `value` is NULL or writable for an `int64_t`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_getsockopt(ctx: *mut SlimCtx, fd: c_int, opt: c_int, value: *mut i64) -> c_int {
    guarded("slim_getsockopt", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::get_mut(value, "value")?) };
        let got = api
            .getsockopt(args::fd(fd, "getsockopt")?, name(opt)?)
            .map_err(CapiError::socket("getsockopt"))?;
        *out = self::value(got);
        Ok(0)
    })
}

/// Bounds the bytes in flight (handed to the device, not yet acknowledged) over all of the
/// context's stream sockets together: the send budget (docs/architecture.md, "The send
/// budget"; by default 512 KiB, or the device's largest send buffer when larger). A socket the
/// budget keeps from sending is not writable until its turn comes. A budget below 64 KiB is
/// taken as 64 KiB. Returns 0, or -EINVAL for a negative size.
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_set_send_budget(ctx: *mut SlimCtx, bytes: i64) -> c_int {
    guarded("slim_set_send_budget", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let bytes = usize::try_from(bytes).map_err(|_| CapiError::BadArgument {
            arg: "bytes",
            value: bytes,
            expected: "a byte count",
        })?;
        api.set_send_budget(bytes);
        Ok(0)
    })
}

/// Stores the send budget's size in `*limit` and the bytes in flight that count against it
/// now in `*used`. Returns 0 or a negative errno (-EINVAL for a NULL pointer).
///
/// # Safety
/// `used` and `limit` are NULL or writable for an `int64_t`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_send_budget(ctx: *mut SlimCtx, used: *mut i64, limit: *mut i64) -> c_int {
    guarded("slim_send_budget", || {
        // SAFETY: forwarded from the caller.
        let (api, used, limit) =
            unsafe { (api(ctx)?, args::get_mut(used, "used")?, args::get_mut(limit, "limit")?) };
        let (now, size) = api.send_budget();
        *used = i64::try_from(now).unwrap_or(i64::MAX);
        *limit = i64::try_from(size).unwrap_or(i64::MAX);
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_round_trips_through_its_integer() {
        let cases = [
            (SLIM_OPT_NONBLOCK, 1),
            (SLIM_OPT_NODELAY, 1),
            (SLIM_OPT_RCVBUF, 1 << 20),
            (SLIM_OPT_SNDBUF, 65536),
            (SLIM_OPT_MSS, 1400),
            (SLIM_OPT_WINDOW_SCALE, -1),
            (SLIM_OPT_WINDOW_SCALE, 7),
            (SLIM_OPT_BURST, 32),
        ];
        for (opt, v) in cases {
            let o = option(name(opt).expect("known"), v).expect("in range");
            assert_eq!(value(o), v, "{o:?}");
        }
    }

    #[test]
    fn unknown_options_and_bad_values_are_einval() {
        assert_eq!(name(99).map_err(|e| e.errno()).err(), Some(libc::EINVAL));
        for (opt, v) in
            [(SLIM_OPT_NONBLOCK, 2), (SLIM_OPT_RCVBUF, -1), (SLIM_OPT_MSS, 70000), (SLIM_OPT_ERROR, 0)]
        {
            let r = option(name(opt).expect("known"), v);
            assert_eq!(r.map_err(|e| e.errno()).err(), Some(libc::EINVAL), "{opt} = {v}");
        }
        let pending =
            SockOpt::Error(Some(slimtcp_api::SocketError::Connection(slimtcp_api::ConnError::Refused)));
        assert_eq!(value(pending), i64::from(libc::ECONNREFUSED));
    }
}
