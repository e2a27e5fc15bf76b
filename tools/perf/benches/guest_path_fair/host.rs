//! The host path with two busy threads: both applications (under test and peer) on the
//! caller's thread (A), one host-runtime worker thread (B, busy-polling) serving both
//! interfaces of the memwire link ([`runtime::two_core_group`], as `slimtcp-perf --nic memwire
//! --runtime two-core`).

use slimtcp::runtime::{self, HostSockets, IdlePolicy, RuntimeConfig, RuntimeError};
use slimtcp::time::Clock;

use super::link::{self, LinkError};

/// What failed setting up or running the host path.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    /// The link.
    #[error("link")]
    Link(#[from] LinkError),
    /// The runtime's worker thread.
    #[error("host runtime")]
    Runtime(#[from] RuntimeError),
    /// The worker thread panicked.
    #[error("the worker thread panicked")]
    Panicked,
}

/// Runs `app` with the host runtime's application side under test and the peer's, on this
/// thread.
pub fn run<R>(app: impl FnOnce(&mut HostSockets, &mut HostSockets) -> R) -> Result<R, HostPathError> {
    let (under, peer) = link::interfaces()?;
    let cfg =
        RuntimeConfig { name: "fair-host".into(), idle: IdlePolicy::BusyPoll, ..RuntimeConfig::default() };
    let (apps, worker) = runtime::two_core_group(vec![under, peer], Clock::real(), &cfg)?;
    let [mut under, mut peer]: [HostSockets; 2] = match apps.try_into() {
        Ok(a) => a,
        Err(_) => unreachable!("two interfaces, two application sides"),
    };
    let r = app(&mut under, &mut peer);
    // The worker ends once both application sides are gone.
    drop((under, peer));
    worker.join().map_err(|_| HostPathError::Panicked)?;
    Ok(r)
}
