//! Sends: payload loaned to the stack and held until it comes back, then completed.

use std::net::SocketAddrV4;

use super::loans::Loan;
use super::{open_in, Event, HeldSend, Phase, SocketServer, Transport};
use crate::api::{Proto, SocketError};
use crate::nic::Nic;
use crate::tcp::{ConnError, TxPayload};

/// A datagram's payload.
#[derive(Debug)]
pub enum DatagramPayload<'a, T: Transport> {
    /// One piece, sent by reference and held (with the transport's token) until the NIC no
    /// longer reads it.
    Loan {
        /// The payload.
        piece: T::Payload,
        /// Comes back in [`Event::SendDone`].
        token: T::Send,
    },
    /// Bytes the stack copies into its frame at once.
    Copy(&'a [u8]),
}

/// What became of a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatagramSent {
    /// Loaned: its [`Event::SendDone`] follows.
    Held,
    /// Copied and sent (or waiting for the peer's address, or dropped as UDP may): this many
    /// bytes.
    Done(usize),
}

impl<N: Nic, T: Transport> SocketServer<N, T> {
    /// The protocol of socket `id`.
    pub fn proto_of(&self, id: u32) -> Option<Proto> {
        self.sockets.get(&id).map(|s| s.proto)
    }

    /// Sends `len` bytes on connection `id`, `pieces` loaned to the stack in order; the send is
    /// held until the peer acknowledged them all, then `token` comes back in
    /// [`Event::SendDone`]. Bytes in flight are bounded by the socket's send buffer: beyond it
    /// `WouldBlock` (and [`Event::Writable`] once there is room), a send larger than the whole
    /// buffer `MessageTooLong`.
    pub fn send(
        &mut self,
        id: u32,
        len: usize,
        pieces: impl IntoIterator<Item = T::Payload>,
        token: T::Send,
    ) -> Result<(), SocketError> {
        let s = open_in(&mut self.sockets, id)?;
        let h = match (s.proto, s.phase, s.handle) {
            (Proto::Tcp, Phase::Connected, Some(h)) => h,
            (Proto::Udp, _, _) => return Err(SocketError::NotSupported),
            _ => return Err(SocketError::NotConnected),
        };
        if s.write_shut {
            return Err(SocketError::BrokenPipe);
        }
        if s.reset_sent {
            return Err(SocketError::Connection(ConnError::Reset));
        }
        let sndbuf = s.opts.sndbuf();
        if len > sndbuf {
            return Err(SocketError::MessageTooLong);
        }
        if s.in_flight + len > sndbuf {
            s.writable_wanted = true;
            return Err(SocketError::WouldBlock);
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        let mut loaned = 0usize;
        for payload in pieces.into_iter().filter(|p| !p.is_empty()) {
            let loan = Box::new(Loan { socket: id, seq, payload });
            match self.iface.tcp_send_loaned(h, loan) {
                Ok(Ok(())) => loaned += 1,
                Ok(Err(back)) => {
                    loaned += 1;
                    open_in(&mut self.sockets, id)?.backlog.push_back(back);
                }
                Err(e) if loaned == 0 => return Err(e),
                Err(e) => {
                    // Not expected once the first piece was taken; the send still completes
                    // once the pieces taken are acknowledged.
                    log::warn!("socket {id}: send piece refused after the first: {e}");
                    break;
                }
            }
        }
        self.hold(id, seq, HeldSend { token, len, loans_left: loaned });
        Ok(())
    }

    /// Sends one datagram from UDP socket `id` (bound to an ephemeral port first if it is not)
    /// to `dst`, or to its connected peer.
    pub fn send_datagram(
        &mut self,
        id: u32,
        dst: Option<SocketAddrV4>,
        payload: DatagramPayload<'_, T>,
    ) -> Result<DatagramSent, SocketError> {
        if open_in(&mut self.sockets, id)?.proto != Proto::Udp {
            return Err(SocketError::NotSupported);
        }
        let len = match &payload {
            DatagramPayload::Loan { piece, .. } => piece.len(),
            DatagramPayload::Copy(bytes) => bytes.len(),
        };
        if len > self.limits.max_datagram {
            return Err(SocketError::MessageTooLong);
        }
        let h = self.udp_handle(id)?;
        let now = self.clock.now();
        match payload {
            DatagramPayload::Loan { piece, token } => {
                let s = open_in(&mut self.sockets, id)?;
                let seq = s.next_seq;
                s.next_seq += 1;
                let loan = Box::new(Loan { socket: id, seq, payload: piece });
                self.iface.udp_send_loaned(now, h, loan, dst)?;
                self.hold(id, seq, HeldSend { token, len, loans_left: 1 });
                // A NIC that copies it hands the loan back at once.
                self.collect_completed(id);
                Ok(DatagramSent::Held)
            }
            DatagramPayload::Copy(bytes) => match self.iface.udp_send_to(now, h, bytes, dst) {
                Ok(n) => Ok(DatagramSent::Done(n)),
                // The datagram waits for ARP in the stack, or is dropped as UDP may.
                Err(SocketError::WouldBlock) => Ok(DatagramSent::Done(len)),
                Err(e) => Err(e),
            },
        }
    }

    /// Holds `send` until its `loans_left` loans come back (at once when there are none).
    fn hold(&mut self, id: u32, seq: u64, send: HeldSend<T::Send>) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if send.loans_left == 0 {
            let lane = s.lane;
            let result = Ok(send.len);
            self.emit(lane, id, Event::SendDone { send: send.token, result });
            return;
        }
        s.in_flight += send.len;
        s.sends.insert(seq, send, &mut self.held_spares);
        if !s.on_sweep_list {
            s.on_sweep_list = true;
            self.sweep_list.push(id);
        }
    }

    /// Completes the sends of `id` whose loans came back: bytes the peer acknowledged (TCP), or
    /// datagrams the NIC no longer reads (UDP). A zombie without held sends is gone afterwards.
    pub fn collect_completed(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let Some(h) = s.handle else { return };
        if s.sends.is_empty() {
            return;
        }
        // Loans the stack could not take at once go first.
        while let Some(back) = s.backlog.pop_front() {
            match self.iface.tcp_send_loaned(h, back) {
                Ok(Ok(())) => {}
                Ok(Err(back)) => {
                    s.backlog.push_front(back);
                    break;
                }
                Err(_) => break,
            }
        }
        let mut completed = std::mem::take(&mut self.completed);
        // A connection that is gone returns nothing; its error comes as activity or on delivery.
        let _ = match s.proto {
            Proto::Tcp => self.iface.tcp_take_completed(h, &mut completed),
            Proto::Udp => self.iface.udp_take_returned(h, &mut completed),
        };
        let returned = !completed.is_empty();
        for payload in completed.drain(..) {
            self.loan_returned(id, payload);
        }
        self.completed = completed;
        self.wake_writer(id);
        // Held sends remain unless some completed now: a zombie stays until its last one.
        if !returned {
            return;
        }
        let Some(s) = self.sockets.get(&id) else { return };
        if s.sends.is_empty() && s.phase == Phase::Zombie {
            self.remove(id, false);
        }
    }

    /// One loan of socket `id` came back (and is dropped: the transport has its memory back):
    /// its send completes with the last one. A copy the server made at a ring stop has no tag.
    fn loan_returned(&mut self, id: u32, payload: Box<dyn TxPayload>) {
        let Some(loan) = payload.tag() else { return };
        drop(payload);
        if loan.socket != id {
            log::error!("socket {id}: a loan of socket {} came back here; ignored", loan.socket);
            return;
        }
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let Some(send) = s.sends.get_mut(loan.seq) else { return };
        send.loans_left = send.loans_left.saturating_sub(1);
        if send.loans_left > 0 {
            return;
        }
        let Some(send) = s.sends.remove(loan.seq, &mut self.held_spares) else { return };
        s.in_flight = s.in_flight.saturating_sub(send.len);
        let lane = s.lane;
        self.emit(lane, id, Event::SendDone { send: send.token, result: Ok(send.len) });
    }

    /// Finishes every held send of `id` in the order they were made, with the result
    /// `result_of` gives each; nothing is in flight afterwards.
    fn finish_all_sends(&mut self, id: u32, result_of: impl Fn(usize) -> Result<usize, SocketError>) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let sends: Vec<_> = s.sends.take_all().collect();
        s.in_flight = 0;
        let lane = s.lane;
        for send in sends {
            let result = result_of(send.len);
            self.emit(lane, id, Event::SendDone { send: send.token, result });
        }
    }

    /// Fails every held send of `id` with `error`.
    pub(super) fn fail_sends(&mut self, id: u32, error: SocketError) {
        if let Some(s) = self.sockets.get_mut(&id) {
            s.backlog.clear();
        }
        self.finish_all_sends(id, |_| Err(error));
    }

    /// Held sends of socket `id`.
    pub fn held_sends(&self, id: u32) -> usize {
        self.sockets.get(&id).map_or(0, |s| s.sends.len())
    }

    /// Replaces the loans of socket `id` with copies in the stack's memory (those the stack did
    /// not take yet, and those it queued), so the transport may have its memory back: a ring
    /// stop. The loans come back (and complete their sends) at once, or once the NIC no longer
    /// reads them. Returns the bytes copied.
    pub fn unloan(&mut self, id: u32) -> usize {
        let Some(s) = self.sockets.get_mut(&id) else { return 0 };
        let mut copied = 0;
        let mut originals = Vec::new();
        for b in s.backlog.iter_mut() {
            let bytes = crate::tcp::copy_all(b.as_ref());
            copied += bytes.len();
            let copy: Box<dyn TxPayload> = Box::new(bytes);
            originals.push(std::mem::replace(b, copy));
        }
        let (proto, handle) = (s.proto, s.handle);
        for original in originals {
            self.loan_returned(id, original);
        }
        if let Some(h) = handle {
            let unloaned = match proto {
                Proto::Tcp => self.iface.tcp_unloan(h),
                // Datagrams waiting for ARP; those the NIC reads come back when it is done.
                Proto::Udp => self.iface.udp_unloan(h),
            };
            match unloaned {
                Ok(n) => copied += n,
                Err(e) => log::debug!("socket {id}: nothing to unloan: {e}"),
            }
        }
        copied
    }

    /// Completes the held sends of `id` as sent, although the NIC still reads some of their
    /// loans: after [`unloan`](Self::unloan) their bytes are copied, so the stream is whole;
    /// the late loans are ignored when they come back.
    pub fn complete_sends_as_sent(&mut self, id: u32) {
        self.finish_all_sends(id, Ok);
    }
}
