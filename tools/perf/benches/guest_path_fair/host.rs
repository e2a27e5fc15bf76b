//! The host path with two busy threads: both applications (under test and peer) on the
//! caller's thread (A); on thread B the host runtime's workers of both interfaces of the
//! memwire link, stepped in turn as the runtime's own worker thread steps its group
//! (`runtime::two_core_group`, `slimtcp-perf --nic memwire --runtime two-core`), here through
//! [`runtime::external_group`] so that thread B idles by the same rule ([`Idle`]) as the guest
//! path's.

use std::sync::atomic::{AtomicBool, Ordering};

use slimtcp::api::SocketError;
use slimtcp::runtime::{self, ExternalWorker, HostSockets, RuntimeConfig};
use slimtcp::time::Clock;

use super::idle::Idle;
use super::link::{self, LinkError};

/// What failed setting up or running the host path.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    /// The link.
    #[error("link")]
    Link(#[from] LinkError),
    /// The worker thread could not be started.
    #[error("starting the worker thread")]
    Spawn(#[source] std::io::Error),
    /// An interface failed (the workers stopped).
    #[error("worker")]
    Worker(#[source] SocketError),
    /// The worker thread panicked.
    #[error("the worker thread panicked")]
    Panicked,
}

/// Runs `app` with the host runtime's application side under test and the peer's, on this
/// thread.
pub fn run<R>(app: impl FnOnce(&mut HostSockets, &mut HostSockets) -> R) -> Result<R, HostPathError> {
    let (under, peer) = link::interfaces()?;
    let ring = RuntimeConfig::default().ring_capacity;
    let (apps, workers) = runtime::external_group(vec![under, peer], Clock::real(), ring);
    let [mut under, mut peer]: [HostSockets; 2] = match apps.try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("two interfaces, two application sides"),
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let stop = &stop;
        let worker = std::thread::Builder::new()
            .name("fair-host".into())
            .spawn_scoped(s, move || worker_loop(workers, stop))
            .map_err(HostPathError::Spawn)?;
        let r = app(&mut under, &mut peer);
        stop.store(true, Ordering::Release);
        worker.join().map_err(|_| HostPathError::Panicked)??;
        Ok(r)
    })
}

/// Thread B: both workers stepped in turn until `stop`.
fn worker_loop(mut workers: ExternalWorker, stop: &AtomicBool) -> Result<(), HostPathError> {
    let mut idle = Idle::default();
    while !stop.load(Ordering::Acquire) {
        idle.pass(workers.step().map_err(HostPathError::Worker)?);
    }
    Ok(())
}
