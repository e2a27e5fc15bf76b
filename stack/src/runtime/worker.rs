//! The worker side: the socket server over the interface (NIC, sockets, timers), fed by the
//! request ring, its events pushed onto the event ring. Nothing else touches socket state, so
//! there are no locks.

use std::collections::VecDeque;
use std::sync::Arc;

use rtrb::{Consumer, Producer};
use slimtcp_api::SocketError;

use super::buffers::{ReleaseQueue, TxBuf};
use super::messages::{Event, Reply, Request};
use super::spare_vecs::SpareVecs;
use crate::iface::{IfaceError, Interface};
use crate::nic::{Nic, PacketBuf};
use crate::server::{
    self, Connecting, DatagramPayload, IdMap, ServerEvent, ServerLimits, SocketServer, StreamReady,
};
use crate::time::Clock;

/// Requests executed per step at most, so polling the NIC is never starved.
const REQUESTS_PER_STEP: usize = 256;

/// The host runtime as the server's transport: a send is known by its length (its buffer is
/// the payload, back in its pool once the stack drops it); connects need no call token (their
/// socket says it all).
#[derive(Debug)]
pub struct HostTransport;

impl server::Transport for HostTransport {
    type Send = usize;
    type Call = ();
    type Payload = TxBuf;
}

/// The worker half of one application's connection to the stack.
#[derive(Debug)]
pub struct Worker<N: Nic> {
    server: SocketServer<N, HostTransport>,
    requests: Consumer<Request>,
    events: Producer<Event>,
    /// Events that did not fit the ring; sent first once it drains.
    overflow: VecDeque<Event>,
    releases: Arc<ReleaseQueue>,
    /// Data events' vectors, back from the application (`spare_vecs.rs`).
    spare_vecs: Arc<SpareVecs<PacketBuf>>,
    /// Scratch: the release queue's entries of one step.
    taken: Vec<(u32, usize)>,
    /// Scratch: bytes released per socket in one step.
    released: IdMap<u32, usize>,
    /// Scratch: a socket's segments of one step.
    segments: Vec<PacketBuf>,
}

/// One unit of worker work, as the thread or the inline driver sees it.
pub trait Step: Send {
    /// Executes requests, polls the interface, forwards events; true when anything happened.
    fn step(&mut self) -> Result<bool, IfaceError>;
    /// True when the application side is gone (its ring end was dropped).
    fn app_gone(&self) -> bool;
}

impl<N: Nic> Worker<N> {
    /// A worker serving `iface` within `limits`, talking over the given ring ends.
    pub fn new(
        iface: Interface<N>,
        clock: Clock,
        limits: ServerLimits,
        (requests, events): (Consumer<Request>, Producer<Event>),
        releases: Arc<ReleaseQueue>,
        spare_vecs: Arc<SpareVecs<PacketBuf>>,
    ) -> Self {
        Worker {
            server: SocketServer::new(iface, clock, limits),
            requests,
            events,
            overflow: VecDeque::new(),
            releases,
            spare_vecs,
            taken: Vec::new(),
            released: IdMap::default(),
            segments: Vec::new(),
        }
    }

    fn emit(&mut self, event: Event) {
        emit_to(&mut self.events, &mut self.overflow, event);
    }

    fn flush_overflow(&mut self) {
        while let Some(event) = self.overflow.pop_front() {
            if let Err(rtrb::PushError::Full(event)) = self.events.push(event) {
                self.overflow.push_front(event);
                break;
            }
        }
    }

    fn execute(&mut self, req: Request) {
        log::trace!("request {req:?}");
        let s = &mut self.server;
        let reply = match req {
            Request::Open { proto } => Some(s.open(0, proto).map(Reply::Opened)),
            Request::Bind { id, addr } => Some(s.bind(id, addr).map(Reply::Addr)),
            Request::Listen { id, backlog } => Some(s.listen(id, backlog).map(|()| Reply::Done)),
            Request::Connect { id, remote } => Some(s.connect(id, remote, ()).map(|c| match c {
                Connecting::Started(local) | Connecting::Done(local) => Reply::Addr(local),
            })),
            Request::SetOption { id, opt } => Some(s.set_option(id, opt).map(|()| Reply::Done)),
            Request::GetOption { id, name } => Some(s.get_option(id, name).map(Reply::Option)),
            Request::Send { id, buf } => {
                let len = buf.len();
                if let Err(e) = s.send(id, len, [buf], len) {
                    self.refused(id, len, e);
                }
                None
            }
            Request::SendTo { id, dst, buf } => {
                let len = buf.len();
                match s.send_datagram(id, dst, DatagramPayload::Loan { piece: buf, token: len }) {
                    Ok(server::DatagramSent::Held) => {}
                    Ok(server::DatagramSent::Done(_)) => self.emit(Event::SendDone { id, bytes: len }),
                    Err(e) => self.refused(id, len, e),
                }
                None
            }
            Request::Shutdown { id } => {
                if let Err(e) = s.shutdown(id, true) {
                    log::debug!("socket {id}: shutdown: {e}");
                }
                None
            }
            Request::Close { id, abort } => {
                if let Err(e) = s.close(id, abort) {
                    log::debug!("socket {id}: close: {e}");
                }
                None
            }
        };
        if let Some(result) = reply {
            self.emit(Event::Reply(result));
        }
        self.forward_events();
    }

    /// A send the server refused: its bytes are done with (the application's credit comes
    /// back); the connection's own failure, if that was it, is reported by the server.
    fn refused(&mut self, id: u32, len: usize, e: SocketError) {
        log::debug!("socket {id}: send of {len} bytes refused: {e}");
        self.emit(Event::SendDone { id, bytes: len });
    }

    /// Turns the server's events into ring events, pushing received data as it comes.
    fn forward_events(&mut self) {
        while let Some(ServerEvent { id, what, .. }) = self.server.next_event() {
            let event = match what {
                server::Event::ConnectDone { result: Ok(local), .. } => Event::Connected { id, local },
                server::Event::ConnectDone { result: Err(error), .. } | server::Event::Reset { error } => {
                    Event::Failed { id, error }
                }
                server::Event::Accepted { socket, local, remote } => {
                    Event::Accepted { listener: id, id: socket, local, remote }
                }
                server::Event::Readable => {
                    self.deliver(id);
                    continue;
                }
                server::Event::Writable { .. } => Event::Writable { id },
                server::Event::SendDone { send, .. } => Event::SendDone { id, bytes: send },
            };
            self.emit(event);
        }
    }

    /// Everything socket `id` has received, pushed to the application (bounded by its receive
    /// window, which counts these buffers until the application drops them).
    fn deliver(&mut self, id: u32) {
        loop {
            match self.server.ready(id) {
                StreamReady::Data => {
                    // One event for all of it: one trip through the ring and one socket lookup
                    // on the application side, however many segments the step brought.
                    self.server.take_segments(id, &mut self.segments);
                    // Not allocated at all for a single buffer; else a vector the application
                    // gave back.
                    let mut more = Vec::new();
                    if self.segments.len() > 1 {
                        more = self.spare_vecs.take();
                        more.extend(self.segments.drain(1..));
                    }
                    if let Some(first) = self.segments.pop() {
                        self.emit(Event::Data { id, first, more });
                    }
                }
                StreamReady::Datagram => {
                    while let Some((from, buf)) = self.server.take_datagram(id) {
                        self.emit(Event::Datagram { id, from, buf });
                    }
                }
                StreamReady::Eof => {
                    self.emit(Event::Eof { id });
                    break;
                }
                StreamReady::Nothing => break,
            }
        }
        self.server.readable_done(id);
    }
}

/// Pushes `event` onto the event ring, behind any that did not fit it before.
fn emit_to(events: &mut Producer<Event>, overflow: &mut VecDeque<Event>, event: Event) {
    log::trace!("event {event:?}");
    if !overflow.is_empty() {
        overflow.push_back(event);
        return;
    }
    if let Err(rtrb::PushError::Full(event)) = events.push(event) {
        overflow.push_back(event);
    }
}

impl<N: Nic + Send> Step for Worker<N> {
    fn step(&mut self) -> Result<bool, IfaceError> {
        let mut work = false;
        for _ in 0..REQUESTS_PER_STEP {
            match self.requests.pop() {
                Ok(req) => {
                    work = true;
                    self.execute(req);
                }
                Err(_) => break,
            }
        }
        // Releases are summed per socket first: one window update for what the application
        // consumed since the last step, not one per buffer.
        let mut released = std::mem::take(&mut self.released);
        let mut taken = std::mem::take(&mut self.taken);
        self.releases.take(&mut taken);
        for (id, n) in taken.drain(..) {
            work = true;
            *released.entry(id).or_insert(0) += n;
        }
        self.taken = taken;
        for (id, n) in released.drain() {
            // A socket closed meanwhile has nothing to release.
            let _ = self.server.release(id, n);
        }
        self.released = released;
        work |= self.server.poll()?;
        self.forward_events();
        self.flush_overflow();
        Ok(work)
    }

    fn app_gone(&self) -> bool {
        self.requests.is_abandoned()
    }
}

/// A run's interface counters (retransmissions, drops by reason) in the debug log when the
/// worker ends: `RUST_LOG=slimtcp=debug` explains a slow run after the fact.
impl<N: Nic> Drop for Worker<N> {
    fn drop(&mut self) {
        log::debug!("interface counters at the end: {:?}", self.server.iface().counters());
    }
}
