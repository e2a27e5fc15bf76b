//! The narrow, batched interface between the stack and a network device.
//!
//! A NIC receives bursts of owned [`PacketBuf`]s and transmits bursts of them; it reports what
//! checksum work it can do. The stack never knows which NIC it runs on. Implementations:
//! [`memwire`] (an in-memory link with fault injection and pcap capture), [`tap`] (a Linux TAP
//! device); the DPDK NIC lives behind the `dpdk` feature.

pub mod buf;
pub mod fault;
pub mod memwire;
pub mod pcap;
pub mod tap;

pub use buf::{L4Proto, PacketBuf, TxOffload};

use crate::time::Instant;
use crate::wire::ChecksumCapabilities;

/// What a NIC can do, reported once at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicCapabilities {
    /// Checksums the NIC verifies on receive / fills on transmit.
    pub checksum: ChecksumCapabilities,
    /// Largest IP packet (the MTU), excluding the Ethernet header.
    pub mtu: usize,
    /// Largest burst `receive` returns and `transmit` accepts at once.
    pub max_burst: usize,
}

impl Default for NicCapabilities {
    fn default() -> Self {
        NicCapabilities { checksum: ChecksumCapabilities::none(), mtu: 1500, max_burst: 32 }
    }
}

/// Errors a NIC reports.
#[derive(Debug, thiserror::Error)]
pub enum NicError {
    /// The device failed an I/O operation.
    #[error("device I/O failed on {device}")]
    Io {
        /// Which device.
        device: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No transmit buffer could be allocated.
    #[error("no transmit buffer available")]
    NoBuffers,
    /// The other end of the link went away.
    #[error("the link is down")]
    LinkDown,
}

/// A network device driven by the stack's worker loop.
pub trait Nic {
    /// Capabilities of this device.
    fn capabilities(&self) -> NicCapabilities;

    /// Appends up to `max` received frames to `out`; returns how many were appended.
    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError>;

    /// An empty buffer to build a frame in (headroom for headers, room for one MTU frame).
    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError>;

    /// Transmits frames from the front of `frames`, removing the ones sent; returns how many.
    /// Frames left in `frames` could not be queued now (device busy) and may be retried.
    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError>;
}
