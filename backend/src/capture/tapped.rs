//! A NIC that copies the frames crossing it into a [`CaptureTap`] while a capture runs.

use std::sync::Arc;

use slimtcp::nic::offload;
use slimtcp::nic::{ExternalFrame, ExternalMemory, Nic, NicCapabilities, NicError, PacketBuf, TxOffload};
use slimtcp::time::Instant;

use super::tap::CaptureTap;

/// Wraps a tenant's NIC: forwards every call to it, and while the tap is armed captures
///
/// - received frames, once `receive` returned them;
/// - transmitted frames, exactly those the inner NIC took (the first `n` of the burst);
/// - by-reference frames (`transmit_external`) as their headers followed by their payload,
///   read with [`ExternalPayload::copy_to`](slimtcp::nic::ExternalPayload::copy_to) (as memwire
///   reads them), again only those the inner NIC took.
///
/// Frames are captured as they are on the wire: a checksum left to the NIC's offload
/// (`PacketBuf::offload`, on a frame to send, or on a received one whose sender's device left it
/// partial, as the TAP's `NEEDS_CSUM` frames) is filled in the copy, so tshark sees real
/// checksums. Disarmed, each receive or transmit call costs one relaxed load more; armed,
/// transmit copies the burst before the inner call (the frames leave with it) and keeps the
/// copies of the frames sent.
#[derive(Debug)]
pub struct Tapped<N: Nic> {
    inner: N,
    tap: Arc<CaptureTap>,
}

impl<N: Nic> Tapped<N> {
    /// `inner`, captured into `tap` whenever it is armed.
    pub fn new(inner: N, tap: Arc<CaptureTap>) -> Self {
        Tapped { inner, tap }
    }

    /// The tap.
    pub fn tap(&self) -> &Arc<CaptureTap> {
        &self.tap
    }

    /// The wrapped NIC.
    pub fn inner(&self) -> &N {
        &self.inner
    }

    /// The wrapped NIC, mutable (for device-specific controls).
    pub fn inner_mut(&mut self) -> &mut N {
        &mut self.inner
    }

    /// The wrapped NIC, unwrapped.
    pub fn into_inner(self) -> N {
        self.inner
    }

    /// Captures the first `sent` of `copies` (taken before a transmit that sent `sent` frames).
    fn record_sent(&self, copies: Vec<Vec<u8>>, sent: usize) {
        if let Some(mut recorder) = self.tap.recorder() {
            for frame in copies.into_iter().take(sent) {
                if !recorder.record_owned(frame) {
                    break;
                }
            }
        }
    }
}

/// A copy of `frame` with the checksums `offload` leaves to the device filled in.
fn wire_copy(frame: &[u8], offload: &TxOffload) -> Vec<u8> {
    let mut copy = frame.to_vec();
    if offload::pending(offload) {
        offload::fill_bytes(&mut copy, offload);
    }
    copy
}

impl<N: Nic> Nic for Tapped<N> {
    fn capabilities(&self) -> NicCapabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        let start = out.len();
        let n = self.inner.receive(now, out, max)?;
        if n > 0 && self.tap.is_armed() {
            if let (Some(mut recorder), Some(received)) = (self.tap.recorder(), out.get(start..)) {
                for frame in received {
                    let kept = if offload::pending(&frame.offload) {
                        recorder.record_owned(wire_copy(frame.as_slice(), &frame.offload))
                    } else {
                        recorder.record(frame.as_slice())
                    };
                    if !kept {
                        break;
                    }
                }
            }
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        self.inner.alloc_tx()
    }

    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        if frames.is_empty() || !self.tap.is_armed() {
            return self.inner.transmit(now, frames);
        }
        let copies: Vec<Vec<u8>> = frames.iter().map(|f| wire_copy(f.as_slice(), &f.offload)).collect();
        let sent = self.inner.transmit(now, frames)?;
        self.record_sent(copies, sent);
        Ok(sent)
    }

    fn transmit_external(
        &mut self,
        now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        if frames.is_empty() || !self.tap.is_armed() {
            return self.inner.transmit_external(now, frames);
        }
        // The payloads are readable now: this call is the one that hands them to a NIC.
        let copies: Vec<Vec<u8>> = frames
            .iter()
            .map(|f| {
                let headers = f.headers.as_slice();
                let mut flat = vec![0u8; headers.len() + f.payload.len()];
                let (head, tail) = flat.split_at_mut(headers.len());
                head.copy_from_slice(headers);
                f.payload.copy_to(tail);
                offload::fill_bytes(&mut flat, &f.headers.offload);
                flat
            })
            .collect();
        let sent = self.inner.transmit_external(now, frames)?;
        self.record_sent(copies, sent);
        Ok(sent)
    }

    fn supports_external(&self) -> bool {
        self.inner.supports_external()
    }

    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        self.inner.poll_tx_completions(out)
    }

    fn attach_memory(&mut self, region: &ExternalMemory) -> Result<(), NicError> {
        self.inner.attach_memory(region)
    }

    fn detach_memory(&mut self, base: *const u8) {
        self.inner.detach_memory(base)
    }

    fn external_copied_bytes(&self) -> u64 {
        self.inner.external_copied_bytes()
    }

    fn prepare_thread(&mut self) {
        self.inner.prepare_thread()
    }

    fn release(&mut self, frames: &mut Vec<PacketBuf>) {
        self.inner.release(frames)
    }

    fn mac_address(&self) -> Option<slimtcp::wire::EthernetAddress> {
        self.inner.mac_address()
    }
}
