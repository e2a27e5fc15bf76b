//! Socket control calls, POSIX-shaped: `slim_socket`, `slim_bind`, `slim_listen`,
//! `slim_accept`, `slim_connect`, `slim_shutdown`, `slim_close`, `slim_getsockname`,
//! `slim_getpeername`. Each returns 0 (or a descriptor) on success, a negative errno on failure.

use std::ffi::c_int;

use slimtcp_api::{Proto, Shutdown, SockOpt, SocketApi};

use super::device::{api, SlimCtx};
use super::entry::guarded;
use super::error::CapiError;
use super::{addr, args};

/// The protocol `socket(domain, type, protocol)` asks for, and whether `SOCK_NONBLOCK` is set.
fn socket_kind(domain: c_int, kind: c_int, protocol: c_int) -> Result<(Proto, bool), CapiError> {
    if domain != libc::AF_INET {
        return Err(CapiError::AddressFamily(domain));
    }
    let nonblocking = kind & libc::SOCK_NONBLOCK != 0;
    let base = kind & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
    let proto = match (base, protocol) {
        (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) => Proto::Tcp,
        (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => Proto::Udp,
        _ => return Err(CapiError::SocketType { kind: base, protocol }),
    };
    Ok((proto, nonblocking))
}

/// A new socket: `domain` `AF_INET`, `socket_type` `SOCK_STREAM` or `SOCK_DGRAM` (optionally ORed
/// with `SOCK_NONBLOCK`; `SOCK_CLOEXEC` is ignored), `protocol` 0 or the matching `IPPROTO_*`.
/// Returns the descriptor (>= 0), or a negative errno.
///
/// # Safety
/// `ctx` is NULL or a live context not used by another thread meanwhile (so for every call
/// taking a context).
#[no_mangle]
pub unsafe extern "C" fn slim_socket(
    ctx: *mut SlimCtx,
    domain: c_int,
    socket_type: c_int,
    protocol: c_int,
) -> c_int {
    guarded("slim_socket", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let (proto, nonblocking) = socket_kind(domain, socket_type, protocol)?;
        let fd = api.socket(proto).map_err(CapiError::socket("socket"))?;
        let set_up = if nonblocking {
            api.setsockopt(fd, SockOpt::NonBlocking(true)).map_err(CapiError::socket("setsockopt"))
        } else {
            Ok(())
        };
        match set_up.and_then(|()| args::to_c(fd.0)) {
            Ok(n) => Ok(n),
            Err(e) => {
                let _ = api.close(fd);
                Err(e)
            }
        }
    })
}

/// Binds `fd` to `addr` (our address or `INADDR_ANY`; port 0: any).
///
/// # Safety
/// `addr` is NULL or a valid `struct sockaddr_in`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_bind(ctx: *mut SlimCtx, fd: c_int, addr: *const libc::sockaddr_in) -> c_int {
    guarded("slim_bind", || {
        // SAFETY: forwarded from the caller.
        let (api, sa) = unsafe { (api(ctx)?, args::get(addr, "addr")?) };
        let fd = args::fd(fd, "bind")?;
        api.bind(fd, addr::from_c(sa)?).map_err(CapiError::socket("bind"))?;
        Ok(0)
    })
}

/// Listens on `fd` with room for `backlog` connections not yet accepted.
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_listen(ctx: *mut SlimCtx, fd: c_int, backlog: c_int) -> c_int {
    guarded("slim_listen", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let fd = args::fd(fd, "listen")?;
        api.listen(fd, args::count(backlog, "backlog")?).map_err(CapiError::socket("listen"))?;
        Ok(0)
    })
}

/// An established connection from listener `fd`: returns its descriptor and, when `peer` is
/// not NULL, stores the peer's address there.
///
/// # Safety
/// `peer` is NULL or writable for a `struct sockaddr_in`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_accept(ctx: *mut SlimCtx, fd: c_int, peer: *mut libc::sockaddr_in) -> c_int {
    guarded("slim_accept", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let (conn, from) = api.accept(args::fd(fd, "accept")?).map_err(CapiError::socket("accept"))?;
        // SAFETY: the caller guarantees `peer` is NULL or writable.
        if let Some(out) = unsafe { peer.as_mut() } {
            *out = addr::to_c(from);
        }
        args::to_c(conn.0)
    })
}

/// Connects a TCP socket to `addr` (a UDP socket: sets its default destination). A
/// non-blocking socket returns `-EINPROGRESS` and reports completion as `SLIM_EPOLLOUT`.
///
/// # Safety
/// `addr` is NULL or a valid `struct sockaddr_in`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_connect(ctx: *mut SlimCtx, fd: c_int, addr: *const libc::sockaddr_in) -> c_int {
    guarded("slim_connect", || {
        // SAFETY: forwarded from the caller.
        let (api, sa) = unsafe { (api(ctx)?, args::get(addr, "addr")?) };
        let fd = args::fd(fd, "connect")?;
        api.connect(fd, addr::from_c(sa)?).map_err(CapiError::socket("connect"))?;
        Ok(0)
    })
}

/// Closes one or both directions: `how` is `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_shutdown(ctx: *mut SlimCtx, fd: c_int, how: c_int) -> c_int {
    guarded("slim_shutdown", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        let how = match how {
            libc::SHUT_RD => Shutdown::Read,
            libc::SHUT_WR => Shutdown::Write,
            libc::SHUT_RDWR => Shutdown::Both,
            _ => {
                let expected = "SHUT_RD, SHUT_WR or SHUT_RDWR";
                return Err(CapiError::BadArgument { arg: "how", value: how.into(), expected });
            }
        };
        api.shutdown(args::fd(fd, "shutdown")?, how).map_err(CapiError::socket("shutdown"))?;
        Ok(0)
    })
}

/// Releases the descriptor; the stack finishes the TCP close on its own (unread data makes it
/// a reset, as in Linux).
///
/// # Safety
/// See `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_close(ctx: *mut SlimCtx, fd: c_int) -> c_int {
    guarded("slim_close", || {
        // SAFETY: forwarded from the caller.
        let api = unsafe { api(ctx) }?;
        api.close(args::fd(fd, "close")?).map_err(CapiError::socket("close"))?;
        Ok(0)
    })
}

/// Stores the local address of `fd` in `out` (`getsockname`).
///
/// # Safety
/// `out` is NULL or writable for a `struct sockaddr_in`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_getsockname(
    ctx: *mut SlimCtx,
    fd: c_int,
    out: *mut libc::sockaddr_in,
) -> c_int {
    guarded("slim_getsockname", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::get_mut(out, "out")?) };
        *out = addr::to_c(
            api.local_addr(args::fd(fd, "getsockname")?).map_err(CapiError::socket("getsockname"))?,
        );
        Ok(0)
    })
}

/// Stores the peer's address of `fd` in `out` (`getpeername`).
///
/// # Safety
/// `out` is NULL or writable for a `struct sockaddr_in`; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_getpeername(
    ctx: *mut SlimCtx,
    fd: c_int,
    out: *mut libc::sockaddr_in,
) -> c_int {
    guarded("slim_getpeername", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::get_mut(out, "out")?) };
        *out = addr::to_c(
            api.peer_addr(args::fd(fd, "getpeername")?).map_err(CapiError::socket("getpeername"))?,
        );
        Ok(0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_arguments_follow_linux() {
        assert!(matches!(socket_kind(libc::AF_INET, libc::SOCK_STREAM, 0), Ok((Proto::Tcp, false))));
        let nb = libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        assert!(matches!(socket_kind(libc::AF_INET, nb, libc::IPPROTO_UDP), Ok((Proto::Udp, true))));
        let errno = |r: Result<(Proto, bool), CapiError>| r.err().map(|e| e.errno());
        assert_eq!(errno(socket_kind(libc::AF_INET6, libc::SOCK_STREAM, 0)), Some(libc::EAFNOSUPPORT));
        assert_eq!(errno(socket_kind(libc::AF_INET, libc::SOCK_RAW, 0)), Some(libc::EPROTONOSUPPORT));
        let tcp_over_dgram = socket_kind(libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_TCP);
        assert_eq!(errno(tcp_over_dgram), Some(libc::EPROTONOSUPPORT));
    }
}
