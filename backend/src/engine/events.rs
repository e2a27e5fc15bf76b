//! The socket server's events as guest messages: completions of held sends and connects,
//! accepted connections, resets and room to send, queued on the socket's pair in the order
//! they happened; readable sockets join their pair's delivery round.

use slimtcp::nic::Nic;
use slimtcp::server::{Event, ServerEvent};
use slimtcp_abi::{Done, Errno, Op, RxMessage};

use super::{errno_of, sock_id, Engine, GuestTransport, HeldSend, Out};

impl<N: Nic> Engine<N> {
    /// Turns every event the server has into messages (call after each server operation, so
    /// they queue ahead of that operation's own completion).
    pub(super) fn drain_events(&mut self) {
        while let Some(event) = self.server.next_event() {
            self.on_event(event);
        }
    }

    fn on_event(&mut self, ServerEvent { lane, id, what }: ServerEvent<GuestTransport>) {
        let socket = sock_id(id);
        match what {
            Event::SendDone { send, result } => {
                let result = result.map(|n| Done::value(n as u64)).map_err(errno_of);
                self.finish_send(lane, id, &send, result);
            }
            Event::ConnectDone { call, result } => {
                if result.is_err() {
                    self.counters.error_completions += 1;
                }
                if result.is_err() || !call.quiet {
                    let result = result.map(|addr| Done { value: 0, addr }).map_err(errno_of);
                    let op = Op::Connect.code();
                    self.push(
                        lane,
                        Out::Msg(RxMessage::Complete { cookie: call.cookie, socket, op, result }),
                    );
                }
            }
            Event::Accepted { socket: new, local, remote } => {
                let msg = RxMessage::Accepted { listener: socket, socket: sock_id(new), remote, local };
                self.push(lane, Out::Msg(msg));
            }
            Event::Readable => {
                if let Some(p) = self.pairs.get_mut(lane) {
                    p.readable.push_back(id);
                }
            }
            Event::Writable { available } => {
                let available = u32::try_from(available).unwrap_or(u32::MAX);
                self.push(lane, Out::Msg(RxMessage::Writable { socket, available }));
            }
            Event::Reset { error } => {
                self.push(lane, Out::Msg(RxMessage::Reset { socket, errno: errno_of(error) }));
            }
        }
    }

    /// Queues `send`'s completion with `result` (errors always, successes unless quiet; a
    /// `COPY` send's success adds to its socket's next `acked` message) and then its chain's
    /// return, on `pair`.
    fn finish_send(&mut self, pair: usize, id: u32, send: &HeldSend, result: Result<Done, Errno>) {
        self.copies_held = self.copies_held.saturating_sub(send.copied);
        if result.is_err() {
            self.counters.error_completions += 1;
        }
        match result {
            Ok(done) if send.by_acked => self.add_acked(pair, id, done.value),
            Ok(_) if send.quiet => {}
            _ => {
                let msg = RxMessage::Complete {
                    cookie: send.cookie,
                    socket: sock_id(id),
                    op: Op::Send.code(),
                    result,
                };
                self.push(pair, Out::Msg(msg));
            }
        }
        if let Some(head) = send.head {
            self.push(pair, Out::Return(head));
        }
    }

    /// Adds `bytes` acknowledged to socket `id`'s pending `acked` message (queued on `pair` if
    /// it has none pending).
    fn add_acked(&mut self, pair: usize, id: u32, bytes: u64) {
        let Some(p) = self.pairs.get_mut(pair) else { return };
        let sum = p.acked.entry(id).or_insert(0);
        let first = *sum == 0;
        *sum += bytes;
        if first && bytes > 0 {
            self.push(pair, Out::Acked(id));
        }
    }
}
