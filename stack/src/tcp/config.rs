//! Per-connection TCP settings.

use std::time::Duration;

/// The default [`TcpConfig::ack_delay`]: longer than an application on the worker's host or in
/// its VM takes to answer a small request, short beside a data-center `rto_min` (and Linux's
/// 40 ms), so a peer that holds small writes for our ACK (Nagle) waits little.
pub const DEFAULT_ACK_DELAY: Duration = Duration::from_micros(200);

/// The largest send or receive buffer a connection uses: 1 GiB, the most a window can offer
/// (65,535 << 14 bytes is just below it). A larger [`TcpConfig::rx_buffer`] or
/// [`TcpConfig::tx_buffer`] gets this much. It keeps every byte count of the buffers within 32
/// bits, with room to spare (a connection's state stays small).
pub const MAX_TCP_BUFFER: usize = 1 << 30;

/// Settings a connection is created with. Defaults suit a data-center link with a 1500-byte MTU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpConfig {
    /// The MSS we advertise, and the largest segment we send (the peer's MSS may lower it).
    pub mss: u16,
    /// Receive buffer in bytes; the advertised window is its free part. At most
    /// [`MAX_TCP_BUFFER`] is used.
    pub rx_buffer: usize,
    /// Send buffer in bytes (queued + unacknowledged). At most [`MAX_TCP_BUFFER`] is used.
    pub tx_buffer: usize,
    /// Window scale shift we offer (RFC 7323); `None` disables the option.
    pub window_scale: Option<u8>,
    /// Offer SACK (RFC 2018): as a receiver, ACKs then tell the peer which segments beyond a
    /// hole the reorder queue holds. (SACK blocks the peer sends are ignored.)
    pub sack: bool,
    /// Initial retransmission timeout (RFC 6298: 1 s).
    pub rto_initial: Duration,
    /// Lower bound of the retransmission timeout.
    pub rto_min: Duration,
    /// Upper bound of the retransmission timeout (after backoff).
    pub rto_max: Duration,
    /// Consecutive retransmissions of the same data before the connection is reset (ETIMEDOUT).
    pub max_retries: u32,
    /// Consecutive SYN retransmissions before a connect fails (ETIMEDOUT).
    pub max_syn_retries: u32,
    /// How long a connection stays in TIME-WAIT (2*MSL; short by default on a data-center link).
    pub time_wait: Duration,
    /// How long a closed (orphaned) connection waits in FIN-WAIT-2 for the peer's FIN.
    pub fin_wait2_timeout: Duration,
    /// Send whatever is queued at once (no Nagle-style coalescing).
    pub nodelay: bool,
    /// How long the ACK of one in-order data segment may wait for data of ours to ride on
    /// (delayed ACK, RFC 9293 3.8.6.3): a request answered within it costs two frames per round
    /// trip instead of four. A second segment, a segment out of order or filling a hole, a FIN,
    /// a duplicate and a nearly shut window are acknowledged at once. `None`: every data
    /// segment is acknowledged at once. Keep it far below `rto_min`.
    pub ack_delay: Option<Duration>,
    /// Keepalive probing of idle connections (`SO_KEEPALIVE`); off by default.
    pub keepalive: Option<super::KeepAlive>,
    /// The longest data may wait for the peer before the connection is reset
    /// (`TCP_USER_TIMEOUT`); `None`: only the retry limits apply.
    pub user_timeout: Option<Duration>,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            mss: 1460,
            rx_buffer: 256 * 1024,
            tx_buffer: 256 * 1024,
            window_scale: Some(3),
            sack: true,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_secs(60),
            max_retries: 8,
            max_syn_retries: 5,
            time_wait: Duration::from_secs(1),
            fin_wait2_timeout: Duration::from_secs(60),
            nodelay: true,
            ack_delay: Some(DEFAULT_ACK_DELAY),
            keepalive: None,
            user_timeout: None,
        }
    }
}

impl TcpConfig {
    /// The smallest window-scale shift that lets `rx_buffer` be advertised in full.
    pub fn scale_for_buffer(rx_buffer: usize) -> u8 {
        let mut shift = 0u8;
        while shift < 14 && (rx_buffer >> shift) > usize::from(u16::MAX) {
            shift += 1;
        }
        shift
    }
}
