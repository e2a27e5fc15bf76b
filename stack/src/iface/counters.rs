//! Interface counters: readable at any time, never reset by reading.

use super::martian::Martian;
use crate::wire::WireError;

/// Why a frame was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its headers or length fields.
    Truncated,
    /// A header field held a forbidden value.
    Malformed,
    /// Bad IPv4, TCP, UDP or ICMP checksum.
    BadChecksum,
    /// An IPv4 fragment.
    Fragmented,
    /// A protocol or message type we do not handle.
    Unsupported,
    /// Not addressed to us (MAC or IP).
    NotForUs,
    /// No socket for the port / connection.
    NoSocket,
    /// A SYN for a listener whose backlog is full.
    BacklogFull,
    /// The socket table is full (a SYN is answered with a RST).
    SocketLimit,
    /// A UDP socket's receive queue is full.
    UdpQueueFull,
    /// The next hop's MAC address could not be resolved.
    Unresolved,
    /// The device would not take a frame and the transmit queue was full.
    TxFull,
    /// A martian IPv4 source address (see [`Counters::martians`] for which kind).
    MartianSource,
    /// An ACK for a listener that returned no valid SYN cookie, while it was sending cookies
    /// (answered with a RST, as any stray ACK to a listener, unless it carries data or a FIN:
    /// then it may be a real client's later segment whose first ones were lost, and it is only
    /// dropped).
    BadCookie,
    /// A UDP datagram whose storage would not fit the interface's receive budget (TCP payload
    /// refused for it is counted by the budget, `Interface::rx_memory`).
    RxMemory,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 15] = [
        DropReason::Truncated,
        DropReason::Malformed,
        DropReason::BadChecksum,
        DropReason::Fragmented,
        DropReason::Unsupported,
        DropReason::NotForUs,
        DropReason::NoSocket,
        DropReason::BacklogFull,
        DropReason::SocketLimit,
        DropReason::UdpQueueFull,
        DropReason::Unresolved,
        DropReason::TxFull,
        DropReason::MartianSource,
        DropReason::BadCookie,
        DropReason::RxMemory,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// A short name for logs.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::Malformed => "malformed",
            DropReason::BadChecksum => "bad-checksum",
            DropReason::Fragmented => "fragment",
            DropReason::Unsupported => "unsupported",
            DropReason::NotForUs => "not-for-us",
            DropReason::NoSocket => "no-socket",
            DropReason::BacklogFull => "backlog-full",
            DropReason::SocketLimit => "socket-limit",
            DropReason::UdpQueueFull => "udp-queue-full",
            DropReason::Unresolved => "unresolved",
            DropReason::TxFull => "tx-full",
            DropReason::MartianSource => "martian-source",
            DropReason::BadCookie => "bad-cookie",
            DropReason::RxMemory => "rx-memory",
        }
    }
}

impl From<WireError> for DropReason {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Truncated => DropReason::Truncated,
            WireError::Malformed => DropReason::Malformed,
            WireError::BadChecksum => DropReason::BadChecksum,
            WireError::Fragmented => DropReason::Fragmented,
            _ => DropReason::Unsupported,
        }
    }
}

/// Packet and protocol counters of one interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// Frames received from the device.
    pub rx_frames: u64,
    /// Bytes received from the device.
    pub rx_bytes: u64,
    /// Frames handed to the device.
    pub tx_frames: u64,
    /// Bytes handed to the device.
    pub tx_bytes: u64,
    /// TCP segments delivered to connections or listeners.
    pub tcp_segs_in: u64,
    /// TCP segments sent.
    pub tcp_segs_out: u64,
    /// TCP segments retransmitted (live and closed connections).
    pub tcp_retransmits: u64,
    /// TCP RSTs sent.
    pub tcp_resets_sent: u64,
    /// Connections opened (active + passive).
    pub tcp_connections_opened: u64,
    /// UDP datagrams delivered to sockets.
    pub udp_in: u64,
    /// UDP datagrams sent.
    pub udp_out: u64,
    /// ARP requests sent.
    pub arp_requests_sent: u64,
    /// ARP replies sent.
    pub arp_replies_sent: u64,
    /// ICMP echo replies sent.
    pub icmp_echo_replies: u64,
    /// Payload bytes the stack copied into transmitted frames (TCP segments of copied or
    /// by-copy loaned data, UDP datagrams). By-reference loaned payloads sent through
    /// `Nic::transmit_external` are not copied and not counted.
    pub tx_payload_copied_bytes: u64,
    /// The part of `tx_payload_copied_bytes` copied because the TCP segment or UDP datagram
    /// was shorter than [`EXTERNAL_MIN_PAYLOAD`](crate::iface::EXTERNAL_MIN_PAYLOAD) (a copy
    /// costs less) on a NIC that sends by reference, from by-reference loans (all of a guest's
    /// sends are).
    pub tx_short_payload_copied_bytes: u64,
    /// Loaned payload bytes the stack copied to hand the loans back early (`tcp_unloan`,
    /// `udp_unloan`).
    pub tx_loans_copied_bytes: u64,
    /// Window updates sent because the receive budget recovered (`rx_pressure.rs`), not
    /// because the socket's own application read.
    pub rx_memory_window_updates: u64,
    /// Times a connection had more to send than the full transmit backlog took: it went on
    /// the held list and resumed once the backlog drained (`Interface::resume_held`).
    pub tx_connections_held: u64,
    /// Frames sent as headers plus an external (by-reference) payload.
    pub tx_external_frames: u64,
    /// Payload bytes of those frames, sent without a copy by the stack.
    pub tx_external_bytes: u64,
    /// SYN-ACKs sent with a SYN cookie (a listener's backlog was full; no state kept).
    pub tcp_syn_cookies_sent: u64,
    /// Connections made from a valid returning SYN cookie.
    pub tcp_syn_cookies_accepted: u64,
    drops: [u64; DropReason::ALL.len()],
    martians: [u64; Martian::ALL.len()],
}

impl Counters {
    /// Counts a dropped frame.
    pub fn drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    /// Counts a datagram dropped for its martian source.
    pub fn drop_martian(&mut self, kind: Martian) {
        self.drop(DropReason::MartianSource);
        self.martians[kind.index()] += 1;
    }

    /// Datagrams dropped for a martian source of `kind`.
    pub fn martians(&self, kind: Martian) -> u64 {
        self.martians[kind.index()]
    }

    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    /// Frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Non-zero drop counters, for logs.
    pub fn drops(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.dropped(*r))).filter(|(_, n)| *n > 0)
    }
}
