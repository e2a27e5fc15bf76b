//! [`HostLink`]: the host runtime's [`Link`]: the application side's requests go to the worker's
//! socket server over the request ring, its events come back over the event ring. The link only
//! maps the application's `Fd`s to the server's ids and the server's replies to tickets; every
//! socket rule is the server's.

use std::collections::VecDeque;
use std::sync::Arc;

use slimtcp_api::app::{Event, Limits, Link, Reply, Request, Submitted};
use slimtcp_api::{Fd, SocketError};

use super::buffers::{ReleaseQueue, RxBuf, TxBuf, TxPool, LARGE_TX};
use super::driver::{self, AppEnd, Driver, IdlePolicy};
use super::messages::{Event as WorkerEvent, Reply as WorkerReply, Request as WorkerRequest};
use super::spare_vecs::SpareVecs;
use crate::nic::PacketBuf;
use crate::server::IdMap;
use slimtcp_api::spares::LocalSpares;

/// Zero-copy transmit buffers the application may hold or have in flight at once.
const MAX_TX_BUFFERS: usize = 1 << 20;

/// A request waiting for the worker's reply (the worker answers in order).
#[derive(Debug)]
struct Pending {
    ticket: u64,
    kind: PendingKind,
}

#[derive(Debug, Clone, Copy)]
enum PendingKind {
    /// Socket `fd` is being opened.
    Open { fd: Fd },
    /// Any other call: the reply is the answer (a TCP connect's address says only that the
    /// handshake started).
    Call,
}

/// The host runtime's link (see the module documentation).
#[derive(Debug)]
pub struct HostLink {
    end: AppEnd,
    releases: Arc<ReleaseQueue>,
    /// Where a data event's vector goes back to the worker once emptied.
    spare_vecs: Arc<SpareVecs<PacketBuf>>,
    /// The application's emptied vectors of data events ([`Link::reuse_vec`]), filled again by
    /// the next ones: a data event allocates nothing on the application's thread.
    rx_vecs: LocalSpares<RxBuf>,
    pool: TxPool,
    limits: Limits,
    /// The server's id of each socket.
    ids: IdMap<Fd, u32>,
    /// The application's descriptor of each server id.
    fds: IdMap<u32, Fd>,
    pending: VecDeque<Pending>,
    next_ticket: u64,
    /// How a wait with nothing to do spends its time.
    idle: IdlePolicy,
}

impl HostLink {
    /// The link over the application's ends of the rings, with the server's `limits`.
    pub(super) fn new(
        end: AppEnd,
        releases: Arc<ReleaseQueue>,
        spare_vecs: Arc<SpareVecs<PacketBuf>>,
        limits: Limits,
        idle: IdlePolicy,
    ) -> Self {
        // Inline, the application's thread runs the worker too; otherwise another thread does.
        let pool = match end.driver {
            Driver::Inline(_) => TxPool::default(),
            Driver::Thread => TxPool::filled_elsewhere(),
        };
        HostLink {
            end,
            releases,
            spare_vecs,
            rx_vecs: LocalSpares::default(),
            pool,
            limits,
            ids: IdMap::default(),
            fds: IdMap::default(),
            pending: VecDeque::new(),
            next_ticket: 0,
            idle,
        }
    }

    fn id(&self, fd: Fd) -> Result<u32, SocketError> {
        self.ids.get(&fd).copied().ok_or(SocketError::BadHandle)
    }

    /// Puts a request on the ring; `Err` gives it back when the ring is full.
    fn push(&mut self, req: WorkerRequest) -> Result<(), WorkerRequest> {
        self.end.requests.push(req).map_err(|rtrb::PushError::Full(req)| req)
    }

    /// Translates a request for the worker; `Err` gives it back when the ring is full.
    fn submit(&mut self, req: Request<TxBuf>) -> Result<Submitted, Request<TxBuf>> {
        let answered = |r: Result<Reply, SocketError>| Ok(Submitted::Answered(r));
        if let Err(e) = self.end.check_alive() {
            return answered(Err(e));
        }
        if self.end.requests.slots() == 0 {
            return Err(req);
        }
        let (kind, wire) = match self.translate(req) {
            Ok(Some(x)) => x,
            Ok(None) => return answered(Ok(Reply::Done)),
            Err(e) => return answered(Err(e)),
        };
        if self.push(wire).is_err() {
            return answered(Err(SocketError::NoBuffers));
        }
        let Some(kind) = kind else { return answered(Ok(Reply::Done)) };
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        self.pending.push_back(Pending { ticket, kind });
        Ok(Submitted::Pending(ticket))
    }

    /// The worker request for `req` and what its reply means (`None`: it has none); `Ok(None)`
    /// for requests done here.
    #[allow(clippy::type_complexity)]
    fn translate(
        &mut self,
        req: Request<TxBuf>,
    ) -> Result<Option<(Option<PendingKind>, WorkerRequest)>, SocketError> {
        let call = Some(PendingKind::Call);
        Ok(Some(match req {
            Request::Open { fd, proto } => (Some(PendingKind::Open { fd }), WorkerRequest::Open { proto }),
            Request::Bind { fd, addr, .. } => (call, WorkerRequest::Bind { id: self.id(fd)?, addr }),
            Request::Listen { fd, backlog } => (call, WorkerRequest::Listen { id: self.id(fd)?, backlog }),
            Request::Accept { .. } => return Err(SocketError::NotSupported),
            Request::Adopt { conn, fd: Some(fd), .. } => {
                let id = u32::try_from(conn).map_err(|_| SocketError::BadHandle)?;
                self.ids.insert(fd, id);
                self.fds.insert(id, fd);
                return Ok(None);
            }
            Request::Adopt { conn, fd: None, .. } => {
                let id = u32::try_from(conn).map_err(|_| SocketError::BadHandle)?;
                (None, WorkerRequest::Close { id, abort: true })
            }
            Request::Connect { fd, remote } => (call, WorkerRequest::Connect { id: self.id(fd)?, remote }),
            Request::UdpConnect { fd, remote } => (call, WorkerRequest::Connect { id: self.id(fd)?, remote }),
            Request::Send { fd, buf } => (None, WorkerRequest::Send { id: self.id(fd)?, buf }),
            Request::SendTo { fd, dst, buf } => {
                (None, WorkerRequest::SendTo { id: self.id(fd)?, dst: Some(dst), buf })
            }
            Request::Shutdown { write: false, .. } => return Ok(None),
            Request::Shutdown { fd, .. } => (None, WorkerRequest::Shutdown { id: self.id(fd)? }),
            Request::Close { fd, abort } => {
                let id = self.id(fd)?;
                self.ids.remove(&fd);
                self.fds.remove(&id);
                (None, WorkerRequest::Close { id, abort })
            }
            Request::SetOption { fd, opt } => (call, WorkerRequest::SetOption { id: self.id(fd)?, opt }),
            Request::GetOption { fd, name } => (call, WorkerRequest::GetOption { id: self.id(fd)?, name }),
        }))
    }

    /// The worker's reply to the oldest pending request, as the application side's reply.
    fn on_reply(&mut self, result: Result<WorkerReply, SocketError>) -> Option<Event<RxBuf>> {
        let Some(p) = self.pending.pop_front() else {
            log::error!("a reply with no request pending");
            return None;
        };
        let result = result.map(|reply| match (p.kind, reply) {
            (PendingKind::Open { fd }, WorkerReply::Opened(id)) => {
                self.ids.insert(fd, id);
                self.fds.insert(id, fd);
                Reply::Done
            }
            (_, WorkerReply::Addr(local)) => Reply::Addr(local),
            (_, WorkerReply::Option(opt)) => Reply::Option(opt),
            (_, WorkerReply::Done | WorkerReply::Opened(_)) => Reply::Done,
        });
        Some(Event::Reply { ticket: p.ticket, result })
    }

    /// A step's payload buffers of socket `id` as one application-side event, in order.
    /// Dropped at once for a socket the application closed: their bytes are released as usual.
    fn translate_data(
        &mut self,
        id: u32,
        first: PacketBuf,
        mut more: Vec<PacketBuf>,
        events: &mut Vec<Event<RxBuf>>,
    ) {
        let rx = |buf| RxBuf::new(buf, id, self.releases.clone());
        let buf = rx(first);
        let mut rx_more = Vec::new();
        if !more.is_empty() {
            rx_more = self.rx_vecs.take();
            rx_more.extend(more.drain(..).map(rx));
        }
        self.spare_vecs.give(more);
        match self.fds.get(&id) {
            Some(&fd) => events.push(Event::Data { fd, buf, more: rx_more }),
            None => drop((buf, rx_more)),
        }
    }

    /// One worker event as the application side's events (none for a socket it closed).
    fn translate_event(&mut self, event: WorkerEvent, events: &mut Vec<Event<RxBuf>>) {
        let fd_of = |link: &Self, id: u32| link.fds.get(&id).copied();
        let translated = match event {
            WorkerEvent::Data { id, first, more } => {
                self.translate_data(id, first, more, events);
                return;
            }
            WorkerEvent::Reply(result) => self.on_reply(result),
            WorkerEvent::Connected { id, local } => {
                fd_of(self, id).map(|fd| Event::Connected { fd, local: Some(local) })
            }
            WorkerEvent::Datagram { id, from, buf } => {
                // Dropped at once for a closed socket: its bytes are released as usual.
                let buf = RxBuf::new(buf, id, self.releases.clone());
                fd_of(self, id).map(|fd| Event::Datagram { fd, from, buf })
            }
            WorkerEvent::Eof { id } => fd_of(self, id).map(|fd| Event::Eof { fd }),
            WorkerEvent::Failed { id, error } => fd_of(self, id).map(|fd| Event::Failed { fd, error }),
            WorkerEvent::Accepted { listener, id, local, remote } => match fd_of(self, listener) {
                Some(listener) => Some(Event::Accepted { listener, conn: u64::from(id), local, remote }),
                None => {
                    // Nobody listens any more: reset it.
                    if self.push(WorkerRequest::Close { id, abort: true }).is_err() {
                        log::debug!("no room to close an unwanted connection");
                    }
                    None
                }
            },
            WorkerEvent::SendDone { id, bytes } => fd_of(self, id).map(|fd| Event::SendDone { fd, bytes }),
            WorkerEvent::Writable { id } => fd_of(self, id).map(|fd| Event::Writable { fd }),
        };
        events.extend(translated);
    }
}

impl Link for HostLink {
    type TxBuf = TxBuf;
    type RxBuf = RxBuf;

    fn limits(&self) -> Limits {
        self.limits
    }

    fn try_submit(&mut self, req: Request<TxBuf>) -> Result<Submitted, Request<TxBuf>> {
        self.submit(req)
    }

    fn has_send_room(&self, _fd: Fd) -> bool {
        self.end.requests.slots() > 0
    }

    fn pump(&mut self, events: &mut Vec<Event<RxBuf>>) -> Result<bool, SocketError> {
        let drove = self.end.drive()?;
        let mut got = false;
        while let Ok(event) = self.end.events.pop() {
            got = true;
            let accepted = matches!(event, WorkerEvent::Accepted { .. });
            self.translate_event(event, events);
            if accepted {
                // The application side adopts it before its first data is translated.
                break;
            }
        }
        Ok(drove || got)
    }

    fn idle(&mut self, idle_steps: u32) -> Result<(), SocketError> {
        match self.idle {
            IdlePolicy::Backoff => driver::back_off(idle_steps),
            IdlePolicy::BusyPoll => std::hint::spin_loop(),
        }
        Ok(())
    }

    fn alloc(&mut self, len: usize) -> Option<TxBuf> {
        self.pool.alloc(len)
    }

    fn recycle(&mut self, buf: TxBuf) {
        drop(buf);
    }

    fn reuse_vec(&mut self, vec: Vec<RxBuf>) {
        self.rx_vecs.give(vec);
    }

    fn tx_outstanding(&self) -> usize {
        self.pool.outstanding()
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        // A final step so an inline worker sees the closes the application side queued.
        let _ = self.end.drive();
    }
}

/// The limits the application side works with, for a server with `limits`.
pub(super) fn app_limits(limits: &crate::server::ServerLimits) -> Limits {
    Limits {
        max_sockets: limits.max_sockets,
        max_datagram: limits.max_datagram,
        default_sndbuf: limits.default_sndbuf,
        max_sndbuf: limits.max_send_in_flight,
        max_tx_buffers: MAX_TX_BUFFERS,
        max_tx_len: LARGE_TX,
        local_ip: None,
    }
}
