//! The narrow, batched interface between the stack and a network device.
//!
//! A NIC receives bursts of owned [`PacketBuf`]s and transmits bursts of them; it reports what
//! checksum work it can do. The stack never knows which NIC it runs on. Implementations:
//! [`memwire`] (an in-memory link with fault injection and pcap capture), [`tap`] (a Linux TAP
//! device); the DPDK NIC lives behind the `dpdk` feature.

pub mod buf;
mod burst_queue;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod external_memory;
pub mod fault;
pub mod memwire;
pub mod offload;
pub mod pcap;
pub mod pool;
pub mod tap;

pub use buf::{L4Proto, PacketBuf, TxOffload};
pub use external_memory::ExternalMemory;

use crate::time::Instant;
use crate::wire::{ChecksumCapabilities, EthernetAddress};

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
    /// The device does not implement this operation (e.g. external-payload transmit).
    #[error("operation not supported by this device")]
    Unsupported,
    /// Memory could not be made available for by-reference transmit.
    #[error("external memory: {0}")]
    ExternalMemory(String),
}

/// Payload bytes in memory the stack does not own (e.g. guest memory), sent without copying.
///
/// Built only through the `unsafe` [`ExternalPayload::new`], whose contract (the memory stays
/// valid until the NIC reports `token` complete) makes the safe NIC methods sound.
#[derive(Debug, PartialEq, Eq)]
pub struct ExternalPayload {
    addr: std::ptr::NonNull<u8>,
    len: usize,
    token: u64,
}

// SAFETY: an ExternalPayload is an address range plus a token; the memory's owner guarantees
// (contract of `new`) that it stays valid until completion, whichever thread transmits it.
unsafe impl Send for ExternalPayload {}

impl ExternalPayload {
    /// Describes `len` bytes at `addr`, reported back as `token` once the NIC is done with them.
    /// Returns `None` for a null `addr`.
    ///
    /// # Safety
    /// The `len` bytes at `addr` must stay mapped, readable and unmodified from the call that
    /// hands this payload to a NIC until that NIC returns `token` from
    /// [`Nic::poll_tx_completions`] (or, if the frame comes back untransmitted, until then).
    pub unsafe fn new(addr: *const u8, len: usize, token: u64) -> Option<Self> {
        // SAFETY: the caller upholds `at`'s contract, which is this one's.
        std::ptr::NonNull::new(addr.cast_mut()).map(|addr| unsafe { Self::at(addr, len, token) })
    }

    /// [`new`](Self::new) for an address known not to be null.
    ///
    /// # Safety
    /// As for [`new`](Self::new).
    pub unsafe fn at(addr: std::ptr::NonNull<u8>, len: usize, token: u64) -> Self {
        ExternalPayload { addr, len, token }
    }

    /// Start address.
    pub fn addr(&self) -> *const u8 {
        self.addr.as_ptr()
    }

    /// Copies the bytes into `dst` (as many as fit); returns how many. The memory may be a
    /// guest's, which the guest may write meanwhile: it is read as vm-memory reads guest memory,
    /// never through a `&[u8]`.
    pub fn copy_to(&self, dst: &mut [u8]) -> usize {
        // SAFETY: the `len` bytes at `addr` stay mapped until this payload's completion
        // (contract of `new`), and `self` exists until then; another party's concurrent writes
        // are what a VolatileSlice allows.
        let bytes = unsafe { vm_memory::VolatileSlice::new(self.addr.as_ptr(), self.len) };
        bytes.copy_to(dst)
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The owner's completion token.
    pub fn token(&self) -> u64 {
        self.token
    }
}

/// A frame sent as headers built by the stack followed by an external payload.
#[derive(Debug)]
pub struct ExternalFrame {
    /// Link, network and transport headers (the frame's first bytes); its `offload` applies to
    /// the whole frame.
    pub headers: PacketBuf,
    /// The payload, appended after the headers on the wire.
    pub payload: ExternalPayload,
}

/// A network device driven by the stack's worker loop.
pub trait Nic {
    /// Capabilities of this device.
    fn capabilities(&self) -> NicCapabilities;

    /// Appends up to `max` received frames to `out`; returns how many were appended.
    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError>;

    /// Gives back the frames of a processed burst and empties `frames`: what the stack kept of
    /// them was taken out already. A device whose buffers return to a pool of its own may return
    /// them together (DPDK: one bulk free instead of one call per frame). The default drops
    /// them one by one.
    fn release(&mut self, frames: &mut Vec<PacketBuf>) {
        frames.clear();
    }

    /// An empty buffer to build a frame in (headroom for headers, room for one MTU frame).
    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError>;

    /// Transmits frames from the front of `frames`, removing the ones sent; returns how many.
    /// Frames left in `frames` could not be queued now (device busy) and may be retried.
    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError>;

    /// Transmits frames whose payload stays in external memory, without copying the payload;
    /// like [`transmit`](Nic::transmit), takes frames from the front and leaves the ones it
    /// cannot queue now. Each payload's token is later returned by
    /// [`poll_tx_completions`](Nic::poll_tx_completions): only then may its memory be reused.
    /// The default reports [`NicError::Unsupported`].
    fn transmit_external(
        &mut self,
        now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        let _ = (now, frames);
        Err(NicError::Unsupported)
    }

    /// True when [`transmit_external`](Nic::transmit_external) is implemented; the stack then
    /// sends by-reference payloads with it. Default: false.
    fn supports_external(&self) -> bool {
        false
    }

    /// Appends the tokens of external payloads the device no longer uses (in completion order,
    /// which need not be the transmit order); returns how many were appended.
    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        let _ = out;
        0
    }

    /// Announces memory that external payloads may come from. Devices that must register
    /// memory for DMA (DPDK) do it here and keep `region` alive while they may read it; an
    /// external payload outside every attached region is then copied (and counted in
    /// [`external_copied_bytes`](Nic::external_copied_bytes)). The default accepts any memory
    /// and does nothing: the device can send from every mapped address.
    fn attach_memory(&mut self, region: &ExternalMemory) -> Result<(), NicError> {
        let _ = region;
        Ok(())
    }

    /// Withdraws a region given to [`attach_memory`](Nic::attach_memory) (its `base`): no new
    /// payload is sent from it by reference; payloads in flight keep it registered until they
    /// complete. Unknown bases are ignored.
    fn detach_memory(&mut self, base: *const u8) {
        let _ = base;
    }

    /// External payload bytes the device copied instead of sending them in place (memory it
    /// could not reference). Default: 0, for devices that never copy them.
    fn external_copied_bytes(&self) -> u64 {
        0
    }

    /// Sets up the calling thread to drive this device. A worker calls it once as it starts,
    /// before it confines itself to its system call filter, so that a driver may make calls the
    /// filter refuses: DPDK makes the thread an lcore (`rte_thread_register`, which probes
    /// `/sys` for the thread's NUMA node), for the pools' per-lcore cache. A driver that needs
    /// it also does it on its first use, so calling it is optional. The default does nothing.
    fn prepare_thread(&mut self) {}

    /// The device's own MAC address, when the stack may use it as its own: a DPDK port's (the
    /// address its switch or VF expects frames from). `None` (the default) for devices whose
    /// address belongs to someone else (a TAP's is the kernel side's) or that have none.
    fn mac_address(&self) -> Option<EthernetAddress> {
        None
    }
}
