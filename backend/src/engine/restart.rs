//! A queue pair whose driver starts over: a second hello on a pair means a new driver
//! instance (an application started after the previous one was killed, which reset the device
//! on its way in). Nothing of the previous driver may leak into the new one's session.

use super::{Engine, Out};
use slimtcp::nic::Nic;

impl<N: Nic> Engine<N> {
    /// Aborts every socket of pair `p` (their peers get a RST; held sends fail, their chains
    /// go back as usual) and drops the messages the previous driver never received. Returns
    /// the sockets aborted.
    pub(super) fn restart_pair(&mut self, p: usize) -> usize {
        let aborted = self.server.abort_lane(p);
        if aborted == 0 {
            // Nothing of a previous driver's to clean up (or the same driver saying hello
            // again): its answers stay queued.
            return 0;
        }
        self.drain_events();
        let Some(pair) = self.pairs.get_mut(p) else { return aborted };
        pair.pending.retain(|o| matches!(o, Out::Return(_)));
        pair.pending_msgs = 0;
        pair.acked.clear();
        pair.readable.clear();
        log::info!("queue pair {p}: a new driver said hello; {aborted} sockets of the previous one reset");
        aborted
    }
}
