//! A tenant: one vhost-user socket, served connection after connection. Each connection gets a
//! new daemon and device (a daemon takes one connection only); the tenant's interface (and NIC)
//! outlives connections unless a worker panic lost it, in which case it is built anew.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::Nic;
use slimtcp::time::Clock;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

use vhost::vhost_user::Listener;
use vhost_user_backend::VhostUserDaemon;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};

use crate::config::{TenantSpec, MAX_QUEUE_SIZE};
use crate::device::{DeviceError, NetDevice};
use crate::engine::{Engine, EngineConfig, SessionReport, TenantLimits};
use crate::gauges::{SessionReading, TenantGauges, PUBLISH_EVERY};
use crate::guest_mem::GuestMem;
use crate::relay::{Relay, RelayError};
use crate::sandbox::{Sandbox, SandboxError, ThreadKind};
use crate::worker::{spawn_worker, WorkerError, WorkerExit};

/// Idle polls spun before the worker starts yielding its core between polls.
const SPIN_IDLE: u32 = 4096;
/// Idle polls after which the worker naps between polls (a guest that went quiet).
const NAP_IDLE: u32 = 1 << 20;
/// The nap.
const NAP: Duration = Duration::from_micros(50);

/// Errors of a tenant.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The socket could not be listened on.
    #[error("listening on {path}")]
    Listen {
        /// The socket path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A VMM's connection could not be accepted.
    #[error("accepting a VMM on {path}")]
    Accept {
        /// The socket path.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The daemon's end of a connection could not be set up.
    #[error("connecting the daemon to the VMM")]
    DaemonSocket(#[source] std::io::Error),
    /// The relay between the VMM and the daemon could not start.
    #[error("relay")]
    Relay(#[from] RelayError),
    /// The daemon failed.
    #[error("vhost-user daemon: {0}")]
    Daemon(vhost_user_backend::Error),
    /// The device could not be made.
    #[error("device")]
    Device(#[from] DeviceError),
    /// The worker could not be started.
    #[error("worker")]
    Worker(#[from] WorkerError),
    /// The sandbox could not be prepared or a thread could not be filtered.
    #[error("sandbox")]
    Sandbox(#[from] SandboxError),
    /// The NIC could not be opened.
    #[error("opening the NIC: {0}")]
    Nic(String),
}

/// What a tenant needs besides its NIC.
#[derive(Debug, Clone)]
pub struct TenantConfig {
    /// Socket path.
    pub socket: std::path::PathBuf,
    /// The interface configuration (addresses, gateway, MAC).
    pub iface: InterfaceConfig,
    /// Queue pairs.
    pub pairs: usize,
    /// Worker core.
    pub core: Option<usize>,
    /// A name for logs and the worker thread.
    pub name: String,
    /// Seccomp filters on the worker and control threads (docs/operating.md, "Sandboxing").
    pub sandbox: Sandbox,
    /// The guest's resource limits (the UDP queue depth is `iface.udp_queue`).
    pub limits: TenantLimits,
}

impl TenantConfig {
    /// From a validated tenant of the command line, filtered as `sandbox` says.
    pub fn from_spec(t: &TenantSpec, sandbox: Sandbox) -> Self {
        let mut iface =
            InterfaceConfig::new(t.mac.unwrap_or(crate::config::DEFAULT_MAC), t.ip.addr, t.ip.prefix_len);
        // No MAC given: a DPDK port's own (the one its switch or PF expects), DEFAULT_MAC on a
        // TAP (whose own is the kernel side's).
        iface.mac_from_nic = t.mac.is_none();
        iface.gateway = t.gateway;
        iface.udp_queue = t.udp_queue;
        iface.rx_memory = t.rx_memory;
        TenantConfig {
            socket: t.socket.clone(),
            iface,
            pairs: t.queue_pairs,
            core: t.core,
            name: t.name.clone(),
            sandbox,
            limits: t.limits,
        }
    }
}

/// A handle to stop a tenant's serve loop (between connections and during one).
#[derive(Debug, Clone, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Asks the tenant to stop.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether stop was asked.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Serves connections on the tenant's socket until `stop`, `max_connections` (if any) are
/// served, or an error. `make_nic` builds the NIC when the tenant has no interface.
pub fn serve_tenant<N, F>(
    cfg: &TenantConfig,
    make_nic: F,
    stop: &StopHandle,
    max_connections: Option<usize>,
) -> Result<(), ServerError>
where
    N: Nic + Send + 'static,
    F: FnMut() -> Result<N, String>,
{
    serve_tenant_reporting(cfg, make_nic, stop, max_connections, |_| {})
}

/// [`serve_tenant`], calling `on_session` with each connection's report when it ends (the
/// report is logged as well).
pub fn serve_tenant_reporting<N, F, R>(
    cfg: &TenantConfig,
    make_nic: F,
    stop: &StopHandle,
    max_connections: Option<usize>,
    on_session: R,
) -> Result<(), ServerError>
where
    N: Nic + Send + 'static,
    F: FnMut() -> Result<N, String>,
    R: FnMut(&SessionReport),
{
    serve_tenant_observed(cfg, make_nic, stop, max_connections, on_session, &Arc::default())
}

/// [`serve_tenant_reporting`], with the worker publishing what it holds into `gauges` while it
/// serves (every [`crate::gauges::PUBLISH_EVERY`] steps and when it goes idle).
pub fn serve_tenant_observed<N, F, R>(
    cfg: &TenantConfig,
    mut make_nic: F,
    stop: &StopHandle,
    max_connections: Option<usize>,
    mut on_session: R,
    gauges: &Arc<TenantGauges>,
) -> Result<(), ServerError>
where
    N: Nic + Send + 'static,
    F: FnMut() -> Result<N, String>,
    R: FnMut(&SessionReport),
{
    crate::worker::remember_affinity();
    if let Some(core) = cfg.core {
        // A core the worker cannot have stops the tenant here, with the reason, rather than
        // each VMM connection later.
        crate::worker::check_core(&cfg.name, core)?;
    }
    cfg.sandbox.prepare()?;
    // The tenant's NIC (a TAP with its host address, a DPDK port) exists from the start, before
    // the socket (whose presence says the tenant is ready), and outlives VMM connections: a host
    // service can bind the host address before the VM boots. Reopened at the next connection
    // only when it failed.
    let mut iface: Option<Interface<N>> = Some(new_interface(cfg, make_nic().map_err(ServerError::Nic)?));
    let path = cfg.socket.display().to_string();
    // An existing file (a socket left by an earlier run) is replaced.
    let _ = std::fs::remove_file(&cfg.socket);
    let listener = UnixListener::bind(&cfg.socket)
        .map_err(|source| ServerError::Listen { path: path.clone(), source })?;
    let mut served = 0usize;
    let mut backoff = Backoff::default();
    log::info!("{}: serving on {path}", cfg.name);
    while !stop.is_stopped() && max_connections.is_none_or(|m| served < m) {
        // Everything a connection needs (descriptors, threads, the NIC) can run out because of
        // other tenants or their VMMs; that is never the end of this tenant: it waits and tries
        // again (docs/operating.md, "Hostile VMMs").
        match serve_connection(
            cfg,
            &listener,
            &mut iface,
            &mut make_nic,
            stop,
            served,
            &mut on_session,
            gauges,
        ) {
            Ok(()) => {
                served += 1;
                backoff = Backoff::default();
            }
            Err(e) => {
                let wait = backoff.next();
                log::warn!("{}: {}; trying again in {wait:?}", cfg.name, crate::error_chain(&e));
                sleep_unless_stopped(wait, stop);
            }
        }
    }
    Ok(())
}

/// How often a tenant waiting for a VMM looks at its stop handle.
const ACCEPT_WAKE: Duration = Duration::from_millis(100);

/// The next VMM on `listener`, or `None` once `stop` is asked (looked at every
/// [`ACCEPT_WAKE`]; the thread sleeps in poll(2) in between).
fn accept_unless_stopped(listener: &UnixListener, stop: &StopHandle) -> std::io::Result<Option<UnixStream>> {
    use std::os::fd::AsRawFd;
    while !stop.is_stopped() {
        let mut fds = [libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        // SAFETY: `fds` is one valid pollfd for the duration of the call; the timeout is bounded.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, ACCEPT_WAKE.as_millis() as libc::c_int) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n > 0 {
            return listener.accept().map(|(s, _)| Some(s));
        }
    }
    Ok(None)
}

/// The tenant's interface over `nic`, with the NIC's own MAC when the tenant gave none and the
/// NIC has one (a DPDK port); logs the MAC it uses.
fn new_interface<N: Nic>(cfg: &TenantConfig, nic: N) -> Interface<N> {
    let iface = Interface::new(nic, cfg.iface.clone());
    let mac = iface.config().mac;
    let whose = match (cfg.iface.mac_from_nic, iface.nic().mac_address()) {
        (false, _) => "configured",
        (true, Some(_)) => "the NIC's own",
        (true, None) => "the default",
    };
    log::info!("{}: stack MAC {mac} ({whose})", cfg.name);
    iface
}

/// Waits between attempts after a transient failure: 10 ms doubling up to 2 s.
#[derive(Debug)]
struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Duration::from_millis(10))
    }
}

impl Backoff {
    fn next(&mut self) -> Duration {
        let now = self.0;
        self.0 = (self.0 * 2).min(Duration::from_secs(2));
        now
    }
}

/// Sleeps `d`, or less when `stop` is asked.
fn sleep_unless_stopped(d: Duration, stop: &StopHandle) {
    let until = std::time::Instant::now() + d;
    while !stop.is_stopped() {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(20)));
    }
}

/// Accepts one VMM and serves it until it leaves. Fails (with nothing left behind) when the
/// connection could not be set up.
// The tenant's loop state, passed through as it is: a struct would only rename it.
#[allow(clippy::too_many_arguments)]
fn serve_connection<N, F, R>(
    cfg: &TenantConfig,
    listener: &UnixListener,
    iface: &mut Option<Interface<N>>,
    make_nic: &mut F,
    stop: &StopHandle,
    served: usize,
    on_session: &mut R,
    gauges: &Arc<TenantGauges>,
) -> Result<(), ServerError>
where
    N: Nic + Send + 'static,
    F: FnMut() -> Result<N, String>,
    R: FnMut(&SessionReport),
{
    let path = cfg.socket.display().to_string();
    let device = NetDevice::new(cfg.pairs)?;
    let launcher = format!("{}-launch", cfg.name);
    let mut daemon = new_daemon(cfg, &device, &launcher)?;
    let Some(vmm) = accept_unless_stopped(listener, stop)
        .map_err(|source| ServerError::Accept { path: path.clone(), source })?
    else {
        return Ok(());
    };
    // The NIC first: a VMM that cannot be served is turned away before the relay starts.
    let the_iface = match iface.take() {
        Some(i) => i,
        None => new_interface(cfg, make_nic().map_err(ServerError::Nic)?),
    };
    let relay = match connect_daemon(&mut daemon, vmm, cfg, &launcher, served) {
        Ok(r) => r,
        Err(e) => {
            *iface = Some(the_iface);
            return Err(e);
        }
    };
    let connection = served + 1;
    log::info!("{}: VMM connected (connection {connection})", cfg.name);
    let engine_cfg = EngineConfig::with_limits(&the_iface, cfg.pairs, MAX_QUEUE_SIZE as u16, &cfg.limits);
    let engine = Engine::new(the_iface, Clock::real(), engine_cfg);
    let signals = ConnectionSignals::new();
    let worker = match spawn_engine_worker(cfg, engine, &device, &signals, stop, gauges) {
        Ok(w) => w,
        Err(e) => {
            // The engine (and the interface) went with the closure: the NIC is opened anew.
            end_connection(&daemon, &device, relay);
            return Err(e.into());
        }
    };
    let watchdog = spawn_watchdog(cfg, &daemon, &signals, stop);
    log_connection_end(&cfg.name, daemon.wait());
    signals.conn_stop.stop();
    device.signal_exit();
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    *iface = join_worker(&cfg.name, worker, &signals.handed_back, on_session);
    drop(daemon);
    relay.join();
    crate::sigbus::release_unused();
    Ok(())
}

/// What a connection's worker returns: the interface, whether it failed, the session's report.
type WorkerResult<N> = (Interface<N>, bool, SessionReport);

/// What the threads of one connection share.
struct ConnectionSignals<N: Nic> {
    /// Set when the connection is over (the daemon returned).
    conn_stop: StopHandle,
    /// Set when the worker ends, by returning or unwinding.
    worker_ended: StopHandle,
    /// A worker that panics hands its engine back here before the panic goes on, so that the
    /// NIC is closed by the serving (unfiltered) thread, not by the worker's unwinding under its
    /// filter.
    handed_back: Arc<Mutex<Option<Engine<N>>>>,
}

impl<N: Nic> ConnectionSignals<N> {
    fn new() -> Self {
        ConnectionSignals {
            conn_stop: StopHandle::default(),
            worker_ended: StopHandle::default(),
            handed_back: Arc::new(Mutex::new(None)),
        }
    }
}

/// A daemon for one connection. Its threads (its epoll threads now, its request thread at
/// start) and the relay's are spawned under the control filter, which they inherit.
fn new_daemon(
    cfg: &TenantConfig,
    device: &NetDevice,
    launcher: &str,
) -> Result<VhostUserDaemon<NetDevice>, ServerError> {
    cfg.sandbox
        .run_confined(ThreadKind::Control, launcher, || {
            VhostUserDaemon::new(
                format!("{}-ctl", cfg.name),
                device.clone(),
                GuestMemoryAtomic::new(GuestMem::new()),
            )
        })?
        .map_err(ServerError::Daemon)
}

/// Starts the connection's worker: pinned, confined to the worker filter, then the data path
/// ([`run_worker`]) until the connection or the tenant stops.
fn spawn_engine_worker<N: Nic + Send + 'static>(
    cfg: &TenantConfig,
    engine: Engine<N>,
    device: &NetDevice,
    signals: &ConnectionSignals<N>,
    tenant_stop: &StopHandle,
    gauges: &Arc<TenantGauges>,
) -> Result<JoinHandle<WorkerExit<WorkerResult<N>>>, WorkerError> {
    let device = device.clone();
    let conn_stop = signals.conn_stop.clone();
    let tenant_stop = tenant_stop.clone();
    let ended = EndGuard(signals.worker_ended.clone());
    let sandbox = cfg.sandbox;
    let gauges = Arc::clone(gauges);
    let handed_back = Arc::clone(&signals.handed_back);
    spawn_worker(&format!("{}-worker", cfg.name), cfg.core, move || {
        let _ended = ended;
        let mut engine = engine;
        // Pinned, and the NIC open and set up for this thread: the rest is the data path.
        engine.prepare_thread();
        if let Err(e) = sandbox.confine(sandbox.worker_kind()) {
            log::error!("{}; closing the connection", crate::error_chain(&e));
            let report = engine.report();
            return (engine.into_interface(), false, report);
        }
        let run = catch_unwind(AssertUnwindSafe(|| {
            run_worker(&mut engine, &device, &conn_stop, &tenant_stop, &gauges)
        }));
        match run {
            Ok((failed, report)) => (engine.into_interface(), failed, report),
            Err(panic) => {
                *handed_back.lock().unwrap_or_else(PoisonError::into_inner) = Some(engine);
                resume_unwind(panic)
            }
        }
    })
}

/// Starts the thread that resets the device when the worker ends on its own (panic, NIC
/// failure, poisoned memory) or the tenant stops: the connection is shut down, the VMM sees the
/// backend go away and may reconnect. Without that thread the connection is shut down at once.
fn spawn_watchdog<N: Nic>(
    cfg: &TenantConfig,
    daemon: &VhostUserDaemon<NetDevice>,
    signals: &ConnectionSignals<N>,
    tenant_stop: &StopHandle,
) -> Option<JoinHandle<()>> {
    let shutdown = daemon.shutdown_handle();
    let conn_stop = signals.conn_stop.clone();
    let tenant_stop = tenant_stop.clone();
    let worker_ended = signals.worker_ended.clone();
    let sandbox = cfg.sandbox;
    let watchdog = std::thread::Builder::new().name(format!("{}-watch", cfg.name)).spawn(move || {
        if let Err(e) = sandbox.confine(ThreadKind::Control) {
            // Unfiltered, it still does its one job.
            log::warn!("{}", crate::error_chain(&e));
        }
        while !conn_stop.is_stopped() {
            if tenant_stop.is_stopped() {
                // The worker drains first, while the rings and memory are there; then the
                // connection goes.
                let until = std::time::Instant::now() + DRAIN_BOUND + Duration::from_secs(1);
                while !worker_ended.is_stopped()
                    && !conn_stop.is_stopped()
                    && std::time::Instant::now() < until
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            if worker_ended.is_stopped() || tenant_stop.is_stopped() {
                if let Some(s) = &shutdown {
                    s.shutdown();
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    match watchdog {
        Ok(w) => Some(w),
        Err(source) => {
            log::warn!("{}: no watchdog thread ({source}); closing the connection", cfg.name);
            if let Some(s) = daemon.shutdown_handle() {
                s.shutdown();
            }
            None
        }
    }
}

/// Logs how the daemon's connection ended.
fn log_connection_end(tenant: &str, result: Result<(), vhost_user_backend::Error>) {
    match result {
        // A hang-up is how a VMM (or guest library) normally leaves.
        Ok(())
        | Err(vhost_user_backend::Error::HandleRequest(
            vhost::vhost_user::Error::Disconnected | vhost::vhost_user::Error::PartialMessage,
        )) => log::info!("{tenant}: VMM disconnected"),
        Err(e) => log::warn!("{tenant}: connection ended: {e}"),
    }
}

/// Waits for the worker and reports its session. Returns the interface for the next connection,
/// or `None` when the NIC is to be opened anew: the interface failed, or the worker was lost
/// (its engine, if it handed it back, and with it the NIC, is closed here).
fn join_worker<N, R>(
    tenant: &str,
    worker: JoinHandle<WorkerExit<WorkerResult<N>>>,
    handed_back: &Mutex<Option<Engine<N>>>,
    on_session: &mut R,
) -> Option<Interface<N>>
where
    N: Nic,
    R: FnMut(&SessionReport),
{
    match worker.join() {
        Ok(WorkerExit::Done((i, failed, report))) => {
            on_session(&report);
            if failed {
                // Closed here rather than on the worker: closing a NIC (a DPDK port's stop and
                // close) makes calls the worker's filter refuses.
                drop(i);
                log::warn!("{tenant}: interface failed; reopening the NIC");
                None
            } else {
                Some(i)
            }
        }
        Ok(WorkerExit::Panicked(_) | WorkerExit::NotStarted) | Err(_) => {
            drop(handed_back.lock().unwrap_or_else(PoisonError::into_inner).take());
            log::warn!("{tenant}: worker lost; reopening the NIC");
            None
        }
    }
}

/// Ends a connection whose worker never started.
fn end_connection(daemon: &VhostUserDaemon<NetDevice>, device: &NetDevice, relay: Relay) {
    if let Some(s) = daemon.shutdown_handle() {
        s.shutdown();
    }
    device.signal_exit();
    relay.shutdown();
    relay.join();
}

/// Hands a VMM's connection to `daemon` through a [`Relay`]: the daemon accepts its end on a
/// private abstract socket, the relay joins the two. The daemon's request thread and the
/// relay's threads start under the control filter (from the launcher thread `launcher`).
fn connect_daemon(
    daemon: &mut VhostUserDaemon<NetDevice>,
    vmm: UnixStream,
    cfg: &TenantConfig,
    launcher: &str,
    connection: usize,
) -> Result<Relay, ServerError> {
    let tenant = cfg.name.as_str();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("slimtcp-vhost.{}.{unique}.{tenant}.{connection}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).map_err(ServerError::DaemonSocket)?;
    let private = UnixListener::bind_addr(&addr).map_err(ServerError::DaemonSocket)?;
    let daemon_end = UnixStream::connect_addr(&addr).map_err(ServerError::DaemonSocket)?;
    cfg.sandbox.run_confined(ThreadKind::Control, launcher, move || {
        // The connection is already queued: the daemon accepts it at once.
        daemon.start(&mut Listener::from(private)).map_err(ServerError::Daemon)?;
        Ok(Relay::spawn(tenant, vmm, daemon_end)?)
    })?
}

/// Sets its flag when dropped: on a worker's return and on its unwinding alike.
struct EndGuard(StopHandle);

impl Drop for EndGuard {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// Longest a tenant's end may spend draining (resets out, chains back) before the worker stops.
pub const DRAIN_BOUND: Duration = Duration::from_millis(500);

/// The worker loop: waits for rings and memory, then busy-polls the engine until the
/// connection ends, or drains it ([`Engine::drain`]) when the tenant stops. Returns whether the
/// interface failed (then the serving thread closes it and opens the NIC anew; the worker does
/// not, its filter refuses what closing a NIC calls) and the session's report.
fn run_worker<N: Nic>(
    engine: &mut Engine<N>,
    device: &NetDevice,
    conn_stop: &StopHandle,
    tenant_stop: &StopHandle,
    gauges: &TenantGauges,
) -> (bool, SessionReport) {
    let mut idle = 0u32;
    let mut since_publish = 0u32;
    let mut failed = false;
    let (mut polls, mut busy) = (0u64, 0u64);
    while !conn_stop.is_stopped() && !tenant_stop.is_stopped() {
        let (Some(vrings), Some(mem)) = (device.vrings(), device.memory()) else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let stops = device.ring_stops();
        stops.set_worker_active(true);
        let mut faults_seen = crate::sigbus::recovered();
        while !conn_stop.is_stopped() {
            if device.memory_poisoned(&mut faults_seen) {
                log::error!(
                    "guest memory was truncated under its mapping by the VMM (SIGBUS recovered); \
                     closing the connection"
                );
                break;
            }
            let m = mem.memory().into_inner();
            if tenant_stop.is_stopped() {
                let drained = engine.drain(vrings.as_slice(), &m, DRAIN_BOUND);
                log::info!("tenant stopping: {drained}");
                break;
            }
            let stopping = stops.take_requests();
            if stopping != 0 {
                for pair in (0..crate::ring_stop::MAX_PAIRS).filter(|p| stopping & (1 << p) != 0) {
                    let n = engine.stop_transmit_queue(pair, vrings.as_slice(), &m);
                    log::info!("transmit queue {pair} stopped by the VMM: {n} chains given back");
                }
                stops.served(stopping);
            }
            since_publish += 1;
            if since_publish >= PUBLISH_EVERY || idle == SPIN_IDLE {
                publish(engine, gauges, polls, busy);
                since_publish = 0;
            }
            polls += 1;
            match engine.step(vrings.as_slice(), &m) {
                Ok(true) => {
                    idle = 0;
                    busy += 1;
                }
                Ok(false) => {
                    idle = idle.saturating_add(1);
                    if idle >= NAP_IDLE {
                        std::thread::sleep(NAP);
                    } else if idle >= SPIN_IDLE {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Err(e) => {
                    log::error!("interface failed: {e}");
                    failed = true;
                    break;
                }
            }
        }
        stops.set_worker_active(false);
        break;
    }
    gauges.publish(&engine.gauges());
    let report = engine.report();
    gauges.publish_final_counters(session_reading(engine, polls, busy));
    log::info!("session counters: {report}");
    (failed, report)
}

/// Publishes what the engine holds and counts ([`crate::gauges`]).
fn publish<N: Nic>(engine: &Engine<N>, gauges: &TenantGauges, polls: u64, busy: u64) {
    gauges.publish(&engine.gauges());
    gauges.publish_counters(session_reading(engine, polls, busy));
}

/// The session's counters as the worker publishes them.
fn session_reading<N: Nic>(engine: &Engine<N>, polls: u64, busy_polls: u64) -> SessionReading {
    let iface = engine.iface();
    SessionReading {
        stack: iface.counters(),
        tcp_states: iface.tcp_state_counts(),
        report: engine.report(),
        polls,
        busy_polls,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::TenantConfig;
    use crate::config::{Args, Config, DEFAULT_MAC};
    use crate::sandbox::Sandbox;

    /// The tenant of `slimtcp-vhost --socket .. --tap t0 --ip .. EXTRA`.
    fn tenant(extra: &[&str]) -> TenantConfig {
        let base =
            ["slimtcp-vhost", "--socket", "/tmp/slimtcp-mac.sock", "--tap", "t0", "--ip", "10.0.0.2/24"];
        let args = Args::parse_from(base.iter().chain(extra));
        let config = Config::try_from(args).expect("valid flags");
        TenantConfig::from_spec(&config.tenants[0], Sandbox::Off)
    }

    #[test]
    fn the_stack_takes_the_nics_mac_only_when_the_tenant_gives_none() {
        let none = tenant(&[]);
        assert!(none.iface.mac_from_nic, "no mac: the NIC's own, when it has one");
        assert_eq!(none.iface.mac, DEFAULT_MAC, "and the default when it has none (a TAP)");
        let given = tenant(&["--mac", "02:00:00:00:77:01"]);
        assert!(!given.iface.mac_from_nic, "a mac given is used");
        assert_eq!(given.iface.mac.to_string(), "02:00:00:00:77:01");
    }
}
