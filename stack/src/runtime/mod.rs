//! The host runtime: [`HostSockets`] implements [`SocketApi`](crate::api::SocketApi) over a
//! SlimTCP worker that alone owns the interface, its NIC, sockets and timers.
//!
//! ```text
//!  application thread                         worker (its own pinned thread, or inline)
//!  ┌──────────────┐  Request ring (SPSC)   ┌───────────────────────────────┐
//!  │ AppSockets   │ ─────────────────────▶ │ Worker: the socket server     │
//!  │  (shared     │                        │  (crate::server) over the     │
//!  │   core) over │ ◀───────────────────── │  Interface (NIC, timers)      │
//!  │ HostLink     │  Event ring (SPSC)     └───────────────────────────────┘
//!  └──────────────┘ ◀── RxBuf drops (lock-free queue: window credit) ──┘
//!                   ◀── emptied vectors of Data events (spare_vecs.rs) ──┘
//! ```
//!
//! [`HostSockets`] is the shared application side ([`AppSockets`]) over [`HostLink`]: the
//! socket table, readiness, credit and blocking rules are the guest library's too. The worker
//! is the [socket server](crate::server) the backend runs for guests, with these rings as its
//! transport: ids, options, ports, loans and windows follow the same rules on both.
//!
//! - Two-core mode ([`two_core`], [`two_core_group`]): the worker runs on a thread of its own,
//!   pinned if asked; the rings are the only shared state (no socket locks).
//! - External mode ([`external_group`]): the two-core rings, the worker stepped by a thread the
//!   caller owns (a loop that also polls something else).
//! - Single-thread mode ([`single`], [`single_group`]): the same worker and rings, but the
//!   application thread steps the worker whenever it waits (run to completion on one core).
//!
//! Received data is pushed to the application side as it arrives (bounded by the receive
//! window, which counts buffers until the application drops them); sends hand zero-copy
//! [`TxBuf`]s to the stack, which drops them back into their pool once acknowledged, and the
//! application side tracks send-buffer credit so `EAGAIN` needs no round trip.

mod buffers;
mod driver;
mod external;
mod link;
mod messages;
mod spare_vecs;
mod worker;

use std::sync::{Arc, Mutex};

use slimtcp_api::app::AppSockets;

pub use buffers::{RxBuf, TxBuf, LARGE_TX, MEDIUM_TX, SMALL_TX};
pub use driver::{IdlePolicy, RuntimeConfig, RuntimeError, WorkerThread};
pub use external::{external_group, ExternalWorker};
pub use link::HostLink;

use buffers::ReleaseQueue;
use driver::{AppEnd, Driver, WorkerGroup};
use spare_vecs::SpareVecs;
use worker::{Step, Worker};

use crate::iface::Interface;
use crate::nic::Nic;
use crate::server::ServerLimits;
use crate::time::Clock;

/// Ring slots in single-thread mode (the worker is stepped often, so rings stay short).
const INLINE_RING: usize = 8192;

/// The socket API of the host runtime (see the module documentation).
pub type HostSockets = AppSockets<HostLink>;

/// The server limits of the host runtime over `iface`: its socket limit and TCP buffers, send
/// buffers up to the largest `SO_SNDBUF`, the application side's backlog bound.
fn server_limits<N: Nic>(iface: &Interface<N>) -> ServerLimits {
    let cfg = iface.config();
    let mtu = iface.nic().capabilities().mtu;
    ServerLimits {
        max_sockets: cfg.max_sockets,
        max_send_in_flight: crate::server::options::MAX_BUFFER,
        default_sndbuf: cfg.tcp.tx_buffer,
        default_rcvbuf: cfg.tcp.rx_buffer,
        max_backlog: slimtcp_api::app::MAX_BACKLOG,
        max_datagram: mtu.saturating_sub(28),
    }
}

/// Builds one application side and its worker.
fn pair<N: Nic + Send + 'static>(
    iface: Interface<N>,
    clock: Clock,
    ring: usize,
    driver: impl FnOnce() -> Driver,
    idle: IdlePolicy,
) -> (HostSockets, Box<dyn Step>) {
    let (req_tx, req_rx) = rtrb::RingBuffer::new(ring);
    let (ev_tx, ev_rx) = rtrb::RingBuffer::new(ring);
    let releases = Arc::new(ReleaseQueue::default());
    let spare_vecs = Arc::new(SpareVecs::default());
    let limits = server_limits(&iface);
    let end = AppEnd { requests: req_tx, events: ev_rx, driver: driver() };
    let link = HostLink::new(end, releases.clone(), spare_vecs.clone(), link::app_limits(&limits), idle);
    let app = AppSockets::with_link(link);
    let worker: Box<dyn Step> =
        Box::new(Worker::new(iface, clock, limits, (req_rx, ev_tx), releases, spare_vecs));
    (app, worker)
}

/// Single-thread mode over one interface: the calling thread runs everything, backing off
/// (spin, yield, nap) while it waits with nothing to do.
pub fn single<N: Nic + Send + 'static>(iface: Interface<N>, clock: Clock) -> HostSockets {
    single_with(iface, clock, IdlePolicy::Backoff)
}

/// Single-thread mode over one interface, waiting as `idle` says: [`IdlePolicy::BusyPoll`] for a
/// thread that owns its core (a pinned DPDK lcore), where a nap would leave the NIC unpolled.
pub fn single_with<N: Nic + Send + 'static>(
    iface: Interface<N>,
    clock: Clock,
    idle: IdlePolicy,
) -> HostSockets {
    let mut apps = single_group_with(vec![iface], clock, idle);
    match apps.pop() {
        Some(app) => app,
        None => unreachable!("one interface gives one application side"),
    }
}

/// Single-thread mode over several interfaces stepped together (e.g. both ends of a memwire
/// link in one thread): waiting on any of them runs all of them. Backs off while idle.
pub fn single_group<N: Nic + Send + 'static>(ifaces: Vec<Interface<N>>, clock: Clock) -> Vec<HostSockets> {
    single_group_with(ifaces, clock, IdlePolicy::Backoff)
}

/// [`single_group`], waiting as `idle` says.
pub fn single_group_with<N: Nic + Send + 'static>(
    ifaces: Vec<Interface<N>>,
    clock: Clock,
    idle: IdlePolicy,
) -> Vec<HostSockets> {
    let group = Arc::new(Mutex::new(WorkerGroup::new(Vec::new())));
    let mut apps = Vec::new();
    let mut workers = Vec::new();
    for iface in ifaces {
        let (app, worker) = pair(iface, clock.clone(), INLINE_RING, || Driver::Inline(group.clone()), idle);
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
    let (mut apps, thread) = two_core_group(vec![iface], clock, cfg)?;
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
        // The application thread of two-core mode shares its core: it backs off while it waits.
        let (app, worker) =
            pair(iface, clock.clone(), cfg.ring_capacity.max(2), || Driver::Thread, IdlePolicy::Backoff);
        apps.push(app);
        workers.push(worker);
    }
    let thread = driver::spawn_worker(WorkerGroup::new(workers), cfg)?;
    Ok((apps, thread))
}
