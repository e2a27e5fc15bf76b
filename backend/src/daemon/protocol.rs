//! The control socket's protocol (`[daemon] control = "PATH"`, `--control PATH`): a client
//! connects, sends one [`Request`] as a JSON line and reads one [`Reply`] as a JSON line; a
//! capture's reply is followed by the pcap stream, until the daemon closes the connection.

use crate::stats::TenantStats;

/// What a client asks.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Every tenant's stats.
    Stats,
    /// A capture of a tenant's NIC traffic, streamed as pcap after the reply.
    Capture {
        /// The tenant.
        tenant: String,
        /// Stop after this many seconds.
        seconds: Option<f64>,
        /// Stop after this many frames.
        count: Option<u64>,
    },
}

/// The daemon's answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    /// The stats of each tenant, by name.
    Stats(Vec<TenantStats>),
    /// The capture started: the pcap stream follows.
    Capturing,
    /// The request was refused.
    Error(String),
}

/// Longest request line the daemon reads.
pub const MAX_REQUEST: usize = 4096;
