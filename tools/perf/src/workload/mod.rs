//! The workload, written once against [`SocketApi`](slimtcp::api::SocketApi): it runs unchanged
//! over the host runtime ([`slimtcp::runtime::HostSockets`]) and over any other provider (the
//! guest library).
//!
//! - [`Sender`]: N non-blocking connections, epoll-driven, each writing as fast as the stack
//!   takes data (1 MiB copy writes as in the paper, or zero-copy buffers).
//! - [`Receiver`]: a listener plus epoll, accepting and reading everything, counting bytes.
//! - [`drive`]: the phases of a run (connect, measure, drain) for one role or both.
//! - [`udp`]: the UDP workload (`--udp`): datagram senders and a counting receiver.

mod drive;
mod receiver;
mod sender;
pub mod udp;

use std::net::SocketAddrV4;

use slimtcp::api::SocketError;

pub use drive::{run_both, run_receiver, run_sender, Measurement, Progress, UdpCounts};
pub use receiver::Receiver;
pub use sender::Sender;

/// Bytes per copy write and read (the paper's 1 MiB).
pub const COPY_CHUNK: usize = 1 << 20;
/// Readiness events fetched per wait.
pub const EVENTS_PER_WAIT: usize = 1024;
/// Total socket buffer the run may use per direction; split over the connections.
pub const BUFFER_BUDGET: usize = 64 << 20;
/// Largest per-connection socket buffer (the stack's default).
pub const MAX_CONN_BUFFER: usize = 256 << 10;
/// Smallest per-connection socket buffer.
pub const MIN_CONN_BUFFER: usize = 16 << 10;

/// Per-connection socket buffer for `connections` connections: the budget split evenly,
/// within [`MIN_CONN_BUFFER`]..=[`MAX_CONN_BUFFER`].
pub fn buffer_per_connection(connections: usize) -> usize {
    (BUFFER_BUDGET / connections.max(1)).clamp(MIN_CONN_BUFFER, MAX_CONN_BUFFER)
}

/// Socket settings shared by both roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// MSS to advertise and send.
    pub mss: u16,
    /// Window-scale shift to offer (`None`: the provider's default).
    pub win_scale: Option<u8>,
    /// Send and receive buffer per connection.
    pub buffer: usize,
    /// Zero-copy data path.
    pub zero_copy: bool,
}

/// Why the workload failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A socket call failed.
    #[error("{op} failed ({})", .source.name())]
    Socket {
        /// The call and its arguments.
        op: String,
        /// The error.
        #[source]
        source: SocketError,
    },
    /// A connection failed while the run needed it.
    #[error("connection to {peer} failed ({})", .source.name())]
    Connection {
        /// The peer.
        peer: SocketAddrV4,
        /// The error.
        #[source]
        source: SocketError,
    },
    /// Not every connection was established in time.
    #[error("{established} of {wanted} connections established within {seconds} s")]
    ConnectTimeout {
        /// Connections up.
        established: usize,
        /// Connections asked for.
        wanted: usize,
        /// The limit.
        seconds: u64,
    },
    /// A UDP receiver alone saw no datagram in time.
    #[error("no datagram arrived within {seconds} s")]
    NoDatagram {
        /// The limit.
        seconds: u64,
    },
    /// A receiver alone saw no connection in time.
    #[error("no connection arrived within {seconds} s")]
    NoConnection {
        /// The limit.
        seconds: u64,
    },
}

/// `op` failed with `source`.
fn sock_err(op: impl Into<String>, source: SocketError) -> WorkloadError {
    WorkloadError::Socket { op: op.into(), source }
}
