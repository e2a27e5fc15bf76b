//! The `slimtcp-vhost` process: its tenants ([`tenants`]) and one control loop on
//! `event-manager` that reacts to signals ([`signals`]: SIGTERM/SIGINT drain every tenant and
//! exit, SIGHUP reads the config file again, [`reload`]), to tenants ending, to the control
//! socket ([`control`], [`protocol`]: stats, captures) and to the Prometheus endpoint
//! ([`metrics`]). The loop thread sleeps in epoll between events; only the workers poll.
//!
//! - [`client`]: the `stats` and `capture` subcommands, the control socket's client side.

pub mod client;
pub mod control;
pub mod metrics;
pub mod protocol;
pub mod reload;
pub mod signals;
pub mod tenants;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use event_manager::{EventManager, EventOps, EventSet, Events, MutEventSubscriber, SubscriberOps};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::config::Config;
use crate::sandbox::SandboxError;
use crate::server::{StopHandle, DRAIN_BOUND};
use crate::worker::WorkerError;
use signals::{SignalError, Signals};
use tenants::TenantSet;

/// How often the loop looks at the library caller's stop handle.
const LOOP_WAKE_MS: i32 = 200;
/// How long the tenants may take to end after a stop, beyond their drain.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Errors of the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The signals could not be set up.
    #[error("signals")]
    Signals(#[from] SignalError),
    /// The sandbox could not be prepared.
    #[error("sandbox")]
    Sandbox(#[from] SandboxError),
    /// A tenant's thread could not be started.
    #[error("starting a tenant")]
    Tenant(#[from] WorkerError),
    /// The eventfd tenants signal their end on could not be made.
    #[error("creating the tenants' eventfd")]
    EventFd(#[source] std::io::Error),
    /// The control loop failed.
    #[error("event loop: {0}")]
    EventLoop(event_manager::Error),
    /// The control socket could not be served.
    #[error("control socket {}", .path.display())]
    Control {
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The metrics endpoint could not be served.
    #[error("metrics endpoint {addr}")]
    Metrics {
        /// Its address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Some tenants failed (each is logged with its error).
    #[error("{failed} of {total} tenants failed (see the log)")]
    TenantsFailed {
        /// Tenants that ended with an error.
        failed: usize,
        /// Tenants started.
        total: usize,
    },
    /// Tenants still ran when the stop's time was up.
    #[error("{0} tenants had not ended {STOP_GRACE:?} after the drain (see the log)")]
    StopTimedOut(usize),
}

/// Where the process is in its life, shared by the loop's subscribers.
#[derive(Debug)]
struct Lifecycle {
    /// The configuration running (updated by reloads).
    config: Config,
    /// When a stop was asked (SIGTERM, SIGINT, the caller's handle).
    stopping: Option<Instant>,
    /// Tenants started, all reloads included.
    started: usize,
}

/// Runs the daemon (see the module documentation) until a stop has drained every tenant, or
/// every tenant ended on its own.
pub fn run(config: &Config, stop: &StopHandle) -> Result<(), DaemonError> {
    // First, before any thread exists: every thread inherits the blocked signals.
    let signals = Signals::block_and_open()?;
    let worker_cores: Vec<usize> = config.tenants.iter().filter_map(|t| t.core).collect();
    crate::worker::keep_control_off(&worker_cores);
    config.sandbox.prepare()?;
    log::info!("{}", config.sandbox.describe());
    let ended = Arc::new(EventFd::new(EFD_NONBLOCK).map_err(DaemonError::EventFd)?);
    let tenants =
        Rc::new(RefCell::new(TenantSet::new(config.eal_args.clone(), config.sandbox, Arc::clone(&ended))));
    for spec in &config.tenants {
        tenants.borrow_mut().start(spec.clone())?;
    }
    let life = Rc::new(RefCell::new(Lifecycle {
        config: config.clone(),
        stopping: None,
        started: config.tenants.len(),
    }));
    let mut loop_ = EventManager::<Box<dyn MutEventSubscriber>>::new().map_err(DaemonError::EventLoop)?;
    loop_.add_subscriber(Box::new(SignalHandler {
        signals,
        tenants: Rc::clone(&tenants),
        life: Rc::clone(&life),
    }));
    loop_.add_subscriber(Box::new(Reaper { ended, tenants: Rc::clone(&tenants) }));
    if let Some(path) = &config.control {
        loop_.add_subscriber(Box::new(control::ControlServer::bind(path, Rc::clone(&tenants))?));
    }
    if let Some(addr) = config.metrics {
        loop_.add_subscriber(Box::new(metrics::MetricsServer::bind(addr, Rc::clone(&tenants))?));
    }
    log::info!("serving {} tenants", tenants.borrow().len());
    while !tenants.borrow().is_empty() {
        loop_.run_with_timeout(LOOP_WAKE_MS).map_err(DaemonError::EventLoop)?;
        if stop.is_stopped() {
            begin_stop(&tenants.borrow(), &mut life.borrow_mut(), "the caller");
        }
        let stopping = life.borrow().stopping;
        if let Some(since) = stopping {
            let left = tenants.borrow().len();
            if left > 0 && since.elapsed() > DRAIN_BOUND + STOP_GRACE {
                return Err(DaemonError::StopTimedOut(left));
            }
        }
    }
    let (failed, total) = (tenants.borrow().failed(), life.borrow().started);
    let stopped = life.borrow().stopping.is_some();
    if failed > 0 || !stopped {
        return Err(DaemonError::TenantsFailed { failed: failed.max(usize::from(!stopped)), total });
    }
    log::info!("every tenant drained; exiting");
    Ok(())
}

/// Serves every connection waiting on a non-blocking listener (`accept`) with `serve`; a
/// client's failure is logged as `what`'s and ends nothing else.
fn serve_pending<S>(
    what: &str,
    mut accept: impl FnMut() -> std::io::Result<S>,
    mut serve: impl FnMut(S) -> std::io::Result<()>,
) {
    loop {
        match accept() {
            Ok(stream) => {
                if let Err(e) = serve(stream) {
                    log::warn!("{what}: a client: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => {
                log::warn!("{what}: accept: {e}");
                break;
            }
        }
    }
}

/// Asks every tenant to stop (once).
fn begin_stop(tenants: &TenantSet, life: &mut Lifecycle, by: &str) {
    if life.stopping.is_none() {
        log::info!("stopping ({by}): draining {} tenants", tenants.len());
        life.stopping = Some(Instant::now());
        tenants.stop_all();
    }
}

/// SIGTERM, SIGINT and SIGHUP.
struct SignalHandler {
    signals: Signals,
    tenants: Rc<RefCell<TenantSet>>,
    life: Rc<RefCell<Lifecycle>>,
}

impl MutEventSubscriber for SignalHandler {
    fn process(&mut self, _events: Events, _ops: &mut EventOps) {
        while let Some(signal) = self.signals.next() {
            let mut life = self.life.borrow_mut();
            match signal {
                libc::SIGHUP if life.stopping.is_none() => {
                    let mut tenants = self.tenants.borrow_mut();
                    let started = reload::reload(&mut life.config, &mut tenants);
                    life.started += started;
                }
                libc::SIGHUP => log::info!("SIGHUP while stopping: ignored"),
                s => begin_stop(&self.tenants.borrow(), &mut life, signals::name(s)),
            }
        }
    }

    fn init(&mut self, ops: &mut EventOps) {
        if let Err(e) = ops.add(Events::new(&self.signals, EventSet::IN)) {
            log::error!("cannot watch the signals: {e}");
        }
    }
}

/// Joins tenants whose thread ended.
struct Reaper {
    ended: Arc<EventFd>,
    tenants: Rc<RefCell<TenantSet>>,
}

impl MutEventSubscriber for Reaper {
    fn process(&mut self, _events: Events, _ops: &mut EventOps) {
        // Read to re-arm; the count does not matter, the set knows which threads ended.
        let _ = self.ended.read();
        self.tenants.borrow_mut().reap();
    }

    fn init(&mut self, ops: &mut EventOps) {
        if let Err(e) = ops.add(Events::new(self.ended.as_ref(), EventSet::IN)) {
            log::error!("cannot watch the tenants' ends: {e}");
        }
    }
}
