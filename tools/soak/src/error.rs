//! The soak's set-up errors. What the soak finds (data mismatches, stalls, growth) is not an
//! error of the driver: those are findings, listed in the summary and turned into exit 1.

use std::path::PathBuf;

/// Why the soak could not run.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    /// A memwire link could not be built.
    #[error("building the memwire link of tenant {tenant}")]
    Link {
        /// The tenant.
        tenant: &'static str,
        /// Why.
        #[source]
        source: slimtcp::nic::memwire::MemwireError,
    },
    /// A thread could not be started.
    #[error("starting thread {name}")]
    Spawn {
        /// The thread's name.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A tenant's backend did not create its socket.
    #[error("tenant {tenant}'s backend did not listen on {path}")]
    NotListening {
        /// The tenant.
        tenant: &'static str,
        /// The socket path.
        path: PathBuf,
    },
    /// A guest could not attach to its tenant.
    #[error("the guest of tenant {tenant} could not attach")]
    Attach {
        /// The tenant.
        tenant: &'static str,
        /// Why.
        #[source]
        source: slimtcp_guest::GuestError,
    },
    /// A directory or file of the soak could not be written.
    #[error("writing {path}")]
    Write {
        /// The path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
