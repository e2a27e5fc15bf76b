//! Transmit queues: walking, parsing and executing requests.

use std::net::SocketAddrV4;
use std::sync::Arc;

use slimtcp::api::SocketError;
use slimtcp::iface::{EPHEMERAL_PORT_COUNT, FIRST_EPHEMERAL_PORT};
use slimtcp::nic::Nic;
use slimtcp::tcp::LivenessOpt;
use slimtcp_abi::{
    Done, Errno, Request, RequestBody, RequestHeader, RxMessage, ShutdownHow, SockOpt, SocketId, SocketKind,
    Version,
};

use super::chain::walk;
use super::{errno_of, sock_id, Engine, GSock, HeldSend, Kind, Out, Phase, Slices, REQUESTS_PER_STEP};
use crate::guest_mem::{read_into, GuestMem, GuestPayload, HostSlice, SendTag};
use crate::queues::{self, Vrings};

/// The fixed bytes of the longest request (send_to, setsockopt).
const MAX_FIXED: usize = 48;
/// Smallest MSS accepted by setsockopt: 64, as the host runtime (the paper's experiments go
/// down to 64-byte segments; Linux's floor is 88).
const MIN_MSS: u64 = 64;
/// Largest MSS accepted by setsockopt (jumbo frames).
const MAX_MSS: u64 = 9_000;
/// Largest receive window a socket may ask for.
const MAX_RCVBUF: u64 = 64 * 1024 * 1024;
/// Smallest receive window a socket may ask for.
const MIN_RCVBUF: u64 = 2048;

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

/// The payload part of a chain: its slices after the first `skip` bytes.
fn payload_slices(slices: &[HostSlice], mut skip: usize) -> Slices {
    let mut out = Vec::new();
    for s in slices {
        if skip >= s.len {
            skip -= s.len;
            continue;
        }
        // SAFETY: `skip < s.len`, so the offset stays inside the translated slice.
        let ptr = unsafe { s.ptr.add(skip) };
        out.push(HostSlice { ptr, len: s.len - skip });
        skip = 0;
    }
    out
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
        let result = self.check_and_execute(p, head, &header, frame, &walked, mem);
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
        header: &RequestHeader,
        frame: &[u8],
        walked: &super::chain::Walked,
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
        match self.sockets.get(&id) {
            Some(s) if s.pair == p && s.phase != Phase::Zombie => {}
            _ => return Outcome::Now(Err(Errno::EBADF)),
        }
        let _ = header;
        match req.body {
            RequestBody::Bind { local } => Outcome::Now(self.bind(id, local)),
            RequestBody::Listen { backlog } => Outcome::Now(self.listen(id, backlog)),
            RequestBody::Connect { remote } => self.connect(id, &req, remote),
            RequestBody::Send { len } => self.send(id, head, &req, len, walked, mem),
            RequestBody::SendTo { remote, len } => {
                self.send_datagram(id, Some(remote), head, &req, len, walked, mem)
            }
            RequestBody::Shutdown { how } => Outcome::Now(self.shutdown(id, how)),
            RequestBody::Close { abort } => Outcome::Now(self.close(id, abort)),
            RequestBody::SetSockOpt { option, value } => Outcome::Now(self.setsockopt(id, option, value)),
            RequestBody::GetSockOpt { option } => Outcome::Now(self.getsockopt(id, option)),
            RequestBody::Credit { bytes } => Outcome::Now(self.credit(id, bytes)),
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

    fn visible_sockets(&self) -> usize {
        self.sockets.values().filter(|s| s.phase != Phase::Zombie).count()
    }

    fn socket(&mut self, p: usize, kind: SocketKind) -> Outcome {
        if self.visible_sockets() >= self.cfg.limits.max_sockets as usize {
            self.counters.socket_limit_refusals += 1;
            return Outcome::NowFor(SocketId::NONE, Err(Errno::EMFILE));
        }
        let id = self.new_id();
        let kind = match kind {
            SocketKind::Tcp => Kind::Tcp,
            SocketKind::Udp => Kind::Udp,
        };
        let opts = self.default_opts();
        self.sockets.insert(id, GSock::new(p, kind, opts));
        Outcome::NowFor(sock_id(id), Ok(Done::value(0)))
    }

    fn sock(&mut self, id: u32) -> Result<&mut GSock, Errno> {
        self.sockets.get_mut(&id).ok_or(Errno::EBADF)
    }

    fn tcp_port_taken(&self, port: u16) -> bool {
        self.sockets.values().any(|s| s.kind == Kind::Tcp && s.port == Some(port))
    }

    fn bind(&mut self, id: u32, local: SocketAddrV4) -> Result<Done, Errno> {
        let ip = self.iface.config().ip;
        if !local.ip().is_unspecified() && *local.ip() != ip {
            return Err(Errno::EADDRNOTAVAIL);
        }
        let s = self.sock(id)?;
        if s.port.is_some() || s.phase != Phase::Fresh {
            return Err(Errno::EINVAL);
        }
        let port = match s.kind {
            Kind::Tcp => {
                let port = if local.port() == 0 { self.ephemeral_tcp_port()? } else { local.port() };
                if self.tcp_port_taken(port) {
                    return Err(Errno::EADDRINUSE);
                }
                port
            }
            Kind::Udp => {
                let h = self.iface.udp_bind(local.port()).map_err(errno_of)?;
                self.by_handle.insert(h, id);
                let port = self.iface.udp_local(h).map_err(errno_of)?.port();
                self.sock(id)?.handle = Some(h);
                port
            }
        };
        self.sock(id)?.port = Some(port);
        Ok(Done { value: 0, addr: self.local_addr(port) })
    }

    fn ephemeral_tcp_port(&mut self) -> Result<u16, Errno> {
        for _ in 0..EPHEMERAL_PORT_COUNT {
            let port = self.next_port;
            self.next_port = if port == u16::MAX { FIRST_EPHEMERAL_PORT } else { port + 1 };
            if !self.tcp_port_taken(port) {
                return Ok(port);
            }
        }
        Err(Errno::EADDRNOTAVAIL)
    }

    fn listen(&mut self, id: u32, backlog: u32) -> Result<Done, Errno> {
        let s = self.sock(id)?;
        match (s.kind, s.phase, s.port) {
            (Kind::Udp, _, _) => Err(Errno::EOPNOTSUPP),
            (Kind::Tcp, Phase::Fresh, Some(port)) => {
                let opts = s.opts;
                let cfg = self.tcp_config(&opts);
                let h = self
                    .iface
                    .tcp_listen_with(port, backlog.clamp(1, self.cfg.limits.max_backlog) as usize, Some(cfg))
                    .map_err(errno_of)?;
                self.by_handle.insert(h, id);
                let s = self.sock(id)?;
                s.handle = Some(h);
                s.phase = Phase::Listening;
                Ok(Done::value(0))
            }
            (Kind::Tcp, Phase::Connected | Phase::Connecting { .. }, _) => Err(Errno::EISCONN),
            _ => Err(Errno::EINVAL),
        }
    }

    fn connect(&mut self, id: u32, req: &Request, remote: SocketAddrV4) -> Outcome {
        let now = self.clock.now();
        let Ok(s) = self.sock(id) else { return Outcome::Now(Err(Errno::EBADF)) };
        match (s.kind, s.phase) {
            (Kind::Tcp, Phase::Fresh) => {
                let (opts, port) = (s.opts, s.port);
                let cfg = self.tcp_config(&opts);
                match self.iface.tcp_connect_with(now, port, remote, Some(cfg)) {
                    Ok(h) => {
                        self.by_handle.insert(h, id);
                        let local_port = self.iface.tcp_info(h).map(|i| i.local.port()).ok();
                        if let Ok(s) = self.sock(id) {
                            s.handle = Some(h);
                            s.port = s.port.or(local_port);
                            s.phase = Phase::Connecting { cookie: req.cookie, quiet: req.flags.is_quiet() };
                        }
                        Outcome::Later
                    }
                    Err(e) => Outcome::Now(Err(errno_of(e))),
                }
            }
            (Kind::Tcp, Phase::Connecting { .. }) => Outcome::Now(Err(Errno::EALREADY)),
            (Kind::Tcp, _) => Outcome::Now(Err(Errno::EISCONN)),
            (Kind::Udp, _) => Outcome::Now(self.udp_connect(id, remote)),
        }
    }

    fn udp_handle(&mut self, id: u32) -> Result<slimtcp::iface::SocketHandle, Errno> {
        if let Some(h) = self.sock(id)?.handle {
            return Ok(h);
        }
        let h = self.iface.udp_bind(0).map_err(errno_of)?;
        self.by_handle.insert(h, id);
        let port = self.iface.udp_local(h).map_err(errno_of)?.port();
        let s = self.sock(id)?;
        s.handle = Some(h);
        s.port = Some(port);
        Ok(h)
    }

    fn udp_connect(&mut self, id: u32, remote: SocketAddrV4) -> Result<Done, Errno> {
        let h = self.udp_handle(id)?;
        self.iface.udp_connect(h, remote).map_err(errno_of)?;
        let local = self.iface.udp_local(h).map_err(errno_of)?;
        self.sock(id)?.phase = Phase::Connected;
        Ok(Done { value: 0, addr: local })
    }

    fn send(
        &mut self,
        id: u32,
        head: u16,
        req: &Request,
        len: u32,
        walked: &super::chain::Walked,
        mem: &Arc<GuestMem>,
    ) -> Outcome {
        let Ok(s) = self.sock(id) else { return Outcome::Now(Err(Errno::EBADF)) };
        if s.kind == Kind::Udp {
            return self.send_datagram(id, None, head, req, len, walked, mem);
        }
        let (h, sndbuf, in_flight) = match (s.phase, s.handle) {
            (Phase::Connected, Some(h)) => (h, u64::from(s.opts.sndbuf), s.in_flight),
            _ => return Outcome::Now(Err(Errno::ENOTCONN)),
        };
        if s.write_shut {
            return Outcome::Now(Err(Errno::EPIPE));
        }
        if s.reset_sent {
            return Outcome::Now(Err(Errno::ECONNRESET));
        }
        if u64::from(len) > sndbuf {
            return Outcome::Now(Err(Errno::EMSGSIZE));
        }
        if in_flight + u64::from(len) > sndbuf {
            s.writable_wanted = true;
            return Outcome::Now(Err(Errno::EAGAIN));
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        let pieces = payload_slices(&walked.slices, req.wire_len());
        let mut sent = 0usize;
        for piece in pieces.iter().filter(|p| p.len > 0) {
            let payload = Box::new(GuestPayload::new(*piece, Arc::clone(mem), SendTag { socket: id, seq }));
            match self.iface.tcp_send_loaned(h, payload) {
                Ok(Ok(())) => sent += 1,
                Ok(Err(back)) => {
                    sent += 1;
                    if let Ok(s) = self.sock(id) {
                        s.backlog.push_back(back);
                    }
                }
                Err(e) if sent == 0 => return Outcome::Now(Err(errno_of(e))),
                Err(e) => {
                    // Cannot happen after the first piece was taken; the chain still returns
                    // once the pieces taken are acknowledged.
                    log::warn!("socket {id}: send piece refused after the first: {e}");
                    break;
                }
            }
        }
        self.hold_send(
            id,
            seq,
            HeldSend { head, cookie: req.cookie, quiet: req.flags.is_quiet(), len, loans_left: sent },
        );
        Outcome::Held
    }

    /// Holds `send`'s chain until the stack hands back its `loans_left` loans.
    fn hold_send(&mut self, id: u32, seq: u64, send: HeldSend) {
        self.counters.tx_payload_by_reference += u64::from(send.len);
        let Ok(s) = self.sock(id) else { return };
        s.in_flight += u64::from(send.len);
        s.sends.insert(seq, send);
        if !self.sending.contains(&id) {
            self.sending.push(id);
        }
    }

    /// One datagram: its payload is loaned to the stack (sent by reference, the chain held
    /// until the NIC is done with it) when it lies in one piece of guest memory, else copied.
    #[allow(clippy::too_many_arguments)]
    fn send_datagram(
        &mut self,
        id: u32,
        dst: Option<SocketAddrV4>,
        head: u16,
        req: &Request,
        len: u32,
        walked: &super::chain::Walked,
        mem: &Arc<GuestMem>,
    ) -> Outcome {
        match self.sock(id) {
            Ok(s) if s.kind == Kind::Udp => {}
            Ok(_) => return Outcome::Now(Err(Errno::EOPNOTSUPP)),
            Err(e) => return Outcome::Now(Err(e)),
        }
        if len > u32::from(self.cfg.hello.max_datagram) {
            return Outcome::Now(Err(Errno::EMSGSIZE));
        }
        let h = match self.udp_handle(id) {
            Ok(h) => h,
            Err(e) => return Outcome::Now(Err(e)),
        };
        let pieces = payload_slices(&walked.slices, req.wire_len());
        let now = self.clock.now();
        let r = match pieces.as_slice() {
            [piece] if piece.len > 0 => {
                let Ok(s) = self.sock(id) else { return Outcome::Now(Err(Errno::EBADF)) };
                let seq = s.next_seq;
                s.next_seq += 1;
                let payload =
                    Box::new(GuestPayload::new(*piece, Arc::clone(mem), SendTag { socket: id, seq }));
                match self.iface.udp_send_loaned(now, h, payload, dst) {
                    Ok(_) => {
                        let (cookie, quiet) = (req.cookie, req.flags.is_quiet());
                        self.hold_send(id, seq, HeldSend { head, cookie, quiet, len, loans_left: 1 });
                        return Outcome::Held;
                    }
                    Err(e) => Err(e),
                }
            }
            pieces => {
                let mut buf = std::mem::take(&mut self.scratch);
                buf.clear();
                buf.resize(len as usize, 0);
                let n = read_into(pieces, 0, &mut buf);
                self.counters.tx_payload_copied += n as u64;
                let r = self.iface.udp_send_to(now, h, &buf[..n], dst);
                self.scratch = buf;
                r
            }
        };
        Outcome::Now(match r {
            Ok(n) => Ok(Done::value(n as u64)),
            // The datagram waits for ARP in the stack or is dropped like UDP does.
            Err(SocketError::WouldBlock) => Ok(Done::value(u64::from(len))),
            Err(e) => Err(errno_of(e)),
        })
    }

    fn shutdown(&mut self, id: u32, how: ShutdownHow) -> Result<Done, Errno> {
        let s = self.sock(id)?;
        match (s.kind, s.phase, s.handle) {
            (Kind::Tcp, Phase::Connected, Some(h)) => {
                if how != ShutdownHow::Read && !s.write_shut {
                    s.write_shut = true;
                    self.iface.tcp_shutdown(h).map_err(errno_of)?;
                }
                Ok(Done::value(0))
            }
            (Kind::Udp, _, _) => Err(Errno::EOPNOTSUPP),
            _ => Err(Errno::ENOTCONN),
        }
    }

    pub(super) fn close(&mut self, id: u32, abort: bool) -> Result<Done, Errno> {
        // Received data the guest never got (still in the host stack, or a partly delivered
        // segment) makes a close an abort, as a kernel resets a connection closed with unread
        // data (RFC 2525 2.17): a graceful close would wait for its sends behind a peer that may
        // itself wait for this window forever.
        let unread = {
            let s = self.sock(id)?;
            let in_stack = match (s.kind, s.handle) {
                (Kind::Tcp, Some(h)) => self.iface.tcp_info(h).map_or(0, |i| i.recv_queued),
                _ => 0,
            };
            in_stack > 0 || self.sock(id)?.rx_partial.is_some()
        };
        let abort = abort || unread;
        // The guest returns no credit after this: the stack's window must not stay shut on the
        // bytes it never acknowledged, or a peer with more to send waits for ever on a closed
        // socket (data that still comes resets it: see `on_activity`, and the stack for orphans).
        let s = self.sock(id)?;
        let credit = std::mem::take(&mut s.outstanding_rx);
        if let (Kind::Tcp, Some(h)) = (s.kind, s.handle) {
            let _ = self.iface.tcp_recv_release(h, credit as usize);
        }
        let s = self.sock(id)?;
        if s.kind == Kind::Udp && !abort && !s.sends.is_empty() {
            // Datagrams the NIC still reads: the chains return when it is done.
            s.phase = Phase::Zombie;
            return Ok(Done::value(0));
        }
        if s.kind == Kind::Tcp && s.phase == Phase::Connected && !abort && !s.sends.is_empty() {
            // Finish the held sends first: FIN after them; the id is gone for the guest.
            s.phase = Phase::Zombie;
            s.rx_partial = None;
            if let Some(h) = s.handle {
                if !s.write_shut {
                    s.write_shut = true;
                    let _ = self.iface.tcp_shutdown(h);
                }
            }
            return Ok(Done::value(0));
        }
        self.fail_sends(id, Errno::ECONNABORTED);
        if let Some(s) = self.sockets.remove(&id) {
            self.release_stack_socket(&s, abort);
        }
        Ok(Done::value(0))
    }

    fn setsockopt(&mut self, id: u32, option: SockOpt, value: u64) -> Result<Done, Errno> {
        let max_send = u64::from(self.cfg.limits.max_send_in_flight);
        let s = self.sock(id)?;
        let fresh = s.phase == Phase::Fresh;
        if s.kind == Kind::Udp && option != SockOpt::RcvBuf && option != SockOpt::SndBuf {
            return Err(Errno::EOPNOTSUPP);
        }
        if let Some(opt) = liveness_opt(option) {
            // Any time: a live connection changes at once, later ones start with it.
            s.opts.live.set(opt, value).map_err(|_| Errno::EINVAL)?;
            let (live, handle) =
                (s.opts.live, s.handle.filter(|_| !matches!(s.phase, Phase::Fresh | Phase::Listening)));
            if let Some(h) = handle {
                let now = self.clock.now();
                // A connection the stack already freed has nothing to keep alive.
                let _ = self.iface.tcp_set_liveness(h, now, live.keepalive(), live.user_timeout());
            }
            return Ok(Done::value(0));
        }
        let o = &mut s.opts;
        match option {
            SockOpt::RcvBuf if fresh && (MIN_RCVBUF..=MAX_RCVBUF).contains(&value) => o.rcvbuf = value as u32,
            SockOpt::SndBuf if (1..=max_send).contains(&value) => o.sndbuf = value as u32,
            SockOpt::MaxSeg if fresh && (MIN_MSS..=MAX_MSS).contains(&value) => o.mss = value as u16,
            SockOpt::WindowScale if fresh && value <= 14 => o.wscale = Some(value as u8),
            SockOpt::NoDelay if fresh && value <= 1 => o.nodelay = value == 1,
            SockOpt::Burst if (1..=1024).contains(&value) => o.burst = value as u32,
            SockOpt::RcvBuf
            | SockOpt::SndBuf
            | SockOpt::MaxSeg
            | SockOpt::WindowScale
            | SockOpt::NoDelay
            | SockOpt::Burst
            | SockOpt::KeepAlive
            | SockOpt::KeepIdle
            | SockOpt::KeepInterval
            | SockOpt::KeepCount
            | SockOpt::UserTimeout => return Err(Errno::EINVAL),
        }
        Ok(Done::value(0))
    }

    fn getsockopt(&mut self, id: u32, option: SockOpt) -> Result<Done, Errno> {
        let s = self.sock(id)?;
        let o = &s.opts;
        let v = match option {
            SockOpt::RcvBuf => u64::from(o.rcvbuf),
            SockOpt::SndBuf => u64::from(o.sndbuf),
            SockOpt::MaxSeg => u64::from(o.mss),
            SockOpt::WindowScale => u64::from(o.wscale.unwrap_or(0)),
            SockOpt::NoDelay => u64::from(o.nodelay),
            SockOpt::Burst => u64::from(o.burst),
            SockOpt::KeepAlive
            | SockOpt::KeepIdle
            | SockOpt::KeepInterval
            | SockOpt::KeepCount
            | SockOpt::UserTimeout => liveness_opt(option).map_or(0, |opt| o.live.get(opt)),
        };
        Ok(Done::value(v))
    }

    fn credit(&mut self, id: u32, bytes: u32) -> Result<Done, Errno> {
        let s = self.sock(id)?;
        let Some(h) = s.handle.filter(|_| s.kind == Kind::Tcp) else { return Err(Errno::EOPNOTSUPP) };
        if u64::from(bytes) > s.outstanding_rx {
            return Err(Errno::EINVAL);
        }
        s.outstanding_rx -= u64::from(bytes);
        // A connection the stack already freed has no window left to open.
        let _ = self.iface.tcp_recv_release(h, bytes as usize);
        Ok(Done::value(0))
    }
}

impl GSock {
    pub(super) fn new(pair: usize, kind: Kind, opts: super::Opts) -> Self {
        GSock {
            pair,
            kind,
            phase: Phase::Fresh,
            handle: None,
            port: None,
            opts,
            in_flight: 0,
            next_seq: 0,
            sends: Default::default(),
            backlog: Default::default(),
            outstanding_rx: 0,
            rx_partial: None,
            in_readable: false,
            write_shut: false,
            writable_wanted: false,
            eof_sent: false,
            reset_sent: false,
        }
    }
}

/// The stack's name of a liveness option (keepalive, user timeout), `None` for the others.
fn liveness_opt(option: SockOpt) -> Option<LivenessOpt> {
    Some(match option {
        SockOpt::KeepAlive => LivenessOpt::KeepAlive,
        SockOpt::KeepIdle => LivenessOpt::KeepIdle,
        SockOpt::KeepInterval => LivenessOpt::KeepInterval,
        SockOpt::KeepCount => LivenessOpt::KeepCount,
        SockOpt::UserTimeout => LivenessOpt::UserTimeout,
        _ => return None,
    })
}
