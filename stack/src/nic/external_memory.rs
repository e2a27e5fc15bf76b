//! Memory a NIC may be asked to transmit from by reference (e.g. a guest's RAM), described once
//! so that devices which must register memory for DMA (DPDK) can do so before the first frame.
//!
//! Devices that can send from any mapped memory (a TAP's `writev`, the in-memory wire) accept
//! every region without doing anything; see [`Nic::attach_memory`](super::Nic::attach_memory).

use std::any::Any;
use std::sync::Arc;

/// A mapped memory region and what keeps it mapped.
///
/// Built only through the `unsafe` [`ExternalMemory::new`]: a device may hand its address range
/// to hardware until it detaches it and every payload sent from it is complete, so the mapping
/// must live as long as `keep_alive` does.
#[derive(Clone)]
pub struct ExternalMemory {
    base: std::ptr::NonNull<u8>,
    len: usize,
    page_size: usize,
    keep_alive: Arc<dyn Any + Send + Sync>,
}

// SAFETY: an ExternalMemory is an address range plus a shared owner that is itself Send + Sync;
// it never dereferences the range (the devices that use it synchronise their own access).
unsafe impl Send for ExternalMemory {}
// SAFETY: as above; all fields are immutable after construction.
unsafe impl Sync for ExternalMemory {}

impl ExternalMemory {
    /// `len` bytes at `base`, made of pages of `page_size` bytes.
    ///
    /// Returns `None` for a null base or an empty region.
    ///
    /// # Safety
    /// `base..base + len` must be mapped, readable memory for as long as `keep_alive` (or any of
    /// its clones) exists: a device keeps a clone for as long as it may read the region.
    pub unsafe fn new(
        base: *mut u8,
        len: usize,
        page_size: usize,
        keep_alive: Arc<dyn Any + Send + Sync>,
    ) -> Option<Self> {
        let base = std::ptr::NonNull::new(base)?;
        (len > 0).then_some(ExternalMemory { base, len, page_size, keep_alive })
    }

    /// Start address.
    pub fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (construction rejects empty regions).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The size of the pages backing the region (4 KiB for a memfd, 2 MiB / 1 GiB for
    /// hugepages).
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// What keeps the region mapped.
    pub fn keep_alive(&self) -> &Arc<dyn Any + Send + Sync> {
        &self.keep_alive
    }
}

impl std::fmt::Debug for ExternalMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalMemory")
            .field("base", &self.base)
            .field("len", &self.len)
            .field("page_size", &self.page_size)
            .finish()
    }
}
