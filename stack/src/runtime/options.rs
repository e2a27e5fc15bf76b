//! Socket options of the host runtime: kept on the application side, validated here, and
//! handed to the worker with `listen` and `connect`.

use slimtcp_api::{Fd, SockOpt, SockOptName, SocketError};

use super::link::{HostLink, HostSock};
use crate::tcp::{LivenessOpt, TcpConfig};

/// Smallest and largest socket buffers accepted by `setsockopt`.
const MIN_BUFFER: usize = 1024;
const MAX_BUFFER: usize = 64 << 20;
/// Smallest MSS accepted (the paper's experiments go down to 64): the stack's own minimum.
const MIN_MSS: u16 = crate::tcp::MIN_MSS;
/// Largest burst accepted.
const MAX_BURST: usize = 512;

/// What a `setsockopt` does once validated.
pub(super) enum SetEffect {
    /// Only the socket's settings changed.
    Local,
    /// The interface's burst changes: the worker must be told.
    Burst,
}

impl HostLink {
    /// Validates and applies an option (the burst only once the worker was told).
    pub(super) fn set_option(&mut self, fd: Fd, opt: SockOpt) -> Result<SetEffect, SocketError> {
        let max_mss = self.max_mss;
        let s = self.sock_mut(fd)?;
        let before_start = !s.on_worker;
        if let Some((liveness, value)) = liveness_of(opt) {
            // The host runtime applies them when the connection is made (the guest library's
            // backend also changes live connections).
            if !before_start {
                return Err(SocketError::IsConnected);
            }
            s.live.set(liveness, value).map_err(|_| SocketError::InvalidInput)?;
            return Ok(SetEffect::Local);
        }
        match opt {
            SockOpt::NonBlocking(_) | SockOpt::Error(_) => return Err(SocketError::InvalidInput),
            SockOpt::NoDelay(true) => {}
            SockOpt::NoDelay(false) => return Err(SocketError::InvalidInput),
            SockOpt::RecvBuffer(n) | SockOpt::SendBuffer(n) if !(MIN_BUFFER..=MAX_BUFFER).contains(&n) => {
                return Err(SocketError::InvalidInput)
            }
            SockOpt::Mss(m) if !(MIN_MSS..=max_mss).contains(&m) => return Err(SocketError::InvalidInput),
            SockOpt::WindowScale(Some(w)) if w > 14 => return Err(SocketError::InvalidInput),
            SockOpt::RecvBuffer(_) | SockOpt::SendBuffer(_) | SockOpt::Mss(_) | SockOpt::WindowScale(_)
                if !before_start =>
            {
                return Err(SocketError::IsConnected)
            }
            SockOpt::RecvBuffer(n) => s.config.rx_buffer = n,
            SockOpt::SendBuffer(n) => s.config.tx_buffer = n,
            SockOpt::Mss(m) => s.config.mss = m,
            SockOpt::WindowScale(w) => {
                s.config.window_scale = w;
                s.window_scale_explicit = true;
            }
            SockOpt::Burst(n) => {
                if !(1..=MAX_BURST).contains(&n) {
                    return Err(SocketError::InvalidInput);
                }
                return Ok(SetEffect::Burst);
            }
            // Handled above.
            SockOpt::KeepAlive(_)
            | SockOpt::KeepIdle(_)
            | SockOpt::KeepInterval(_)
            | SockOpt::KeepCount(_)
            | SockOpt::UserTimeout(_) => {}
        }
        Ok(SetEffect::Local)
    }

    /// An option's value.
    pub(super) fn get_option(&self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        let s = self.sock(fd)?;
        Ok(match name {
            SockOptName::RecvBuffer => SockOpt::RecvBuffer(s.config.rx_buffer),
            SockOptName::SendBuffer => SockOpt::SendBuffer(s.config.tx_buffer),
            SockOptName::Mss => SockOpt::Mss(s.config.mss),
            SockOptName::WindowScale => SockOpt::WindowScale(effective_config(s).window_scale),
            SockOptName::NoDelay => SockOpt::NoDelay(true),
            SockOptName::Burst => SockOpt::Burst(self.burst),
            SockOptName::NonBlocking | SockOptName::Error => return Err(SocketError::InvalidInput),
            SockOptName::KeepAlive => SockOpt::KeepAlive(s.live.keepalive),
            SockOptName::KeepIdle => SockOpt::KeepIdle(s.live.idle_secs),
            SockOptName::KeepInterval => SockOpt::KeepInterval(s.live.interval_secs),
            SockOptName::KeepCount => SockOpt::KeepCount(s.live.count),
            SockOptName::UserTimeout => SockOpt::UserTimeout(s.live.user_timeout_ms),
        })
    }
}

/// A liveness option as the stack's rules name it, with its value; `None` for other options.
pub fn liveness_of(opt: SockOpt) -> Option<(LivenessOpt, u64)> {
    Some(match opt {
        SockOpt::KeepAlive(on) => (LivenessOpt::KeepAlive, u64::from(on)),
        SockOpt::KeepIdle(v) => (LivenessOpt::KeepIdle, u64::from(v)),
        SockOpt::KeepInterval(v) => (LivenessOpt::KeepInterval, u64::from(v)),
        SockOpt::KeepCount(v) => (LivenessOpt::KeepCount, u64::from(v)),
        SockOpt::UserTimeout(v) => (LivenessOpt::UserTimeout, u64::from(v)),
        _ => return None,
    })
}

/// The connection settings a socket's options give: a receive buffer larger than 64 KiB gets
/// the window scale it needs, unless the application chose one.
pub(super) fn effective_config(s: &HostSock) -> TcpConfig {
    let mut cfg = s.config.clone();
    cfg.keepalive = s.live.keepalive();
    cfg.user_timeout = s.live.user_timeout();
    if !s.window_scale_explicit {
        let needed = TcpConfig::scale_for_buffer(cfg.rx_buffer);
        cfg.window_scale = Some(cfg.window_scale.unwrap_or(0).max(needed));
    }
    cfg
}
