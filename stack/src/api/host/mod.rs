//! The host runtime: [`HostSockets`] implements [`SocketApi`](crate::api::SocketApi) over a
//! SlimTCP worker that alone owns the interface, its NIC, sockets and timers.
//!
//! ```text
//!  application thread                         worker (its own pinned thread, or inline)
//!  ┌──────────────┐  Request ring (SPSC)   ┌───────────────────────────────┐
//!  │ HostSockets  │ ─────────────────────▶ │ Worker: execute requests,     │
//!  │  socket table│                        │  Interface::poll (NIC, timers)│
//!  │  epoll sets  │ ◀───────────────────── │  activity -> events           │
//!  │  TxPool      │  Event ring (SPSC)     └───────────────────────────────┘
//!  └──────────────┘ ◀── RxBuf drops (lock-free queue: window credit) ──┘
//! ```
//!
//! - Two-core mode ([`HostSockets::two_core`]): the worker runs on a thread of its own, pinned
//!   if asked; the rings are the only shared state (no socket locks).
//! - Single-thread mode ([`HostSockets::single`]): the same worker and rings, but the
//!   application thread steps the worker whenever it waits (run to completion on one core).
//!
//! Received data is pushed to the application side as it arrives (bounded by the receive
//! window, which counts buffers until the application drops them); sends hand zero-copy
//! [`TxBuf`]s to the stack, which returns them once acknowledged, and the application side
//! tracks send-buffer credit so `EAGAIN` needs no round trip.

mod api_impl;
mod buffers;
mod control;
mod data;
mod driver;
mod messages;
mod state;
mod worker;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

pub use buffers::{RxBuf, TxBuf, LARGE_TX, SMALL_TX};
pub use driver::{IdlePolicy, RuntimeConfig, RuntimeError, WorkerThread};

use buffers::{ReleaseQueue, TxPool};
use driver::{AppEnd, Driver, WorkerGroup};
use messages::{Event, Reply, Request};
use state::{Phase, SockEntry};
use worker::{Step, Worker};

use crate::api::{EpollFd, EpollSet, Fd, Proto, SocketError};
use crate::iface::Interface;
use crate::nic::Nic;
use crate::tcp::TcpConfig;
use crate::time::Clock;

/// Ring slots in single-thread mode (the worker is stepped often, so rings stay short).
const INLINE_RING: usize = 8192;
/// Zero-copy transmit buffers the application may hold or have in flight at once.
const MAX_TX_BUFFERS: usize = 1 << 20;

/// The socket API of the host runtime (see the module documentation).
#[derive(Debug)]
pub struct HostSockets {
    end: AppEnd,
    releases: Arc<ReleaseQueue>,
    local_ip: Ipv4Addr,
    defaults: TcpConfig,
    max_mss: u16,
    burst: usize,
    max_sockets: usize,
    sockets: HashMap<Fd, SockEntry>,
    next_fd: u32,
    epolls: HashMap<EpollFd, EpollSet>,
    next_epoll: u32,
    pool: TxPool,
    reply: Option<(Fd, Result<Reply, SocketError>)>,
}

/// Builds one application side and its worker.
fn pair<N: Nic + Send + 'static>(
    iface: Interface<N>,
    clock: Clock,
    ring: usize,
    driver: impl FnOnce() -> Driver,
) -> (HostSockets, Box<dyn Step>) {
    let (req_tx, req_rx) = rtrb::RingBuffer::new(ring);
    let (ev_tx, ev_rx) = rtrb::RingBuffer::new(ring);
    let releases = Arc::new(ReleaseQueue::new());
    let cfg = iface.config().clone();
    let mtu = iface.nic().capabilities().mtu;
    let max_mss = u16::try_from(mtu.saturating_sub(40)).unwrap_or(u16::MAX).max(64);
    let app = HostSockets {
        end: AppEnd { requests: req_tx, events: ev_rx, driver: driver() },
        releases: releases.clone(),
        local_ip: cfg.ip,
        defaults: cfg.tcp.clone(),
        max_mss,
        burst: cfg.burst,
        max_sockets: cfg.max_sockets,
        sockets: HashMap::new(),
        next_fd: 3,
        epolls: HashMap::new(),
        next_epoll: 1,
        pool: TxPool::default(),
        reply: None,
    };
    let worker: Box<dyn Step> = Box::new(Worker::new(iface, clock, req_rx, ev_tx, releases));
    (app, worker)
}

impl HostSockets {
    /// Single-thread mode over one interface: the calling thread runs everything.
    pub fn single<N: Nic + Send + 'static>(iface: Interface<N>, clock: Clock) -> HostSockets {
        let mut apps = Self::single_group(vec![iface], clock);
        match apps.pop() {
            Some(app) => app,
            None => unreachable!("one interface gives one application side"),
        }
    }

    /// Single-thread mode over several interfaces stepped together (e.g. both ends of a
    /// memwire link in one thread): waiting on any of them runs all of them.
    pub fn single_group<N: Nic + Send + 'static>(
        ifaces: Vec<Interface<N>>,
        clock: Clock,
    ) -> Vec<HostSockets> {
        let group = Arc::new(Mutex::new(WorkerGroup::new(Vec::new())));
        let mut apps = Vec::new();
        let mut workers = Vec::new();
        for iface in ifaces {
            let (app, worker) = pair(iface, clock.clone(), INLINE_RING, || Driver::Inline(group.clone()));
            apps.push(app);
            workers.push(worker);
        }
        if let Ok(mut g) = group.lock() {
            *g = WorkerGroup::new(workers);
        }
        apps
    }

    /// Two-core mode: the worker runs on its own thread.
    pub fn two_core<N: Nic + Send + 'static>(
        iface: Interface<N>,
        clock: Clock,
        cfg: &RuntimeConfig,
    ) -> Result<(HostSockets, WorkerThread), RuntimeError> {
        let (mut apps, thread) = Self::two_core_group(vec![iface], clock, cfg)?;
        match apps.pop() {
            Some(app) => Ok((app, thread)),
            None => unreachable!("one interface gives one application side"),
        }
    }

    /// Two-core mode with one worker thread serving several interfaces.
    pub fn two_core_group<N: Nic + Send + 'static>(
        ifaces: Vec<Interface<N>>,
        clock: Clock,
        cfg: &RuntimeConfig,
    ) -> Result<(Vec<HostSockets>, WorkerThread), RuntimeError> {
        let mut apps = Vec::new();
        let mut workers = Vec::new();
        for iface in ifaces {
            let (app, worker) = pair(iface, clock.clone(), cfg.ring_capacity.max(2), || Driver::Thread);
            apps.push(app);
            workers.push(worker);
        }
        let thread = driver::spawn_worker(WorkerGroup::new(workers), cfg)?;
        Ok((apps, thread))
    }

    /// Applies whatever the worker reported (and, in single-thread mode, runs it once) without
    /// waiting; true when anything happened. Blocking calls and `epoll_wait` do this already.
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
        if self.sockets.len() >= self.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        let fd = Fd(self.next_fd);
        self.next_fd = self.next_fd.checked_add(1).ok_or(SocketError::TooManySockets)?;
        Ok(fd)
    }

    /// Lets the worker progress and applies its events; true when anything happened.
    fn pump(&mut self) -> Result<bool, SocketError> {
        let drove = self.end.drive()?;
        let mut got = false;
        while let Ok(event) = self.end.events.pop() {
            got = true;
            self.on_event(event);
        }
        Ok(drove || got)
    }

    /// Pumps until `done` holds (true) or `deadline` passes (false).
    fn wait_until(
        &mut self,
        deadline: Option<std::time::Instant>,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<bool, SocketError> {
        let mut idle = 0u32;
        loop {
            let progressed = self.pump()?;
            if done(self) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Ok(false);
            }
            if progressed {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                driver::back_off(idle);
            }
        }
    }

    /// Waits until `fd` is gone or `ready` holds for it.
    fn wait_for(&mut self, fd: Fd, ready: impl Fn(&SockEntry) -> bool) -> Result<(), SocketError> {
        self.wait_until(None, |s| s.sockets.get(&fd).is_none_or(&ready)).map(|_| ())
    }

    /// Queues a request, pumping while the ring is full.
    fn submit(&mut self, mut req: Request) -> Result<(), SocketError> {
        self.end.check_alive()?;
        let mut idle = 0u32;
        loop {
            match self.end.requests.push(req) {
                Ok(()) => return Ok(()),
                Err(rtrb::PushError::Full(r)) => req = r,
            }
            if self.pump()? {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                driver::back_off(idle);
            }
        }
    }

    /// A request that replies: submits it and waits for the answer.
    fn call(&mut self, fd: Fd, req: Request) -> Result<Reply, SocketError> {
        self.reply = None;
        self.submit(req)?;
        self.wait_until(None, |s| s.reply.is_some())?;
        match self.reply.take() {
            Some((rfd, result)) if rfd == fd => result,
            Some((rfd, _)) => {
                log::error!("reply for {rfd} while waiting for {fd}");
                Err(SocketError::InvalidInput)
            }
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

    fn on_event(&mut self, event: Event) {
        let fd = match event {
            Event::Reply { fd, result } => {
                self.reply = Some((fd, result));
                return;
            }
            Event::Connected { fd } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    if s.phase == Phase::Connecting {
                        s.phase = Phase::Connected;
                        s.credit = s.config.tx_buffer;
                    }
                }
                fd
            }
            Event::Data { fd, buf } => {
                let rx = RxBuf::new(buf, fd, self.releases.clone());
                match self.sockets.get_mut(&fd) {
                    Some(s) if !s.rd_shut => s.rxq.push_back(rx),
                    _ => drop(rx),
                }
                fd
            }
            Event::Eof { fd } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.eof = true;
                }
                fd
            }
            Event::Failed { fd, error } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.failure = Some(error);
                    s.pending_error = Some(error);
                    if s.phase == Phase::Connecting {
                        s.phase = Phase::Failed;
                    }
                }
                fd
            }
            Event::Acceptable { fd } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.acceptable = true;
                }
                fd
            }
            Event::SendDone { fd, bufs } => {
                let s = self.sockets.get_mut(&fd).filter(|s| s.proto == Proto::Tcp);
                let returned: usize = bufs.iter().map(TxBuf::len).sum();
                if let Some(s) = s {
                    s.credit = (s.credit + returned).min(s.config.tx_buffer);
                }
                for b in bufs {
                    self.pool.recycle(b);
                }
                fd
            }
            Event::Datagram { fd, from, buf } => {
                let rx = RxBuf::new(buf, fd, self.releases.clone());
                if let Some(s) = self.sockets.get_mut(&fd) {
                    if s.datagrams.len() < state::DATAGRAM_QUEUE {
                        s.datagrams.push_back((from, rx));
                    } else {
                        s.datagrams_dropped += 1;
                    }
                }
                fd
            }
        };
        self.notify(fd);
    }
}

impl Drop for HostSockets {
    fn drop(&mut self) {
        // Close what is left, so connections end cleanly instead of lingering on the worker.
        let fds: Vec<Fd> = self.sockets.keys().copied().collect();
        for fd in fds {
            if let Some(s) = self.sockets.remove(&fd) {
                if s.on_worker() {
                    let abort = !s.rxq.is_empty();
                    let _ = self.end.requests.push(Request::Close { fd, abort });
                }
            }
        }
        // A final step so an inline worker sees the closes.
        let _ = self.end.drive();
    }
}
