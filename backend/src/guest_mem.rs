//! Guest memory on the data path: address translation with full range checks, the zero-copy
//! transmit payload that points into guest memory, and writing into guest-posted buffers.

use std::sync::Arc;

use slimtcp::tcp::TxPayload;
use vm_memory::{
    Address, GuestAddress, GuestMemoryBackend, GuestMemoryRegion, MemoryRegionAddress, VolatileSlice,
};

/// The guest memory type of the device (no dirty-page bitmap: LOG_SHMFD is not offered).
pub type GuestMem = vm_memory::GuestMemoryMmap<()>;

/// A descriptor range that is not entirely inside guest memory (or whose end overflows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("guest range {addr:#x}+{len} is outside guest memory")]
pub struct Fault {
    /// Start guest-physical address.
    pub addr: u64,
    /// Length.
    pub len: u64,
}

/// A contiguous host mapping of part of a guest buffer.
#[derive(Debug, Clone, Copy)]
pub struct HostSlice {
    /// Host address.
    pub ptr: *mut u8,
    /// Length.
    pub len: usize,
}

// SAFETY: a HostSlice is an address range; whoever dereferences it guarantees the mapping is
// alive (the memory guard or the `Arc` of the memory table it was translated from).
unsafe impl Send for HostSlice {}

impl HostSlice {
    /// The range as vm-memory's view of memory another party (the guest) may access at the same
    /// time; copies in and out go through it.
    fn volatile(&self) -> VolatileSlice<'_> {
        // SAFETY: the range was produced by `translate` from a memory table whose mapping the
        // caller keeps alive while it uses the slice (the memory guard, or the `Arc` of the
        // table); the guest's concurrent accesses are what a VolatileSlice is for.
        unsafe { VolatileSlice::new(self.ptr, self.len) }
    }
}

/// Translates `[addr, addr + len)` to host slices, one per memory region it crosses. Fails when
/// any byte is outside guest memory or the end overflows.
pub fn translate(mem: &GuestMem, addr: u64, len: u64, out: &mut Vec<HostSlice>) -> Result<(), Fault> {
    let fault = Fault { addr, len };
    addr.checked_add(len).ok_or(fault)?;
    let mut a = addr;
    let mut left = len;
    while left > 0 {
        let region = mem.find_region(GuestAddress(a)).ok_or(fault)?;
        let off = a - region.start_addr().raw_value();
        let n = (region.len() - off).min(left);
        let ptr = region.get_host_address(MemoryRegionAddress(off)).map_err(|_| fault)?;
        out.push(HostSlice { ptr, len: usize::try_from(n).map_err(|_| fault)? });
        a += n;
        left -= n;
    }
    Ok(())
}

/// Copies up to `out.len()` bytes from the host slices, in order, starting `skip` bytes in.
/// Returns bytes copied. Used only for the fixed request bytes, never for payload.
pub fn read_into(slices: &[HostSlice], mut skip: usize, out: &mut [u8]) -> usize {
    let mut done = 0;
    for s in slices {
        if done == out.len() {
            break;
        }
        if skip >= s.len {
            skip -= s.len;
            continue;
        }
        let n = (s.len - skip).min(out.len() - done);
        // The guest may write these bytes meanwhile, which only changes the values read (they
        // are validated afterwards, never read twice).
        done += s.volatile().offset(skip).map_or(0, |v| v.copy_to(&mut out[done..done + n]));
        skip = 0;
    }
    done
}

/// Bytes of a cache line (where [`GuestWriter`]'s write-ahead starts its requests).
const CACHE_LINE: usize = 64;

/// A position in a buffer's host slices: the slice, and the offset in it.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    idx: usize,
    off: usize,
}

impl Cursor {
    /// The piece of at most `want` bytes at the cursor (its slice, the offset in it, its length),
    /// the cursor moved past it; `None` at the buffer's end.
    fn take(&mut self, slices: &[HostSlice], want: usize) -> Option<(HostSlice, usize, usize)> {
        let s = *slices.get(self.idx)?;
        let off = self.off;
        let n = (s.len - off).min(want);
        self.off += n;
        if self.off == s.len {
            self.idx += 1;
            self.off = 0;
        }
        Some((s, off, n))
    }
}

/// Sequential writer over the host slices of a guest-posted (device-writable) buffer.
#[derive(Debug)]
pub struct GuestWriter<'a> {
    slices: &'a [HostSlice],
    at: Cursor,
    written: usize,
    /// With [`with_write_ahead`](Self::with_write_ahead): how far past what is written the
    /// buffer's lines are asked for, where the asking stops (the bytes that will be written),
    /// how many bytes from the start are asked for, and where.
    ahead: usize,
    ask_limit: usize,
    asked: usize,
    ask: Cursor,
}

impl<'a> GuestWriter<'a> {
    /// A writer at the start of the buffer.
    pub fn new(slices: &'a [HostSlice]) -> Self {
        GuestWriter {
            slices,
            at: Cursor::default(),
            written: 0,
            ahead: 0,
            ask_limit: 0,
            asked: 0,
            ask: Cursor::default(),
        }
    }

    /// A writer at the start of the buffer that asks the CPU for the buffer's lines, to be
    /// written, `ahead` bytes before it writes them
    /// ([`lines_for_write`](slimtcp::api::prefetch::lines_for_write)), up to the first `limit`
    /// bytes (what the caller will write: lines past them would be asked for and not used). The
    /// guest read the buffer last, on its own core: each line must be taken from there, and
    /// asked for a bounded distance ahead they come while the bytes before them are copied;
    /// asked for all at once (a whole buffer, 128 lines of 8 KiB) the CPU stalls on the
    /// requests it cannot yet hold.
    pub fn with_write_ahead(slices: &'a [HostSlice], ahead: usize, limit: usize) -> Self {
        let mut w = GuestWriter { ahead, ask_limit: limit, ..GuestWriter::new(slices) };
        w.ask_for_lines_ahead();
        w
    }

    /// Asks for the lines up to `ahead` bytes past what is written, within the limit (nothing
    /// without write-ahead).
    fn ask_for_lines_ahead(&mut self) {
        let mut want = (self.written + self.ahead).min(self.ask_limit).saturating_sub(self.asked);
        while want > 0 {
            let Some((s, off, n)) = self.ask.take(self.slices, want) else { break };
            // From the start of the first line touched: a range that starts inside a line asks
            // for that line and every one it reaches.
            let start = s.ptr.wrapping_add(off);
            let lead = start as usize % CACHE_LINE;
            slimtcp::api::prefetch::lines_for_write(start.wrapping_sub(lead), n + lead);
            want -= n;
            self.asked += n;
        }
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Moves `n` bytes ahead without writing.
    pub fn skip(&mut self, mut n: usize) {
        while n > 0 {
            let Some((_, _, k)) = self.at.take(self.slices, n) else { break };
            n -= k;
            self.written += k;
        }
    }

    /// Writes all of `data` or as much as fits; returns bytes written.
    pub fn write(&mut self, mut data: &[u8]) -> usize {
        let start = self.written;
        while !data.is_empty() {
            let Some((s, off, n)) = self.at.take(self.slices, data.len()) else { break };
            // The buffer is device-writable and the device's until it is put on the used ring.
            if let Ok(v) = s.volatile().offset(off) {
                v.copy_from(&data[..n]);
            }
            data = &data[n..];
            self.written += n;
        }
        if self.ahead > 0 {
            self.ask_for_lines_ahead();
        }
        self.written - start
    }
}

/// A piece of a `send` request's payload, transmitted by the stack straight from guest memory
/// (by reference). It keeps the memory mapping it points into alive (`Arc` of the memory table
/// at the time of the request), so a memory-table swap or a disconnect cannot unmap it.
pub struct GuestPayload {
    ptr: *const u8,
    len: usize,
    _mem: Arc<GuestMem>,
}

// SAFETY: the payload is an address range in a mapping kept alive by the `Arc` it holds; it is
// only read, from whichever thread owns the stack.
unsafe impl Send for GuestPayload {}

impl GuestPayload {
    /// A payload of `slice`, a translation made from `mem`.
    pub fn new(slice: HostSlice, mem: Arc<GuestMem>) -> Self {
        GuestPayload { ptr: slice.ptr, len: slice.len, _mem: mem }
    }
}

impl std::fmt::Debug for GuestPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestPayload").field("len", &self.len).finish()
    }
}

/// The guest promised not to write a send's payload until its chain comes back (the avail-ring
/// entry, docs/protocol.md section 7), but nothing stops a guest that writes anyway: the bytes
/// are never a `&[u8]`, only read through volatile copies (and by the NIC in place); such a
/// guest changes only its own stream's bytes.
impl TxPayload for GuestPayload {
    fn len(&self) -> usize {
        self.len
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        self.read_ahead(offset, dst.len());
        let slice = HostSlice { ptr: self.ptr.cast_mut(), len: self.len };
        // `_mem` keeps the mapping alive while `self` exists.
        slice.volatile().offset(offset).map_or(0, |v| v.copy_to(dst))
    }

    fn external_addr(&self) -> Option<std::ptr::NonNull<u8>> {
        // `len` bytes stay mapped while the stack holds this payload: `_mem` keeps the mapping.
        std::ptr::NonNull::new(self.ptr.cast_mut())
    }

    fn read_ahead(&self, offset: usize, n: usize) {
        // The guest wrote them, on one of its vCPUs.
        slimtcp::tcp::ask_ahead(self.ptr, self.len, offset, n);
    }
}

#[cfg(test)]
mod tests {
    use vm_memory::{Bytes, GuestAddress};

    use super::*;

    #[test]
    fn a_guest_payload_is_read_by_copies_at_any_offset_and_sent_from_its_address() {
        let mem = Arc::new(GuestMem::from_ranges(&[(GuestAddress(0), 0x4000)]).expect("guest memory"));
        let bytes: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        mem.write_slice(&bytes, GuestAddress(0x1000)).expect("write");
        let mut slices = Vec::new();
        translate(&mem, 0x1000, 3000, &mut slices).expect("inside guest memory");
        let payload = GuestPayload::new(slices[0], Arc::clone(&mem));
        assert_eq!(payload.len(), 3000);
        assert!(payload.as_slice().is_none(), "guest memory is never a slice");
        let mut out = vec![0u8; 1000];
        assert_eq!(payload.copy_to(2500, &mut out), 500);
        assert_eq!(&out[..500], &bytes[2500..]);
        assert_eq!(payload.copy_to(3001, &mut out), 0, "past the end");
        assert_eq!(
            slimtcp::tcp::payload_sum(&payload, 7, 2000),
            slimtcp::wire::checksum::data(&bytes[7..2007])
        );
        assert_eq!(
            payload.external_addr().map(|p| p.as_ptr().cast_const()),
            Some(slices[0].ptr.cast_const())
        );
    }

    #[test]
    fn a_writer_asking_ahead_writes_what_a_plain_one_does_across_regions() {
        // Two regions: a buffer over their seam is two host slices.
        let mem = GuestMem::from_ranges(&[(GuestAddress(0), 0x2000), (GuestAddress(0x2000), 0x2000)])
            .expect("guest memory");
        let mut slices = Vec::new();
        translate(&mem, 0x1f83, 0x1400, &mut slices).expect("inside guest memory");
        assert_eq!(slices.len(), 2, "the buffer crosses the regions' seam");
        let pieces: Vec<Vec<u8>> = [3usize, 1460, 700, 1, 1460, 1500]
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8 + 1; n])
            .collect();
        let write_all = |w: &mut GuestWriter<'_>| {
            w.skip(29);
            pieces.iter().map(|p| w.write(p)).sum::<usize>()
        };
        let plain = write_all(&mut GuestWriter::new(&slices));
        let mut expected = vec![0u8; 0x1400];
        mem.read_slice(&mut expected, GuestAddress(0x1f83)).expect("read");
        mem.write_slice(&vec![0u8; 0x1400], GuestAddress(0x1f83)).expect("clear");
        for (ahead, limit) in
            [(1, usize::MAX), (64, usize::MAX), (100, 700), (2048, 3000), (1 << 20, usize::MAX)]
        {
            let mut w = GuestWriter::with_write_ahead(&slices, ahead, limit);
            assert_eq!(write_all(&mut w), plain, "ahead {ahead}, limit {limit}: as much written");
            assert_eq!(w.written(), 29 + plain);
            let mut got = vec![0u8; 0x1400];
            mem.read_slice(&mut got, GuestAddress(0x1f83)).expect("read");
            assert_eq!(got, expected, "ahead {ahead}: the same bytes in the same places");
            mem.write_slice(&vec![0u8; 0x1400], GuestAddress(0x1f83)).expect("clear");
        }
        assert_eq!(plain, 0x1400 - 29, "the last piece was cut at the buffer's end");
    }
}
