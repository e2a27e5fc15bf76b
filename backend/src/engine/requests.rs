//! Transmit queues: walking, parsing and executing requests on the socket server.

use std::net::SocketAddrV4;
use std::sync::Arc;

use slimtcp::api::Proto;
use slimtcp::nic::Nic;
use slimtcp::server::{DatagramPayload, DatagramSent};
use slimtcp_abi::{
    layout, Done, Errno, Request, RequestBody, RequestHeader, RxMessage, ShutdownHow, SockOpt, SocketId,
    SocketKind, Version,
};

use super::chain::{walk, Walked};
use super::{errno_of, options, sock_id, ConnectCall, Engine, HeldSend, Out, SendPayload, REQUESTS_PER_STEP};
use crate::guest_mem::{read_into, GuestMem, GuestPayload, HostSlice};
use crate::queues;
use crate::queues::Vrings;

/// The fixed bytes of the longest request (send_to, setsockopt).
const MAX_FIXED: usize = layout::virtio_net_hdr::SIZE + layout::request_header::SIZE + MAX_BODY;
/// The longest request body.
const MAX_BODY: usize = max(layout::send_to::SIZE, layout::setsockopt::SIZE);

const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}

/// What executing a request led to.
enum Outcome {
    /// Complete now with this result (the chain returns after the completion).
    Now(Result<Done, Errno>),
    /// Complete now, naming this socket in the completion (the `socket` op).
    NowFor(SocketId, Result<Done, Errno>),
    /// The chain is held (send) or the completion comes later (connect): nothing to do now.
    Held,
    /// The completion comes later; the chain returns now.
    Later,
}

/// The payload part of a chain: its slices after the first `skip` bytes (walked, not
/// collected: a send allocates nothing to name its pieces).
fn payload_pieces(slices: &[HostSlice], skip: usize) -> impl Iterator<Item = HostSlice> + Clone + '_ {
    slices
        .iter()
        .scan(skip, |skip, s| {
            if *skip >= s.len {
                *skip -= s.len;
                return Some(None);
            }
            // SAFETY: `skip < s.len`, so the offset stays inside the translated slice.
            let ptr = unsafe { s.ptr.add(*skip) };
            let piece = HostSlice { ptr, len: s.len - *skip };
            *skip = 0;
            Some(Some(piece))
        })
        .flatten()
}

impl<N: Nic> Engine<N> {
    /// Takes and executes requests from pair `p`'s transmit queue.
    pub(super) fn take_requests<V: Vrings + ?Sized>(
        &mut self,
        p: usize,
        rings: &V,
        mem: &Arc<GuestMem>,
    ) -> bool {
        let max_pending = self.cfg.limits.max_requests as usize;
        let taken = rings.with(2 * p + 1, |q| {
            let mut n = 0;
            while n < REQUESTS_PER_STEP && self.pairs[p].pending_msgs < max_pending {
                let Some(chain) = queues::pop_head(q, mem) else { break };
                self.handle_chain(p, chain, mem);
                n += 1;
            }
            n
        });
        taken.unwrap_or(0) > 0
    }

    fn handle_chain(
        &mut self,
        p: usize,
        chain: virtio_queue::DescriptorChain<&GuestMem>,
        mem: &Arc<GuestMem>,
    ) {
        let head = chain.head_index();
        self.counters.requests += 1;
        let mut walked = std::mem::take(&mut self.walked);
        walk(chain, mem, false, self.cfg.limits.max_chain as usize, &mut walked);
        let mut fixed = [0u8; MAX_FIXED];
        let got = read_into(&walked.slices, 0, &mut fixed);
        let frame = &fixed[..got];
        let Ok(header) = RequestHeader::parse(frame) else {
            // No magic or shorter than 32 bytes: nothing to answer.
            self.counters.unanswerable_chains += 1;
            self.pairs[p].taken += 1;
            self.push(p, Out::Return(head));
            self.walked = walked;
            return;
        };
        self.pairs[p].taken += 1;
        let result = self.check_and_execute(p, head, frame, &walked, mem);
        // What the server reported meanwhile (sends failed by a close, ...) goes first.
        self.drain_events();
        match result {
            Outcome::Now(r) => self.complete(p, head, &header, header.socket, r),
            Outcome::NowFor(s, r) => self.complete(p, head, &header, s, r),
            Outcome::Held => {}
            Outcome::Later => self.push(p, Out::Return(head)),
        }
        self.walked = walked;
    }

    fn check_and_execute(
        &mut self,
        p: usize,
        head: u16,
        frame: &[u8],
        walked: &Walked,
        mem: &Arc<GuestMem>,
    ) -> Outcome {
        if walked.fault.is_some() {
            return Outcome::Now(Err(Errno::EFAULT));
        }
        let req = match Request::parse(frame) {
            Ok(r) => r,
            Err(e) => return Outcome::Now(Err(e.errno())),
        };
        if req.check_chain_len(usize::try_from(walked.len).unwrap_or(usize::MAX)).is_err() {
            return Outcome::Now(Err(Errno::EINVAL));
        }
        if self.pairs[p].taken > self.cfg.limits.max_requests as usize {
            return Outcome::Now(Err(Errno::ENOBUFS));
        }
        if let RequestBody::Hello { version } = req.body {
            return self.hello(p, &req, version);
        }
        if !self.pairs[p].hello {
            return Outcome::Now(Err(Errno::EPERM));
        }
        if let RequestBody::Socket { kind } = req.body {
            return self.socket(p, kind);
        }
        let id = req.socket.0;
        if !self.server.is_open_on(id, p) {
            return Outcome::Now(Err(Errno::EBADF));
        }
        let done = |r: Result<(), slimtcp::api::SocketError>| {
            Outcome::Now(r.map(|()| Done::value(0)).map_err(errno_of))
        };
        match req.body {
            RequestBody::Bind { local } => Outcome::Now(
                self.server.bind(id, local).map(|addr| Done { value: 0, addr }).map_err(errno_of),
            ),
            RequestBody::Listen { backlog } => done(self.server.listen(id, backlog as usize)),
            RequestBody::Connect { remote } => self.connect(id, &req, remote),
            RequestBody::Send { .. } if req.flags.is_copy() && !self.pairs[p].copy_sends => {
                // A flag of protocol 1.2 on a pair that negotiated less.
                Outcome::Now(Err(Errno::EINVAL))
            }
            RequestBody::Send { .. } | RequestBody::SendTo { .. } => self.send(id, head, &req, walked, mem),
            RequestBody::Shutdown { how } => done(self.server.shutdown(id, how != ShutdownHow::Read)),
            RequestBody::Close { abort } => done(self.server.close(id, abort)),
            RequestBody::SetSockOpt { option, value } => match options::to_server(option, value) {
                Ok(opt) => done(self.server.set_option(id, opt)),
                Err(e) => Outcome::Now(Err(e)),
            },
            RequestBody::GetSockOpt { option } => Outcome::Now(self.getsockopt(id, option)),
            RequestBody::Credit { bytes } => done(self.server.release(id, bytes as usize)),
            RequestBody::Hello { .. } | RequestBody::Socket { .. } => Outcome::Now(Err(Errno::EINVAL)),
        }
    }

    /// Queues the completion (unless a quiet success) and then the chain's return.
    fn complete(
        &mut self,
        p: usize,
        head: u16,
        header: &RequestHeader,
        socket: SocketId,
        r: Result<Done, Errno>,
    ) {
        let quiet = header.flags & slimtcp_abi::RequestFlags::QUIET.bits() != 0;
        if r.is_err() {
            self.counters.error_completions += 1;
        }
        if r.is_err() || !quiet {
            let socket = if r.is_err() && header.op == slimtcp_abi::Op::Socket.code() {
                SocketId::NONE
            } else {
                socket
            };
            self.push(
                p,
                Out::Msg(RxMessage::Complete { cookie: header.cookie, socket, op: header.op, result: r }),
            );
        }
        self.push(p, Out::Return(head));
    }

    fn hello(&mut self, p: usize, req: &Request, guest: Version) -> Outcome {
        if self.pairs[p].hello {
            self.restart_pair(p);
        }
        let msg = match Version::CURRENT.negotiate(guest) {
            Some(version) => {
                self.pairs[p].hello = true;
                self.pairs[p].copy_sends = version.minor >= 2;
                RxMessage::HelloDone { cookie: req.cookie, version, result: Ok(self.cfg.hello) }
            }
            None => RxMessage::HelloDone {
                cookie: req.cookie,
                version: Version::CURRENT,
                result: Err(Errno::EPROTONOSUPPORT),
            },
        };
        self.push(p, Out::Msg(msg));
        Outcome::Later
    }

    fn socket(&mut self, p: usize, kind: SocketKind) -> Outcome {
        let proto = match kind {
            SocketKind::Tcp => Proto::Tcp,
            SocketKind::Udp => Proto::Udp,
        };
        match self.server.open(p, proto) {
            Ok(id) => Outcome::NowFor(sock_id(id), Ok(Done::value(0))),
            Err(e) => {
                self.counters.socket_limit_refusals += 1;
                Outcome::NowFor(SocketId::NONE, Err(errno_of(e)))
            }
        }
    }

    fn connect(&mut self, id: u32, req: &Request, remote: SocketAddrV4) -> Outcome {
        let call = ConnectCall { cookie: req.cookie, quiet: req.flags.is_quiet() };
        match self.server.connect(id, remote, call) {
            Ok(slimtcp::server::Connecting::Started(_)) => Outcome::Later,
            Ok(slimtcp::server::Connecting::Done(addr)) => Outcome::Now(Ok(Done { value: 0, addr })),
            Err(e) => Outcome::Now(Err(errno_of(e))),
        }
    }

    /// A send or send_to: stream payload is loaned to the server piece by piece (sent by
    /// reference, the chain held until the peer acknowledged it all), or copied (a `COPY` send,
    /// [`send_copy`](Self::send_copy)); a datagram is loaned when it lies in one piece of guest
    /// memory, else gathered into one copy.
    fn send(&mut self, id: u32, head: u16, req: &Request, walked: &Walked, mem: &Arc<GuestMem>) -> Outcome {
        let (dst, len) = match req.body {
            RequestBody::SendTo { remote, len } => (Some(remote), len as usize),
            RequestBody::Send { len } => (None, len as usize),
            _ => return Outcome::Now(Err(Errno::EINVAL)),
        };
        let by_acked = req.flags.is_copy();
        let skip = req.wire_len();
        let pieces = payload_pieces(&walked.slices, skip);
        let token = HeldSend {
            head: Some(head),
            cookie: req.cookie,
            quiet: req.flags.is_quiet(),
            by_acked,
            copied: 0,
        };
        let piece = |slice: &HostSlice| SendPayload::Guest(GuestPayload::new(*slice, Arc::clone(mem)));
        let datagram = self.server.proto_of(id) == Some(Proto::Udp);
        if !datagram {
            if dst.is_some() {
                return Outcome::Now(Err(Errno::EOPNOTSUPP));
            }
            if by_acked {
                if self.copies_held + len <= self.cfg.copy_budget {
                    return self.send_copy(id, &walked.slices, skip, token, len);
                }
                self.counters.tx_copies_over_budget += 1;
            }
            return match self.server.send(id, len, pieces.map(|s| piece(&s)), token) {
                Ok(()) => {
                    self.counters.tx_payload_by_reference += len as u64;
                    Outcome::Held
                }
                Err(e) => Outcome::Now(Err(errno_of(e))),
            };
        }
        let mut first_two = pieces;
        let r = match (first_two.next(), first_two.next()) {
            (Some(one), None) if one.len > 0 => {
                let sent =
                    self.server.send_datagram(id, dst, DatagramPayload::Loan { piece: piece(&one), token });
                if sent.is_ok() {
                    self.counters.tx_payload_by_reference += len as u64;
                }
                sent
            }
            // Gathered into the scratch buffer, which never grows past the largest datagram.
            _ if len > self.server.limits().max_datagram => return Outcome::Now(Err(Errno::EMSGSIZE)),
            _ => {
                let mut buf = std::mem::take(&mut self.scratch);
                buf.clear();
                buf.resize(len, 0);
                let n = read_into(&walked.slices, skip, &mut buf);
                self.counters.tx_payload_copied += n as u64;
                let sent = self.server.send_datagram(id, dst, DatagramPayload::Copy(&buf[..n]));
                self.scratch = buf;
                sent
            }
        };
        match r {
            Ok(DatagramSent::Held) => Outcome::Held,
            Ok(DatagramSent::Done(n)) => Outcome::Now(Ok(Done::value(n as u64))),
            Err(e) => Outcome::Now(Err(errno_of(e))),
        }
    }

    /// A `COPY` send within the copy budget: its payload copied into host memory, its chain
    /// returned now; the server holds the copy until the peer acknowledged it, then its bytes
    /// go to the guest in an `acked` message.
    fn send_copy(
        &mut self,
        id: u32,
        slices: &[HostSlice],
        skip: usize,
        mut token: HeldSend,
        len: usize,
    ) -> Outcome {
        let mut bytes = vec![0u8; len];
        let n = read_into(slices, skip, &mut bytes);
        bytes.truncate(n);
        token.head = None;
        token.copied = n;
        match self.server.send(id, n, [SendPayload::Copied(bytes)], token) {
            Ok(()) => {
                self.copies_held += n;
                self.counters.tx_sends_copied += n as u64;
                Outcome::Now(Ok(Done::value(n as u64)))
            }
            Err(e) => Outcome::Now(Err(errno_of(e))),
        }
    }

    fn getsockopt(&mut self, id: u32, option: SockOpt) -> Result<Done, Errno> {
        let opt = self.server.get_option(id, options::name_of(option)).map_err(errno_of)?;
        Ok(Done::value(options::value_of(opt)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slices over one buffer, cut at `cuts` (host addresses only: nothing is dereferenced).
    fn slices(buf: &mut [u8], cuts: &[usize]) -> Vec<HostSlice> {
        let base = buf.as_mut_ptr();
        let mut edges = vec![0];
        edges.extend_from_slice(cuts);
        edges.push(buf.len());
        edges.windows(2).map(|w| HostSlice { ptr: base.wrapping_add(w[0]), len: w[1] - w[0] }).collect()
    }

    /// (offset in the buffer, length) of each piece.
    fn pieces(buf: &mut [u8], cuts: &[usize], skip: usize) -> Vec<(usize, usize)> {
        let base = buf.as_mut_ptr() as usize;
        let s = slices(buf, cuts);
        payload_pieces(&s, skip).map(|p| (p.ptr as usize - base, p.len)).collect()
    }

    #[test]
    fn a_chains_payload_pieces_start_after_the_skipped_bytes_wherever_the_slices_are_cut() {
        let mut buf = [0u8; 100];
        assert_eq!(pieces(&mut buf, &[], 40), vec![(40, 60)], "one slice");
        assert_eq!(pieces(&mut buf, &[40], 40), vec![(40, 60)], "the header slice whole");
        assert_eq!(pieces(&mut buf, &[30, 70], 40), vec![(40, 30), (70, 30)], "inside the second slice");
        assert_eq!(pieces(&mut buf, &[10, 20, 30], 25), vec![(25, 5), (30, 70)], "past two slices");
        assert_eq!(pieces(&mut buf, &[40, 40], 40), vec![(40, 60)], "an empty slice skipped as a whole");
        assert_eq!(pieces(&mut buf, &[50], 100), vec![], "nothing after the header");
        assert_eq!(pieces(&mut buf, &[50], 150), vec![], "a skip past the end");
        let s = slices(&mut buf, &[30, 70]);
        let it = payload_pieces(&s, 40);
        assert_eq!(it.clone().count(), 2, "a clone walks the same pieces");
        assert_eq!(it.map(|p| p.len).sum::<usize>(), 60);
    }
}
