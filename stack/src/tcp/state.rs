//! The connection states of RFC 9293 section 3.3.2.

/// A TCP connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection (initial, or after reset/abort/final close).
    Closed,
    /// Waiting for a connection request (listeners only; kept for completeness of names).
    Listen,
    /// SYN sent, waiting for SYN-ACK.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the ACK.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We closed; our FIN is sent or queued, not yet acknowledged.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's FIN.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed first, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both FINs exchanged and acknowledged; lingering for 2*MSL.
    TimeWait,
}

impl State {
    /// Every state, in RFC order (the order of [`State::index`]).
    pub const ALL: [State; 11] = [
        State::Closed,
        State::Listen,
        State::SynSent,
        State::SynReceived,
        State::Established,
        State::FinWait1,
        State::FinWait2,
        State::CloseWait,
        State::Closing,
        State::LastAck,
        State::TimeWait,
    ];

    /// The state's place in [`State::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// True once the three-way handshake has completed (RFC "synchronized" states).
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::Listen | State::SynSent | State::SynReceived)
    }

    /// True when the application may still queue data to send.
    pub fn may_send(self) -> bool {
        matches!(self, State::Established | State::CloseWait)
    }

    /// True when the peer may still send us data.
    pub fn peer_may_send(self) -> bool {
        matches!(self, State::SynReceived | State::Established | State::FinWait1 | State::FinWait2)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            State::Closed => "CLOSED",
            State::Listen => "LISTEN",
            State::SynSent => "SYN-SENT",
            State::SynReceived => "SYN-RECEIVED",
            State::Established => "ESTABLISHED",
            State::FinWait1 => "FIN-WAIT-1",
            State::FinWait2 => "FIN-WAIT-2",
            State::CloseWait => "CLOSE-WAIT",
            State::Closing => "CLOSING",
            State::LastAck => "LAST-ACK",
            State::TimeWait => "TIME-WAIT",
        };
        f.write_str(name)
    }
}
