//! Errors of setting up the guest library (the socket API itself reports `SocketError`).

/// Why the guest library could not start.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// A vhost-user setup step failed.
    #[error("vhost-user {step} failed")]
    VhostUser {
        /// The step (message) that failed.
        step: &'static str,
        /// Why.
        #[source]
        source: vhost::Error,
    },
    /// The backend acknowledged a vhost-user message with a failure (REPLY_ACK).
    /// The backend did not answer a set-up message in time: another process (VMM) is attached
    /// to that tenant, or the backend hangs.
    #[error("the backend did not answer vhost-user {step} within {after:?} (is another process attached to this tenant?)")]
    NoAnswer {
        /// The message.
        step: &'static str,
        /// How long we waited.
        after: std::time::Duration,
    },
    #[error("the backend refused vhost-user {step}")]
    Refused {
        /// The step (message) it refused.
        step: &'static str,
    },
    /// The backend lacks features this driver needs.
    #[error("device offers features {offered:#x}, the driver needs {required:#x}")]
    MissingFeatures {
        /// What the device offered.
        offered: u64,
        /// What is required.
        required: u64,
    },
    /// More queue pairs were asked for than the device has.
    #[error("{wanted} queue pairs wanted, the device has {available}")]
    TooManyQueuePairs {
        /// Asked for.
        wanted: usize,
        /// Available.
        available: usize,
    },
    /// The queue pair does not exist or was already taken.
    #[error("queue pair {0} does not exist or is taken")]
    NoSuchQueuePair(usize),
    /// The shared memory could not be created or mapped.
    #[error("cannot create the shared memory")]
    Memory(#[source] std::io::Error),
    /// An eventfd could not be created or written.
    #[error("cannot notify the device")]
    Notify(#[source] std::io::Error),
    /// A ring could not be laid out or the device broke its rules.
    #[error("virtqueue error")]
    Ring(#[source] crate::ring::RingError),
    /// A setting is out of range.
    #[error("invalid configuration: {0}")]
    Config(&'static str),
    /// The backend went away.
    #[error("the backend disconnected")]
    Disconnected,
    /// The backend did not answer hello in time.
    #[error("no hello answer from the backend")]
    HelloTimeout,
    /// The backend refused the protocol version.
    #[error("the backend refused protocol version {guest} (it speaks {host})")]
    VersionRefused {
        /// Ours.
        guest: slimtcp_abi::Version,
        /// Theirs.
        host: slimtcp_abi::Version,
    },
    /// The PCI transport could not set the device up.
    #[error(transparent)]
    Pci(#[from] crate::pci::PciError),
    /// The backend sent something that does not follow the protocol.
    #[error("protocol violation by the backend: {0}")]
    Protocol(slimtcp_abi::AbiError),
}
