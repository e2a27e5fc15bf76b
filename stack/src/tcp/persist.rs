//! What a connection keeps for zero-window probing (RFC 9293 section 3.8.6.1): created the first
//! time the peer's window keeps queued data back with nothing in flight (or a probe goes out),
//! kept from then on. Most connections never meet a shut window; theirs holds one word for it
//! (`iface::socket_set::TCP_STATE_BYTES`). The logic stays with output (`output.rs` arms the
//! timer and sends the probes), input (`input.rs`: an answer, a window that opened) and timers
//! (`timers.rs`: `on_persist_timeout`).

use super::connection::Connection;
use crate::time::Instant;

/// Zero-window probing state (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(super) struct Persist {
    /// When the next probe is due.
    pub(super) deadline: Option<Instant>,
    /// Doublings of the probe interval so far (at most 16).
    pub(super) backoff: u32,
    /// Probes sent since the peer last answered.
    pub(super) unanswered: u32,
}

impl Connection {
    /// The zero-window probing state, created at its first use.
    pub(super) fn persist_mut(&mut self) -> &mut Persist {
        self.persist.get_or_insert_with(Box::default)
    }

    /// When the next zero-window probe is due, if the persist timer runs.
    pub(super) fn persist_deadline(&self) -> Option<Instant> {
        self.persist.as_ref().and_then(|p| p.deadline)
    }

    /// Zero-window probes sent since the peer last answered.
    pub(super) fn probes_unanswered(&self) -> u32 {
        self.persist.as_ref().map_or(0, |p| p.unanswered)
    }

    /// Stops the persist timer.
    pub(super) fn stop_persist_timer(&mut self) {
        if let Some(p) = self.persist.as_deref_mut() {
            p.deadline = None;
        }
    }
}
