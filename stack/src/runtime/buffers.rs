//! Zero-copy buffers of the host runtime.
//!
//! [`TxBuf`]: the application fills it in place; the stack sends straight from it and drops it
//! (back into its pool, for reuse) only after the peer acknowledged its bytes. [`RxBuf`]: a received packet
//! buffer trimmed to its payload, owned by the application; dropping it tells the worker the
//! bytes are consumed, which reopens the receive window (a shared queue, so it may be
//! dropped on any thread).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::SegQueue;
use slimtcp_api::{ReleaseList, ZeroCopyTx};

use crate::nic::PacketBuf;
use crate::tcp::TxPayload;

use slimtcp_api::tx_classes::{tx_class_of, TX_CLASSES};
pub use slimtcp_api::tx_classes::{LARGE_TX, MEDIUM_TX, SMALL_TX};

/// The spare buffers each class of [`TX_CLASSES`] keeps at least.
const SPARES_KEPT: [usize; TX_CLASSES.len()] = [4096, 256, 64];

/// A transmit buffer (see the module documentation). Dropped anywhere (by the application, the
/// worker, the stack), it goes back to its pool.
pub struct TxBuf {
    data: Box<[u8]>,
    len: usize,
    pool: Arc<PoolShared>,
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
        self.data.len()
    }

    /// Address of the first byte (tests use it to follow a buffer's identity).
    pub fn as_ptr(&self) -> *const u8 {
        self.data.as_ptr()
    }
}

impl std::fmt::Debug for TxBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxBuf").field("len", &self.len).field("capacity", &self.data.len()).finish()
    }
}

impl ZeroCopyTx for TxBuf {
    fn space_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    fn filled(&self) -> &[u8] {
        &self.data[..self.len]
    }

    fn set_len(&mut self, len: usize) {
        self.len = len.min(self.data.len());
    }
}

impl TxPayload for TxBuf {
    fn len(&self) -> usize {
        self.len
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        self.read_ahead(offset, dst.len());
        crate::tcp::copy_from_slice_at(&self.data[..self.len], offset, dst)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(&self.data[..self.len])
    }

    #[inline]
    fn read_ahead(&self, offset: usize, n: usize) {
        if self.pool.filled_elsewhere {
            crate::tcp::ask_ahead(self.data.as_ptr(), self.len, offset, n);
        }
    }
}

impl Drop for TxBuf {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.data));
    }
}

/// One size class of a pool: its spare buffers and how many of its buffers are out.
#[derive(Debug, Default)]
struct Class {
    spare: SegQueue<Box<[u8]>>,
    out: AtomicUsize,
}

/// The storage of one pool, shared by its buffers (they go back from whichever thread drops
/// them).
#[derive(Debug, Default)]
struct PoolShared {
    classes: [Class; TX_CLASSES.len()],
    /// The application fills the buffers on another core than the worker's
    /// ([`TxPool::filled_elsewhere`]).
    filled_elsewhere: bool,
}

impl PoolShared {
    /// A class keeps a buffer that comes back while it has fewer spares than buffers out (and
    /// at least its minimum): a steady load allocates nothing, however many connections hold a
    /// send each, and what the pool keeps idle is at most what the load uses. (A fixed 64
    /// spare 64 KiB buffers made 4096 connections' 16 KiB sends free and allocate, and fault
    /// in, fresh memory at every send.)
    fn give_back(&self, data: Box<[u8]>) {
        let Some(i) = tx_class_of(data.len()) else { return };
        let class = &self.classes[i];
        let out = class.out.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        if class.spare.len() < out.max(SPARES_KEPT[i]) {
            class.spare.push(data);
        }
    }
}

/// Recycled transmit buffers, in three size classes.
#[derive(Debug, Default)]
pub struct TxPool(Arc<PoolShared>);

impl TxPool {
    /// A pool whose buffers the application fills on another thread than the worker's (two-core
    /// and external modes): the stack reads their bytes ahead of its copies
    /// ([`TxPayload::read_ahead`]). [`TxPool::default`]: the same thread (single mode).
    pub fn filled_elsewhere() -> Self {
        TxPool(Arc::new(PoolShared { filled_elsewhere: true, ..PoolShared::default() }))
    }

    /// A buffer holding at least `len` bytes, with `len` set; `None` beyond [`LARGE_TX`].
    pub fn alloc(&self, len: usize) -> Option<TxBuf> {
        let i = tx_class_of(len)?;
        let class = &self.0.classes[i];
        let data = class.spare.pop().unwrap_or_else(|| vec![0; TX_CLASSES[i]].into_boxed_slice());
        class.out.fetch_add(1, Ordering::Relaxed);
        Some(TxBuf { data, len, pool: Arc::clone(&self.0) })
    }

    /// Buffers handed out (to the application or the stack) and not yet back.
    pub fn outstanding(&self) -> usize {
        self.0.classes.iter().map(|c| c.out.load(Ordering::Relaxed)).sum()
    }

    /// Spare buffers kept (all classes).
    #[cfg(test)]
    fn spares(&self) -> usize {
        self.0.classes.iter().map(|c| c.spare.len()).sum()
    }
}

#[cfg(test)]
mod pool_tests {
    use super::*;

    #[test]
    fn a_buffer_filled_on_another_thread_copies_the_same_bytes_at_any_offset() {
        let (here, elsewhere) = (TxPool::default(), TxPool::filled_elsewhere());
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        let fill = |pool: &TxPool| {
            let mut buf = pool.alloc(bytes.len()).expect("medium");
            buf.space_mut()[..bytes.len()].copy_from_slice(&bytes);
            buf
        };
        let (a, b) = (fill(&here), fill(&elsewhere));
        for offset in [0, 1, 1460, 5000, 9_000, 9_999, 10_000, 10_007] {
            for n in [0, 1, 64, 1460, 4096] {
                let (mut x, mut y) = (vec![0u8; n], vec![0u8; n]);
                assert_eq!(a.copy_to(offset, &mut x), b.copy_to(offset, &mut y), "at {offset}, {n}");
                assert_eq!(x, y);
                assert_eq!(a.copy_to_summed(offset, &mut x), b.copy_to_summed(offset, &mut y));
                assert_eq!(x, y, "the hint changes nothing it copies");
            }
        }
    }

    #[test]
    fn each_size_class_hands_out_its_size_and_reuses_what_came_back() {
        let pool = TxPool::default();
        for (len, cap) in
            [(1, SMALL_TX), (SMALL_TX, SMALL_TX), (SMALL_TX + 1, MEDIUM_TX), (MEDIUM_TX + 1, LARGE_TX)]
        {
            let buf = pool.alloc(len).expect("within LARGE_TX");
            assert_eq!((buf.len(), buf.capacity()), (len, cap));
            let at = buf.as_ptr();
            drop(buf);
            assert_eq!(pool.alloc(len).expect("again").as_ptr(), at, "the same buffer, back from its class");
        }
        assert!(pool.alloc(LARGE_TX + 1).is_none());
        assert_eq!(pool.outstanding(), 0);
    }

    #[test]
    fn spares_follow_what_is_in_use_beyond_the_minimum() {
        let pool = TxPool::default();
        // Thousands of connections each holding a 16 KiB send: all of them are kept when they
        // come back, so the next round allocates nothing.
        let held: Vec<TxBuf> = (0..1000).map(|_| pool.alloc(MEDIUM_TX).expect("medium")).collect();
        let addresses: std::collections::HashSet<usize> = held.iter().map(|b| b.as_ptr() as usize).collect();
        drop(held);
        assert!(pool.spares() >= 500, "kept {} of 1000", pool.spares());
        let again: Vec<TxBuf> = (0..500).map(|_| pool.alloc(MEDIUM_TX).expect("medium")).collect();
        assert!(again.iter().all(|b| addresses.contains(&(b.as_ptr() as usize))), "reused, none new");
        drop(again);
        // Idle, the class keeps no more than its minimum plus what was out as each came back.
        assert!(pool.spares() <= 1000);
    }
}

/// Bytes of received buffers the application let go of, per socket (the server's id), for the
/// worker ([`release`]: a buffer dropped right after one of the same socket adds to its entry,
/// so an application reading a burst queues one entry, not one per buffer).
pub type ReleaseQueue = ReleaseList<(u32, usize)>;

/// Queues `bytes` released by socket `id` on `queue`.
fn release(queue: &ReleaseQueue, id: u32, bytes: usize) {
    queue.push_merged((id, bytes), |last, new| {
        let same_socket = last.0 == new.0;
        if same_socket {
            last.1 += new.1;
        }
        same_socket
    });
}

/// A received payload buffer (see the module documentation).
#[derive(Debug)]
pub struct RxBuf {
    buf: PacketBuf,
    /// The server's id of the socket.
    id: u32,
    /// Window bytes this buffer holds (its length when delivered).
    held: usize,
    releases: Arc<ReleaseQueue>,
}

impl RxBuf {
    pub(super) fn new(buf: PacketBuf, id: u32, releases: Arc<ReleaseQueue>) -> RxBuf {
        let held = buf.len();
        RxBuf { buf, id, held, releases }
    }

    /// The payload bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops the first `n` bytes (a partial copy-out).
    pub(super) fn consume(&mut self, n: usize) {
        self.buf.advance(n.min(self.buf.len()));
    }
}

impl slimtcp_api::app::RxPayload for RxBuf {
    fn consume(&mut self, n: usize) {
        RxBuf::consume(self, n);
    }
}

impl AsRef<[u8]> for RxBuf {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_slice()
    }
}

impl Drop for RxBuf {
    fn drop(&mut self) {
        if self.held > 0 {
            release(&self.releases, self.id, self.held);
        }
    }
}
