//! `setsockopt`/`getsockopt` on SlimTCP sockets: which options SlimTCP acts on, which it
//! accepts without effect (recorded, read back, logged once), and which it refuses
//! (`ENOPROTOOPT`, logged once).

use std::time::Duration;

use libc::{c_int, c_void, socklen_t};
use slimtcp_api::{Proto, SockOpt, SockOptName, SocketApi};

use crate::device;
use crate::errno::{Errno, Sys};
use crate::logger::warn_once;
use crate::socket::Entry;

/// What an option set means to SlimTCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapped {
    /// An option of the library.
    Opt(SockOpt),
    /// A timeout this library's blocking honours.
    Timeout {
        /// `SO_RCVTIMEO` (true) or `SO_SNDTIMEO`.
        recv: bool,
        /// `None`: wait for ever.
        after: Option<Duration>,
    },
    /// Accepted, recorded, without effect on SlimTCP (named for the log).
    NoEffect(&'static str),
    /// Not supported.
    Unknown,
}

fn int(value: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
}

fn timeval(value: &[u8]) -> Option<Option<Duration>> {
    if value.len() < std::mem::size_of::<libc::timeval>() {
        return None;
    }
    // SAFETY: `value` holds at least one timeval; read_unaligned copes with any alignment.
    let tv: libc::timeval = unsafe { std::ptr::read_unaligned(value.as_ptr().cast()) };
    let (s, us) = (u64::try_from(tv.tv_sec).ok()?, u64::try_from(tv.tv_usec).ok()?);
    let d = Duration::from_secs(s) + Duration::from_micros(us);
    Some(if d.is_zero() { None } else { Some(d) })
}

/// What setting (`level`, `name`) to `value` means; `Unknown` also for a malformed value.
pub fn map_set(level: c_int, name: c_int, value: &[u8], proto: Proto) -> Mapped {
    use Mapped::*;
    let on = || int(value).map(|v| v != 0);
    let num = || int(value).and_then(|v| u32::try_from(v).ok());
    let opt = |o: Option<SockOpt>| o.map_or(Unknown, Opt);
    match (level, name) {
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => opt(on().map(SockOpt::KeepAlive)),
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => opt(num().map(|v| SockOpt::RecvBuffer(v as usize))),
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => opt(num().map(|v| SockOpt::SendBuffer(v as usize))),
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => {
            timeval(value).map_or(Unknown, |after| Timeout { recv: true, after })
        }
        (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => {
            timeval(value).map_or(Unknown, |after| Timeout { recv: false, after })
        }
        (libc::SOL_SOCKET, libc::SO_REUSEADDR) => NoEffect("SO_REUSEADDR"),
        (libc::SOL_SOCKET, libc::SO_REUSEPORT) => NoEffect("SO_REUSEPORT"),
        (libc::SOL_SOCKET, libc::SO_LINGER) => NoEffect("SO_LINGER"),
        (libc::SOL_SOCKET, libc::SO_BROADCAST) => NoEffect("SO_BROADCAST"),
        (libc::SOL_SOCKET, libc::SO_PRIORITY) => NoEffect("SO_PRIORITY"),
        (libc::SOL_SOCKET, libc::SO_RCVLOWAT) => NoEffect("SO_RCVLOWAT"),
        (libc::SOL_SOCKET, libc::SO_OOBINLINE) => NoEffect("SO_OOBINLINE"),
        (libc::SOL_SOCKET, libc::SO_TIMESTAMP) => NoEffect("SO_TIMESTAMP"),
        (libc::IPPROTO_TCP, _) if proto == Proto::Udp => Unknown,
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => match on() {
            // SlimTCP never delays small segments: off is accepted and has no effect.
            Some(true) => Opt(SockOpt::NoDelay(true)),
            Some(false) => NoEffect("TCP_NODELAY=0"),
            None => Unknown,
        },
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => {
            opt(num().and_then(|v| u16::try_from(v).ok()).map(SockOpt::Mss))
        }
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => opt(num().map(SockOpt::KeepIdle)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => opt(num().map(SockOpt::KeepInterval)),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => opt(num().map(SockOpt::KeepCount)),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => opt(num().map(SockOpt::UserTimeout)),
        (libc::IPPROTO_TCP, libc::TCP_CORK) => NoEffect("TCP_CORK"),
        (libc::IPPROTO_TCP, libc::TCP_QUICKACK) => NoEffect("TCP_QUICKACK"),
        (libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT) => NoEffect("TCP_DEFER_ACCEPT"),
        (libc::IPPROTO_TCP, libc::TCP_FASTOPEN) => NoEffect("TCP_FASTOPEN"),
        (libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT) => NoEffect("TCP_NOTSENT_LOWAT"),
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => NoEffect("TCP_CONGESTION"),
        (libc::IPPROTO_IP, libc::IP_TOS) => NoEffect("IP_TOS"),
        (libc::IPPROTO_IP, libc::IP_TTL) => NoEffect("IP_TTL"),
        (libc::IPPROTO_IP, libc::IP_MTU_DISCOVER) => NoEffect("IP_MTU_DISCOVER"),
        (libc::IPPROTO_IP, libc::IP_RECVERR) => NoEffect("IP_RECVERR"),
        _ => Unknown,
    }
}

/// `setsockopt` on a SlimTCP socket (pending ones record the value for later).
pub fn set(entry: &Entry, level: c_int, name: c_int, value: &[u8]) -> Sys<()> {
    let mapped = map_set(level, name, value, entry.proto);
    match mapped {
        Mapped::Unknown => {
            warn_once(format!("set {level}/{name}"), || {
                format!("setsockopt level {level} option {name} is not supported by SlimTCP: ENOPROTOOPT")
            });
            return Err(Errno(libc::ENOPROTOOPT));
        }
        Mapped::NoEffect(what) => {
            warn_once(format!("noeffect {what}"), || format!("{what}: accepted, no effect with SlimTCP"));
        }
        Mapped::Timeout { recv, after } => {
            let mut o = crate::device::lock(&entry.options);
            if recv {
                o.recv_timeout = after;
            } else {
                o.send_timeout = after;
            }
        }
        Mapped::Opt(_) => {}
    }
    crate::device::lock(&entry.options).record(level, name, value);
    if let (Mapped::Opt(opt), false) = (mapped, entry.pending()) {
        let s = entry.slim()?;
        let dev = device::attached().ok_or(Errno(libc::ENETDOWN))?;
        match dev.with_pair(s.pair, |api| api.setsockopt(s.fd, opt))? {
            Ok(()) => {}
            // Linux takes buffer sizes at any time; SlimTCP fixes them at connect.
            Err(e) if matches!(opt, SockOpt::RecvBuffer(_) | SockOpt::SendBuffer(_)) => {
                warn_once(format!("late {opt:?}"), || {
                    format!("{opt:?} after connect/listen has no effect ({e})")
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// An option's value as `getsockopt` writes it.
enum Value {
    Int(i32),
    Bytes(Vec<u8>),
}

/// `getsockopt` on a SlimTCP socket: writes at most `*len` bytes at `out`, sets `*len`.
///
/// # Safety
/// `out` must be valid for `*len` bytes and `len` for one `socklen_t` (checked for NULL).
pub unsafe fn get(
    entry: &Entry,
    level: c_int,
    name: c_int,
    out: *mut c_void,
    len: *mut socklen_t,
) -> Sys<()> {
    if out.is_null() || len.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    let value = value_of(entry, level, name)?;
    let bytes = match &value {
        Value::Int(v) => v.to_ne_bytes().to_vec(),
        Value::Bytes(b) => b.clone(),
    };
    // SAFETY: `len` is non-null and, by the caller's contract, points at a socklen_t.
    let room = usize::try_from(unsafe { *len }).unwrap_or(0);
    let n = room.min(bytes.len());
    // SAFETY: `out` has room for `room >= n` bytes by the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.cast::<u8>(), n);
        *len = socklen_t::try_from(n).unwrap_or(0);
    }
    Ok(())
}

fn value_of(entry: &Entry, level: c_int, name: c_int) -> Sys<Value> {
    let lib = |what: SockOptName| -> Sys<Option<SockOpt>> {
        if entry.pending() {
            return Ok(None);
        }
        let s = entry.slim()?;
        let dev = device::attached().ok_or(Errno(libc::ENETDOWN))?;
        Ok(Some(dev.with_pair(s.pair, |api| api.getsockopt(s.fd, what))??))
    };
    let recorded_int = || {
        let o = crate::device::lock(&entry.options);
        o.recorded(level, name).and_then(int).unwrap_or(0)
    };
    let tcp = entry.proto == Proto::Tcp;
    Ok(match (level, name) {
        (libc::SOL_SOCKET, libc::SO_ERROR) => match lib(SockOptName::Error)? {
            Some(SockOpt::Error(Some(e))) => Value::Int(e.errno()),
            _ => Value::Int(0),
        },
        (libc::SOL_SOCKET, libc::SO_TYPE) => {
            Value::Int(if tcp { libc::SOCK_STREAM } else { libc::SOCK_DGRAM })
        }
        (libc::SOL_SOCKET, libc::SO_DOMAIN) => Value::Int(libc::AF_INET),
        (libc::SOL_SOCKET, libc::SO_PROTOCOL) => {
            Value::Int(if tcp { libc::IPPROTO_TCP } else { libc::IPPROTO_UDP })
        }
        (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => {
            let listening = match entry.slim() {
                Ok(s) => device::attached()
                    .and_then(|d| d.with_pair(s.pair, |api| api.is_listening(s.fd)).ok())
                    .and_then(Result::ok)
                    .unwrap_or(false),
                Err(_) => false,
            };
            Value::Int(i32::from(listening))
        }
        (libc::SOL_SOCKET, libc::SO_RCVBUF) => match lib(SockOptName::RecvBuffer)? {
            Some(SockOpt::RecvBuffer(n)) => Value::Int(i32::try_from(n).unwrap_or(i32::MAX)),
            _ => Value::Int(recorded_int()),
        },
        (libc::SOL_SOCKET, libc::SO_SNDBUF) => match lib(SockOptName::SendBuffer)? {
            Some(SockOpt::SendBuffer(n)) => Value::Int(i32::try_from(n).unwrap_or(i32::MAX)),
            _ => Value::Int(recorded_int()),
        },
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => match lib(SockOptName::KeepAlive)? {
            Some(SockOpt::KeepAlive(on)) => Value::Int(i32::from(on)),
            _ => Value::Int(recorded_int()),
        },
        (libc::SOL_SOCKET, libc::SO_RCVTIMEO | libc::SO_SNDTIMEO | libc::SO_LINGER) => {
            let o = crate::device::lock(&entry.options);
            let size = if name == libc::SO_LINGER {
                std::mem::size_of::<libc::linger>()
            } else {
                std::mem::size_of::<libc::timeval>()
            };
            Value::Bytes(o.recorded(level, name).map_or_else(|| vec![0; size], <[u8]>::to_vec))
        }
        (
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR | libc::SO_REUSEPORT | libc::SO_BROADCAST | libc::SO_PRIORITY,
        ) => Value::Int(recorded_int()),
        (libc::IPPROTO_TCP, _) if !tcp => return Err(Errno(libc::ENOPROTOOPT)),
        (libc::IPPROTO_TCP, libc::TCP_NODELAY) => Value::Int(1),
        (libc::IPPROTO_TCP, libc::TCP_MAXSEG) => match lib(SockOptName::Mss)? {
            Some(SockOpt::Mss(m)) => Value::Int(i32::from(m)),
            _ => Value::Int(recorded_int()),
        },
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => keep(lib(SockOptName::KeepIdle)?),
        (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => keep(lib(SockOptName::KeepInterval)?),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => keep(lib(SockOptName::KeepCount)?),
        (libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT) => keep(lib(SockOptName::UserTimeout)?),
        (libc::IPPROTO_TCP, libc::TCP_INFO) => Value::Bytes(tcp_info(entry, &lib)?),
        // SlimTCP has no congestion control to name (iperf3 asks, and copes with the error).
        (libc::IPPROTO_TCP, libc::TCP_CONGESTION) => return Err(Errno(libc::ENOPROTOOPT)),
        _ => {
            warn_once(format!("get {level}/{name}"), || {
                format!("getsockopt level {level} option {name} is not supported by SlimTCP: ENOPROTOOPT")
            });
            return Err(Errno(libc::ENOPROTOOPT));
        }
    })
}

fn keep(v: Option<SockOpt>) -> Value {
    match v {
        Some(
            SockOpt::KeepIdle(n) | SockOpt::KeepInterval(n) | SockOpt::KeepCount(n) | SockOpt::UserTimeout(n),
        ) => Value::Int(i32::try_from(n).unwrap_or(i32::MAX)),
        _ => Value::Int(0),
    }
}

/// `TCP_INFO`: the state and the MSS; every counter SlimTCP does not keep is 0.
fn tcp_info(entry: &Entry, lib: &dyn Fn(SockOptName) -> Sys<Option<SockOpt>>) -> Sys<Vec<u8>> {
    // SAFETY: tcp_info is plain integers; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let established = entry.slim().is_ok();
    info.tcpi_state = if established { 1 } else { 7 }; // TCP_ESTABLISHED, TCP_CLOSE
    if let Some(SockOpt::Mss(m)) = lib(SockOptName::Mss)? {
        info.tcpi_snd_mss = u32::from(m);
        info.tcpi_rcv_mss = u32::from(m);
        info.tcpi_advmss = u32::from(m);
    }
    let size = std::mem::size_of::<libc::tcp_info>();
    // SAFETY: reads the bytes of a plain struct we own.
    let bytes = unsafe { std::slice::from_raw_parts((&info as *const libc::tcp_info).cast::<u8>(), size) };
    Ok(bytes.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_what_apps_set() {
        let one = 1i32.to_ne_bytes();
        let zero = 0i32.to_ne_bytes();
        assert_eq!(
            map_set(libc::IPPROTO_TCP, libc::TCP_NODELAY, &one, Proto::Tcp),
            Mapped::Opt(SockOpt::NoDelay(true))
        );
        assert_eq!(
            map_set(libc::IPPROTO_TCP, libc::TCP_NODELAY, &zero, Proto::Tcp),
            Mapped::NoEffect("TCP_NODELAY=0")
        );
        assert_eq!(
            map_set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, &one, Proto::Tcp),
            Mapped::Opt(SockOpt::KeepAlive(true))
        );
        assert_eq!(
            map_set(libc::SOL_SOCKET, libc::SO_SNDBUF, &65536i32.to_ne_bytes(), Proto::Tcp),
            Mapped::Opt(SockOpt::SendBuffer(65536))
        );
        assert_eq!(map_set(libc::IPPROTO_TCP, libc::TCP_NODELAY, &one, Proto::Udp), Mapped::Unknown);
        assert_eq!(
            map_set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, &[1], Proto::Tcp),
            Mapped::Unknown,
            "short value"
        );
        assert_eq!(
            map_set(libc::SOL_SOCKET, libc::SO_SNDBUF, &(-1i32).to_ne_bytes(), Proto::Tcp),
            Mapped::Unknown
        );
        assert_eq!(map_set(libc::SOL_SOCKET, libc::SO_BINDTODEVICE, b"eth0", Proto::Tcp), Mapped::Unknown);
    }

    #[test]
    fn timeouts_read_a_timeval() {
        let tv = libc::timeval { tv_sec: 2, tv_usec: 500_000 };
        // SAFETY: the bytes of a plain struct on the stack.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&tv as *const libc::timeval).cast::<u8>(),
                std::mem::size_of::<libc::timeval>(),
            )
        };
        assert_eq!(
            map_set(libc::SOL_SOCKET, libc::SO_RCVTIMEO, bytes, Proto::Tcp),
            Mapped::Timeout { recv: true, after: Some(Duration::from_millis(2500)) }
        );
        let zero = [0u8; std::mem::size_of::<libc::timeval>()];
        assert_eq!(
            map_set(libc::SOL_SOCKET, libc::SO_SNDTIMEO, &zero, Proto::Tcp),
            Mapped::Timeout { recv: false, after: None }
        );
    }
}
