//! Zero-copy buffers in shared (DMA) memory.
//!
//! [`TxBuf`]: cut from the pair's transmit pool; the application fills it in place and
//! `send_zc` puts its GPA in the send chain. The library holds it while the device holds the
//! chain, and it goes back to the pool (on drop) only when the device returned the chain, i.e.
//! after the peer acknowledged its bytes. [`RxBuf`]: the payload of a `data` or `datagram`
//! message, read in place inside the posted receive buffer; dropping it queues the buffer for
//! reposting and its bytes for a credit return.

use std::sync::{Arc, Mutex, PoisonError};

use slimtcp_api::{Fd, ReleaseList, ZeroCopyTx};

use crate::mem::DmaRegion;

/// The largest transmit buffer (and copy-send chunk).
pub use slimtcp_api::tx_classes::LARGE_TX;
use slimtcp_api::tx_classes::{tx_class_of, TX_CLASSES};

#[derive(Debug, Default)]
struct PoolLists {
    /// Free offsets of each class of [`TX_CLASSES`].
    free: [Vec<usize>; TX_CLASSES.len()],
    /// Next uncarved offset.
    bump: usize,
    outstanding: usize,
}

/// The transmit pool of one queue pair: three size classes carved on demand from a region.
#[derive(Debug)]
pub(crate) struct TxPool {
    region: DmaRegion,
    lists: Mutex<PoolLists>,
}

impl TxPool {
    pub(crate) fn new(region: DmaRegion) -> Arc<TxPool> {
        Arc::new(TxPool { region, lists: Mutex::new(PoolLists::default()) })
    }

    fn lists(&self) -> std::sync::MutexGuard<'_, PoolLists> {
        self.lists.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A buffer with room for `len` bytes (and `len` set), `None` when the pool is exhausted
    /// or `len` is above [`LARGE_TX`].
    pub(crate) fn alloc(self: &Arc<Self>, len: usize) -> Option<TxBuf> {
        let class = tx_class_of(len)?;
        let cap = TX_CLASSES[class];
        let mut l = self.lists();
        let offset = match l.free[class].pop() {
            Some(o) => o,
            None => {
                let start = l.bump;
                if start + cap > self.region.len() {
                    return None;
                }
                l.bump = start + cap;
                start
            }
        };
        l.outstanding += 1;
        // The next send of this class takes the buffer now on top: its lines are asked for, to
        // be written, while this one is filled (the device read it last, on its own core).
        let next = l.free[class].last().copied();
        drop(l);
        if let Some(next) = next {
            slimtcp_api::prefetch::lines_for_write(self.region.host().wrapping_add(next), len);
        }
        Some(TxBuf { pool: self.clone(), offset, cap, len })
    }

    pub(crate) fn outstanding(&self) -> usize {
        self.lists().outstanding
    }
}

/// A zero-copy transmit buffer in shared memory (see the module documentation).
pub struct TxBuf {
    pool: Arc<TxPool>,
    offset: usize,
    cap: usize,
    len: usize,
}

impl TxBuf {
    /// Bytes that will be sent.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing will be sent.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room in the buffer.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The guest-physical address the device reads the payload from.
    pub fn gpa(&self) -> u64 {
        self.pool.region.gpa() + self.offset as u64
    }

    /// Address of the first byte (tests use it to follow a buffer's identity).
    pub fn as_ptr(&self) -> *const u8 {
        // SAFETY: offset + cap <= region length (checked when carved).
        unsafe { self.pool.region.host().add(self.offset) }
    }
}

impl std::fmt::Debug for TxBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxBuf")
            .field("gpa", &format_args!("{:#x}", self.gpa()))
            .field("len", &self.len)
            .field("capacity", &self.cap)
            .finish()
    }
}

impl ZeroCopyTx for TxBuf {
    fn space_mut(&mut self) -> &mut [u8] {
        // SAFETY: the buffer's bytes belong to this TxBuf alone (the pool hands each offset out
        // once, and the device reads it only while the library holds the TxBuf in flight, when
        // the application cannot reach it).
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr().cast_mut(), self.cap) }
    }

    fn filled(&self) -> &[u8] {
        // SAFETY: as in `space_mut`; len <= cap.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len) }
    }

    fn set_len(&mut self, len: usize) {
        self.len = len.min(self.cap);
    }
}

impl Drop for TxBuf {
    fn drop(&mut self) {
        let mut l = self.pool.lists();
        l.outstanding = l.outstanding.saturating_sub(1);
        if let Some(class) = tx_class_of(self.cap) {
            l.free[class].push(self.offset);
        }
    }
}

/// A received payload the application let go of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Release {
    /// The receive-buffer slot to repost (`None`: the payload was copied out of its buffer,
    /// which went back at once).
    pub slot: Option<u16>,
    /// The socket whose window the bytes count against (TCP data only).
    pub fd: Option<Fd>,
    /// Payload bytes to credit.
    pub bytes: u32,
}

/// Releases queued by dropped [`RxBuf`]s (they may be dropped anywhere, even on another
/// thread), taken by the library's poll loop. It also keeps the receive buffers' mapping
/// alive, so an [`RxBuf`] takes one reference (this queue's), not two.
pub(crate) struct ReleaseQueue {
    list: ReleaseList<Release>,
    _mem: crate::mem::KeepAlive,
}

impl std::fmt::Debug for ReleaseQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseQueue").field("queued", &self.list.len()).finish()
    }
}

impl ReleaseQueue {
    /// An empty queue keeping `mem` (the receive buffers' mapping) alive.
    pub(crate) fn new(mem: crate::mem::KeepAlive) -> Arc<ReleaseQueue> {
        Arc::new(ReleaseQueue { list: ReleaseList::new(), _mem: mem })
    }

    /// Moves the queued releases into `out` (empty; its allocation is reused).
    pub(crate) fn take(&self, out: &mut Vec<Release>) {
        self.list.take(out);
    }
}

/// A received payload, read in place in shared memory, or (when the posted buffers run low)
/// copied out of it (see the module documentation).
pub struct RxBuf {
    bytes: Payload,
    start: usize,
    len: usize,
    release: Release,
    /// Where the buffer goes back; also keeps the mapping alive.
    queue: Arc<ReleaseQueue>,
}

/// Where an [`RxBuf`]'s bytes are.
enum Payload {
    /// In a returned receive buffer.
    InPlace(*const u8),
    /// In memory of its own.
    Copied(Box<[u8]>),
}

// SAFETY: in place, the bytes are a posted buffer the device returned and that is not reposted
// before this RxBuf drops (the release queue is a mutex), and the mapping is kept by `queue`;
// a copy is owned.
unsafe impl Send for RxBuf {}

impl RxBuf {
    /// The `len` bytes at `ptr`, in a receive buffer the device returned, read in place.
    pub(crate) fn in_place(ptr: *const u8, len: usize, release: Release, queue: Arc<ReleaseQueue>) -> RxBuf {
        RxBuf { bytes: Payload::InPlace(ptr), start: 0, len, release, queue }
    }

    /// A copy of `bytes` (their receive buffer is reposted by the caller).
    pub(crate) fn copied(bytes: &[u8], release: Release, queue: Arc<ReleaseQueue>) -> RxBuf {
        RxBuf { bytes: Payload::Copied(bytes.into()), start: 0, len: bytes.len(), release, queue }
    }

    /// The payload bytes not yet consumed.
    pub fn as_slice(&self) -> &[u8] {
        match &self.bytes {
            // SAFETY: `ptr..ptr + len` lies in a returned receive buffer (checked against the
            // buffer size when the message was parsed) that nobody writes until this drops.
            Payload::InPlace(ptr) => unsafe {
                std::slice::from_raw_parts(ptr.add(self.start), self.len - self.start)
            },
            Payload::Copied(copy) => &copy[self.start..],
        }
    }

    /// Payload bytes not yet consumed.
    pub fn len(&self) -> usize {
        self.len - self.start
    }

    /// True when everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.len == self.start
    }

    /// Drops the first `n` bytes (a partial copy-out).
    pub(crate) fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.len);
    }
}

impl std::fmt::Debug for RxBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxBuf").field("slot", &self.release.slot).field("len", &self.len()).finish()
    }
}

impl slimtcp_api::app::RxPayload for RxBuf {
    fn consume(&mut self, n: usize) {
        RxBuf::consume(self, n);
    }
}

impl AsRef<[u8]> for RxBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl Drop for RxBuf {
    fn drop(&mut self) {
        self.queue.list.push(self.release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slimtcp_api::tx_classes::{MEDIUM_TX, SMALL_TX};

    /// A pool over `len` bytes of heap memory standing in for shared memory.
    fn pool(len: usize) -> Arc<TxPool> {
        let memory: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(vec![0u8; len]));
        let host = memory.lock().expect("memory").as_mut_ptr();
        // SAFETY: the vector is never resized, and the keep-alive holds it as long as the region.
        let region = unsafe { DmaRegion::new(host, 0x10_0000, len, memory) };
        TxPool::new(region)
    }

    #[test]
    fn each_send_takes_the_smallest_class_that_holds_it() {
        let pool = pool(1 << 20);
        let cases = [
            (1, SMALL_TX),
            (SMALL_TX, SMALL_TX),
            (SMALL_TX + 1, MEDIUM_TX),
            (MEDIUM_TX, MEDIUM_TX),
            (MEDIUM_TX + 1, LARGE_TX),
            (LARGE_TX, LARGE_TX),
        ];
        for (len, cap) in cases {
            let buf = pool.alloc(len).expect("room");
            assert_eq!((buf.len(), buf.capacity()), (len, cap), "a {len}-byte buffer");
        }
        assert!(pool.alloc(LARGE_TX + 1).is_none());
    }

    #[test]
    fn a_freed_buffer_serves_its_class_again_and_the_region_bounds_the_pool() {
        let pool = pool(4 * MEDIUM_TX);
        let held: Vec<TxBuf> = (0..4).map(|_| pool.alloc(MEDIUM_TX).expect("room")).collect();
        assert!(pool.alloc(MEDIUM_TX).is_none(), "the region is carved");
        assert!(pool.alloc(1).is_none(), "no class has a free buffer");
        let gpa = held[2].gpa();
        drop(held);
        assert_eq!(pool.outstanding(), 0);
        let again: Vec<TxBuf> = (0..4).map(|_| pool.alloc(SMALL_TX + 1).expect("reused")).collect();
        assert!(again.iter().any(|b| b.gpa() == gpa), "offsets come back to their class");
        assert!(pool.alloc(SMALL_TX).is_none(), "medium buffers are not split into small ones");
    }
}
