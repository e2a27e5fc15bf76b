//! What happened to a connection since the owner last looked: readiness edges for the API layer.

/// A set of connection events (bit flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Events(u8);

impl Events {
    /// The handshake completed.
    pub const CONNECTED: Events = Events(0x01);
    /// New data (or end of stream) is readable.
    pub const READABLE: Events = Events(0x02);
    /// Send-buffer space was freed.
    pub const WRITABLE: Events = Events(0x04);
    /// The peer sent FIN.
    pub const PEER_CLOSED: Events = Events(0x08);
    /// The connection failed (reset, refused, timed out); see `Connection::error`.
    pub const ERROR: Events = Events(0x10);
    /// The connection reached CLOSED (it can be freed).
    pub const CLOSED: Events = Events(0x20);

    /// No events.
    pub const fn empty() -> Self {
        Events(0)
    }

    /// True when every event of `other` is set.
    pub fn contains(self, other: Events) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when any event of `other` is set.
    pub fn intersects(self, other: Events) -> bool {
        self.0 & other.0 != 0
    }

    /// True when no event is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Adds `other`.
    pub fn insert(&mut self, other: Events) {
        self.0 |= other.0;
    }
}

impl std::ops::BitOr for Events {
    type Output = Events;
    fn bitor(self, rhs: Events) -> Events {
        Events(self.0 | rhs.0)
    }
}
