//! DMA memory inside a VM: 2 MiB hugepages, whose guest-physical addresses (GPAs) are read once
//! from `/proc/self/pagemap` and never change while they are mapped (hugetlb pages are neither
//! swapped nor moved by compaction).
//!
//! A queue pair's buffer area must be contiguous in GPA space ([`DmaRegion`] translates by
//! addition). The pages of one hugetlb memfd are mapped again in the order of their physical
//! addresses, so that physically consecutive pages are also virtually consecutive (DPDK's
//! "legacy memory" way); [`HugeMemory::runs`] are then the stretches that are contiguous in both.
//! Hugepages reserved at boot (`hugepages=N`) come from untouched memory and form one run.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

use super::PciError;

/// The hugepage size this transport uses.
pub const HUGEPAGE: usize = 2 << 20;
const FREE_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
const PAGEMAP_PRESENT: u64 = 1 << 63;
const PAGEMAP_PFN: u64 = (1 << 55) - 1;

/// Hugepage memory (see the module documentation); unmapped on drop.
#[derive(Debug)]
pub struct HugeMemory {
    base: *mut u8,
    len: usize,
    /// Physical address of each page, in mapping order (ascending).
    page_gpa: Vec<u64>,
    _file: File,
}

// SAFETY: the mapping is owned by this value; the raw pointer is only its address. Users of
// the bytes (rings, pools) each belong to one thread.
unsafe impl Send for HugeMemory {}
// SAFETY: as for `Send`: `&HugeMemory` only hands out addresses.
unsafe impl Sync for HugeMemory {}

fn free_hugepages() -> usize {
    std::fs::read_to_string(FREE_HUGEPAGES).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
}

/// `mmap` of `len` bytes of `fd` at `offset`, at `addr` exactly when given.
fn map(addr: Option<*mut u8>, len: usize, fd: i32, offset: usize) -> std::io::Result<*mut u8> {
    let fixed = if addr.is_some() { libc::MAP_FIXED } else { 0 };
    // SAFETY: maps a file range; with MAP_FIXED the target lies in a reservation this module
    // made and owns, so nothing else is replaced.
    let p = unsafe {
        libc::mmap(
            addr.unwrap_or(std::ptr::null_mut()).cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE | fixed,
            fd,
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(p.cast())
    }
}

fn physical_address(pagemap: &File, va: *const u8) -> Result<u64, PciError> {
    let mut entry = [0u8; 8];
    let index = (va as u64) / 4096;
    pagemap
        .read_exact_at(&mut entry, index * 8)
        .map_err(PciError::io("cannot read", "/proc/self/pagemap"))?;
    let entry = u64::from_le_bytes(entry);
    let pfn = entry & PAGEMAP_PFN;
    if entry & PAGEMAP_PRESENT == 0 || pfn == 0 {
        return Err(PciError::NoPhysicalAddress);
    }
    Ok(pfn * 4096 + (va as u64 % 4096))
}

impl HugeMemory {
    /// At least `len` bytes (rounded up to whole hugepages), sorted by physical address.
    pub fn allocate(len: usize) -> Result<HugeMemory, PciError> {
        let pages = len.div_ceil(HUGEPAGE).max(1);
        let len = pages * HUGEPAGE;
        let free = free_hugepages();
        if free < pages {
            return Err(PciError::NoHugepages { needed: pages, free });
        }
        // SAFETY: a valid NUL-terminated name; the fd is owned by the File below.
        let fd =
            unsafe { libc::memfd_create(c"slimtcp-dma".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_HUGETLB) };
        if fd < 0 {
            return Err(PciError::io("cannot create", "a hugetlb memfd")(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is fresh and owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(len as u64).map_err(PciError::io("cannot size", "the hugetlb memfd"))?;
        let pagemap =
            File::open("/proc/self/pagemap").map_err(PciError::io("cannot open", "/proc/self/pagemap"))?;

        // First mapping: fault every page in and learn its physical address.
        let first = map(None, len, file.as_raw_fd(), 0)
            .map_err(|_| PciError::NoHugepages { needed: pages, free: free_hugepages() })?;
        let mut by_pa: Vec<(u64, usize)> = Vec::with_capacity(pages);
        let mut failed = None;
        for i in 0..pages {
            // SAFETY: i * HUGEPAGE < len, inside the mapping.
            let va = unsafe { first.add(i * HUGEPAGE) };
            match physical_address(&pagemap, va) {
                Ok(pa) => by_pa.push((pa, i)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // SAFETY: unmaps the mapping made above; the pages stay in the memfd.
        unsafe { libc::munmap(first.cast(), len) };
        if let Some(e) = failed {
            return Err(e);
        }
        by_pa.sort_unstable();

        // Second mapping: a 2 MiB-aligned reservation (hugetlb mappings must be aligned), then
        // each file page at its rank in physical order.
        let resv_len = len + HUGEPAGE;
        // SAFETY: an anonymous PROT_NONE reservation owned by this function until returned.
        let resv = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                resv_len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if resv == libc::MAP_FAILED {
            return Err(PciError::io("cannot reserve", "address space")(std::io::Error::last_os_error()));
        }
        let resv: *mut u8 = resv.cast();
        let lead = (HUGEPAGE - resv as usize % HUGEPAGE) % HUGEPAGE;
        // SAFETY: the unaligned head and the tail beyond `len` lie inside the reservation and
        // are given back; `base..base + len` stays reserved.
        let base = unsafe {
            let base = resv.add(lead);
            if lead > 0 {
                libc::munmap(resv.cast(), lead);
            }
            let tail = resv_len - lead - len;
            if tail > 0 {
                libc::munmap(base.add(len).cast(), tail);
            }
            base
        };
        let mem = HugeMemory { base, len, page_gpa: by_pa.iter().map(|(pa, _)| *pa).collect(), _file: file };
        for (rank, (pa, file_page)) in by_pa.iter().enumerate() {
            // SAFETY: rank * HUGEPAGE < len: inside the reservation.
            let at = unsafe { base.add(rank * HUGEPAGE) };
            map(Some(at), HUGEPAGE, mem._file.as_raw_fd(), file_page * HUGEPAGE)
                .map_err(PciError::io("cannot map", "a hugepage"))?;
            if physical_address(&pagemap, at)? != *pa {
                return Err(PciError::NoPhysicalAddress);
            }
        }
        Ok(mem)
    }

    /// The stretches contiguous in both address spaces: (offset, guest-physical address, length).
    pub fn runs(&self) -> Vec<(usize, u64, usize)> {
        physical_runs(&self.page_gpa)
    }

    /// Host address of byte `offset`.
    pub fn host(&self, offset: usize) -> *mut u8 {
        // SAFETY: callers pass offsets from `runs`, which lie inside the mapping.
        unsafe { self.base.add(offset.min(self.len)) }
    }
}

/// Runs of physically consecutive pages, given each page's address in mapping order.
pub fn physical_runs(page_gpa: &[u64]) -> Vec<(usize, u64, usize)> {
    let mut runs: Vec<(usize, u64, usize)> = Vec::new();
    for (i, &pa) in page_gpa.iter().enumerate() {
        match runs.last_mut() {
            Some((_, start, len)) if *start + *len as u64 == pa => *len += HUGEPAGE,
            _ => runs.push((i * HUGEPAGE, pa, HUGEPAGE)),
        }
    }
    runs
}

impl Drop for HugeMemory {
    fn drop(&mut self) {
        // SAFETY: unmaps the whole reservation made in `allocate` (and the pages mapped in it);
        // the transport resets the device before this runs (see `PciDevice`'s Drop).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M2: u64 = HUGEPAGE as u64;

    #[test]
    fn consecutive_pages_form_one_run() {
        let runs = physical_runs(&[10 * M2, 11 * M2, 12 * M2]);
        assert_eq!(runs, vec![(0, 10 * M2, 3 * HUGEPAGE)]);
    }

    #[test]
    fn a_gap_starts_a_new_run() {
        let runs = physical_runs(&[4 * M2, 5 * M2, 9 * M2, 10 * M2, 20 * M2]);
        assert_eq!(
            runs,
            vec![
                (0, 4 * M2, 2 * HUGEPAGE),
                (2 * HUGEPAGE, 9 * M2, 2 * HUGEPAGE),
                (4 * HUGEPAGE, 20 * M2, HUGEPAGE)
            ]
        );
    }
}
