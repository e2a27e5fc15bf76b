//! A transmit queue stopped by the VMM (GET_VRING_BASE): everything the device holds from it goes
//! back to the used ring before the answer, because vhost-user keeps no record of descriptors in
//! flight. Sends waiting for their ACK are copied into host memory first, so their connections
//! go on as if nothing happened (docs/protocol.md section 7).

use std::sync::Arc;
use std::time::Duration;

use slimtcp::nic::Nic;
use slimtcp::tcp::TxPayload;
use slimtcp::time::Clock;
use slimtcp_abi::Done;

use super::{Engine, Kind, Out};
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
        let ids: Vec<u32> = self
            .sockets
            .iter()
            .filter(|(_, s)| s.pair == p && !s.sends.is_empty())
            .map(|(&id, _)| id)
            .collect();
        for &id in &ids {
            self.unloan(id);
        }
        // Loans come back at once, or once the NIC no longer reads them.
        let deadline = self.clock.now() + NIC_DRAIN;
        let (mut least_held, mut stalled) = (usize::MAX, 0);
        loop {
            for &id in &ids {
                self.collect_completed(id);
            }
            let held: usize = ids.iter().filter_map(|id| self.sockets.get(id)).map(|s| s.sends.len()).sum();
            let now = self.clock.now();
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
            if stalled > STALLED_POLLS && matches!(self.clock, Clock::Virtual(_)) {
                break;
            }
            let worked = match self.iface.poll(now) {
                Ok(worked) => worked,
                Err(e) => {
                    log::warn!("poll while stopping transmit queue {p}: {e}");
                    break;
                }
            };
            // A virtual clock (tests, simulations, fuzzing) moves only when its owner moves it:
            // once a poll has nothing to do, waiting cannot bring anything more back.
            if !worked && matches!(self.clock, Clock::Virtual(_)) {
                break;
            }
        }
        for &id in &ids {
            self.complete_copied_sends(id);
        }
        self.flush_returns(p, rings, mem)
    }

    /// Replaces the socket's loans with copies: those the stack did not take yet here, the
    /// queued ones in the stack.
    fn unloan(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let mut copied = 0u64;
        for b in s.backlog.iter_mut() {
            let bytes = slimtcp::tcp::copy_all(b.as_ref());
            copied += bytes.len() as u64;
            let copy: Box<dyn TxPayload> = Box::new(bytes);
            self.completed.push(std::mem::replace(b, copy));
        }
        if let Some(h) = s.handle {
            let unloaned = match s.kind {
                Kind::Tcp => self.iface.tcp_unloan(h),
                // Datagrams waiting for ARP; those the NIC reads come back within NIC_DRAIN.
                Kind::Udp => self.iface.udp_unloan(h),
            };
            match unloaned {
                Ok(n) => copied += n as u64,
                Err(e) => log::debug!("socket {id}: nothing to unloan: {e}"),
            }
        }
        self.counters.tx_payload_copied_at_stop += copied;
    }

    /// Completes the sends whose loans the NIC still reads after the drain time: their bytes
    /// are copied already, so they complete as sent; the late loans are ignored when they come.
    fn complete_copied_sends(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if s.sends.is_empty() {
            return;
        }
        log::warn!(
            "socket {id}: {} sends still read by the NIC; their chains are returned anyway",
            s.sends.len()
        );
        self.finish_all_sends(id, |send| Ok(Done::value(u64::from(send.len))));
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
            Out::Msg(_) => true,
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
