//! [`GuestLink`]: the guest library's [`Link`]: the shared application side's requests become
//! protocol requests on the transmit queue; completions and events on the receive queue become
//! its events.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use slimtcp_abi::{
    Done, Errno, HelloInfo, Request as Wire, RequestBody, ShutdownHow, SocketId, SocketKind, Version,
};
use slimtcp_api::app::{Event, Limits, Link, Reply, Request, Submitted};
use slimtcp_api::id_map::IdMap;
use slimtcp_api::{Fd, Proto, SockOpt, SockOptName, SocketError};

use super::buffers::{Release, ReleaseQueue, RxBuf, TxBuf, TxPool, LARGE_TX};
use super::held_age::HeldAges;
use super::{HDR_SLOT, TAG_CALL, TAG_CLOSE, TAG_CONNECT, TAG_HELLO, TAG_QUIET_SEND};
use crate::mem::{BumpAllocator, DmaRegion};
use crate::transport::QueuePair;
use crate::{GuestConfig, GuestError};

/// Receive buffers a queue pair posts, at most (a smaller ring: as many as it has entries). The
/// device fills buffers in the order they were posted and the library reposts each as it is
/// released, so a buffer comes round again after all the others: with the ring's 1,024 of
/// 8 KiB, after 8 MiB of messages, out of every cache by then, and the device's copy into it
/// and the application's read of it both wait for memory. 256 (2 MiB) come round while still
/// cached: fair bench, guest receives, alternating runs, in one of the machine's two states
/// (docs/benchmarks.md, "The machine's placements"): 1 connection MSS 1460 +6-7% (28.3 -> 30.1
/// Gb/s), MSS 512 +7%, MSS 64 +1-3%, 4096 connections +6% (12.4 -> 13.2 Gb/s); in the other
/// (30.7 Gb/s either way) no difference. At 4096 connections no payload had to be copied out of
/// its buffer (249 with 1,024), and a pair needs 2 MiB for them instead of 8.
const RX_BUFFERS_MAX: usize = 256;

/// What the device holds for a transmit chain.
#[derive(Debug)]
pub(super) enum TxSlot {
    Free,
    Control,
    /// A stream send; `by_acked`: a `COPY` send, whose bytes the backend acknowledges in
    /// `acked` messages (its chain's return says nothing about them).
    Send {
        fd: Fd,
        bytes: usize,
        by_acked: bool,
        /// Its [`HeldAges`] stamp (held chains only).
        stamp: u32,
        _buf: TxBuf,
    },
    Datagram {
        _buf: TxBuf,
    },
}

/// What the link keeps per socket.
#[derive(Debug, Clone, Copy)]
pub(super) struct GuestSock {
    pub sid: SocketId,
    pub proto: Proto,
    /// The receive window (SO_RCVBUF): credit is returned in batches of half of it.
    pub rcvbuf: usize,
    /// Consumed received bytes not yet credited back.
    pub credit_pending: u32,
    /// In `GuestLink::credit_owed`: its credit is due and waits for room on the ring.
    pub credit_owed: bool,
    /// Send chains (not `COPY`) the device holds (until the peer acknowledges their bytes).
    pub chains_held: usize,
    /// The payload bytes of those chains.
    pub bytes_held: usize,
}

impl GuestSock {
    fn new(sid: SocketId, proto: Proto, rcvbuf: usize) -> GuestSock {
        GuestSock { sid, proto, rcvbuf, credit_pending: 0, credit_owed: false, chains_held: 0, bytes_held: 0 }
    }
}

/// What a blocking call's completion means.
#[derive(Debug, Clone, Copy)]
pub(super) enum CallKind {
    Open { fd: Fd, proto: Proto },
    Bind,
    SetOption { fd: Fd, opt: SockOpt },
    GetOption { name: SockOptName },
    Other,
}

/// The client over one queue pair (see the module documentation).
#[derive(Debug)]
pub struct GuestLink {
    pub(super) qp: QueuePair,
    pub(super) info: HelloInfo,
    pub(super) version: Version,
    /// Receive buffers ([`RX_BUFFERS_MAX`] at most): `slot i` is at `rx_area + i * rx_size`.
    pub(super) rx_area: DmaRegion,
    pub(super) rx_size: usize,
    /// The slot each outstanding receive head carries.
    pub(super) rx_slot_of_head: Vec<u16>,
    /// Slots to (re)post.
    pub(super) rx_to_post: Vec<u16>,
    /// Slots holding payloads the application has not let go of.
    pub(super) rx_held: usize,
    /// Most slots payloads may hold (three quarters of the slots); beyond, payloads are copied
    /// out of their slot, which is reposted at once.
    pub(super) rx_hold_max: usize,
    /// Payloads copied out of their slot so far.
    pub(super) rx_copied_out: u64,
    pub(super) releases: Arc<ReleaseQueue>,
    /// Releases taken from `releases` (the vector is reused from step to step).
    pub(super) released: Vec<Release>,
    /// Transmit header slots, indexed by chain head.
    pub(super) hdr_area: DmaRegion,
    pub(super) tx_slots: Vec<TxSlot>,
    pub(super) tx_outstanding: usize,
    /// Send chains (not `COPY`) the device holds, all sockets together.
    pub(super) sends_held: usize,
    /// How long it has held them.
    pub(super) held_ages: HeldAges,
    /// The clock as of the last send or pump that read it (those made while held chains are
    /// at half the pressure mark or more): what the held chains' ages are judged by, so that
    /// the checks made for every send and every writability test read no clock (their 50 ms
    /// epochs need no fresher one; a send that waits pumps first).
    pub(super) clock: Instant,
    pub(super) max_requests: usize,
    pub(super) pool: Arc<TxPool>,
    pub(super) socks: IdMap<Fd, GuestSock>,
    /// Sockets whose credit was due while the transmit ring was full: paid as chains come back
    /// (an application that only polls never reaches the idle wait's flush).
    pub(super) credit_owed: Vec<Fd>,
    pub(super) by_sid: IdMap<SocketId, Fd>,
    /// Ids whose close is not yet complete: their events are dropped.
    pub(super) closing: IdMap<SocketId, ()>,
    pub(super) seq: u64,
    /// Blocking calls in flight, by cookie.
    pub(super) calls: IdMap<u64, CallKind>,
    /// The answer to hello.
    pub(super) hello: Option<(Version, Result<HelloInfo, Errno>)>,
    pub(super) dead: bool,
    pub(super) idle_checks: u32,
    /// Pumps in a row that found nothing (a polling application never idles through us).
    pub(super) empty_pumps: u32,
}

impl GuestLink {
    /// The link over a queue pair: posts the receive buffers and negotiates the protocol
    /// version.
    pub fn new(mut qp: QueuePair, cfg: &GuestConfig) -> Result<GuestLink, GuestError> {
        let q = usize::from(qp.rx.ring.size());
        let rx_slots = q.min(RX_BUFFERS_MAX);
        let txq = usize::from(qp.tx.ring.size());
        let mut alloc = BumpAllocator::new(qp.memory.clone());
        let rx_area = alloc
            .alloc(rx_slots * cfg.rx_buffer_size, 4096)
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
        let releases = ReleaseQueue::new(rx_area.keep_alive());
        let now = Instant::now();
        let mut g = GuestLink {
            info: HelloInfo {
                addr: Ipv4Addr::UNSPECIFIED,
                prefix_len: 0,
                mac: [0; 6],
                gateway: Ipv4Addr::UNSPECIFIED,
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
            rx_to_post: (0..rx_slots as u16).collect(),
            rx_held: 0,
            rx_hold_max: rx_slots - rx_slots / 4,
            rx_copied_out: 0,
            releases,
            released: Vec::new(),
            hdr_area,
            tx_slots: (0..txq).map(|_| TxSlot::Free).collect(),
            tx_outstanding: 0,
            sends_held: 0,
            held_ages: HeldAges::new(now),
            clock: now,
            max_requests: txq,
            pool: TxPool::new(pool_area),
            socks: IdMap::default(),
            credit_owed: Vec::new(),
            by_sid: IdMap::default(),
            closing: IdMap::default(),
            seq: 0,
            calls: IdMap::default(),
            hello: None,
            dead: false,
            idle_checks: 0,
            empty_pumps: 0,
            qp,
        };
        g.post_rx().map_err(|_| GuestError::Disconnected)?;
        g.say_hello(cfg.hello_timeout)?;
        Ok(g)
    }

    fn say_hello(&mut self, timeout: Duration) -> Result<(), GuestError> {
        let req = Wire::new(TAG_HELLO, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT });
        if !self.tx_room(0) {
            return Err(GuestError::Disconnected);
        }
        self.put(req, None, None).map_err(|_| GuestError::Disconnected)?;
        let deadline = Instant::now() + timeout;
        let mut idle = 0u32;
        let mut events = Vec::new();
        loop {
            let progressed = self.pump_rings(&mut events).map_err(|_| GuestError::Disconnected)?;
            events.clear();
            if let Some((version, result)) = self.hello.take() {
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
                self.idle_step(idle).map_err(|_| GuestError::Disconnected)?;
            }
        }
    }

    pub(super) fn next_cookie(&mut self, tag: u64) -> u64 {
        self.seq += 1;
        (self.seq << 8) | tag
    }

    fn default_rcvbuf(&self) -> usize {
        self.info.rx_buffer as usize
    }

    /// Puts a blocking call on the queue; its completion comes back as a reply.
    fn call(&mut self, sid: SocketId, body: RequestBody, kind: CallKind) -> Result<Submitted, SocketError> {
        let cookie = self.next_cookie(TAG_CALL);
        self.put(Wire::new(cookie, sid, body), None, None)?;
        self.calls.insert(cookie, kind);
        Ok(Submitted::Pending(cookie))
    }

    /// Puts a request whose completion nobody waits for.
    fn post(&mut self, req: Wire, payload: Option<TxBuf>, fd: Option<Fd>) -> Result<Submitted, SocketError> {
        self.put(req, payload, fd)?;
        Ok(Submitted::Answered(Ok(Reply::Done)))
    }

    /// Closes a connection nobody will use (reset).
    pub(super) fn refuse(&mut self, sid: SocketId) -> Result<Submitted, SocketError> {
        self.by_sid.remove(&sid);
        self.closing.insert(sid, ());
        let cookie = self.next_cookie(TAG_CLOSE);
        self.post(Wire::new(cookie, sid, RequestBody::Close { abort: true }), None, None)
    }

    /// Translates a request (the queue has room for it).
    fn submit(&mut self, req: Request<TxBuf>) -> Result<Submitted, SocketError> {
        let sid_of = |g: &Self, fd: Fd| g.socks.get(&fd).map(|s| s.sid).ok_or(SocketError::BadHandle);
        match req {
            Request::Open { fd, proto } => {
                let kind = match proto {
                    Proto::Tcp => SocketKind::Tcp,
                    Proto::Udp => SocketKind::Udp,
                };
                self.call(SocketId::NONE, RequestBody::Socket { kind }, CallKind::Open { fd, proto })
            }
            Request::Bind { fd, addr, .. } => {
                self.call(sid_of(self, fd)?, RequestBody::Bind { local: addr }, CallKind::Bind)
            }
            Request::Listen { fd, backlog } => {
                let backlog = backlog as u32;
                self.call(sid_of(self, fd)?, RequestBody::Listen { backlog }, CallKind::Other)
            }
            Request::Accept { .. } => Err(SocketError::NotSupported),
            Request::Adopt { conn, fd: None, .. } => self.refuse(SocketId(conn as u32)),
            Request::Adopt { conn, fd: Some(fd), listener } => {
                Ok(self.adopt(SocketId(conn as u32), fd, listener))
            }
            Request::Connect { fd, remote } => {
                let cookie = self.next_cookie(TAG_CONNECT);
                self.post(Wire::new(cookie, sid_of(self, fd)?, RequestBody::Connect { remote }), None, None)
            }
            Request::UdpConnect { fd, remote } => {
                self.call(sid_of(self, fd)?, RequestBody::Connect { remote }, CallKind::Other)
            }
            Request::Send { fd, buf } => {
                let cookie = (u64::from(fd.0) << 8) | TAG_QUIET_SEND;
                let body = RequestBody::Send { len: buf.len() as u32 };
                let req = Wire::new(cookie, sid_of(self, fd)?, body).quiet();
                let req = if self.send_copied(fd) { req.copy_allowed() } else { req };
                self.post(req, Some(buf), Some(fd))
            }
            Request::SendTo { fd, dst, buf } => {
                let cookie = (u64::from(fd.0) << 8) | TAG_QUIET_SEND;
                let body = RequestBody::SendTo { remote: dst, len: buf.len() as u32 };
                self.post(Wire::new(cookie, sid_of(self, fd)?, body).quiet(), Some(buf), None)
            }
            Request::Shutdown { fd, read, write } => {
                let how = match (read, write) {
                    (true, true) => ShutdownHow::Both,
                    (true, false) => ShutdownHow::Read,
                    _ => ShutdownHow::Write,
                };
                self.call(sid_of(self, fd)?, RequestBody::Shutdown { how }, CallKind::Other)
            }
            Request::Close { fd, abort } => self.close(sid_of(self, fd)?, fd, abort),
            Request::SetOption { fd, opt } => {
                let (option, value) = wire_option(opt).ok_or(SocketError::InvalidInput)?;
                self.backend_knows(option)?;
                let body = RequestBody::SetSockOpt { option, value };
                self.call(sid_of(self, fd)?, body, CallKind::SetOption { fd, opt })
            }
            Request::GetOption { fd, name } => {
                let option = wire_option_name(name).ok_or(SocketError::InvalidInput)?;
                self.backend_knows(option)?;
                self.call(sid_of(self, fd)?, RequestBody::GetSockOpt { option }, CallKind::GetOption { name })
            }
        }
    }

    /// Gives an accepted connection `sid` the descriptor `fd`, with its listener's receive
    /// buffer size.
    fn adopt(&mut self, sid: SocketId, fd: Fd, listener: Fd) -> Submitted {
        let rcvbuf = self.socks.get(&listener).map_or(self.default_rcvbuf(), |l| l.rcvbuf);
        self.socks.insert(fd, GuestSock::new(sid, Proto::Tcp, rcvbuf));
        self.by_sid.insert(sid, fd);
        Submitted::Answered(Ok(Reply::Done))
    }

    /// Forgets `fd` (socket `sid`) and asks the backend to close it; its last events are
    /// dropped while it closes.
    fn close(&mut self, sid: SocketId, fd: Fd, abort: bool) -> Result<Submitted, SocketError> {
        self.socks.remove(&fd);
        self.by_sid.remove(&sid);
        self.closing.insert(sid, ());
        let cookie = self.next_cookie(TAG_CLOSE);
        self.post(Wire::new(cookie, sid, RequestBody::Close { abort }), None, None)
    }

    /// The liveness options (keepalive, user timeout) came with protocol 1.1: a 1.0 backend
    /// does not know them.
    fn backend_knows(&self, option: slimtcp_abi::SockOpt) -> Result<(), SocketError> {
        if option.is_liveness() && self.version.minor < 1 {
            Err(SocketError::NotSupported)
        } else {
            Ok(())
        }
    }

    /// A blocking call's completion as the application side's reply.
    pub(super) fn on_call_done(
        &mut self,
        kind: CallKind,
        sid: SocketId,
        done: Done,
    ) -> Result<Reply, SocketError> {
        let sat = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(match kind {
            CallKind::Open { fd, proto } => {
                if sid.is_none() {
                    return Err(SocketError::InvalidInput);
                }
                let rcvbuf = self.default_rcvbuf();
                self.socks.insert(fd, GuestSock::new(sid, proto, rcvbuf));
                self.by_sid.insert(sid, fd);
                Reply::Done
            }
            CallKind::Bind => Reply::Addr(done.addr),
            CallKind::SetOption { fd, opt: SockOpt::RecvBuffer(n) } => {
                if let Some(s) = self.socks.get_mut(&fd) {
                    s.rcvbuf = n;
                }
                Reply::Done
            }
            CallKind::GetOption { name } => {
                let v = done.value;
                Reply::Option(match name {
                    SockOptName::RecvBuffer => SockOpt::RecvBuffer(sat(v)),
                    SockOptName::SendBuffer => SockOpt::SendBuffer(sat(v)),
                    SockOptName::Mss => SockOpt::Mss(u16::try_from(v).unwrap_or(u16::MAX)),
                    SockOptName::WindowScale => SockOpt::WindowScale(u8::try_from(v).ok()),
                    SockOptName::NoDelay => SockOpt::NoDelay(v != 0),
                    SockOptName::Burst => SockOpt::Burst(sat(v)),
                    SockOptName::KeepAlive => SockOpt::KeepAlive(v != 0),
                    SockOptName::KeepIdle => SockOpt::KeepIdle(u32::try_from(v).unwrap_or(u32::MAX)),
                    SockOptName::KeepInterval => SockOpt::KeepInterval(u32::try_from(v).unwrap_or(u32::MAX)),
                    SockOptName::KeepCount => SockOpt::KeepCount(u32::try_from(v).unwrap_or(u32::MAX)),
                    SockOptName::UserTimeout => SockOpt::UserTimeout(u32::try_from(v).unwrap_or(u32::MAX)),
                    SockOptName::NonBlocking | SockOptName::Error => return Err(SocketError::InvalidInput),
                })
            }
            CallKind::SetOption { .. } | CallKind::Other => Reply::Done,
        })
    }
}

impl Link for GuestLink {
    type TxBuf = TxBuf;
    type RxBuf = RxBuf;

    fn limits(&self) -> Limits {
        Limits {
            max_sockets: usize::MAX,
            max_datagram: usize::from(self.info.max_datagram),
            default_sndbuf: self.info.max_send_in_flight as usize,
            max_sndbuf: self.info.max_send_in_flight as usize,
            max_tx_buffers: usize::MAX,
            max_tx_len: LARGE_TX,
            local_ip: None,
        }
    }

    fn try_submit(&mut self, req: Request<TxBuf>) -> Result<Submitted, Request<TxBuf>> {
        if self.dead {
            return Ok(Submitted::Answered(Err(SocketError::StackDown)));
        }
        let payload = usize::from(matches!(req, Request::Send { .. } | Request::SendTo { .. }));
        let local = matches!(req, Request::Accept { .. } | Request::Adopt { fd: Some(_), .. });
        let over_share = matches!(req, Request::Send { fd, .. } if !self.can_hold_send(fd));
        if over_share || (!local && !self.tx_room(payload)) {
            return Err(req);
        }
        Ok(self.submit(req).unwrap_or_else(|e| Submitted::Answered(Err(e))))
    }

    fn has_send_room(&self, fd: Fd) -> bool {
        self.dead || (self.tx_room(1) && self.can_hold_send(fd))
    }

    fn pump(&mut self, events: &mut Vec<Event<RxBuf>>) -> Result<bool, SocketError> {
        self.pump_rings(events)
    }

    fn idle(&mut self, idle_steps: u32) -> Result<(), SocketError> {
        self.idle_step(idle_steps)
    }

    fn alloc(&mut self, len: usize) -> Option<TxBuf> {
        self.pool.alloc(len)
    }

    fn recycle(&mut self, buf: TxBuf) {
        drop(buf);
    }

    fn tx_outstanding(&self) -> usize {
        self.pool.outstanding()
    }
}

/// The protocol's option and value for `opt`; `None` for what the library answers itself
/// (non-blocking mode, the pending error).
fn wire_option(opt: SockOpt) -> Option<(slimtcp_abi::SockOpt, u64)> {
    use slimtcp_abi::SockOpt as W;
    Some(match opt {
        SockOpt::NonBlocking(_) | SockOpt::Error(_) => return None,
        SockOpt::RecvBuffer(n) => (W::RcvBuf, n as u64),
        SockOpt::SendBuffer(n) => (W::SndBuf, n as u64),
        SockOpt::Mss(m) => (W::MaxSeg, u64::from(m)),
        SockOpt::WindowScale(Some(w)) => (W::WindowScale, u64::from(w)),
        // The protocol has no "offer no window scale"; shift 0 is the closest.
        SockOpt::WindowScale(None) => (W::WindowScale, 0),
        SockOpt::NoDelay(on) => (W::NoDelay, u64::from(on)),
        SockOpt::Burst(n) => (W::Burst, n as u64),
        SockOpt::KeepAlive(on) => (W::KeepAlive, u64::from(on)),
        SockOpt::KeepIdle(v) => (W::KeepIdle, u64::from(v)),
        SockOpt::KeepInterval(v) => (W::KeepInterval, u64::from(v)),
        SockOpt::KeepCount(v) => (W::KeepCount, u64::from(v)),
        SockOpt::UserTimeout(v) => (W::UserTimeout, u64::from(v)),
    })
}

/// The protocol's option for `name`; `None` for what the library answers itself.
fn wire_option_name(name: SockOptName) -> Option<slimtcp_abi::SockOpt> {
    use slimtcp_abi::SockOpt as W;
    Some(match name {
        SockOptName::NonBlocking | SockOptName::Error => return None,
        SockOptName::RecvBuffer => W::RcvBuf,
        SockOptName::SendBuffer => W::SndBuf,
        SockOptName::Mss => W::MaxSeg,
        SockOptName::WindowScale => W::WindowScale,
        SockOptName::NoDelay => W::NoDelay,
        SockOptName::Burst => W::Burst,
        SockOptName::KeepAlive => W::KeepAlive,
        SockOptName::KeepIdle => W::KeepIdle,
        SockOptName::KeepInterval => W::KeepInterval,
        SockOptName::KeepCount => W::KeepCount,
        SockOptName::UserTimeout => W::UserTimeout,
    })
}
