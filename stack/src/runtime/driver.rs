//! Who runs the worker: a thread of its own (two-core mode), or the application thread itself,
//! stepping the workers whenever it waits (single-thread, run-to-completion mode).

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rtrb::{Consumer, Producer};
use slimtcp_api::SocketError;

use crate::cpu::CpuError;

use super::messages::{Event, Request};
use super::worker::Step;

/// How an idle worker thread waits for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdlePolicy {
    /// Never sleep (a pinned, dedicated core: lowest latency).
    BusyPoll,
    /// Spin a while, then yield, then nap briefly (shared cores, tests, laptops).
    Backoff,
}

/// Settings of the two-core runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Slots of each ring (requests and events), a power of two is best.
    pub ring_capacity: usize,
    /// Core to pin the worker thread to (`None`: not pinned).
    pub worker_core: Option<usize>,
    /// Worker thread name.
    pub name: String,
    /// How the worker idles.
    pub idle: IdlePolicy,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            ring_capacity: 8192,
            worker_core: None,
            name: "slimtcp-worker".into(),
            idle: IdlePolicy::Backoff,
        }
    }
}

/// Errors starting the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The worker thread could not be created.
    #[error("cannot start the worker thread")]
    Spawn(#[source] std::io::Error),
    /// The worker could not be pinned.
    #[error("cannot pin the worker to core {core}")]
    Pin {
        /// The requested core.
        core: usize,
        /// Why.
        #[source]
        source: CpuError,
    },
}

/// Workers stepped together (one thread, or inline).
pub(super) struct WorkerGroup {
    workers: Vec<Box<dyn Step>>,
    failed: bool,
}

impl std::fmt::Debug for WorkerGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerGroup")
            .field("workers", &self.workers.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl WorkerGroup {
    pub(super) fn new(workers: Vec<Box<dyn Step>>) -> Self {
        WorkerGroup { workers, failed: false }
    }

    /// Steps every worker once; true when any did work. A worker whose NIC failed stops the
    /// group: its applications see `ENETDOWN`.
    pub(super) fn step_all(&mut self) -> Result<bool, SocketError> {
        if self.failed {
            return Err(SocketError::StackDown);
        }
        let mut work = false;
        for w in &mut self.workers {
            match w.step() {
                Ok(did) => work |= did,
                Err(e) => {
                    log::error!("worker stopped: {e}");
                    self.failed = true;
                    return Err(SocketError::StackDown);
                }
            }
        }
        Ok(work)
    }

    pub(super) fn all_apps_gone(&self) -> bool {
        self.workers.iter().all(|w| w.app_gone())
    }
}

/// How the application side makes the worker progress.
#[derive(Debug)]
pub(super) enum Driver {
    /// A worker thread runs on its own.
    Thread,
    /// The application steps the group itself (the lock is never contended: one thread).
    Inline(Arc<Mutex<WorkerGroup>>),
}

/// The application's ends of the rings.
#[derive(Debug)]
pub(super) struct AppEnd {
    pub requests: Producer<Request>,
    pub events: Consumer<Event>,
    pub driver: Driver,
}

impl AppEnd {
    /// `StackDown` when the worker has stopped (cheap: no stepping).
    pub(super) fn check_alive(&self) -> Result<(), SocketError> {
        let down = match &self.driver {
            Driver::Thread => self.requests.is_abandoned(),
            Driver::Inline(group) => group.lock().unwrap_or_else(PoisonError::into_inner).failed,
        };
        if down {
            Err(SocketError::StackDown)
        } else {
            Ok(())
        }
    }

    /// Lets the worker make progress; `StackDown` once it cannot any more.
    pub(super) fn drive(&mut self) -> Result<bool, SocketError> {
        match &self.driver {
            Driver::Thread => {
                if self.events.is_abandoned() && self.events.is_empty() {
                    Err(SocketError::StackDown)
                } else {
                    Ok(false)
                }
            }
            Driver::Inline(group) => group.lock().unwrap_or_else(PoisonError::into_inner).step_all(),
        }
    }
}

/// The worker thread of the two-core runtime. It stops by itself once every application
/// handle it serves is dropped; [`join`](Self::join) waits for that.
#[derive(Debug)]
pub struct WorkerThread {
    handle: JoinHandle<()>,
}

impl WorkerThread {
    /// Waits for the thread to finish. `Err` when it panicked.
    pub fn join(self) -> Result<(), SocketError> {
        self.handle.join().map_err(|_| SocketError::StackDown)
    }

    /// True once the thread has finished.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }
}

/// Spawns, names and (optionally) pins the worker thread for `group`.
pub(super) fn spawn_worker(
    mut group: WorkerGroup,
    cfg: &RuntimeConfig,
) -> Result<WorkerThread, RuntimeError> {
    let core = cfg.worker_core;
    if let Some(core) = core {
        // Check the core before starting anything, so a bad value is a clear error.
        pin_current_check(core)?;
    }
    let idle = cfg.idle;
    let handle = std::thread::Builder::new()
        .name(cfg.name.clone())
        .spawn(move || {
            if let Some(core) = core {
                if let Err(e) = crate::cpu::pin_current_thread(core) {
                    log::warn!("worker not pinned to core {core}: {}", crate::report::error_chain(&e));
                }
            }
            let mut idle_steps: u32 = 0;
            loop {
                match group.step_all() {
                    Ok(true) => idle_steps = 0,
                    Ok(false) => idle_steps = idle_steps.saturating_add(1),
                    Err(_) => break,
                }
                if group.all_apps_gone() {
                    break;
                }
                if idle == IdlePolicy::Backoff {
                    back_off(idle_steps);
                }
            }
        })
        .map_err(RuntimeError::Spawn)?;
    Ok(WorkerThread { handle })
}

/// Spin, then yield, then nap: keeps latency low while busy and the CPU free while idle.
pub(super) fn back_off(idle_steps: u32) {
    if idle_steps < 256 {
        std::hint::spin_loop();
    } else if idle_steps < 4096 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Fails when `core` is not among the cores this process may run on.
fn pin_current_check(core: usize) -> Result<(), RuntimeError> {
    match crate::cpu::current_affinity() {
        Ok(allowed) if allowed.contains(core) => Ok(()),
        Ok(_) => Err(RuntimeError::Pin { core, source: CpuError::NotAllowed(core) }),
        Err(source) => Err(RuntimeError::Pin { core, source }),
    }
}
