//! Guest memory announced to the tenant's NIC, so that send payload goes out of guest memory by
//! reference on every NIC (DPDK needs each region registered for DMA; a TAP needs nothing).
//!
//! The worker calls [`GuestDma::sync`] with the memory table of each step; when the VMM replaced
//! the table, regions that appeared are attached and regions that went away are detached. Each
//! attached region keeps its own mapping alive (the region's `Arc`), so the NIC can unregister it
//! after its last in-flight payload, even when the table is long gone.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use slimtcp::nic::{ExternalMemory, Nic};
use vm_memory::{GuestMemoryBackend, GuestMemoryRegion, MemoryRegionAddress};

use crate::guest_mem::GuestMem;

/// The page size assumed when the backing file does not tell (anonymous memory, memfd).
const SMALL_PAGE: usize = 4096;

/// One attached region: host start and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Attached {
    base: usize,
    len: usize,
}

/// Which guest memory regions the NIC knows (see the module documentation).
#[derive(Debug, Default)]
pub struct GuestDma {
    /// The table synced last (compared by pointer: the daemon makes a new one per update).
    table: Option<Arc<GuestMem>>,
    attached: Vec<Attached>,
    /// Regions the NIC refused (their payload is copied); reported once per region.
    refused: Vec<Attached>,
}

impl GuestDma {
    /// Attaches the regions of `mem` the NIC does not know yet and detaches the ones `mem` no
    /// longer has. Cheap when the table did not change (one pointer comparison).
    pub fn sync<N: Nic>(&mut self, nic: &mut N, mem: &Arc<GuestMem>) {
        if self.table.as_ref().is_some_and(|t| Arc::ptr_eq(t, mem)) {
            return;
        }
        let current: Vec<(Attached, vm_memory::GuestAddress)> = mem
            .iter()
            .filter_map(|r| {
                let base = r.get_host_address(MemoryRegionAddress(0)).ok()? as usize;
                let len = usize::try_from(r.len()).ok()?;
                Some((Attached { base, len }, r.start_addr()))
            })
            .collect();
        self.attached.retain(|a| {
            let keep = current.iter().any(|(c, _)| c == a);
            if !keep {
                nic.detach_memory(a.base as *const u8);
            }
            keep
        });
        self.refused.retain(|a| current.iter().any(|(c, _)| c == a));
        for (region, start) in current {
            if self.attached.contains(&region) || self.refused.contains(&region) {
                continue;
            }
            match Self::attach(nic, mem, region, start) {
                Ok(()) => {
                    log::info!(
                        "guest memory {:#x}+{:#x} attached for zero-copy transmit",
                        region.base,
                        region.len
                    );
                    self.attached.push(region);
                }
                Err(e) => {
                    log::warn!(
                        "guest memory {:#x}+{:#x} cannot be sent by reference ({e}); its send payload is copied",
                        region.base,
                        region.len
                    );
                    self.refused.push(region);
                }
            }
        }
        self.table = Some(Arc::clone(mem));
    }

    /// Detaches every region (the connection ended); payloads in flight keep theirs registered.
    pub fn detach_all<N: Nic>(&mut self, nic: &mut N) {
        for a in self.attached.drain(..) {
            nic.detach_memory(a.base as *const u8);
        }
        self.refused.clear();
        self.table = None;
    }

    /// Regions attached now.
    pub fn attached(&self) -> usize {
        self.attached.len()
    }

    fn attach<N: Nic>(
        nic: &mut N,
        mem: &GuestMem,
        region: Attached,
        start: vm_memory::GuestAddress,
    ) -> Result<(), String> {
        let (_, owner) = mem.remove_region(start, region.len as u64).map_err(|e| e.to_string())?;
        let page_size = page_size_of(&owner, region);
        let owner: Arc<dyn std::any::Any + Send + Sync> = owner;
        // SAFETY: `region` is the mapping of the guest memory region `owner`, which unmaps it only
        // when dropped; the ExternalMemory holds `owner`, so the range stays mapped as long as
        // the NIC may read it.
        let memory = unsafe { ExternalMemory::new(region.base as *mut u8, region.len, page_size, owner) }
            .ok_or_else(|| "empty region".to_owned())?;
        nic.attach_memory(&memory).map_err(|e| e.to_string())
    }
}

/// The page size backing `region`: the backing file's block size (hugetlbfs reports its huge
/// page size) when the mapping is aligned to it, else 4 KiB.
fn page_size_of(r: &vm_memory::GuestRegionMmap<()>, region: Attached) -> usize {
    let from_file = r
        .file_offset()
        .and_then(|f| f.file().metadata().ok())
        .and_then(|m| usize::try_from(m.blksize()).ok())
        .filter(|p| p.is_power_of_two() && *p >= SMALL_PAGE);
    match from_file {
        Some(p) if region.base % p == 0 && region.len % p == 0 => p,
        _ => SMALL_PAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slimtcp::nic::memwire::{link, LinkConfig};
    use vm_memory::GuestAddress;

    fn table(regions: &[(u64, usize)]) -> Arc<GuestMem> {
        let r: Vec<(GuestAddress, usize)> = regions.iter().map(|&(a, l)| (GuestAddress(a), l)).collect();
        Arc::new(GuestMem::from_ranges(&r).expect("anonymous guest memory"))
    }

    #[test]
    fn follows_table_replacements() {
        let (mut nic, _peer) = link(LinkConfig::default()).expect("memwire link");
        let mut dma = GuestDma::default();
        let t1 = table(&[(0, 1 << 20), (1 << 30, 1 << 20)]);
        dma.sync(&mut nic, &t1);
        assert_eq!(dma.attached(), 2);
        dma.sync(&mut nic, &t1);
        assert_eq!(dma.attached(), 2, "the same table is synced once");
        // A table that keeps the first region (same mapping) and drops the second.
        let (kept, _) = t1.remove_region(GuestAddress(1 << 30), 1 << 20).expect("region");
        let t2 = Arc::new(kept);
        dma.sync(&mut nic, &t2);
        assert_eq!(dma.attached(), 1);
        dma.detach_all(&mut nic);
        assert_eq!(dma.attached(), 0);
    }
}
