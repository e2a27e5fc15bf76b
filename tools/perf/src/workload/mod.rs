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

use slimtcp::api::{SockOpt, SocketError};

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
/// The sizes [`SocketBuffer::Fixed`] accepts.
pub const FIXED_BUFFER_RANGE: std::ops::RangeInclusive<usize> = 4096..=(16 << 20);

/// Per-connection socket buffer for `connections` connections: the budget split evenly,
/// within [`MIN_CONN_BUFFER`]..=[`MAX_CONN_BUFFER`].
pub fn buffer_per_connection(connections: usize) -> usize {
    (BUFFER_BUDGET / connections.max(1)).clamp(MIN_CONN_BUFFER, MAX_CONN_BUFFER)
}

/// The send and receive buffers a run's sockets ask for (`--socket-buffer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SocketBuffer {
    /// [`buffer_per_connection`]: the same total at any connection count (16 KiB each at 4096
    /// connections, 256 KiB for one).
    #[default]
    Split,
    /// None asked for: each stack's own (SlimTCP's default 256 KiB, within the application's
    /// send budget; Linux's autotuning).
    Stack,
    /// The same bytes for every socket, within [`FIXED_BUFFER_RANGE`].
    Fixed(usize),
}

impl SocketBuffer {
    /// The buffer each of `connections` sockets asks for (`None`: the stack's own).
    pub fn per_connection(self, connections: usize) -> Option<usize> {
        match self {
            SocketBuffer::Split => Some(buffer_per_connection(connections)),
            SocketBuffer::Stack => None,
            SocketBuffer::Fixed(bytes) => Some(bytes),
        }
    }
}

/// The `--socket-buffer` value: `split`, `stack`, or the bytes.
impl std::fmt::Display for SocketBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketBuffer::Split => f.write_str("split"),
            SocketBuffer::Stack => f.write_str("stack"),
            SocketBuffer::Fixed(bytes) => write!(f, "{bytes}"),
        }
    }
}

/// A `--socket-buffer` value that is none of `split`, `stack` or bytes in [`FIXED_BUFFER_RANGE`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{value:?}: want split, stack, or bytes per socket buffer in {min}..={max}",
    value = .0,
    min = FIXED_BUFFER_RANGE.start(),
    max = FIXED_BUFFER_RANGE.end()
)]
pub struct BadSocketBuffer(pub String);

impl std::str::FromStr for SocketBuffer {
    type Err = BadSocketBuffer;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "split" => Ok(SocketBuffer::Split),
            "stack" => Ok(SocketBuffer::Stack),
            v => v
                .parse::<usize>()
                .ok()
                .filter(|b| FIXED_BUFFER_RANGE.contains(b))
                .map(SocketBuffer::Fixed)
                .ok_or_else(|| BadSocketBuffer(s.to_owned())),
        }
    }
}

/// The send and receive buffer options of a socket that asks for `bytes` of each (none for
/// `None`: the stack's own).
pub fn buffer_options(bytes: Option<usize>) -> impl Iterator<Item = SockOpt> {
    bytes.into_iter().flat_map(|b| [SockOpt::SendBuffer(b), SockOpt::RecvBuffer(b)])
}

/// Socket options every socket of a run gets: non-blocking, the MSS, the buffers when asked for
/// (`settings.buffer`), the window-scale shift when given.
pub fn socket_options(settings: &Settings) -> Vec<SockOpt> {
    [SockOpt::NonBlocking(true), SockOpt::Mss(settings.mss)]
        .into_iter()
        .chain(buffer_options(settings.buffer))
        .chain(settings.win_scale.map(|w| SockOpt::WindowScale(Some(w))))
        .collect()
}

/// Socket settings shared by both roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// MSS to advertise and send.
    pub mss: u16,
    /// Window-scale shift to offer (`None`: the provider's default).
    pub win_scale: Option<u8>,
    /// Send and receive buffer per connection (`None`: the stack's own).
    pub buffer: Option<usize>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_ask_for_buffers_only_when_given_one() {
        let settings = |buffer| Settings { mss: 1400, win_scale: Some(3), buffer, zero_copy: false };
        let given = socket_options(&settings(Some(16 << 10)));
        assert!(
            given.contains(&SockOpt::SendBuffer(16 << 10)) && given.contains(&SockOpt::RecvBuffer(16 << 10))
        );
        assert!(
            given.contains(&SockOpt::WindowScale(Some(3))) && given.contains(&SockOpt::NonBlocking(true))
        );
        let own = socket_options(&settings(None));
        assert!(!own.iter().any(|o| matches!(o, SockOpt::SendBuffer(_) | SockOpt::RecvBuffer(_))), "{own:?}");
        assert!(own.contains(&SockOpt::Mss(1400)));
    }

    #[test]
    fn a_socket_buffer_choice_reads_back_as_written() {
        for text in ["split", "stack", "4096", "65536", "16777216"] {
            let choice: SocketBuffer = text.parse().expect(text);
            assert_eq!(choice.to_string(), text);
        }
    }
}
