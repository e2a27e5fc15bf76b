//! A transmit queue stopped by the VMM (GET_VRING_BASE): everything the device holds from it goes
//! back to the used ring before the answer, because vhost-user keeps no record of descriptors in
//! flight. Sends waiting for their ACK are copied into host memory first, so their connections
//! go on as if nothing happened (docs/protocol.md section 7).

use std::sync::Arc;
use std::time::Duration;

use slimtcp::nic::Nic;
use slimtcp::time::Clock;

use super::{Engine, Out};
use crate::guest_mem::GuestMem;
use crate::queues::{self, Vrings};

/// How long the stop waits for the NIC to finish transmissions that still read guest memory.
const NIC_DRAIN: Duration = Duration::from_millis(200);
/// Polls in a row that returned no loan, after which a ring stop under a virtual clock stops
/// waiting for the NIC.
const STALLED_POLLS: usize = 16;

impl<N: Nic> Engine<N> {
    /// Gives back every chain pair `p`'s transmit queue holds (see the module documentation).
    /// Completions stay queued for the receive queue, which may be stopped too: chains can thus
    /// come back ahead of their completions. Returns the chains put on the used ring.
    pub fn stop_transmit_queue<V: Vrings + ?Sized>(
        &mut self,
        p: usize,
        rings: &V,
        mem: &Arc<GuestMem>,
    ) -> usize {
        if p >= self.pairs.len() {
            return 0;
        }
        let ids: Vec<u32> =
            self.server.sockets_of_lane(p).into_iter().filter(|&id| self.server.held_sends(id) > 0).collect();
        for &id in &ids {
            self.counters.tx_payload_copied_at_stop += self.server.unloan(id) as u64;
        }
        // Loans come back at once, or once the NIC no longer reads them.
        let virtual_clock = matches!(self.server.clock(), Clock::Virtual(_));
        let deadline = self.server.clock().now() + NIC_DRAIN;
        let (mut least_held, mut stalled) = (usize::MAX, 0);
        loop {
            for &id in &ids {
                self.server.collect_completed(id);
            }
            let held: usize = ids.iter().map(|&id| self.server.held_sends(id)).sum();
            let now = self.server.clock().now();
            if held == 0 || now >= deadline {
                break;
            }
            if held < least_held {
                (least_held, stalled) = (held, 0);
            } else {
                stalled += 1;
            }
            // A virtual clock (tests, simulations, fuzzing) never reaches the deadline by itself:
            // stop once polls have brought nothing back for a while (a connection that keeps
            // sending keeps every poll busy without returning a loan).
            if stalled > STALLED_POLLS && virtual_clock {
                break;
            }
            let worked = match self.server.iface_mut().poll(now) {
                Ok(worked) => worked,
                Err(e) => {
                    log::warn!("poll while stopping transmit queue {p}: {e}");
                    break;
                }
            };
            // A virtual clock moves only when its owner moves it: once a poll has nothing to
            // do, waiting cannot bring anything more back.
            if !worked && virtual_clock {
                break;
            }
        }
        // Sends whose loans the NIC still reads after the drain time: their bytes are copied
        // already, so they complete as sent; the late loans are ignored when they come.
        for &id in &ids {
            let held = self.server.held_sends(id);
            if held > 0 {
                log::warn!(
                    "socket {id}: {held} sends still read by the NIC; their chains are returned anyway"
                );
                self.server.complete_sends_as_sent(id);
            }
        }
        self.drain_events();
        self.flush_returns(p, rings, mem)
    }

    /// Puts every chain return queued for pair `p` on its transmit used ring now, ahead of the
    /// messages queued before them.
    fn flush_returns<V: Vrings + ?Sized>(&mut self, p: usize, rings: &V, mem: &Arc<GuestMem>) -> usize {
        let Some(pair) = self.pairs.get_mut(p) else { return 0 };
        let mut heads = Vec::new();
        pair.pending.retain(|o| match o {
            Out::Return(h) => {
                heads.push(*h);
                false
            }
            Out::Msg(_) | Out::Acked(_) => true,
        });
        pair.taken = pair.taken.saturating_sub(heads.len());
        if heads.is_empty() {
            return 0;
        }
        rings.with_stopping(2 * p + 1, |q| {
            for &h in &heads {
                queues::add_used(q, mem, h, 0);
            }
        });
        rings.notify(2 * p + 1, mem);
        self.counters.chains_returned_at_stop += heads.len() as u64;
        heads.len()
    }
}
