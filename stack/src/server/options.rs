//! Socket options: the one set of rules for what a socket may set, when, and within which bounds,
//! and the connection settings the options give. Every runtime applies these rules, so a
//! `setsockopt` means the same over the host runtime and over the guest protocol.

use crate::api::{SockOpt, SockOptName, SocketError};
use crate::tcp::{LivenessOpt, LivenessOptions, TcpConfig, MIN_MSS};

/// The smallest `SO_RCVBUF` / `SO_SNDBUF`.
pub const MIN_BUFFER: usize = 2048;
/// The largest `SO_RCVBUF` (and `SO_SNDBUF`, unless the operator bounds it lower).
pub const MAX_BUFFER: usize = 64 << 20;
const _: () = assert!(
    MAX_BUFFER <= crate::tcp::MAX_TCP_BUFFER,
    "a socket's buffer options must fit a connection's buffers (tcp::MAX_TCP_BUFFER)"
);
/// The largest burst (frames per receive/transmit burst of the interface).
pub const MAX_BURST: usize = 512;
/// The largest window-scale shift (RFC 7323).
pub const MAX_WINDOW_SCALE: u8 = 14;

/// Where a socket is in its life, as far as options care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionStage {
    /// Neither listening nor connecting: every option may change.
    Fresh,
    /// Listening or connecting or connected: the settings fixed at the handshake (buffers'
    /// receive side, MSS, window scale) are final.
    Started,
}

/// The bounds of one server's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionBounds {
    /// The largest MSS: the NIC's MTU less the IPv4 and TCP headers.
    pub max_mss: u16,
    /// The largest `SO_SNDBUF` (the operator's bound on bytes in flight per socket).
    pub max_sndbuf: usize,
}

impl OptionBounds {
    /// The bounds for a NIC of `mtu` bytes and send buffers of at most `max_sndbuf` bytes.
    pub fn new(mtu: usize, max_sndbuf: usize) -> Self {
        let max_mss = u16::try_from(mtu.saturating_sub(40)).unwrap_or(u16::MAX).max(MIN_MSS);
        OptionBounds { max_mss, max_sndbuf: max_sndbuf.clamp(MIN_BUFFER, MAX_BUFFER) }
    }
}

/// What a `setsockopt` asks of its caller beyond storing the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionEffect {
    /// Nothing: the value applies from the next listen or connect, or is read where it is kept.
    Stored,
    /// Keepalive or user timeout changed: a live connection takes them at once.
    Liveness,
    /// The interface's burst changes to this.
    Burst(usize),
}

/// A socket's options as set (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketOptions {
    rcvbuf: usize,
    sndbuf: usize,
    mss: u16,
    /// `None` until the application chooses a shift (or chooses none).
    window_scale: Option<Option<u8>>,
    live: LivenessOptions,
}

impl SocketOptions {
    /// The options of a new socket: the MSS of `base`, receive and send buffers as given.
    pub fn new(base: &TcpConfig, rcvbuf: usize, sndbuf: usize) -> Self {
        SocketOptions { rcvbuf, sndbuf, mss: base.mss, window_scale: None, live: LivenessOptions::default() }
    }

    /// The receive buffer.
    pub fn rcvbuf(&self) -> usize {
        self.rcvbuf
    }

    /// The send buffer: bytes the socket may have queued and unacknowledged.
    pub fn sndbuf(&self) -> usize {
        self.sndbuf
    }

    /// Keepalive and user timeout as set.
    pub fn live(&self) -> LivenessOptions {
        self.live
    }

    /// The window-scale shift offered: the application's choice, else the smallest that lets
    /// the whole receive buffer be advertised.
    pub fn window_scale(&self) -> Option<u8> {
        self.window_scale.unwrap_or(Some(TcpConfig::scale_for_buffer(self.rcvbuf)))
    }

    /// Validates `opt` for a socket at `stage` and stores it. `NonBlocking` and `Error` are the
    /// application side's, never a server's: `InvalidInput`.
    pub fn set(
        &mut self,
        opt: SockOpt,
        stage: OptionStage,
        bounds: &OptionBounds,
    ) -> Result<OptionEffect, SocketError> {
        if let Some((name, value)) = liveness_of(opt) {
            self.live.set(name, value).map_err(|_| SocketError::InvalidInput)?;
            return Ok(OptionEffect::Liveness);
        }
        let fixed_at_handshake =
            matches!(opt, SockOpt::RecvBuffer(_) | SockOpt::Mss(_) | SockOpt::WindowScale(_));
        let valid = match opt {
            SockOpt::RecvBuffer(n) => (MIN_BUFFER..=MAX_BUFFER).contains(&n),
            SockOpt::SendBuffer(n) => (MIN_BUFFER..=bounds.max_sndbuf).contains(&n),
            SockOpt::Mss(m) => (MIN_MSS..=bounds.max_mss).contains(&m),
            SockOpt::WindowScale(w) => w.is_none_or(|w| w <= MAX_WINDOW_SCALE),
            // SlimTCP never delays small segments.
            SockOpt::NoDelay(on) => on,
            SockOpt::Burst(n) => (1..=MAX_BURST).contains(&n),
            _ => false,
        };
        if !valid {
            return Err(SocketError::InvalidInput);
        }
        if fixed_at_handshake && stage == OptionStage::Started {
            return Err(SocketError::IsConnected);
        }
        match opt {
            SockOpt::RecvBuffer(n) => self.rcvbuf = n,
            SockOpt::SendBuffer(n) => self.sndbuf = n,
            SockOpt::Mss(m) => self.mss = m,
            SockOpt::WindowScale(w) => self.window_scale = Some(w),
            SockOpt::Burst(n) => return Ok(OptionEffect::Burst(n)),
            _ => {}
        }
        Ok(OptionEffect::Stored)
    }

    /// The value of option `name`; `burst` is the interface's. `NonBlocking` and `Error` are the
    /// application side's: `InvalidInput`.
    pub fn get(&self, name: SockOptName, burst: usize) -> Result<SockOpt, SocketError> {
        Ok(match name {
            SockOptName::RecvBuffer => SockOpt::RecvBuffer(self.rcvbuf),
            SockOptName::SendBuffer => SockOpt::SendBuffer(self.sndbuf),
            SockOptName::Mss => SockOpt::Mss(self.mss),
            SockOptName::WindowScale => SockOpt::WindowScale(self.window_scale()),
            SockOptName::NoDelay => SockOpt::NoDelay(true),
            SockOptName::Burst => SockOpt::Burst(burst),
            SockOptName::KeepAlive => SockOpt::KeepAlive(self.live.keepalive),
            SockOptName::KeepIdle => SockOpt::KeepIdle(self.live.idle_secs),
            SockOptName::KeepInterval => SockOpt::KeepInterval(self.live.interval_secs),
            SockOptName::KeepCount => SockOpt::KeepCount(self.live.count),
            SockOptName::UserTimeout => SockOpt::UserTimeout(self.live.user_timeout_ms),
            SockOptName::NonBlocking | SockOptName::Error => return Err(SocketError::InvalidInput),
        })
    }

    /// The settings a connection made with these options gets: `base` (the interface's) with
    /// the socket's MSS, buffers, window scale and liveness. The stack's send buffer is
    /// `tx_floor` at least: a server that bounds bytes in flight itself (by `sndbuf`, which may
    /// grow on a live connection) never has a loan refused below that bound.
    pub fn tcp_config(&self, base: &TcpConfig, tx_floor: usize) -> TcpConfig {
        let mut c = base.clone();
        c.mss = self.mss;
        c.rx_buffer = self.rcvbuf;
        c.tx_buffer = self.sndbuf.max(tx_floor);
        c.window_scale = self.window_scale();
        c.keepalive = self.live.keepalive();
        c.user_timeout = self.live.user_timeout();
        c
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh() -> SocketOptions {
        SocketOptions::new(&TcpConfig::default(), 256 * 1024, 256 * 1024)
    }

    const BOUNDS: OptionBounds = OptionBounds { max_mss: 1460, max_sndbuf: 1 << 20 };

    #[test]
    fn bounds_come_from_the_mtu_and_the_operator() {
        assert_eq!(OptionBounds::new(1500, 1 << 20), BOUNDS);
        assert_eq!(OptionBounds::new(9000, 1 << 30).max_mss, 8960);
        assert_eq!(OptionBounds::new(9000, 1 << 30).max_sndbuf, MAX_BUFFER);
        assert_eq!(OptionBounds::new(20, 0).max_mss, MIN_MSS, "never below the stack's minimum");
    }

    #[test]
    fn values_outside_their_range_are_refused_at_any_stage() {
        let mut o = fresh();
        for stage in [OptionStage::Fresh, OptionStage::Started] {
            for bad in [
                SockOpt::RecvBuffer(MIN_BUFFER - 1),
                SockOpt::RecvBuffer(MAX_BUFFER + 1),
                SockOpt::SendBuffer(MIN_BUFFER - 1),
                SockOpt::SendBuffer((1 << 20) + 1),
                SockOpt::Mss(MIN_MSS - 1),
                SockOpt::Mss(1461),
                SockOpt::WindowScale(Some(15)),
                SockOpt::NoDelay(false),
                SockOpt::Burst(0),
                SockOpt::Burst(MAX_BURST + 1),
                SockOpt::KeepIdle(0),
                SockOpt::NonBlocking(true),
                SockOpt::Error(None),
            ] {
                assert_eq!(o.set(bad, stage, &BOUNDS), Err(SocketError::InvalidInput), "{bad:?} {stage:?}");
            }
        }
        assert_eq!(o, fresh(), "refusals change nothing");
    }

    #[test]
    fn handshake_settings_are_final_once_started_the_others_are_not() {
        let mut o = fresh();
        let s = OptionStage::Started;
        assert_eq!(o.set(SockOpt::RecvBuffer(4096), s, &BOUNDS), Err(SocketError::IsConnected));
        assert_eq!(o.set(SockOpt::Mss(536), s, &BOUNDS), Err(SocketError::IsConnected));
        assert_eq!(o.set(SockOpt::WindowScale(None), s, &BOUNDS), Err(SocketError::IsConnected));
        assert_eq!(o.set(SockOpt::SendBuffer(4096), s, &BOUNDS), Ok(OptionEffect::Stored));
        assert_eq!(o.set(SockOpt::KeepAlive(true), s, &BOUNDS), Ok(OptionEffect::Liveness));
        assert_eq!(o.set(SockOpt::Burst(32), s, &BOUNDS), Ok(OptionEffect::Burst(32)));
        assert_eq!(o.set(SockOpt::NoDelay(true), s, &BOUNDS), Ok(OptionEffect::Stored));
        assert_eq!(o.sndbuf(), 4096);
        assert!(o.live().keepalive);
    }

    #[test]
    fn the_window_scale_fits_the_buffer_unless_the_application_chose() {
        let mut o = fresh();
        assert_eq!(o.window_scale(), Some(3), "256 KiB needs shift 3");
        o.set(SockOpt::RecvBuffer(1 << 20), OptionStage::Fresh, &BOUNDS).expect("valid");
        assert_eq!(o.get(SockOptName::WindowScale, 64), Ok(SockOpt::WindowScale(Some(5))));
        o.set(SockOpt::WindowScale(Some(1)), OptionStage::Fresh, &BOUNDS).expect("valid");
        assert_eq!(o.window_scale(), Some(1), "the application's choice wins");
        o.set(SockOpt::WindowScale(None), OptionStage::Fresh, &BOUNDS).expect("valid");
        assert_eq!(o.tcp_config(&TcpConfig::default(), 0).window_scale, None, "or none at all");
    }

    #[test]
    fn the_connection_settings_follow_the_options() {
        let mut o = fresh();
        o.set(SockOpt::Mss(536), OptionStage::Fresh, &BOUNDS).expect("valid");
        o.set(SockOpt::SendBuffer(8192), OptionStage::Fresh, &BOUNDS).expect("valid");
        o.set(SockOpt::UserTimeout(1500), OptionStage::Fresh, &BOUNDS).expect("valid");
        let c = o.tcp_config(&TcpConfig::default(), 0);
        assert_eq!((c.mss, c.rx_buffer, c.tx_buffer), (536, 256 * 1024, 8192));
        assert_eq!(c.user_timeout, Some(std::time::Duration::from_millis(1500)));
        assert_eq!(o.tcp_config(&TcpConfig::default(), 1 << 20).tx_buffer, 1 << 20, "the floor");
        assert_eq!(o.get(SockOptName::Mss, 64), Ok(SockOpt::Mss(536)));
        assert_eq!(o.get(SockOptName::Burst, 64), Ok(SockOpt::Burst(64)));
        assert_eq!(o.get(SockOptName::Error, 64), Err(SocketError::InvalidInput));
    }
}
