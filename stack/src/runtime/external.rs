//! Workers stepped by a thread the caller owns: the two-core runtime's application sides, with
//! the worker loop left to the caller. For a loop that polls something else besides, e.g. a
//! benchmark whose one backend thread serves a guest's engine and a host-runtime peer's
//! interface (`tools/perf/benches/guest_path_fair.rs`).

use slimtcp_api::SocketError;

use super::driver::{Driver, WorkerGroup};
use super::{pair, HostSockets};
use crate::iface::Interface;
use crate::nic::Nic;
use crate::time::Clock;

/// The workers of [`external_group`]: the caller steps them (from one thread at a time).
#[derive(Debug)]
pub struct ExternalWorker {
    group: WorkerGroup,
}

impl ExternalWorker {
    /// Steps every worker once (requests, the interface, events); true when any did work.
    /// `StackDown` once an interface failed (its applications see `ENETDOWN`).
    pub fn step(&mut self) -> Result<bool, SocketError> {
        self.group.step_all()
    }

    /// True once every application side was dropped.
    pub fn apps_gone(&self) -> bool {
        self.group.all_apps_gone()
    }
}

/// Two-core mode without the worker thread: one application side per interface (each used
/// from its own thread, or all from one), and their workers, which the caller steps with
/// [`ExternalWorker::step`] from a thread of its own. `ring` slots per ring (at least 2).
pub fn external_group<N: Nic + Send + 'static>(
    ifaces: Vec<Interface<N>>,
    clock: Clock,
    ring: usize,
) -> (Vec<HostSockets>, ExternalWorker) {
    let mut apps = Vec::new();
    let mut workers = Vec::new();
    for iface in ifaces {
        let (app, worker) =
            pair(iface, clock.clone(), ring.max(2), || Driver::Thread, super::IdlePolicy::Backoff);
        apps.push(app);
        workers.push(worker);
    }
    (apps, ExternalWorker { group: WorkerGroup::new(workers) })
}
