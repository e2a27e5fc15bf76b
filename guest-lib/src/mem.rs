//! DMA memory: regions shared with the device, addressed by the device through guest-physical
//! addresses (GPAs).
//!
//! A [`DmaRegion`] is contiguous both in this process's address space and in GPA space, so the
//! data path translates with one addition (`gpa = base_gpa + offset`), never a lookup. The
//! vhost-user transport gets one from its memfd; the PCI transport will get them from
//! hugepages (each 2 MiB page is physically contiguous, its GPA read once from
//! `/proc/self/pagemap`).

use std::fmt;
use std::sync::Arc;

/// Keeps the mapping behind a [`DmaRegion`] alive (the memfd mapping, a hugepage mapping, ...).
pub type KeepAlive = Arc<dyn Send + Sync>;

/// A piece of DMA memory (see the module documentation). Cheap to clone; clones share the
/// mapping.
#[derive(Clone)]
pub struct DmaRegion {
    host: *mut u8,
    gpa: u64,
    len: usize,
    _keep: KeepAlive,
}

// SAFETY: the region is a plain shared mapping owned through `_keep` (`Send + Sync`); the raw
// pointer is only an address into it. Who may write which bytes is the business of the users
// (rings, buffer pools), each of which is owned by one thread.
unsafe impl Send for DmaRegion {}
// SAFETY: as for `Send`: `&DmaRegion` only gives addresses, no access.
unsafe impl Sync for DmaRegion {}

impl fmt::Debug for DmaRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DmaRegion")
            .field("host", &self.host)
            .field("gpa", &format_args!("{:#x}", self.gpa))
            .field("len", &self.len)
            .finish()
    }
}

impl DmaRegion {
    /// A region of `len` bytes at host address `host` that the device sees at `gpa`.
    ///
    /// # Safety
    /// `host..host + len` must be mapped readable and writable for as long as `keep` lives, and
    /// the device must see exactly those bytes at `gpa..gpa + len`.
    pub unsafe fn new(host: *mut u8, gpa: u64, len: usize, keep: KeepAlive) -> DmaRegion {
        DmaRegion { host, gpa, len, _keep: keep }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The guest-physical address of the first byte.
    pub fn gpa(&self) -> u64 {
        self.gpa
    }

    /// The host address of the first byte.
    pub fn host(&self) -> *mut u8 {
        self.host
    }

    /// The sub-region `offset..offset + len`, `None` when it does not fit.
    pub fn slice(&self, offset: usize, len: usize) -> Option<DmaRegion> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        Some(DmaRegion {
            // SAFETY: offset <= self.len, so the result stays inside (or one past) the mapping.
            host: unsafe { self.host.add(offset) },
            gpa: self.gpa + offset as u64,
            len,
            _keep: self._keep.clone(),
        })
    }

    /// The mapping's keep-alive handle (buffers cut from the region hold one).
    pub fn keep_alive(&self) -> KeepAlive {
        self._keep.clone()
    }
}

/// Hands out consecutive, aligned pieces of a region (rings and buffer areas at setup time).
#[derive(Debug)]
pub struct BumpAllocator {
    region: DmaRegion,
    next: usize,
}

impl BumpAllocator {
    /// Allocates from the whole of `region`.
    pub fn new(region: DmaRegion) -> BumpAllocator {
        BumpAllocator { region, next: 0 }
    }

    /// `len` bytes aligned to `align` (a power of two), `None` when the region is exhausted.
    pub fn alloc(&mut self, len: usize, align: usize) -> Option<DmaRegion> {
        let start = self.next.checked_add(align - 1)? & !(align - 1);
        let piece = self.region.slice(start, len)?;
        self.next = start + len;
        Some(piece)
    }

    /// Bytes not yet handed out (before alignment).
    pub fn remaining(&self) -> usize {
        self.region.len() - self.next
    }
}
