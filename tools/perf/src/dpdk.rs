//! `--nic dpdk`: the EAL from the arguments before `--`, then one queue of the `--iface` port.

use slimtcp::nic::dpdk::{DpdkNic, Eal, EalError, PortConfig, PortError};

/// Why the DPDK NIC could not start.
#[derive(Debug, thiserror::Error)]
pub enum DpdkSetupError {
    /// The EAL rejected its arguments or failed to start.
    #[error("starting the EAL")]
    Eal(#[source] EalError),
    /// The port could not be configured.
    #[error("opening port {port}")]
    Port {
        /// `--iface`.
        port: String,
        /// Why.
        #[source]
        source: PortError,
    },
    /// The port came up without a queue.
    #[error("port {port} has no queue")]
    NoQueue {
        /// `--iface`.
        port: String,
    },
}

/// Starts the EAL with `eal_args` and opens queue 0 of `port`.
pub fn open(eal_args: &[String], port: &str, burst: usize) -> Result<DpdkNic, DpdkSetupError> {
    let eal = Eal::init(eal_args).map_err(DpdkSetupError::Eal)?;
    let config = PortConfig { burst, promiscuous: true, ..PortConfig::new(port) };
    let mut nics = DpdkNic::open(eal, &config)
        .map_err(|source| DpdkSetupError::Port { port: port.to_owned(), source })?;
    if nics.is_empty() {
        return Err(DpdkSetupError::NoQueue { port: port.to_owned() });
    }
    Ok(nics.swap_remove(0))
}
