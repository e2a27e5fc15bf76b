//! The guest path with two busy threads: the guest library (`GuestSockets`, vhost-user
//! transport) and the peer's application on the caller's thread (A); on thread B one loop
//! steps the tenant's [`Engine`] (over the guest's rings, as slimtcp-vhost's worker does) and
//! the peer's host-runtime worker ([`runtime::external_group`]) on the same memwire link.
//!
//! The vhost-user control plane is slimtcp-vhost's own [`NetDevice`] in a
//! `VhostUserDaemon` (its request thread and ring-event thread sleep in `recv`/`epoll_wait`
//! after set-up); a control thread here accepts the guest and waits for it to leave. Left out
//! of the daemon's serving path: the relay between VMM and daemon, the sandbox, SIGBUS
//! poisoning checks and gauges (none of them on the data path's per-step work but the last two,
//! an atomic load each).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use slimtcp::api::SocketError;
use slimtcp::iface::IfaceError;
use slimtcp::nic::Nic;
use slimtcp::runtime::{self, ExternalWorker, HostSockets, RuntimeConfig};
use slimtcp::time::Clock;
use slimtcp_guest::{GuestConfig, GuestError, GuestSockets};
use slimtcp_vhost::config::MAX_QUEUE_SIZE;
use slimtcp_vhost::device::{DeviceError, NetDevice};
use slimtcp_vhost::engine::{Engine, EngineConfig, SessionReport, TenantLimits};
use slimtcp_vhost::guest_mem::GuestMem;
use vhost::vhost_user::Listener;
use vhost_user_backend::VhostUserDaemon;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};

use super::idle::Idle;
use super::link::{self, LinkError};

/// What failed setting up or running the guest path.
#[derive(Debug, thiserror::Error)]
pub enum GuestPathError {
    /// The link.
    #[error("link")]
    Link(#[from] LinkError),
    /// The device.
    #[error("device")]
    Device(#[from] DeviceError),
    /// The daemon could not be made, or failed.
    #[error("vhost-user daemon: {0}")]
    Daemon(vhost_user_backend::Error),
    /// The socket could not be listened on.
    #[error("listening on {0}")]
    Listen(PathBuf, #[source] vhost::vhost_user::Error),
    /// The guest library could not attach.
    #[error("the guest library attaching")]
    Guest(#[from] GuestError),
    /// The tenant's interface failed.
    #[error("tenant interface")]
    Interface(#[from] IfaceError),
    /// The peer's worker stopped.
    #[error("peer worker")]
    Peer(#[source] SocketError),
    /// The backend worker thread could not be started.
    #[error("starting the backend worker thread")]
    Spawn(#[source] std::io::Error),
    /// A thread of the set-up panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Runs `app` with the guest library (under test) and the peer's host-runtime application, on
/// this thread; returns its result and the backend session's report.
pub fn run<R>(
    app: impl FnOnce(&mut GuestSockets, &mut HostSockets) -> R,
) -> Result<(R, SessionReport), GuestPathError> {
    let (tenant, peer) = link::interfaces()?;
    let ring = RuntimeConfig::default().ring_capacity;
    let (mut peers, peer_worker) = runtime::external_group(vec![peer], Clock::real(), ring);
    let Some(mut peer_api) = peers.pop() else { unreachable!("one interface, one application side") };
    let engine_cfg = EngineConfig::with_limits(&tenant, 1, MAX_QUEUE_SIZE as u16, &TenantLimits::default());
    let engine = Engine::new(tenant, Clock::real(), engine_cfg);

    let device = NetDevice::new(1)?;
    let mut daemon =
        VhostUserDaemon::new("fair-ctl".into(), device.clone(), GuestMemoryAtomic::new(GuestMem::new()))
            .map_err(GuestPathError::Daemon)?;
    let dir = std::env::temp_dir().join(format!("slimtcp-fair-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let socket = dir.join("vhost.sock");
    let mut listener = Listener::new(&socket, true).map_err(|e| GuestPathError::Listen(socket.clone(), e))?;
    let stop = AtomicBool::new(false);

    let result = std::thread::scope(|s| {
        let (stop, device) = (&stop, &device);
        let control = s.spawn(move || {
            let r = daemon.start(&mut listener).and_then(|()| daemon.wait());
            stop.store(true, Ordering::Release);
            // The daemon's ring-event thread leaves before the daemon is dropped.
            device.signal_exit();
            r
        });
        let worker = std::thread::Builder::new()
            .name("fair-backend".into())
            .spawn_scoped(s, move || backend_loop(engine, peer_worker, device, stop));
        let attached = match &worker {
            Ok(_) => GuestSockets::connect_vhost_user(&socket, GuestConfig::default())
                .map_err(GuestPathError::from),
            // Nothing serves the rings: the guest is not attached (reported below).
            Err(_) => Err(GuestPathError::Panicked("backend worker (not started)")),
        };
        let r = match attached {
            Ok(mut guest) => Ok(app(&mut guest, &mut peer_api)),
            Err(e) => {
                // The control thread may still wait in accept: a connection that hangs up at
                // once ends it.
                let _ = std::os::unix::net::UnixStream::connect(&socket);
                Err(e)
            }
        };
        // The guest is gone (dropped above): the daemon returns, then the worker stops.
        let ctl = control.join().map_err(|_| GuestPathError::Panicked("control"))?;
        let report = match worker {
            Ok(w) => w.join().map_err(|_| GuestPathError::Panicked("backend worker"))??,
            Err(e) => return Err(GuestPathError::Spawn(e)),
        };
        let r = r?;
        if let Err(e) = ctl {
            log::debug!("daemon: {e}");
        }
        Ok((r, report))
    });
    drop(peer_api);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Thread B: the tenant's engine over the guest's rings and the peer's worker, stepped in turn
/// (idling by the bench's one rule, [`Idle`]), until `stop`. Ring stops asked by the
/// control plane (GET_VRING_BASE) are served as slimtcp-vhost's worker serves them.
fn backend_loop<N: Nic>(
    mut engine: Engine<N>,
    mut peer: ExternalWorker,
    device: &NetDevice,
    stop: &AtomicBool,
) -> Result<SessionReport, GuestPathError> {
    let mut idle = Idle::default();
    // The peer runs from the start (its listener); the engine once the guest's rings are there.
    let (vrings, mem) = loop {
        if stop.load(Ordering::Acquire) {
            return Ok(engine.report());
        }
        let work = peer.step().map_err(GuestPathError::Peer)?;
        if let (Some(v), Some(m)) = (device.vrings(), device.memory()) {
            break (v, m);
        }
        idle.pass(work);
    };
    let stops = device.ring_stops();
    stops.set_worker_active(true);
    let run = (|| {
        while !stop.load(Ordering::Acquire) {
            let m: Arc<GuestMem> = mem.memory().into_inner();
            let stopping = stops.take_requests();
            if stopping != 0 {
                for pair in (0..slimtcp_vhost::ring_stop::MAX_PAIRS).filter(|p| stopping & (1 << p) != 0) {
                    engine.stop_transmit_queue(pair, vrings.as_slice(), &m);
                }
                stops.served(stopping);
            }
            let work = engine.step(vrings.as_slice(), &m)?;
            let peer_work = peer.step().map_err(GuestPathError::Peer)?;
            idle.pass(work | peer_work);
        }
        Ok(())
    })();
    stops.set_worker_active(false);
    run.map(|()| engine.report())
}
