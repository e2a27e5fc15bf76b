//! One run from a validated [`Config`] to a [`Summary`]: SlimTCP's host runtime, or the Linux
//! kernel with `--kernel`.

use crate::config::{Config, Role};
use crate::host::{self, HostError};
use crate::kernel::KernelSockets;
use crate::report::Summary;
use crate::workload::{self, Progress, WorkloadError};

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The SlimTCP run failed.
    #[error("slimtcp")]
    Host(#[from] HostError),
    /// The kernel run failed.
    #[error("kernel")]
    Kernel(#[source] WorkloadError),
    /// `--kernel` needs a role.
    #[error("--kernel runs one role: give --listen or --connect-ip")]
    KernelNeedsRole,
}

/// Runs `cfg`, handing each progress interval to `progress`.
pub fn run(cfg: &Config, progress: Progress<'_>) -> Result<Summary, RunError> {
    let measurement = if cfg.kernel { run_kernel(cfg, progress)? } else { host::run(cfg, progress)? };
    Ok(Summary {
        stack: if cfg.kernel { "linux" } else { "slimtcp" },
        nic: if cfg.kernel { "kernel".to_owned() } else { cfg.nic.label() },
        runtime: match (&cfg.nic, cfg.kernel) {
            (_, true) => "kernel",
            (crate::config::NicChoice::Guest { .. }, false) => "guest-lib",
            _ => cfg.runtime.label(),
        },
        role: cfg.role.label(),
        zero_copy: cfg.zero_copy,
        mss: cfg.mss,
        socket_buffer: host::settings(cfg).buffer,
        measurement,
    })
}

fn run_kernel(cfg: &Config, progress: Progress<'_>) -> Result<workload::Measurement, RunError> {
    let mut api = KernelSockets::new();
    let s = host::settings(cfg);
    let duration = cfg.duration.unwrap_or(crate::config::DEFAULT_DURATION);
    match (cfg.role, cfg.udp) {
        (Role::Sender, true) => {
            workload::udp::run_sender(&mut api, cfg.connect, cfg.connections, s, duration, progress)
        }
        (Role::Receiver, true) => {
            workload::udp::run_receiver(&mut api, cfg.listen_port, s, cfg.duration, progress)
        }
        (Role::Sender, false) => {
            workload::run_sender(&mut api, cfg.connect, cfg.connections, s, duration, progress)
        }
        (Role::Receiver, false) => {
            let expect = cfg.connections_given.then_some(cfg.connections);
            workload::run_receiver(&mut api, cfg.listen_port, s, cfg.duration, expect, progress)
        }
        (Role::Both, _) => return Err(RunError::KernelNeedsRole),
    }
    .map_err(RunError::Kernel)
}
