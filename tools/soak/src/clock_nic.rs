//! One time base for both ends of a memwire link.
//!
//! Memwire delivers a reordered frame when the receiver's `now` passes the sender's `now` plus
//! the hold, so both ends must count from the same instant. The backend's engine counts from its
//! connection's start ([`slimtcp::time::Clock::real`]) and the peer from its own: [`ClockNic`]
//! hands the link the soak's time base instead of the caller's `now`.

use slimtcp::nic::{ExternalFrame, ExternalMemory, Nic, NicCapabilities, NicError, PacketBuf};
use slimtcp::time::Instant;

/// `inner`, with every `now` replaced by the time since `base`.
#[derive(Debug)]
pub struct ClockNic<N> {
    inner: N,
    base: std::time::Instant,
}

impl<N> ClockNic<N> {
    /// Wraps `inner`; `base` is the instant both ends count from.
    pub fn new(inner: N, base: std::time::Instant) -> Self {
        ClockNic { inner, base }
    }

    /// The time on the shared base.
    pub fn now(&self) -> Instant {
        Instant::from_std(self.base)
    }

    /// The wrapped NIC.
    pub fn inner(&self) -> &N {
        &self.inner
    }
}

impl<N: Nic> Nic for ClockNic<N> {
    fn capabilities(&self) -> NicCapabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, _now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        let now = self.now();
        self.inner.receive(now, out, max)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        self.inner.alloc_tx()
    }

    fn transmit(&mut self, _now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        let now = self.now();
        self.inner.transmit(now, frames)
    }

    fn transmit_external(
        &mut self,
        _now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        let now = self.now();
        self.inner.transmit_external(now, frames)
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
}
