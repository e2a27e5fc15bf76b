//! External memory (e.g. guest memory) as zero-copy transmit payload.
//!
//! An [`ExtMemRegion`] registers a region with DPDK (`rte_extmem_register`, IOVA = VA) and maps
//! it for DMA by each port that transmits from it (`rte_dev_dma_map`; a no-op on vdevs, what makes
//! the region DMA-able for `net_bnxt` under vfio). A frame is then a small header mbuf chained to
//! a payload mbuf attached to the region's bytes with `rte_pktmbuf_attach_extbuf`.
//!
//! Completion: each payload in flight owns a slot of the sending NIC's [`ExtSlots`]; DPDK calls
//! the slot's free callback when the last reference to the payload mbuf goes away (after TX
//! completion on a real NIC, right after the copy on `net_tap`, when the receiver frees it on
//! `net_ring`), from whichever thread drops it. The callback pushes the slot onto a lock-free
//! stack the owner drains in `poll`, reporting the owner's token: only then may the memory be
//! reused.

use std::any::Any;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

use super::eal::Eal;
use crate::nic::ExternalMemory;

/// The most pages one region may register: DPDK keeps a memory-segment descriptor per page (and
/// we build an IOVA table of 8 bytes per page), so a VMM that declares a huge sparse region must
/// not make the backend allocate gigabytes. 4 Mi pages: 16 GiB of 4 KiB pages, 8 TiB of 2 MiB
/// hugepages. A region beyond it is not attached; its payload is copied (counted).
pub const MAX_PAGES: usize = 4 << 20;

/// The number of pages of a region, checked: whole pages, page-aligned, within [`MAX_PAGES`].
pub fn checked_pages(addr: usize, len: usize, page_size: usize) -> Result<usize, ExtMemError> {
    if !page_size.is_power_of_two() || addr % page_size != 0 || len == 0 || len % page_size != 0 {
        return Err(ExtMemError::Layout(format!(
            "{len} bytes at {addr:#x} is not a whole number of {page_size}-byte pages"
        )));
    }
    let pages = len / page_size;
    if pages > MAX_PAGES {
        return Err(ExtMemError::TooManyPages { pages, max: MAX_PAGES });
    }
    Ok(pages)
}

/// Why external memory could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtMemError {
    /// DMA addresses are physical: the region's addresses cannot be given to the NIC.
    #[error("external memory needs IOVA-as-VA mode (vfio-pci with an IOMMU, --iova-mode=va, or --no-huge)")]
    NeedsIovaVa,
    /// Address, length or page size unusable.
    #[error("external memory region rejected: {0}")]
    Layout(String),
    /// More pages than one region may register (DPDK keeps a descriptor per page).
    #[error("external memory region of {pages} pages exceeds the limit of {max} pages (back large guest memory with hugepages)")]
    TooManyPages {
        /// Pages the region has.
        pages: usize,
        /// The limit, [`MAX_PAGES`].
        max: usize,
    },
    /// `rte_extmem_register` failed.
    #[error("rte_extmem_register failed for {len} bytes at {base:#x}: {reason}")]
    Register {
        /// Region start.
        base: usize,
        /// Region length.
        len: usize,
        /// DPDK's description of the error.
        reason: String,
    },
    /// `rte_dev_dma_map` failed for the port's device.
    #[error("rte_dev_dma_map failed on DPDK port {port}: {reason}")]
    DmaMap {
        /// Port number.
        port: u16,
        /// DPDK's description of the error.
        reason: String,
    },
    /// The port cannot transmit chained mbufs, which external payloads need.
    #[error("DPDK port {port} cannot transmit multi-segment frames, which external payloads need")]
    NoMultiSegment {
        /// Port number.
        port: u16,
    },
}

#[derive(Debug)]
struct RegionInner {
    base: usize,
    len: usize,
    page_size: usize,
    dma_ports: Mutex<Vec<u16>>,
    /// What keeps the memory mapped; dropped after the region is unregistered.
    _owner: Option<Arc<dyn Any + Send + Sync>>,
}

/// A region of external memory registered with DPDK. Cloning shares the registration, which is
/// undone when the last clone is dropped; NICs with payloads still in flight keep theirs alive.
#[derive(Debug, Clone)]
pub struct ExtMemRegion(Arc<RegionInner>);

impl ExtMemRegion {
    /// Registers `len` bytes at `base`, made of pages of `page_size` bytes (4096 for a memfd or
    /// anonymous mapping, 2 MiB / 1 GiB for hugepage-backed guest memory).
    ///
    /// # Safety
    /// The region must stay mapped until the returned value and all its clones are dropped, and
    /// any payload handed to a NIC must stay unmodified until its completion is reported.
    pub unsafe fn register(
        eal: &Eal,
        base: *mut u8,
        len: usize,
        page_size: usize,
    ) -> Result<Self, ExtMemError> {
        // SAFETY: the caller's contract is this function's.
        unsafe { Self::register_owned(eal, base, len, page_size, None) }
    }

    /// [`register`](Self::register), holding `owner` until the region is unregistered.
    ///
    /// # Safety
    /// As for [`register`](Self::register).
    unsafe fn register_owned(
        eal: &Eal,
        base: *mut u8,
        len: usize,
        page_size: usize,
        owner: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<Self, ExtMemError> {
        let addr = base as usize;
        let n_pages = checked_pages(addr, len, page_size)?;
        if !eal.iova_is_va() {
            return Err(ExtMemError::NeedsIovaVa);
        }
        let n_pages_c = libc::c_uint::try_from(n_pages)
            .map_err(|_| ExtMemError::Layout(format!("{n_pages} pages is too many")))?;
        // IOVA = VA: each page's DMA address is its virtual address.
        let mut iova: Vec<u64> = (0..n_pages).map(|i| (addr + i * page_size) as u64).collect();
        // SAFETY: the caller guarantees the region is mapped (contract above); `iova` holds
        // n_pages entries; DPDK copies the table.
        let rc =
            unsafe { sys::rte_extmem_register(base.cast(), len, iova.as_mut_ptr(), n_pages_c, page_size) };
        if rc != 0 {
            return Err(ExtMemError::Register { base: addr, len, reason: sys::strerror(sys::errno()) });
        }
        Ok(ExtMemRegion(Arc::new(RegionInner {
            base: addr,
            len,
            page_size,
            dma_ports: Mutex::new(Vec::new()),
            _owner: owner,
        })))
    }

    /// Registers `memory`, keeping it mapped (through its owner) until the registration ends.
    pub fn register_external(eal: &Eal, memory: &ExternalMemory) -> Result<Self, ExtMemError> {
        // SAFETY: ExternalMemory's contract keeps the range mapped while its owner lives; the
        // region holds the owner until after it is unregistered (RegionInner's Drop runs before
        // its fields are dropped). Payloads handed to a NIC stay unmodified until completion by
        // the contract of ExternalPayload::new, which every transmit goes through.
        unsafe {
            Self::register_owned(
                eal,
                memory.base(),
                memory.len(),
                memory.page_size(),
                Some(Arc::clone(memory.keep_alive())),
            )
        }
    }

    /// Start address.
    pub fn base(&self) -> *const u8 {
        self.0.base as *const u8
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// True for an empty region (never: registration rejects it).
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }

    /// Page size given at registration.
    pub fn page_size(&self) -> usize {
        self.0.page_size
    }

    /// True when `len` bytes at `addr` lie inside the region.
    pub fn contains(&self, addr: *const u8, len: usize) -> bool {
        let a = addr as usize;
        a >= self.0.base && a.checked_add(len).is_some_and(|end| end <= self.0.base + self.0.len)
    }

    /// Maps the region for DMA by `port`'s device (once per port).
    pub(crate) fn dma_map(&self, port: u16) -> Result<(), ExtMemError> {
        let mut ports = self.0.dma_ports.lock().unwrap_or_else(|p| p.into_inner());
        if ports.contains(&port) {
            return Ok(());
        }
        let inner = &self.0;
        // SAFETY: the region is registered and mapped (contract of `register`); IOVA = VA.
        let rc = unsafe {
            sys::shim_port_dma_map(port, inner.base as *mut libc::c_void, inner.base as u64, inner.len)
        };
        if rc != 0 {
            return Err(ExtMemError::DmaMap { port, reason: sys::strerror(sys::errno()) });
        }
        ports.push(port);
        Ok(())
    }
}

impl Drop for RegionInner {
    fn drop(&mut self) {
        let ports = self.dma_ports.get_mut().unwrap_or_else(|p| p.into_inner());
        for &port in ports.iter() {
            // SAFETY: the region was mapped for this port; nothing uses it any more (last clone).
            // A port closed meanwhile makes this fail harmlessly (ENODEV).
            let rc = unsafe {
                sys::shim_port_dma_unmap(port, self.base as *mut libc::c_void, self.base as u64, self.len)
            };
            if rc != 0 {
                log::debug!("rte_dev_dma_unmap on port {port}: {}", sys::strerror(sys::errno()));
            }
        }
        // SAFETY: registered by `register`; no payload is in flight (NICs keep a clone while any is).
        let rc = unsafe { sys::rte_extmem_unregister(self.base as *mut libc::c_void, self.len) };
        if rc != 0 {
            log::warn!("rte_extmem_unregister: {}", sys::strerror(sys::errno()));
        }
    }
}

/// The completion stack shared with the free callbacks: a lock-free stack of slot indices
/// (pushed by callbacks on any thread, drained whole by the owner, so no ABA problem).
#[derive(Debug)]
struct Completions {
    /// Index + 1 of the top slot; 0 when empty.
    head: AtomicU32,
    /// Per slot: index + 1 of the slot below it.
    next: Box<[AtomicU32]>,
}

/// What the free callback gets as its opaque argument; immutable after creation.
#[derive(Debug)]
struct SlotCtx {
    index: u32,
    completions: *const Completions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Payload in flight; the owner's token.
    InFlight(u64),
    /// The frame was not transmitted after all: discard the completion.
    Cancelled,
}

/// DPDK's free callback for external payloads.
///
/// # Safety
/// `opaque` is a `SlotCtx` of a live (or deliberately leaked) `ExtSlots`.
unsafe extern "C" fn ext_payload_freed(_addr: *mut libc::c_void, opaque: *mut libc::c_void) {
    // SAFETY: DPDK passes back the opaque pointer armed in `ExtSlots::acquire`: a SlotCtx whose
    // storage (and that of its Completions) outlives every payload in flight (see Drop).
    let ctx = unsafe { &*opaque.cast::<SlotCtx>() };
    // SAFETY: as above.
    let completions = unsafe { &*ctx.completions };
    let Some(next) = completions.next.get(ctx.index as usize) else { return };
    let mut head = completions.head.load(Ordering::Relaxed);
    loop {
        next.store(head, Ordering::Relaxed);
        match completions.head.compare_exchange_weak(
            head,
            ctx.index + 1,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(h) => head = h,
        }
    }
}

/// Per-NIC-queue table of external payload slots and their completions.
#[derive(Debug)]
pub(crate) struct ExtSlots {
    completions: ManuallyDrop<Box<Completions>>,
    ctx: ManuallyDrop<Box<[SlotCtx]>>,
    shinfo: NonNull<sys::rte_mbuf_ext_shared_info>,
    state: Vec<SlotState>,
    /// Per slot: the region its payload lies in, kept registered until the payload completes.
    held: Vec<Option<ExtMemRegion>>,
    free: Vec<u32>,
    /// Regions payloads may be sent from (detached ones live on in `held` while in flight).
    regions: Vec<ExtMemRegion>,
}

impl ExtSlots {
    /// A table of `n` slots; `None` if `n` is 0, too large, or C memory is exhausted.
    pub(crate) fn new(n: usize) -> Option<Self> {
        let n32 = u32::try_from(n).ok().filter(|&n| n > 0 && n < u32::MAX)?;
        // SAFETY: plain allocation of n zeroed shared-info structs (freed in Drop).
        let shinfo = NonNull::new(unsafe { sys::shim_shinfo_array_alloc(n) })?;
        let completions = Box::new(Completions {
            head: AtomicU32::new(0),
            next: (0..n).map(|_| AtomicU32::new(0)).collect(),
        });
        let cptr: *const Completions = &*completions;
        let ctx: Box<[SlotCtx]> = (0..n32).map(|index| SlotCtx { index, completions: cptr }).collect();
        Some(ExtSlots {
            completions: ManuallyDrop::new(completions),
            ctx: ManuallyDrop::new(ctx),
            shinfo,
            state: vec![SlotState::Free; n],
            held: vec![None; n],
            free: (0..n32).rev().collect(),
            regions: Vec::new(),
        })
    }

    /// The attached region holding `len` bytes at `addr`, if any.
    pub(crate) fn region_of(&self, addr: *const u8, len: usize) -> Option<ExtMemRegion> {
        self.regions.iter().find(|r| r.contains(addr, len)).cloned()
    }

    /// Stops using the region starting at `base` for new payloads; payloads in flight keep it
    /// registered until their completion is polled.
    pub(crate) fn remove_region(&mut self, base: *const u8) {
        self.regions.retain(|r| r.base() != base);
    }

    /// Keeps `region` for payload lookup (and alive while payloads are in flight).
    pub(crate) fn add_region(&mut self, region: ExtMemRegion) {
        if !self.regions.iter().any(|r| Arc::ptr_eq(&r.0, &region.0)) {
            self.regions.push(region);
        }
    }

    /// Takes a free slot for `token` and arms its shared info; `None` when all are in flight.
    pub(crate) fn acquire(
        &mut self,
        token: u64,
        region: ExtMemRegion,
    ) -> Option<(u32, *mut sys::rte_mbuf_ext_shared_info)> {
        let i = self.free.pop()?;
        let idx = i as usize;
        self.state[idx] = SlotState::InFlight(token);
        self.held[idx] = Some(region);
        let opaque = (&self.ctx[idx] as *const SlotCtx).cast_mut().cast::<libc::c_void>();
        // SAFETY: idx < n (slot indices come from 0..n); the slot is not in flight, so its shared
        // info is ours to (re)arm; the callback and opaque stay valid (see Drop).
        let shinfo = unsafe { sys::shim_shinfo_arm(self.shinfo.as_ptr(), idx, ext_payload_freed, opaque) };
        Some((i, shinfo))
    }

    /// Marks a slot's frame as not transmitted: its completion (when the payload mbuf is freed)
    /// is discarded.
    pub(crate) fn cancel(&mut self, slot: u32) {
        if let Some(s) = self.state.get_mut(slot as usize) {
            *s = SlotState::Cancelled;
        }
    }

    /// Frees a slot whose shared info was armed but never attached to an mbuf.
    pub(crate) fn release_unused(&mut self, slot: u32) {
        if let Some(s) = self.state.get_mut(slot as usize) {
            *s = SlotState::Free;
            self.held[slot as usize] = None;
            self.free.push(slot);
        }
    }

    /// Appends the tokens of completed payloads to `out`; returns how many.
    pub(crate) fn poll(&mut self, out: &mut Vec<u64>) -> usize {
        let mut top = self.completions.head.swap(0, Ordering::Acquire);
        let mut n = 0;
        while top != 0 {
            let idx = (top - 1) as usize;
            top = self.completions.next[idx].load(Ordering::Relaxed);
            self.held[idx] = None;
            match std::mem::replace(&mut self.state[idx], SlotState::Free) {
                SlotState::InFlight(token) => {
                    out.push(token);
                    n += 1;
                }
                SlotState::Cancelled => {}
                SlotState::Free => {
                    log::error!("external payload slot {idx} completed twice");
                    continue;
                }
            }
            self.free.push(idx as u32);
        }
        n
    }

    /// Payloads handed to the NIC whose completion has not been polled yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.state.len() - self.free.len()
    }
}

impl Drop for ExtSlots {
    fn drop(&mut self) {
        let mut sink = Vec::new();
        self.poll(&mut sink);
        if self.in_flight() > 0 {
            // Frames still reference the slots and the regions: leak them so late callbacks
            // find valid memory and the regions stay registered.
            log::warn!(
                "dropping a DPDK NIC with {} external payloads in flight: leaking their slots",
                self.in_flight()
            );
            std::mem::forget(std::mem::take(&mut self.regions));
            std::mem::forget(std::mem::take(&mut self.held));
            return;
        }
        // SAFETY: nothing is in flight, so no callback can run any more; each is dropped once.
        unsafe {
            ManuallyDrop::drop(&mut self.ctx);
            ManuallyDrop::drop(&mut self.completions);
            sys::shim_shinfo_array_free(self.shinfo.as_ptr());
        }
    }
}
