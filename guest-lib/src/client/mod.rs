//! The protocol client: [`GuestSockets`] implements [`slimtcp::api::SocketApi`] over one queue
//! pair, speaking `docs/protocol.md`.
//!
//! - Requests go on the transmit queue, one chain each: `[R] hdr+body` (40/48 bytes, in a
//!   per-head header slot) `[R] payload` (send/send_to: the TxBuf itself, zero copy). Blocking
//!   calls wait for their completion by cookie; `send` and `credit` go QUIET (only errors
//!   come back; their cookie tags the socket).
//! - The receive queue always has `queue_size` equal buffers posted; each returned one holds a
//!   completion or an event. Data payloads stay where they landed, become [`RxBuf`]s, and are
//!   reposted (and their bytes credited, in batches of a quarter window) when dropped.
//! - Send flow control is counted here: a socket's bytes in flight are the lengths of its send
//!   chains the device still holds; they return with the used ring, after the peer's ACK.
//! - Waiting spins, yields, then sleeps on the receive queue's interrupt with EVENT_IDX armed;
//!   a dead backend turns every call into `ENETDOWN` (`SocketError::StackDown`).

mod api_impl;
mod buffers;
mod control;
mod data;
mod errno;
mod state;

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use slimtcp::api::{EpollFd, EpollSet, Fd, Proto, SocketError};
use slimtcp_abi::{
    Done, Errno, HelloInfo, Op, Request, RequestBody, RxMessage, SocketId, Version, VIRTIO_NET_HDR_LEN,
};

pub use buffers::{RxBuf, TxBuf, LARGE_TX};

use crate::mem::{BumpAllocator, DmaRegion};
use crate::ring::Segment;
use crate::transport::QueuePair;
use crate::{GuestConfig, GuestError};
use buffers::{Release, ReleaseQueue, TxPool};
use state::{Phase, SockEntry, DATAGRAM_QUEUE};

/// Bytes reserved per request header slot (the largest fixed request is 48).
const HDR_SLOT: usize = 64;
/// Cookie tags (low 8 bits); the rest is a sequence number or, for quiet requests, the fd.
const TAG_CALL: u64 = 1;
const TAG_CONNECT: u64 = 2;
const TAG_CLOSE: u64 = 3;
const TAG_QUIET_SEND: u64 = 4;
const TAG_QUIET_CREDIT: u64 = 5;
const TAG_HELLO: u64 = 6;

/// What the device holds for a transmit chain.
#[derive(Debug)]
enum TxSlot {
    Free,
    Control,
    Send { fd: Fd, bytes: usize, _buf: TxBuf },
    Datagram { _buf: TxBuf },
}

/// The socket API over one queue pair (see the module documentation). One per thread.
#[derive(Debug)]
pub struct GuestSockets {
    qp: QueuePair,
    info: HelloInfo,
    version: Version,
    /// Receive buffers: `slot i` is at `rx_area + i * rx_size`.
    rx_area: DmaRegion,
    rx_size: usize,
    /// The slot each outstanding receive head carries.
    rx_slot_of_head: Vec<u16>,
    /// Slots to (re)post.
    rx_to_post: Vec<u16>,
    releases: Arc<ReleaseQueue>,
    /// Transmit header slots, indexed by chain head.
    hdr_area: DmaRegion,
    tx_slots: Vec<TxSlot>,
    tx_outstanding: usize,
    max_requests: usize,
    pool: Arc<TxPool>,
    sockets: HashMap<Fd, SockEntry>,
    by_sid: HashMap<SocketId, Fd>,
    /// Ids whose close is not yet complete: their events are dropped.
    closing: HashMap<SocketId, ()>,
    next_fd: u32,
    epolls: HashMap<EpollFd, EpollSet>,
    next_epoll: u32,
    seq: u64,
    /// Completions of blocking calls, by cookie.
    replies: HashMap<u64, (SocketId, Result<Done, Errno>)>,
    dead: bool,
    idle_checks: u32,
}

impl GuestSockets {
    /// Connects to a `slimtcp-vhost` backend at `path` with the vhost-user transport, sets up
    /// one queue pair and says hello on it.
    pub fn connect_vhost_user(
        path: impl AsRef<std::path::Path>,
        cfg: GuestConfig,
    ) -> Result<GuestSockets, GuestError> {
        use crate::transport::Transport;
        let cfg = GuestConfig { queue_pairs: cfg.queue_pairs.max(1), ..cfg };
        let mut t = crate::VhostUserTransport::connect(path, &cfg)?;
        let qp = t.take_queue_pair(0)?;
        GuestSockets::new(qp, &cfg)
    }

    /// The client over a queue pair: posts the receive buffers and negotiates the protocol
    /// version.
    pub fn new(mut qp: QueuePair, cfg: &GuestConfig) -> Result<GuestSockets, GuestError> {
        let q = usize::from(qp.rx.ring.size());
        let txq = usize::from(qp.tx.ring.size());
        let mut alloc = BumpAllocator::new(qp.memory.clone());
        let rx_area = alloc
            .alloc(q * cfg.rx_buffer_size, 4096)
            .ok_or(GuestError::Config("memory too small for receive buffers"))?;
        let hdr_area =
            alloc.alloc(txq * HDR_SLOT, 4096).ok_or(GuestError::Config("memory too small for headers"))?;
        let rest = alloc.remaining() & !4095;
        let pool_area = alloc.alloc(rest, 4096).ok_or(GuestError::Config("memory too small"))?;
        if pool_area.len() < LARGE_TX * 4 {
            return Err(GuestError::Config("memory too small for transmit buffers"));
        }
        qp.rx.ring.disarm_interrupt();
        qp.tx.ring.disarm_interrupt();
        let mut g = GuestSockets {
            info: HelloInfo {
                addr: std::net::Ipv4Addr::UNSPECIFIED,
                prefix_len: 0,
                mac: [0; 6],
                gateway: std::net::Ipv4Addr::UNSPECIFIED,
                mss: 0,
                max_datagram: 0,
                max_sockets: 0,
                max_send_in_flight: 0,
                rx_buffer: 0,
                max_requests: 0,
            },
            version: Version::CURRENT,
            rx_area,
            rx_size: cfg.rx_buffer_size,
            rx_slot_of_head: vec![0; q],
            rx_to_post: (0..q as u16).collect(),
            releases: Arc::new(ReleaseQueue::default()),
            hdr_area,
            tx_slots: (0..txq).map(|_| TxSlot::Free).collect(),
            tx_outstanding: 0,
            max_requests: txq,
            pool: TxPool::new(pool_area),
            sockets: HashMap::new(),
            by_sid: HashMap::new(),
            closing: HashMap::new(),
            next_fd: 3,
            epolls: HashMap::new(),
            next_epoll: 1,
            seq: 0,
            replies: HashMap::new(),
            dead: false,
            idle_checks: 0,
            qp,
        };
        g.post_rx().map_err(|_| GuestError::Disconnected)?;
        g.hello(cfg.hello_timeout)?;
        Ok(g)
    }

    fn hello(&mut self, timeout: Duration) -> Result<(), GuestError> {
        let cookie = TAG_HELLO;
        let req = Request::new(cookie, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT });
        self.submit(req, None).map_err(|_| GuestError::Disconnected)?;
        let deadline = Instant::now() + timeout;
        let mut idle = 0u32;
        loop {
            let mut answer = None;
            let progressed = self.pump_with(|m| {
                if let RxMessage::HelloDone { cookie: c, version, result } = m {
                    if *c == cookie {
                        answer = Some((*version, *result));
                        return true;
                    }
                }
                false
            });
            let progressed = progressed.map_err(|_| GuestError::Disconnected)?;
            if let Some((version, result)) = answer {
                return match result {
                    Ok(info) => {
                        self.version = version;
                        self.info = info;
                        if info.max_requests > 0 {
                            self.max_requests = self.max_requests.min(info.max_requests as usize);
                        }
                        Ok(())
                    }
                    Err(_) => Err(GuestError::VersionRefused { guest: Version::CURRENT, host: version }),
                };
            }
            if Instant::now() >= deadline {
                return Err(GuestError::HelloTimeout);
            }
            if progressed {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                self.idle(idle).map_err(|_| GuestError::Disconnected)?;
            }
        }
    }

    /// What the backend told us in hello: our address, MSS, limits.
    pub fn hello_info(&self) -> &HelloInfo {
        &self.info
    }

    /// The negotiated protocol version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// Which queue pair this instance drives.
    pub fn queue_pair(&self) -> usize {
        self.qp.index
    }

    /// Applies whatever the device did, without waiting; true when anything happened.
    pub fn progress(&mut self) -> Result<bool, SocketError> {
        self.pump()
    }

    /// Zero-copy transmit buffers handed out (held by the application or in flight).
    pub fn tx_buffers_outstanding(&self) -> usize {
        self.pool.outstanding()
    }

    /// Datagrams dropped on `fd` because the application did not read fast enough.
    pub fn datagrams_dropped(&self, fd: Fd) -> Result<u64, SocketError> {
        Ok(self.entry(fd)?.datagrams_dropped)
    }

    fn entry(&self, fd: Fd) -> Result<&SockEntry, SocketError> {
        self.sockets.get(&fd).ok_or(SocketError::BadHandle)
    }

    fn entry_mut(&mut self, fd: Fd) -> Result<&mut SockEntry, SocketError> {
        self.sockets.get_mut(&fd).ok_or(SocketError::BadHandle)
    }

    fn new_fd(&mut self) -> Result<Fd, SocketError> {
        let fd = Fd(self.next_fd);
        self.next_fd = self.next_fd.checked_add(1).ok_or(SocketError::TooManySockets)?;
        Ok(fd)
    }

    fn default_sndbuf(&self) -> usize {
        self.info.max_send_in_flight as usize
    }

    fn default_rcvbuf(&self) -> usize {
        self.info.rx_buffer as usize
    }

    fn next_cookie(&mut self, tag: u64) -> u64 {
        self.seq += 1;
        (self.seq << 8) | tag
    }

    // ---------------------------------------------------------------- rings

    /// Posts the receive buffers waiting in `rx_to_post`.
    fn post_rx(&mut self) -> Result<(), SocketError> {
        if self.rx_to_post.is_empty() {
            return Ok(());
        }
        while let Some(&slot) = self.rx_to_post.last() {
            let gpa = self.rx_area.gpa() + (usize::from(slot) * self.rx_size) as u64;
            let seg = Segment { gpa, len: self.rx_size as u32, writable: true };
            match self.qp.rx.ring.add(&[seg]) {
                Ok(head) => {
                    self.rx_slot_of_head[usize::from(head)] = slot;
                    self.rx_to_post.pop();
                }
                Err(_) => break,
            }
        }
        self.qp.rx.flush().map_err(|_| self.down())
    }

    /// Marks the backend gone.
    fn down(&mut self) -> SocketError {
        if !self.dead {
            log::error!("slimtcp-guest: the backend is gone (queue pair {})", self.qp.index);
        }
        self.dead = true;
        SocketError::StackDown
    }

    /// Whether a request with `payload_segs` payload descriptors fits now.
    fn tx_room(&self, payload_segs: usize) -> bool {
        self.tx_outstanding < self.max_requests && usize::from(self.qp.tx.ring.num_free()) > payload_segs
    }

    /// Puts a request (and its payload buffer) on the transmit queue, waiting for room.
    fn submit(&mut self, req: Request, payload: Option<TxBuf>) -> Result<(), SocketError> {
        let segs = usize::from(payload.is_some());
        let mut idle = 0u32;
        while !self.tx_room(segs) {
            if self.pump()? {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                self.idle(idle)?;
            }
        }
        let head = self.qp.tx.ring.next_head().ok_or(SocketError::NoBuffers)?;
        let hdr =
            self.hdr_area.slice(usize::from(head) * HDR_SLOT, HDR_SLOT).ok_or(SocketError::NoBuffers)?;
        // SAFETY: the header slot of a free head is ours until the chain is returned.
        let frame = unsafe { std::slice::from_raw_parts_mut(hdr.host(), HDR_SLOT) };
        let n = req.emit(frame).map_err(|_| SocketError::InvalidInput)?;
        let mut chain = [Segment { gpa: hdr.gpa(), len: n as u32, writable: false }; 2];
        let slot = match (payload, req.body) {
            (Some(buf), RequestBody::Send { .. }) => {
                chain[1] = Segment { gpa: buf.gpa(), len: buf.len() as u32, writable: false };
                TxSlot::Send {
                    fd: self.by_sid.get(&req.socket).copied().unwrap_or(Fd(0)),
                    bytes: buf.len(),
                    _buf: buf,
                }
            }
            (Some(buf), _) => {
                chain[1] = Segment { gpa: buf.gpa(), len: buf.len() as u32, writable: false };
                TxSlot::Datagram { _buf: buf }
            }
            (None, _) => TxSlot::Control,
        };
        let used = if matches!(slot, TxSlot::Control) { 1 } else { 2 };
        // A zero-length datagram has no payload descriptor.
        let used = if used == 2 && chain[1].len == 0 { 1 } else { used };
        let got = self.qp.tx.ring.add(&chain[..used]).map_err(|_| SocketError::NoBuffers)?;
        debug_assert_eq!(got, head);
        self.tx_slots[usize::from(head)] = slot;
        self.tx_outstanding += 1;
        self.qp.tx.flush().map_err(|_| self.down())
    }

    /// Lets the device progress: returned chains, received messages, released buffers.
    fn pump(&mut self) -> Result<bool, SocketError> {
        self.pump_with(|_| false)
    }

    /// [`pump`](Self::pump), offering each message to `intercept` first (true: consumed).
    fn pump_with(&mut self, mut intercept: impl FnMut(&RxMessage) -> bool) -> Result<bool, SocketError> {
        if self.dead {
            return Err(SocketError::StackDown);
        }
        let mut progressed = self.drain_releases()?;
        // Transmit chains back.
        loop {
            match self.qp.tx.ring.pop_used() {
                Ok(Some((head, _))) => {
                    progressed = true;
                    self.tx_outstanding = self.tx_outstanding.saturating_sub(1);
                    let slot = std::mem::replace(&mut self.tx_slots[usize::from(head)], TxSlot::Free);
                    if let TxSlot::Send { fd, bytes, .. } = slot {
                        if let Some(s) = self.sockets.get_mut(&fd) {
                            s.in_flight = s.in_flight.saturating_sub(bytes);
                            self.notify(fd);
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::error!("slimtcp-guest: transmit queue: {e}");
                    return Err(self.down());
                }
            }
        }
        // Messages.
        loop {
            let (head, len) = match self.qp.rx.ring.pop_used() {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    log::error!("slimtcp-guest: receive queue: {e}");
                    return Err(self.down());
                }
            };
            progressed = true;
            let slot = self.rx_slot_of_head[usize::from(head)];
            let len = (len as usize).min(self.rx_size);
            let offset = usize::from(slot) * self.rx_size;
            // SAFETY: the slot's buffer lies inside rx_area; the device returned it, so it no
            // longer writes it until we repost it.
            let frame = unsafe { std::slice::from_raw_parts(self.rx_area.host().add(offset), len) };
            let msg = match RxMessage::parse(frame) {
                Ok(m) => m,
                Err(e) => {
                    if len > 0 {
                        log::warn!("slimtcp-guest: dropped an unparsable message ({e})");
                    }
                    self.rx_to_post.push(slot);
                    continue;
                }
            };
            if intercept(&msg) {
                self.rx_to_post.push(slot);
                continue;
            }
            let payload = msg.payload_range();
            // SAFETY: as above; the payload range lies within `len` (checked by parse).
            let ptr = unsafe { self.rx_area.host().add(offset + payload.start) };
            self.on_message(msg, slot, ptr, payload.len());
        }
        self.post_rx()?;
        Ok(progressed)
    }

    /// Reposts buffers the application dropped and returns their credit.
    fn drain_releases(&mut self) -> Result<bool, SocketError> {
        let released = std::mem::take(&mut *self.releases.lock().unwrap_or_else(PoisonError::into_inner));
        if released.is_empty() {
            return Ok(false);
        }
        for r in &released {
            self.rx_to_post.push(r.slot);
            let Some(fd) = r.fd else { continue };
            let Some(s) = self.sockets.get_mut(&fd) else { continue };
            s.credit_pending = s.credit_pending.saturating_add(r.bytes);
            let batch = (s.rcvbuf / 4).clamp(1, u32::MAX as usize) as u32;
            if s.credit_pending >= batch {
                self.send_credit(fd)?;
            }
        }
        Ok(true)
    }

    /// Returns a socket's pending credit (QUIET), if the transmit queue has room now.
    fn send_credit(&mut self, fd: Fd) -> Result<(), SocketError> {
        let Some(s) = self.sockets.get(&fd) else { return Ok(()) };
        if s.credit_pending == 0 || s.proto != Proto::Tcp || !self.tx_room(0) {
            return Ok(());
        }
        let req = Request::new(
            (u64::from(fd.0) << 8) | TAG_QUIET_CREDIT,
            s.sid,
            RequestBody::Credit { bytes: s.credit_pending },
        )
        .quiet();
        if let Some(s) = self.sockets.get_mut(&fd) {
            s.credit_pending = 0;
        }
        self.submit(req, None)
    }

    /// Returns every pending credit (before sleeping: a peer may be waiting for window).
    fn flush_credits(&mut self) -> Result<(), SocketError> {
        let fds: Vec<Fd> =
            self.sockets.iter().filter(|(_, s)| s.credit_pending > 0).map(|(fd, _)| *fd).collect();
        for fd in fds {
            self.send_credit(fd)?;
        }
        Ok(())
    }

    /// One idle step of a wait: spin, then yield, then sleep on the receive interrupt.
    fn idle(&mut self, idle: u32) -> Result<(), SocketError> {
        if idle < 256 {
            std::hint::spin_loop();
            return Ok(());
        }
        if idle == 256 {
            self.flush_credits()?;
        }
        self.idle_checks = self.idle_checks.wrapping_add(1);
        if idle < 4096 {
            if self.idle_checks % 512 == 0 && !self.qp.link.alive() {
                return Err(self.down());
            }
            std::thread::yield_now();
            return Ok(());
        }
        if !self.qp.link.alive() {
            return Err(self.down());
        }
        let pending = self.qp.rx.ring.arm_interrupt() | self.qp.tx.ring.arm_interrupt();
        if !pending {
            match &self.qp.rx.call {
                Some(call) => {
                    let _ = call.wait(Duration::from_millis(1));
                }
                None => std::thread::sleep(Duration::from_micros(50)),
            }
        }
        self.qp.rx.ring.disarm_interrupt();
        self.qp.tx.ring.disarm_interrupt();
        Ok(())
    }

    /// Pumps until `done` holds (true) or `deadline` passes (false).
    fn wait_until(
        &mut self,
        deadline: Option<Instant>,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<bool, SocketError> {
        let mut idle = 0u32;
        loop {
            let progressed = self.pump()?;
            if done(self) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            if progressed {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                self.idle(idle)?;
            }
        }
    }

    /// Waits until `fd` is gone or `ready` holds for it.
    fn wait_for(&mut self, fd: Fd, ready: impl Fn(&SockEntry) -> bool) -> Result<(), SocketError> {
        self.wait_until(None, |s| s.sockets.get(&fd).is_none_or(&ready)).map(|_| ())
    }

    /// Submits a request and waits for its completion: (header socket, result).
    fn call(&mut self, sid: SocketId, body: RequestBody) -> Result<(SocketId, Done), SocketError> {
        let cookie = self.next_cookie(TAG_CALL);
        self.submit(Request::new(cookie, sid, body), None)?;
        self.wait_until(None, |s| s.replies.contains_key(&cookie))?;
        match self.replies.remove(&cookie) {
            Some((sid, Ok(done))) => Ok((sid, done)),
            Some((_, Err(e))) => Err(errno::to_socket_error(e)),
            None => Err(SocketError::StackDown),
        }
    }

    fn notify(&mut self, fd: Fd) {
        let Some(s) = self.sockets.get(&fd) else { return };
        for ep in &s.epolls {
            if let Some(set) = self.epolls.get_mut(ep) {
                set.notify(fd);
            }
        }
    }

    fn rx_buf(&self, ptr: *const u8, len: usize, slot: u16, credit_fd: Option<Fd>) -> RxBuf {
        let release = Release { slot, fd: credit_fd, bytes: len as u32 };
        RxBuf::new(ptr, len, release, self.releases.clone(), self.rx_area.keep_alive())
    }

    /// Applies one receive-queue message; `slot` is reposted unless a payload keeps it.
    fn on_message(&mut self, msg: RxMessage, slot: u16, payload: *const u8, payload_len: usize) {
        match msg {
            RxMessage::Complete { cookie, socket, op, result } => {
                self.rx_to_post.push(slot);
                self.on_complete(cookie, socket, op, result);
            }
            RxMessage::HelloDone { .. } => self.rx_to_post.push(slot),
            RxMessage::Data { socket, .. } => {
                let fd = self.by_sid.get(&socket).copied();
                let buf = self.rx_buf(payload, payload_len, slot, fd);
                match fd.and_then(|fd| self.sockets.get_mut(&fd)) {
                    Some(s) if !s.rd_shut => s.rxq.push_back(buf),
                    _ => drop(buf),
                }
                if let Some(fd) = fd {
                    self.notify(fd);
                }
            }
            RxMessage::Datagram { socket, from, .. } => {
                let fd = self.by_sid.get(&socket).copied();
                let buf = self.rx_buf(payload, payload_len, slot, None);
                match fd.and_then(|fd| self.sockets.get_mut(&fd)) {
                    Some(s) if s.datagrams.len() < DATAGRAM_QUEUE => s.datagrams.push_back((from, buf)),
                    Some(s) => {
                        s.datagrams_dropped += 1;
                        drop(buf);
                    }
                    None => drop(buf),
                }
                if let Some(fd) = fd {
                    self.notify(fd);
                }
            }
            RxMessage::Accepted { listener, socket, remote, local } => {
                self.rx_to_post.push(slot);
                self.on_accepted(listener, socket, remote, local);
            }
            RxMessage::Writable { socket, .. } => {
                self.rx_to_post.push(slot);
                if let Some(fd) = self.by_sid.get(&socket).copied() {
                    self.notify(fd);
                }
            }
            RxMessage::PeerClosed { socket } => {
                self.rx_to_post.push(slot);
                if let Some(fd) = self.by_sid.get(&socket).copied() {
                    if let Some(s) = self.sockets.get_mut(&fd) {
                        s.eof = true;
                    }
                    self.notify(fd);
                }
            }
            RxMessage::Reset { socket, errno } => {
                self.rx_to_post.push(slot);
                if let Some(fd) = self.by_sid.get(&socket).copied() {
                    self.fail(fd, errno::to_socket_error(errno));
                }
            }
            RxMessage::Error { socket, errno } => {
                self.rx_to_post.push(slot);
                if let Some(fd) = self.by_sid.get(&socket).copied() {
                    if let Some(s) = self.sockets.get_mut(&fd) {
                        s.pending_error = Some(errno::to_socket_error(errno));
                    }
                    self.notify(fd);
                }
            }
        }
    }

    /// The connection of `fd` failed.
    fn fail(&mut self, fd: Fd, e: SocketError) {
        if let Some(s) = self.sockets.get_mut(&fd) {
            s.failure = Some(e);
            s.pending_error = Some(e);
            if s.phase == Phase::Connecting {
                s.phase = Phase::Failed;
            }
        }
        self.notify(fd);
    }

    fn on_complete(&mut self, cookie: u64, socket: SocketId, op: u8, result: Result<Done, Errno>) {
        match cookie & 0xff {
            TAG_CALL => {
                self.replies.insert(cookie, (socket, result));
            }
            TAG_CONNECT => {
                let Some(fd) = self.by_sid.get(&socket).copied() else { return };
                match result {
                    Ok(done) => {
                        if let Some(s) = self.sockets.get_mut(&fd) {
                            if s.phase == Phase::Connecting {
                                s.phase = Phase::Connected;
                                s.local = Some(done.addr);
                                s.bound = true;
                            }
                        }
                        self.notify(fd);
                    }
                    Err(e) => self.fail(fd, errno::to_socket_error(e)),
                }
            }
            TAG_CLOSE => {
                self.closing.remove(&socket);
            }
            TAG_QUIET_SEND => {
                let fd = Fd((cookie >> 8) as u32);
                if let Err(e) = result {
                    log::debug!("slimtcp-guest: send on {fd} failed: {e}");
                    if self.sockets.get(&fd).is_some_and(|s| s.sid == socket) {
                        self.fail(fd, errno::to_socket_error(e));
                    }
                }
            }
            TAG_QUIET_CREDIT => {
                if let Err(e) = result {
                    log::warn!("slimtcp-guest: credit on socket {} refused: {e}", socket.0);
                }
            }
            _ => log::warn!("slimtcp-guest: completion of op {op:#x} with unknown cookie {cookie:#x}"),
        }
    }

    fn on_accepted(
        &mut self,
        listener: SocketId,
        socket: SocketId,
        remote: SocketAddrV4,
        local: SocketAddrV4,
    ) {
        let lfd = self.by_sid.get(&listener).copied();
        let listening = lfd.and_then(|fd| self.sockets.get(&fd)).is_some_and(|s| s.phase == Phase::Listening);
        let fd = match (listening, self.new_fd()) {
            (true, Ok(fd)) => fd,
            _ => {
                // Nobody will accept it: close it at once (reset).
                self.by_sid.remove(&socket);
                self.closing.insert(socket, ());
                let cookie = self.next_cookie(TAG_CLOSE);
                if let Err(e) =
                    self.submit(Request::new(cookie, socket, RequestBody::Close { abort: true }), None)
                {
                    log::debug!("slimtcp-guest: closing an unwanted connection: {e}");
                }
                return;
            }
        };
        let (sndbuf, rcvbuf) = match lfd.and_then(|l| self.sockets.get(&l)) {
            Some(l) => (l.sndbuf, l.rcvbuf),
            None => (self.default_sndbuf(), self.default_rcvbuf()),
        };
        let mut conn = SockEntry::new(socket, Proto::Tcp, sndbuf, rcvbuf);
        conn.phase = Phase::Connected;
        conn.bound = true;
        conn.local = Some(local);
        conn.peer = Some(remote);
        self.sockets.insert(fd, conn);
        self.by_sid.insert(socket, fd);
        if let Some(lfd) = lfd {
            if let Some(l) = self.sockets.get_mut(&lfd) {
                l.accept_q.push_back((fd, remote));
            }
            self.notify(lfd);
        }
    }

    /// The frame a request occupies (header + body), for tests and tools.
    pub fn request_wire_len(op: Op) -> usize {
        VIRTIO_NET_HDR_LEN + slimtcp_abi::layout::request_header::SIZE + op.body_len()
    }
}

impl Drop for GuestSockets {
    fn drop(&mut self) {
        if self.dead {
            return;
        }
        // Close what is left so connections end cleanly instead of lingering in the backend.
        let fds: Vec<Fd> = self.sockets.keys().copied().collect();
        for fd in fds {
            if let Some(s) = self.sockets.remove(&fd) {
                let abort = s.proto == Proto::Tcp && !s.rxq.is_empty();
                let cookie = self.next_cookie(TAG_CLOSE);
                if self.tx_room(0) {
                    let _ = self.submit(Request::new(cookie, s.sid, RequestBody::Close { abort }), None);
                }
            }
        }
    }
}
