//! Two TCP stacks, each as a sender/receiver pair in one thread over the same in-memory link
//! (`slimtcp::nic::memwire`), driven by one workload: SlimTCP and smoltcp side by side.
//!
//! Both sides are set up the same way: side A (10.0.0.1) connects to side B (10.0.0.2) over a
//! memwire link of [`LINK_CAPACITY`] frames per direction; 256 KiB send and receive buffers,
//! window scaling, no congestion control, no Nagle, checksums computed and verified in software.
//! One step polls A, then B (each stack taking in what arrived and sending what its window
//! allows; see [`smol`] for how smoltcp is polled to do that); the application calls (send on A,
//! receive on B) run between steps in the same thread. Nothing sleeps and nothing else runs: what a run measures is the CPU cost
//! of both stacks plus the link and the application's copies.
//!
//! - [`slim`]: SlimTCP's `Interface` over `MemwireNic`.
//! - [`smol`]: smoltcp's `Interface` + `tcp::Socket` over a `phy::Device` that wraps a
//!   `MemwireNic` ([`device`]); also polled the plain way (one `poll` per step).
//! - [`workload`]: bulk transfer (with a pattern check), 64-byte round trips, fixed segment
//!   counts (for callgrind).

pub mod device;
pub mod slim;
pub mod smol;
pub mod workload;

use std::sync::atomic::{AtomicBool, Ordering};

use slimtcp::nic::memwire::LinkConfig;
use slimtcp::wire::ChecksumCapabilities;

/// Frames in flight per direction: deep enough that the link never pushes back (one
/// connection's 256 KiB window is at most 4,096 frames of MSS 64), so the comparison measures
/// the stacks, not how each waits for a full ring. (`slimtcp-perf`'s link is as deep as a NIC's
/// ring instead: `slimtcp_perf::host::MEMWIRE_CAPACITY`.)
pub const LINK_CAPACITY: usize = 1 << 17;
/// Send and receive buffer of every connection, both stacks.
pub const BUFFER: usize = 256 * 1024;
/// The port B listens on.
pub const PORT: u16 = 5001;
/// Steps allowed for the handshake (and ARP) before set-up counts as failed.
pub const SETUP_STEPS: u64 = 100_000;

/// Whether the link offers checksum offload (set once per process, from `--offload`): memwire
/// then fills and verifies checksums itself where anything needs them real (nothing does
/// here), as a NIC would, and both stacks leave them to it.
static CHECKSUM_OFFLOAD: AtomicBool = AtomicBool::new(false);

/// Sets [`CHECKSUM_OFFLOAD`] for every pair made afterwards.
pub fn set_checksum_offload(on: bool) {
    CHECKSUM_OFFLOAD.store(on, Ordering::Relaxed);
}

/// Whether pairs use checksum offload.
pub fn checksum_offload() -> bool {
    CHECKSUM_OFFLOAD.load(Ordering::Relaxed)
}

/// The memwire link both stacks run over.
pub fn link_config() -> LinkConfig {
    let mut config = LinkConfig { capacity: LINK_CAPACITY, ..LinkConfig::default() };
    if checksum_offload() {
        config.caps.checksum = ChecksumCapabilities::all();
    }
    config
}

/// Which end of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// 10.0.0.1, the connecting side (bulk sender, round-trip client).
    A,
    /// 10.0.0.2, the listening side (bulk receiver, echo server).
    B,
}

/// Why a pair could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The memwire link could not be built.
    #[error("building the memwire link")]
    Link(#[from] slimtcp::nic::memwire::MemwireError),
    /// The connection did not reach ESTABLISHED on both sides in time.
    #[error("the connection was not established after {SETUP_STEPS} steps")]
    SetupTimeout,
    /// A stack reported an error.
    #[error("{stack}: {what}")]
    Stack {
        /// `"slimtcp"` or `"smoltcp"`.
        stack: &'static str,
        /// What failed.
        what: String,
    },
    /// The received bytes differ from the ones sent.
    #[error("byte {offset} of the stream differs from what was sent")]
    Corrupt {
        /// Stream offset of the first wrong byte.
        offset: u64,
    },
    /// The transfer stopped making progress.
    #[error("no progress for {steps} steps ({received} of {expected} bytes received)")]
    Stalled {
        /// Steps without progress.
        steps: u64,
        /// Bytes received.
        received: u64,
        /// Bytes expected.
        expected: u64,
    },
}

/// A connected pair of one stack: A connected to B, both ESTABLISHED.
pub trait Pair: Sized {
    /// The stack's name in reports.
    const NAME: &'static str;

    /// Builds the link and both interfaces, connects A to B with `mss`, and steps until both
    /// sides are ESTABLISHED.
    fn connect(mss: u16) -> Result<Self, PeerError>;

    /// Polls A, then B, once each.
    fn step(&mut self) -> Result<(), PeerError>;

    /// Queues as much of `data` as the send buffer of `side` takes; returns the count.
    fn send(&mut self, side: Side, data: &[u8]) -> Result<usize, PeerError>;

    /// Reads what `side` has received, up to `buf.len()`; 0 when nothing is there.
    fn recv(&mut self, side: Side, buf: &mut [u8]) -> Result<usize, PeerError>;

    /// Frames sent so far on the link, `(A to B, B to A)`.
    fn frames(&self) -> (u64, u64);
}
