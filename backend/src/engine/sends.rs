//! Held sends leaving the device: each one's completion (unless it is quiet and succeeded) and
//! its chain's return, queued in that order for the guest.

use slimtcp::nic::Nic;
use slimtcp_abi::{Done, Errno, RxMessage};

use super::{sock_id, Engine, HeldSend, Out};

impl<N: Nic> Engine<N> {
    /// Queues `send`'s completion with `result` (errors always, successes unless quiet) and
    /// then its chain's return, on `pair`.
    pub(super) fn finish_send(&mut self, pair: usize, id: u32, send: &HeldSend, result: Result<Done, Errno>) {
        if result.is_err() {
            self.counters.error_completions += 1;
        }
        if result.is_err() || !send.quiet {
            self.push(
                pair,
                Out::Msg(RxMessage::Complete {
                    cookie: send.cookie,
                    socket: sock_id(id),
                    op: slimtcp_abi::Op::Send.code(),
                    result,
                }),
            );
        }
        self.push(pair, Out::Return(send.head));
    }

    /// Finishes every held send of `id`, in the order they were taken, with the result
    /// `result_of` gives each; the socket has nothing in flight afterwards.
    pub(super) fn finish_all_sends(&mut self, id: u32, result_of: impl Fn(&HeldSend) -> Result<Done, Errno>) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let mut sends: Vec<(u64, HeldSend)> = s.sends.drain().collect();
        s.in_flight = 0;
        let pair = s.pair;
        sends.sort_by_key(|(seq, _)| *seq);
        for (_, send) in sends {
            self.finish_send(pair, id, &send, result_of(&send));
        }
    }

    /// Completes every held send of `id` with `errno` and returns their chains.
    pub(super) fn fail_sends(&mut self, id: u32, errno: Errno) {
        if let Some(s) = self.sockets.get_mut(&id) {
            s.backlog.clear();
        }
        self.finish_all_sends(id, |_| Err(errno));
    }
}
