//! The tenant's end (SIGTERM, or the tenant removed from the configuration): every connection is
//! reset, every transmit chain the device holds goes back to the guest, and the resets reach the
//! wire, within a bound. Chains come back as a ring stop gives them back
//! ([`Engine::stop_transmit_queue`]); the guest sees its sends fail with ECONNRESET.

use std::sync::Arc;
use std::time::Duration;

use slimtcp::nic::Nic;

use super::Engine;
use crate::guest_mem::GuestMem;
use crate::queues::Vrings;

/// What a drain did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainReport {
    /// Connections and listeners reset.
    pub sockets_reset: usize,
    /// Transmit chains put back on the used rings.
    pub chains_returned: usize,
    /// Transmit chains still held when the bound ran out (0 unless the NIC kept reading guest
    /// memory past it).
    pub chains_held: usize,
}

impl std::fmt::Display for DrainReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} sockets reset, {} transmit chains returned, {} still held",
            self.sockets_reset, self.chains_returned, self.chains_held
        )
    }
}

impl<N: Nic> Engine<N> {
    /// Resets every socket of every pair, gives back every transmit chain and lets the resets
    /// out, spending at most about `bound` (see the module documentation). No request is taken
    /// from the guest any more.
    pub fn drain<V: Vrings + ?Sized>(
        &mut self,
        rings: &V,
        mem: &Arc<GuestMem>,
        bound: Duration,
    ) -> DrainReport {
        let mut report = DrainReport::default();
        for p in 0..self.pairs.len() {
            report.sockets_reset += self.server.abort_lane(p);
        }
        self.drain_events();
        for p in 0..self.pairs.len() {
            report.chains_returned += self.stop_transmit_queue(p, rings, mem);
        }
        // The resets out to the wire (a real clock; a virtual one stops when nothing is left).
        let deadline = self.server.clock().now() + bound;
        loop {
            let now = self.server.clock().now();
            if now >= deadline {
                break;
            }
            match self.server.iface_mut().poll(now) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    log::warn!("poll while draining: {e}");
                    break;
                }
            }
        }
        report.chains_held = self.pairs.iter().map(|p| p.taken).sum();
        report
    }
}
