//! The daemon's running tenants: each on its own serving thread ([`crate::serve_spec`]) with its
//! stop handle, gauges and capture tap. A thread that ends says so on a shared eventfd, which
//! the control loop watches; [`TenantSet::reap`] then joins it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use vmm_sys_util::eventfd::EventFd;

use crate::capture::CaptureTap;
use crate::config::TenantSpec;
use crate::gauges::TenantGauges;
use crate::sandbox::Sandbox;
use crate::server::StopHandle;
use crate::stats::TenantStats;
use crate::worker::WorkerError;

/// A tenant being served.
#[derive(Debug)]
struct Running {
    spec: TenantSpec,
    stop: StopHandle,
    gauges: Arc<TenantGauges>,
    capture: Arc<CaptureTap>,
    /// Set by the thread as it ends (before the eventfd is written).
    done: Arc<AtomicBool>,
    thread: JoinHandle<bool>,
}

/// The running tenants (see the module documentation).
#[derive(Debug)]
pub struct TenantSet {
    running: BTreeMap<String, Running>,
    eal_args: Option<Vec<String>>,
    sandbox: Sandbox,
    ended: Arc<EventFd>,
    failed: usize,
}

impl TenantSet {
    /// An empty set; tenants it starts use the EAL of `eal_args` and `sandbox`, and write
    /// `ended` when their thread ends.
    pub fn new(eal_args: Option<Vec<String>>, sandbox: Sandbox, ended: Arc<EventFd>) -> Self {
        TenantSet { running: BTreeMap::new(), eal_args, sandbox, ended, failed: 0 }
    }

    /// Starts serving `spec` on a thread of its own.
    pub fn start(&mut self, spec: TenantSpec) -> Result<(), WorkerError> {
        let stop = StopHandle::default();
        let gauges = Arc::new(TenantGauges::default());
        let capture = Arc::new(CaptureTap::new());
        let name = format!("{}-serve", spec.name);
        let done = Arc::new(AtomicBool::new(false));
        let thread = {
            let done = Arc::clone(&done);
            let (spec, eal, sandbox, stop, gauges, capture, ended) = (
                spec.clone(),
                self.eal_args.clone(),
                self.sandbox,
                stop.clone(),
                Arc::clone(&gauges),
                Arc::clone(&capture),
                Arc::clone(&self.ended),
            );
            std::thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    let r = crate::serve_spec(&spec, eal.as_deref(), sandbox, &stop, &gauges, &capture);
                    if let Err(e) = &r {
                        log::error!("{}: {}", spec.name, crate::error_chain(e));
                    }
                    done.store(true, Ordering::Release);
                    if let Err(e) = ended.write(1) {
                        log::warn!("{}: telling the control loop the tenant ended: {e}", spec.name);
                    }
                    r.is_ok()
                })
                .map_err(|source| WorkerError::Spawn { name, source })?
        };
        self.running.insert(spec.name.clone(), Running { spec, stop, gauges, capture, done, thread });
        Ok(())
    }

    /// Asks tenant `name` to stop (it drains, then its thread ends).
    pub fn stop(&self, name: &str) {
        if let Some(t) = self.running.get(name) {
            t.stop.stop();
        }
    }

    /// Asks every tenant to stop.
    pub fn stop_all(&self) {
        for t in self.running.values() {
            t.stop.stop();
        }
    }

    /// Joins the tenants whose thread ended; returns their names.
    pub fn reap(&mut self) -> Vec<String> {
        let done: Vec<String> = self
            .running
            .iter()
            .filter(|(_, t)| t.done.load(Ordering::Acquire))
            .map(|(n, _)| n.clone())
            .collect();
        for name in &done {
            if let Some(t) = self.running.remove(name) {
                let ok = t.thread.join().unwrap_or(false);
                if !ok {
                    self.failed += 1;
                }
                log::info!("{name}: tenant ended{}", if ok { "" } else { " with an error" });
            }
        }
        done
    }

    /// Tenants running.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// Whether no tenant runs.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Tenants that ended with an error.
    pub fn failed(&self) -> usize {
        self.failed
    }

    /// The settings of the running tenants, by name.
    pub fn specs(&self) -> impl Iterator<Item = &TenantSpec> {
        self.running.values().map(|t| &t.spec)
    }

    /// Every running tenant's stats, by name.
    pub fn stats(&self) -> Vec<TenantStats> {
        self.running
            .iter()
            .map(|(name, t)| TenantStats::new(name, &t.gauges.read(), &t.gauges.counters()))
            .collect()
    }

    /// Tenant `name`'s capture tap.
    pub fn capture_tap(&self, name: &str) -> Option<Arc<CaptureTap>> {
        self.running.get(name).map(|t| Arc::clone(&t.capture))
    }
}
