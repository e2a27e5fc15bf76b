//! The worker side: owns the interface (NIC, sockets, timers), executes requests, and turns
//! socket activity into events. Nothing else touches socket state, so there are no locks.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rtrb::{Consumer, Producer};
use slimtcp_api::{Fd, SocketError, ZeroCopyTx};

use super::buffers::{ReleaseQueue, TxBuf};
use super::messages::{Event, Reply, Request};
use crate::iface::{Activity, IfaceError, Interface, SocketHandle};
use crate::nic::Nic;
use crate::tcp::{Events, TxPayload};
use crate::time::Clock;

/// Requests executed per step at most, so polling the NIC is never starved.
const REQUESTS_PER_STEP: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stream,
    Listener,
    Datagram,
}

#[derive(Debug)]
struct WorkerSocket {
    handle: SocketHandle,
    kind: Kind,
    /// Sends that did not fit the stack's send buffer yet, in order.
    pending: VecDeque<TxBuf>,
    /// A shutdown waits for `pending` to drain.
    shutdown_pending: bool,
    eof_sent: bool,
    failure_sent: bool,
}

/// The worker half of one application's connection to the stack.
#[derive(Debug)]
pub struct Worker<N: Nic> {
    iface: Interface<N>,
    clock: Clock,
    requests: Consumer<Request>,
    events: Producer<Event>,
    /// Events that did not fit the ring; sent first once it drains.
    overflow: VecDeque<Event>,
    releases: Arc<ReleaseQueue>,
    sockets: HashMap<Fd, WorkerSocket>,
    by_handle: HashMap<SocketHandle, Fd>,
    activity: Vec<Activity>,
    completed: Vec<Box<dyn TxPayload>>,
    /// Scratch: bytes released per socket in one step.
    released: HashMap<Fd, usize>,
}

/// One unit of worker work, as the thread or the inline driver sees it.
pub trait Step: Send {
    /// Executes requests, polls the interface, forwards events; true when anything happened.
    fn step(&mut self) -> Result<bool, IfaceError>;
    /// True when the application side is gone (its ring end was dropped).
    fn app_gone(&self) -> bool;
}

impl<N: Nic> Worker<N> {
    /// A worker for `iface`, talking over the given ring ends.
    pub fn new(
        iface: Interface<N>,
        clock: Clock,
        requests: Consumer<Request>,
        events: Producer<Event>,
        releases: Arc<ReleaseQueue>,
    ) -> Self {
        Worker {
            iface,
            clock,
            requests,
            events,
            overflow: VecDeque::new(),
            releases,
            sockets: HashMap::new(),
            by_handle: HashMap::new(),
            activity: Vec::new(),
            completed: Vec::new(),
            released: HashMap::new(),
        }
    }

    fn emit(&mut self, event: Event) {
        log::trace!("event {event:?}");
        if !self.overflow.is_empty() {
            self.overflow.push_back(event);
            return;
        }
        if let Err(rtrb::PushError::Full(event)) = self.events.push(event) {
            self.overflow.push_back(event);
        }
    }

    fn flush_overflow(&mut self) {
        while let Some(event) = self.overflow.pop_front() {
            if let Err(rtrb::PushError::Full(event)) = self.events.push(event) {
                self.overflow.push_front(event);
                break;
            }
        }
    }

    fn reply(&mut self, fd: Fd, result: Result<Reply, SocketError>) {
        self.emit(Event::Reply { fd, result });
    }

    fn map(&mut self, fd: Fd, handle: SocketHandle, kind: Kind) {
        let ws = WorkerSocket {
            handle,
            kind,
            pending: VecDeque::new(),
            shutdown_pending: false,
            eof_sent: false,
            failure_sent: false,
        };
        self.sockets.insert(fd, ws);
        self.by_handle.insert(handle, fd);
    }

    fn handle_of(&self, fd: Fd) -> Result<SocketHandle, SocketError> {
        self.sockets.get(&fd).map(|s| s.handle).ok_or(SocketError::BadHandle)
    }

    fn execute(&mut self, req: Request) {
        log::trace!("request {req:?}");
        let now = self.clock.now();
        match req {
            Request::Listen { fd, port, backlog, config } => {
                let r = self.iface.tcp_listen_with(port, backlog, Some(*config));
                let r = r.map(|h| {
                    self.map(fd, h, Kind::Listener);
                    Reply::Done
                });
                self.reply(fd, r);
            }
            Request::Accept { fd, new_fd } => {
                let r = self.accept(fd, new_fd);
                let accepted = r.is_ok();
                self.reply(fd, r);
                if accepted {
                    // Data, FIN or a reset may have come before the application accepted.
                    self.forward(new_fd, Events::READABLE | Events::WRITABLE);
                }
            }
            Request::Connect { fd, local_port, remote, config } => {
                let r = self.iface.tcp_connect_with(now, local_port, remote, Some(*config));
                let r = r.and_then(|h| {
                    self.map(fd, h, Kind::Stream);
                    Ok(Reply::Bound { local: self.iface.tcp_info(h)?.local })
                });
                self.reply(fd, r);
            }
            Request::Send { fd, buf } => self.send(fd, buf),
            Request::Shutdown { fd } => {
                if let Some(ws) = self.sockets.get_mut(&fd) {
                    if ws.pending.is_empty() {
                        let _ = self.iface.tcp_shutdown(ws.handle);
                    } else {
                        ws.shutdown_pending = true;
                    }
                }
            }
            Request::Close { fd, abort } => self.close(fd, abort),
            Request::UdpBind { fd, port } => {
                let r = self.iface.udp_bind(port).inspect(|&h| self.map(fd, h, Kind::Datagram));
                let r = r.and_then(|h| Ok(Reply::Bound { local: self.iface.udp_local(h)? }));
                self.reply(fd, r);
            }
            Request::UdpConnect { fd, peer } => {
                let r = self.handle_of(fd).and_then(|h| self.iface.udp_connect(h, peer));
                self.reply(fd, r.map(|()| Reply::Done));
            }
            Request::UdpSend { fd, dst, buf } => {
                if let Ok(h) = self.handle_of(fd) {
                    if let Err(e) = self.iface.udp_send_to(now, h, buf.filled(), Some(dst)) {
                        log::debug!("{fd}: datagram to {dst} dropped: {e}");
                    }
                }
                self.emit(Event::SendDone { fd, bufs: vec![buf] });
            }
            Request::SetBurst { burst } => self.iface.set_burst(burst),
        }
    }

    fn accept(&mut self, fd: Fd, new_fd: Fd) -> Result<Reply, SocketError> {
        let lh = self.handle_of(fd)?;
        let h = self.iface.tcp_accept(lh)?;
        let info = self.iface.tcp_info(h)?;
        self.map(new_fd, h, Kind::Stream);
        Ok(Reply::Accepted { local: info.local, peer: info.remote, more: self.iface.tcp_can_accept(lh) })
    }

    fn send(&mut self, fd: Fd, buf: TxBuf) {
        let Some(ws) = self.sockets.get_mut(&fd) else {
            self.emit(Event::SendDone { fd, bufs: vec![buf] });
            return;
        };
        if !ws.pending.is_empty() {
            ws.pending.push_back(buf);
            return;
        }
        let h = ws.handle;
        match self.iface.tcp_send_loaned(h, Box::new(buf)) {
            Ok(Ok(())) => {}
            Ok(Err(back)) => {
                if let (Some(buf), Some(ws)) = (downcast(back), self.sockets.get_mut(&fd)) {
                    ws.pending.push_back(buf);
                }
            }
            Err(e) => {
                log::debug!("{fd}: send refused: {e}");
                // The payload was not taken: `tcp_send_loaned` fails before queueing.
                self.emit(Event::SendDone { fd, bufs: Vec::new() });
            }
        }
    }

    /// Moves pending sends into the stack while they fit; then a waiting shutdown.
    fn retry_pending(&mut self, fd: Fd) {
        let Some(ws) = self.sockets.get_mut(&fd) else { return };
        let h = ws.handle;
        while let Some(buf) = ws.pending.pop_front() {
            match self.iface.tcp_send_loaned(h, Box::new(buf)) {
                Ok(Ok(())) => {}
                Ok(Err(back)) => {
                    if let Some(buf) = downcast(back) {
                        ws.pending.push_front(buf);
                    }
                    return;
                }
                Err(_) => {
                    let bufs: Vec<TxBuf> = ws.pending.drain(..).collect();
                    self.emit(Event::SendDone { fd, bufs });
                    return;
                }
            }
        }
        if ws.shutdown_pending {
            ws.shutdown_pending = false;
            let _ = self.iface.tcp_shutdown(h);
        }
    }

    fn close(&mut self, fd: Fd, abort: bool) {
        let Some(mut ws) = self.sockets.remove(&fd) else { return };
        self.by_handle.remove(&ws.handle);
        let h = ws.handle;
        if ws.kind == Kind::Stream && !abort {
            for buf in ws.pending.drain(..) {
                if let Ok(Err(_)) = self.iface.tcp_send_loaned(h, Box::new(buf)) {
                    log::warn!("{fd}: closed with sends that never fit; they are dropped");
                    break;
                }
            }
        }
        let r = match (ws.kind, abort) {
            (Kind::Stream, true) => self.iface.tcp_abort(h),
            _ => self.iface.tcp_close(h),
        };
        if let Err(e) = r {
            log::debug!("{fd}: close: {e}");
        }
    }

    /// Turns a socket's news into events.
    fn forward(&mut self, fd: Fd, events: Events) {
        let Some(ws) = self.sockets.get(&fd) else { return };
        let h = ws.handle;
        match ws.kind {
            Kind::Listener => self.emit(Event::Acceptable { fd }),
            Kind::Datagram => {
                while let Ok((from, buf)) = self.iface.udp_recv_buf(h) {
                    self.emit(Event::Datagram { fd, from, buf });
                }
            }
            Kind::Stream => {
                if events.contains(Events::CONNECTED) {
                    self.emit(Event::Connected { fd });
                }
                self.forward_data(fd, h);
                let mut done = Vec::new();
                if self.iface.tcp_take_completed(h, &mut self.completed).is_ok() {
                    done.extend(self.completed.drain(..).filter_map(downcast));
                }
                if !done.is_empty() {
                    self.emit(Event::SendDone { fd, bufs: done });
                }
                self.retry_pending(fd);
            }
        }
    }

    fn forward_data(&mut self, fd: Fd, h: SocketHandle) {
        loop {
            match self.iface.tcp_recv_segment_held(h) {
                Ok(Some(buf)) => self.emit(Event::Data { fd, buf }),
                Ok(None) => {
                    if let Some(ws) = self.sockets.get_mut(&fd) {
                        if !ws.eof_sent {
                            ws.eof_sent = true;
                            self.emit(Event::Eof { fd });
                        }
                    }
                    break;
                }
                Err(SocketError::WouldBlock) => break,
                Err(error) => {
                    if let Some(ws) = self.sockets.get_mut(&fd) {
                        if !ws.failure_sent {
                            ws.failure_sent = true;
                            self.emit(Event::Failed { fd, error });
                        }
                    }
                    break;
                }
            }
        }
    }
}

/// Gets our buffer back from the stack's type-erased loan.
fn downcast(payload: Box<dyn TxPayload>) -> Option<TxBuf> {
    let any: Box<dyn Any + Send> = payload;
    match any.downcast::<TxBuf>() {
        Ok(buf) => Some(*buf),
        Err(_) => {
            log::error!("a loaned payload of a foreign type came back; dropped");
            None
        }
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
        while let Some((fd, n)) = self.releases.pop() {
            work = true;
            *released.entry(fd).or_insert(0) += n;
        }
        for (fd, n) in released.drain() {
            if let Some(ws) = self.sockets.get(&fd) {
                let _ = self.iface.tcp_recv_release(ws.handle, n);
            }
        }
        self.released = released;
        let now = self.clock.now();
        work |= self.iface.poll(now)?;
        let mut activity = std::mem::take(&mut self.activity);
        self.iface.take_activity(&mut activity);
        for a in activity.drain(..) {
            work = true;
            if let Some(&fd) = self.by_handle.get(&a.handle) {
                self.forward(fd, a.events);
            }
        }
        self.activity = activity;
        self.flush_overflow();
        Ok(work)
    }

    fn app_gone(&self) -> bool {
        self.requests.is_abandoned()
    }
}
