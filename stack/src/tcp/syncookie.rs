//! SYN cookies (RFC 4987 section 3.6, after Bernstein and Linux): when a listener's backlog is
//! full, its SYN-ACK carries everything the connection needs in the initial sequence number, and
//! no state is kept until the peer's ACK returns the cookie in its acknowledgment number.
//!
//! The cookie, before a per-tuple offset is added (so the ISN as a whole looks random, as RFC
//! 6528 wants):
//!
//! ```text
//!  31 30 29   27 26      23 22                                    0
//! +-----+-------+----------+---------------------------------------+
//! |  t  |  mss  |  wscale  |  MAC (23 bits)                        |
//! +-----+-------+----------+---------------------------------------+
//! ```
//!
//! - `t`: the low 2 bits of a counter of [`COOKIE_PERIOD`]s (64 s); a cookie is accepted in its
//!   own period and the next one, so it lives 64 to 128 s.
//! - `mss`: an index into [`MSS_TABLE`]: the largest entry not above the peer's MSS.
//! - `wscale`: the peer's window-scale shift (0..=14), or [`NO_WSCALE`] when its SYN had no
//!   window-scale option. Window scaling is therefore *kept* for cookie connections (Linux can
//!   only keep it when timestamps are on; SlimTCP has no timestamps and spends 4 bits instead).
//!   Our own shift is the configured one, so it needs no bits.
//! - `MAC`: a keyed SipHash (std's `RandomState`: SipHash-1-3 with a 128-bit random key from the
//!   OS, the ISN generator's source) over both addresses and ports, the peer's ISN, the full
//!   counter and the two fields above. Changing any field, the tuple or the peer's sequence
//!   number, or coming back after 128 s, breaks it; a blind guess succeeds with probability 2^-23.
//!
//! What the cookie cannot carry is lost, as in every cookie scheme: the peer's SYN window (the
//! ACK's window replaces it) and a SYN-ACK retransmission (the peer retransmits its SYN instead,
//! and gets a fresh cookie).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::SocketAddrV4;
use std::time::Duration;

use super::config::TcpConfig;
use super::SeqNumber;
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// The cookie clock's period: a cookie is valid in the period it was made and the next.
pub const COOKIE_PERIOD: Duration = Duration::from_secs(64);

/// The MSS values a cookie can express (3 bits). A peer gets the largest entry not above the MSS
/// it offered; 64 is the stack's minimum ([`super::MIN_MSS`]), 536 the RFC 9293 default,
/// 1220..1460 the usual Ethernet and tunnel values, 8960 a jumbo frame.
pub const MSS_TABLE: [u16; 8] = [64, 256, 536, 1220, 1400, 1440, 1460, 8960];

/// The `wscale` field's value for "the peer offered no window scaling".
pub const NO_WSCALE: u8 = 15;

const T_SHIFT: u32 = 30;
const MSS_SHIFT: u32 = 27;
const WSCALE_SHIFT: u32 = 23;
const MAC_MASK: u32 = (1 << WSCALE_SHIFT) - 1;
/// Domain-separation tags of the two keyed hashes.
const TAG_OFFSET: u8 = 1;
const TAG_MAC: u8 = 2;

/// What a valid cookie tells about the peer's SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieSyn {
    /// The peer's initial sequence number.
    pub irs: SeqNumber,
    /// Our initial sequence number (the cookie itself).
    pub iss: SeqNumber,
    /// The peer's MSS, rounded down to a [`MSS_TABLE`] entry.
    pub peer_mss: u16,
    /// The peer's window-scale shift, `None` when its SYN had no window-scale option.
    pub peer_wscale: Option<u8>,
}

/// Makes and checks SYN cookies with a per-interface random secret.
#[derive(Debug, Clone, Default)]
pub struct SynCookies {
    secret: RandomState,
}

impl SynCookies {
    /// Cookies under a fresh random secret.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cookie (our ISN) answering `syn` from `remote` to `local` at `now`.
    pub fn make(&self, local: SocketAddrV4, remote: SocketAddrV4, syn: &TcpRepr, now: Instant) -> SeqNumber {
        let t = counter(now);
        let mss = syn.max_seg_size.unwrap_or(super::connection::DEFAULT_PEER_MSS);
        let mss_index = MSS_TABLE.iter().rposition(|&m| m <= mss).unwrap_or(0) as u8;
        let wscale = syn.window_scale.map_or(NO_WSCALE, |s| s.min(14));
        let mac = self.mac(local, remote, syn.seq_number, t, mss_index, wscale);
        let field = ((t as u32 & 3) << T_SHIFT)
            | (u32::from(mss_index) << MSS_SHIFT)
            | (u32::from(wscale) << WSCALE_SHIFT)
            | mac;
        SeqNumber(field.wrapping_add(self.offset(local, remote)))
    }

    /// Checks the cookie an ACK from `remote` to `local` returns at `now`; `None` when the
    /// segment is not a bare ACK (SYN or RST set), or the cookie is forged, altered or expired.
    pub fn check(
        &self,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        ack: &TcpRepr,
        now: Instant,
    ) -> Option<CookieSyn> {
        if ack.flags.intersects(TcpFlags::SYN | TcpFlags::RST) {
            return None;
        }
        let iss = ack.ack_number? - 1;
        let irs = ack.seq_number - 1;
        let field = iss.0.wrapping_sub(self.offset(local, remote));
        let now_t = counter(now);
        let age = (now_t as u32).wrapping_sub(field >> T_SHIFT) & 3;
        if age > 1 || u64::from(age) > now_t {
            return None;
        }
        let t = now_t - u64::from(age);
        let mss_index = ((field >> MSS_SHIFT) & 7) as u8;
        let wscale = ((field >> WSCALE_SHIFT) & 15) as u8;
        if self.mac(local, remote, irs, t, mss_index, wscale) != field & MAC_MASK {
            return None;
        }
        Some(CookieSyn {
            irs,
            iss,
            peer_mss: MSS_TABLE[usize::from(mss_index)],
            peer_wscale: (wscale != NO_WSCALE).then_some(wscale),
        })
    }

    fn offset(&self, local: SocketAddrV4, remote: SocketAddrV4) -> u32 {
        self.secret.hash_one((TAG_OFFSET, local, remote)) as u32
    }

    fn mac(&self, local: SocketAddrV4, remote: SocketAddrV4, irs: SeqNumber, t: u64, mss: u8, ws: u8) -> u32 {
        self.secret.hash_one((TAG_MAC, local, remote, irs.0, t, mss, ws)) as u32 & MAC_MASK
    }
}

fn counter(now: Instant) -> u64 {
    now.total_micros() / COOKIE_PERIOD.as_micros() as u64
}

/// The SYN-ACK carrying cookie `iss` in answer to `syn`, for a listener whose connections use
/// `cfg`: the same options a SYN-RECEIVED connection would send (our MSS; our window scale when
/// the peer offered one), and the window of an empty receive buffer.
pub fn cookie_syn_ack(cfg: &TcpConfig, syn: &TcpRepr, iss: SeqNumber) -> TcpRepr {
    TcpRepr {
        src_port: syn.dst_port,
        dst_port: syn.src_port,
        seq_number: iss,
        ack_number: Some(syn.seq_number + 1),
        flags: TcpFlags::SYN,
        window_len: syn_window(cfg),
        max_seg_size: Some(cfg.mss),
        window_scale: syn.window_scale.and(cfg.window_scale),
        sack: crate::wire::TcpSack::NONE,
    }
}

/// The window a SYN-ACK offers (never scaled, RFC 7323 section 2.2): the empty receive buffer.
pub(super) fn syn_window(cfg: &TcpConfig) -> u16 {
    cfg.rx_buffer.min(usize::from(u16::MAX)) as u16
}
