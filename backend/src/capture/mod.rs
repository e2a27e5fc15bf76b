//! Per-tenant packet capture, bounded and cheap when off.
//!
//! A tenant's NIC is wrapped in a [`Tapped`] NIC that shares a [`CaptureTap`] (as
//! `Arc<CaptureTap>`) with a control thread. Disarmed, the tap costs the worker one relaxed
//! atomic load per receive or transmit call. [`CaptureTap::arm`] starts a capture within
//! [`CaptureLimits`] (a frame count, a duration, and always a byte cap) and returns the control
//! thread's [`Capture`] handle; the worker then copies every frame that crosses the NIC, with a
//! wall-clock timestamp, into a bounded lock-free queue (a full queue drops frames and counts
//! them: the worker never waits for the control thread). The control thread drains the queue
//! into a [`PcapWriter`](slimtcp::nic::pcap::PcapWriter) over any sink (a file, a socket):
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use slimtcp::nic::pcap::PcapWriter;
//! # use slimtcp_vhost::capture::{CaptureError, CaptureLimits, CaptureTap};
//! # fn control(tap: &Arc<CaptureTap>, sink: std::fs::File) -> Result<(), CaptureError> {
//! let mut capture = tap.arm(CaptureLimits { max_frames: Some(10_000), ..CaptureLimits::default() })?;
//! let mut out = PcapWriter::new(std::io::BufWriter::new(sink), "the capture of vm1")
//!     .map_err(CaptureError::Write)?;
//! while !capture.is_finished() {
//!     if capture.drain(&mut out)? == 0 {
//!         out.flush().map_err(CaptureError::Write)?;
//!         std::thread::sleep(std::time::Duration::from_millis(10)); // or wait for a stop request
//!     }
//! }
//! let report = capture.finish(&mut out)?;
//! log::info!("{report}");
//! # Ok(())
//! # }
//! ```
//!
//! One capture at a time per tap: arming it again before the previous [`Capture`] is finished
//! or dropped fails with [`CaptureError::Busy`].
//!
//! - [`tap`]: the shared tap, the limits, the control thread's handle and its report.
//! - [`tapped`]: the NIC wrapper that feeds the tap.

pub mod tap;
pub mod tapped;

#[cfg(test)]
mod tests;

pub use tap::{
    Capture, CaptureEnd, CaptureLimits, CaptureReport, CaptureTap, Recorder, DEFAULT_MAX_BYTES,
    DEFAULT_QUEUE_FRAMES, MAX_QUEUE_FRAMES,
};
pub use tapped::Tapped;

use slimtcp::nic::pcap::PcapError;

/// Errors starting or writing a capture.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The tap already has a capture (armed, or ended and not yet finished or dropped).
    #[error("a capture is already running on this tenant")]
    Busy,
    /// The limits would make an unbounded or useless capture.
    #[error("invalid capture limits: {0}")]
    InvalidLimits(&'static str),
    /// Writing the pcap stream failed.
    #[error("writing the capture")]
    Write(#[source] PcapError),
}
