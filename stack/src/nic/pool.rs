//! A pool of heap packet buffers for NICs without one of their own (memwire, TAP): a buffer
//! taken from it goes back when its [`PacketBuf`] is dropped, wherever that is (the stack that
//! received it, a queue, another thread), so a steady flow allocates and zeroes nothing. The
//! free list is a bounded lock-free queue: a buffer that finds it full is freed; an empty one
//! makes a new buffer. Buffers come back holding old frame bytes (never uninitialised memory):
//! a [`PacketBuf`] shows only what was written into it.
//!
//! Each thread also keeps a few of one pool's free buffers aside (its spare, as a DPDK mempool
//! keeps a cache per lcore): a buffer dropped on the thread that takes the next one (a stack
//! that receives and sends on one core, both ends of a link polled by one worker) goes round
//! without an atomic operation, neither on the queue nor on the pool's reference count (a spare
//! buffer keeps its reference). The spare holds at most [`SPARE_BYTES`] and one pool's buffers
//! at a time: a buffer of another pool takes the queue, unless the spare's pool is otherwise
//! gone, whose buffers are then released. A thread's spare goes back to the queue when the
//! thread ends.
//!
//! A free buffer in the queue keeps its reference to the pool as well: buffers that flow from
//! one thread to another (a worker's frames, dropped by the application that read them) cross
//! the queue without touching the pool's reference count, one cache line both cores would
//! otherwise write for every buffer (the worker's wait for it was 16% of its time). The queue
//! so holds its own pool: the pool's owner ([`PoolOwner`], the NIC or budget that made it)
//! closes it when dropped, which frees what the queue holds, and a buffer given back after that
//! is freed.
//!
//! A buffer made on its own (`PacketBuf::with_headroom`, a copy of any buffer) keeps its bytes
//! the same way, [`HeapBytes`] without a pool, and frees them when dropped: a buffer's bytes are
//! found the same way whichever it is.

use std::cell::RefCell;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::buf::PacketBuf;

/// Most bytes of free buffers one thread keeps aside (its spare; see the module documentation):
/// a 256 KiB window of 64-byte segments in flight on one thread is 4,096 frames, 8 MiB of 2 KiB
/// buffers (DPDK's per-lcore caches hold up to 512 mbufs; a window of small segments on a
/// memwire link holds more, and what does not fit pays the queue's atomics on both ends).
pub const SPARE_BYTES: usize = 8 << 20;

thread_local! {
    /// This thread's spare: free buffers of one pool, each still holding its reference to it.
    static SPARE: RefCell<Vec<HeapBytes>> = const { RefCell::new(Vec::new()) };
}

/// The pool (see the module documentation). Shared as `Arc<BufferPool>`; made and closed by
/// its [`PoolOwner`].
#[derive(Debug)]
pub struct BufferPool {
    /// Free buffers, each with its reference to this pool.
    free: ArrayQueue<HeapBytes>,
    buf_size: usize,
    /// Most of its buffers a thread's spare holds (`SPARE_BYTES / buf_size`).
    spare_max: usize,
    /// Its owner is gone: the queue is emptied and takes nothing more.
    closed: AtomicBool,
}

impl BufferPool {
    /// An empty buffer from this thread's spare, the pool's queue, or a new one, whose data
    /// starts after `headroom` bytes.
    #[inline]
    pub fn take(self: &Arc<Self>, headroom: usize) -> PacketBuf {
        let bytes = take_spare(self).unwrap_or_else(|| self.take_queued());
        PacketBuf::on_heap(bytes, headroom)
    }

    /// A buffer from the queue (with its reference), or a new one.
    #[inline(never)]
    fn take_queued(self: &Arc<Self>) -> HeapBytes {
        self.free.pop().unwrap_or_else(|| {
            HeapBytes::new(vec![0u8; self.buf_size].into_boxed_slice(), Some(Arc::clone(self)))
        })
    }

    /// Queues `entry` (this pool's bytes with their reference), or frees it when the queue is
    /// full or the pool closed.
    fn give(&self, mut entry: HeapBytes) {
        if self.closed.load(Ordering::Relaxed) {
            return entry.free();
        }
        if let Err(mut entry) = self.free.push(entry) {
            return entry.free();
        }
        // Against `close` running meanwhile: either it sees this entry in the queue, or this
        // sees it closed (each stores, then loads after a full fence).
        fence(Ordering::SeqCst);
        if self.closed.load(Ordering::Relaxed) {
            self.drain();
        }
    }

    /// Takes nothing more and frees what the queue holds (the other half of `give`'s check).
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        self.drain();
    }

    /// Frees what the queue holds.
    fn drain(&self) {
        while let Some(mut entry) = self.free.pop() {
            entry.free();
        }
    }

    /// Free buffers in the pool's queue now (threads' spares not counted).
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Size of its buffers.
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }
}

/// A buffer of `pool` from this thread's spare, if it holds one.
#[inline]
fn take_spare(pool: &Arc<BufferPool>) -> Option<HeapBytes> {
    SPARE
        .try_with(|spare| {
            let mut spare = spare.try_borrow_mut().ok()?;
            match spare.last() {
                Some(top) if top.is_of(pool) => spare.pop(),
                _ => None,
            }
        })
        .ok()
        .flatten()
}

/// The owner of a [`BufferPool`] (the NIC or budget that made it): dereferences to the pool, and
/// closes it when dropped (see the module documentation). Buffers out keep the pool itself
/// alive as long as they live.
#[derive(Debug)]
pub struct PoolOwner(Arc<BufferPool>);

impl PoolOwner {
    /// A pool keeping up to `keep` free buffers of `buf_size` bytes in its queue (and threads'
    /// spares up to [`SPARE_BYTES`] each), owned by the caller.
    pub fn new(keep: usize, buf_size: usize) -> Self {
        let spare_max = SPARE_BYTES.checked_div(buf_size).unwrap_or(0);
        PoolOwner(Arc::new(BufferPool {
            free: ArrayQueue::new(keep.max(1)),
            buf_size,
            spare_max,
            closed: AtomicBool::new(false),
        }))
    }
}

impl Deref for PoolOwner {
    type Target = Arc<BufferPool>;

    fn deref(&self) -> &Arc<BufferPool> {
        &self.0
    }
}

impl Drop for PoolOwner {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Whether `spare` (this thread's) has room for a buffer of `pool`: it is empty or holds fewer
/// than `spare_max` of `pool`'s. A spare of another pool held by nothing else (its link is
/// gone) is released first.
#[inline]
fn spare_has_room(spare: &mut Vec<HeapBytes>, pool: &Arc<BufferPool>) -> bool {
    match spare.first() {
        None => pool.spare_max > 0,
        Some(first) if first.is_of(pool) => spare.len() < pool.spare_max,
        Some(_) => release_orphaned_spare(spare) && pool.spare_max > 0,
    }
}

/// Empties `spare` (of another pool than the buffer dropped now) when nothing but the spare
/// holds its pool, and says whether it did. Its buffers then find the spare borrowed and go to
/// their pool, closed since its owner is gone: they are freed (the last one frees the pool).
#[cold]
#[inline(never)]
fn release_orphaned_spare(spare: &mut Vec<HeapBytes>) -> bool {
    let orphaned = spare
        .first()
        .and_then(|first| first.pool.as_ref())
        .is_some_and(|pool| Arc::strong_count(pool) == spare.len());
    if orphaned {
        spare.clear();
    }
    orphaned
}

/// A buffer's heap bytes: returned to their pool on drop when they came from one (a pool's
/// buffer), freed otherwise (a buffer made on its own). One type for both, so that a buffer's
/// bytes are found without asking which kind it is.
///
/// Neither field is dropped by itself: [`Drop`] lets them go (recycled, or freed), so that
/// dropping bytes that hold nothing (the stand-in a frame whose payload was taken leaves, an
/// emptied queue slot) is one test wherever it is inlined, not a call to drop glue that looks
/// at both fields.
#[derive(Debug)]
pub(crate) struct HeapBytes {
    /// Empty (an empty boxed slice allocates nothing) after being given back.
    bytes: ManuallyDrop<Box<[u8]>>,
    /// The pool the bytes go back to; taken out only when the bytes are let go.
    pool: ManuallyDrop<Option<Arc<BufferPool>>>,
}

impl HeapBytes {
    #[inline]
    fn new(bytes: Box<[u8]>, pool: Option<Arc<BufferPool>>) -> Self {
        HeapBytes { bytes: ManuallyDrop::new(bytes), pool: ManuallyDrop::new(pool) }
    }

    /// Bytes of no pool, freed with the buffer.
    #[inline]
    pub(crate) fn unpooled(bytes: Box<[u8]>) -> Self {
        HeapBytes::new(bytes, None)
    }

    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Whether the bytes are `pool`'s.
    #[inline]
    fn is_of(&self, pool: &Arc<BufferPool>) -> bool {
        self.pool.as_ref().is_some_and(|own| Arc::ptr_eq(own, pool))
    }

    /// Moves the bytes and the pool reference out, leaving nothing to drop.
    #[inline]
    fn take_out(&mut self) -> HeapBytes {
        HeapBytes::new(std::mem::take(&mut *self.bytes), self.pool.take())
    }

    /// Frees the bytes and drops the pool reference, recycling nothing (nothing is left to
    /// drop).
    fn free(&mut self) {
        drop(std::mem::take(&mut *self.bytes));
        drop(self.pool.take());
    }

    /// Moves the bytes and the pool reference into this thread's spare, if it has room.
    #[inline]
    fn keep_in_spare(&mut self) -> bool {
        SPARE
            .try_with(|spare| {
                let Ok(mut spare) = spare.try_borrow_mut() else { return false };
                let Some(pool) = self.pool.as_ref() else { return false };
                if !spare_has_room(&mut spare, pool) {
                    return false;
                }
                spare.push(self.take_out());
                true
            })
            .unwrap_or(false)
    }

    /// Lets the bytes go: a pool's are kept in this thread's spare or given back to the pool's
    /// queue; others are freed. Nothing is left to drop.
    #[inline(never)]
    fn let_go(&mut self) {
        if self.pool.is_none() {
            self.free();
        } else if !self.keep_in_spare() {
            self.queue();
        }
    }

    /// Gives a pool's bytes, with their reference, to the pool's queue: reached through this
    /// thread's spare when it is full of the pool's (the spare's own reference: none is
    /// counted), else through a reference of its own ([`give_back`]).
    #[cold]
    #[inline(never)]
    fn queue(&mut self) {
        let mut entry = Some(self.take_out());
        let _ = SPARE.try_with(|spare| {
            let Ok(spare) = spare.try_borrow() else { return };
            let Some(pool) = entry.as_ref().and_then(|e| e.pool.as_ref()) else { return };
            if let Some(queue) = spare.first().filter(|first| first.is_of(pool)).and_then(|f| f.pool.as_ref())
            {
                if let Some(entry) = entry.take() {
                    queue.give(entry);
                }
            }
        });
        if let Some(entry) = entry {
            give_back(entry);
        }
    }
}

/// Queues `entry` where this thread's spare could not take it or reach its pool (it is gone,
/// borrowed, or another pool's): through a reference of its own to the pool.
#[cold]
#[inline(never)]
fn give_back(entry: HeapBytes) {
    if let Some(pool) = entry.pool.as_ref().map(Arc::clone) {
        pool.give(entry);
    }
}

impl Drop for HeapBytes {
    /// Bytes that hold nothing (empty, of no pool) cost a test; others are let go.
    #[inline]
    fn drop(&mut self) {
        if self.pool.is_some() || !self.bytes.is_empty() {
            self.let_go();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers in this thread's spare.
    fn spare_len() -> usize {
        SPARE.with(|spare| spare.borrow().len())
    }

    /// Where a buffer's bytes live (the same allocation when one comes round again).
    fn address(b: &PacketBuf) -> *const u8 {
        b.as_slice().as_ptr().wrapping_sub(b.headroom())
    }

    #[test]
    fn a_dropped_buffer_comes_round_through_this_threads_spare() {
        let pool = PoolOwner::new(4, 256);
        let mut b = pool.take(16);
        assert_eq!((b.capacity(), b.headroom(), b.len()), (256, 16, 0));
        b.append(3).expect("room").copy_from_slice(b"abc");
        let at = address(&b);
        drop(b);
        assert_eq!((spare_len(), pool.free_count()), (1, 0), "aside on this thread, not queued");
        let again = pool.take(32);
        assert_eq!((again.headroom(), again.len()), (32, 0), "reset: no old data shows");
        assert_eq!(address(&again), at, "the same bytes");
        assert_eq!(spare_len(), 0);
        assert_eq!(Arc::strong_count(&pool), 2, "one reference per buffer out, none lost");
        drop(again);
        drop(pool.take(0));
        assert_eq!(Arc::strong_count(&pool), 2, "a spare buffer keeps its reference");
    }

    #[test]
    fn a_buffer_of_no_pool_and_a_copy_of_a_pools_buffer_are_freed_on_their_own() {
        let pool = PoolOwner::new(4, 256);
        let mut pooled = pool.take(8);
        pooled.append(2).expect("room").copy_from_slice(b"hi");
        let copy = pooled.clone();
        assert_eq!(copy.as_slice(), b"hi");
        assert_eq!(Arc::strong_count(&pool), 2, "the copy holds no reference to the pool");
        let before = spare_len();
        drop(copy);
        drop(PacketBuf::with_headroom(256, 8));
        assert_eq!((spare_len(), pool.free_count()), (before, 0), "neither went to the spare or queue");
        drop(pooled);
        assert_eq!(spare_len(), before + 1, "the pool's own buffer did");
    }

    #[test]
    fn a_full_spare_queues_and_a_full_queue_frees() {
        let per_spare = SPARE_BYTES / 4096;
        let pool = PoolOwner::new(2, 4096);
        let bufs: Vec<PacketBuf> = (0..per_spare + 5).map(|_| pool.take(0)).collect();
        drop(bufs);
        assert_eq!(spare_len(), per_spare, "the spare holds up to SPARE_BYTES");
        assert_eq!(pool.free_count(), 2, "then the queue up to its bound; the rest freed");
        assert_eq!(Arc::strong_count(&pool), 1 + per_spare + 2, "spare and queue keep theirs");
    }

    #[test]
    fn a_thread_that_ends_queues_its_spare() {
        let pool = PoolOwner::new(8, 64);
        let moved: Vec<PacketBuf> = (0..3).map(|_| pool.take(0)).collect();
        let t = std::thread::spawn(move || {
            drop(moved);
            spare_len()
        });
        assert_eq!(t.join().expect("thread"), 3, "aside on the thread that dropped them");
        assert_eq!(pool.free_count(), 3, "back in the queue once that thread ended");
        assert_eq!(Arc::strong_count(&pool), 1 + 3, "each with its reference");
        assert_eq!(spare_len(), 0, "this thread's spare untouched");
        let _taken = pool.take(0);
        assert_eq!(pool.free_count(), 2, "taken from the queue");
    }

    #[test]
    fn buffers_cross_the_queue_with_their_references() {
        let pool = PoolOwner::new(8, 64);
        let moved: Vec<PacketBuf> = (0..3).map(|_| pool.take(0)).collect();
        assert_eq!(Arc::strong_count(&pool), 4);
        // Dropped on another thread whose spare is full of another pool's: queued.
        let other = PoolOwner::new(1, SPARE_BYTES);
        let t = std::thread::spawn(move || {
            drop(other.take(0));
            drop(moved);
            (spare_len(), Arc::strong_count(&other))
        });
        assert_eq!(t.join().expect("thread"), (1, 2), "the other pool's one buffer in the spare");
        assert_eq!(pool.free_count(), 3);
        assert_eq!(Arc::strong_count(&pool), 4, "no reference dropped by the queue ...");
        let again: Vec<PacketBuf> = (0..3).map(|_| pool.take(0)).collect();
        assert_eq!((pool.free_count(), Arc::strong_count(&pool)), (0, 4), "... or taken");
        drop(again);
    }

    #[test]
    fn a_closed_pool_frees_its_queue_and_what_comes_back_then_itself() {
        let pool = PoolOwner::new(8, 64);
        let weak = Arc::downgrade(&pool);
        let out: Vec<PacketBuf> = (0..4).map(|_| pool.take(0)).collect();
        // Two go to the queue from a thread whose spare cannot take them (it ends first).
        let (queued, late): (Vec<_>, Vec<_>) = out.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
        std::thread::spawn(move || drop(queued)).join().expect("thread");
        assert_eq!(pool.free_count(), 2);
        drop(pool);
        let alive = weak.upgrade().expect("two buffers are still out");
        assert_eq!(alive.free_count(), 0, "closed: the queue emptied");
        assert_eq!(Arc::strong_count(&alive), 1 + 2);
        drop(alive);
        // Given back after the close, on a thread that ends: freed, not queued.
        std::thread::spawn(move || drop(late)).join().expect("thread");
        assert!(weak.upgrade().is_none(), "the pool is freed with its last buffer");
    }

    #[test]
    fn another_pools_buffer_takes_its_queue_while_the_spares_pool_lives() {
        let (first, second) = (PoolOwner::new(4, 64), PoolOwner::new(4, 64));
        drop(first.take(0));
        drop(second.take(0));
        assert_eq!((spare_len(), second.free_count()), (1, 1), "the spare stays the first's");
        let b = second.take(0);
        assert_eq!(second.free_count(), 0, "the second's from its queue");
        drop(first);
        assert_eq!(spare_len(), 1, "held by the spare alone now");
        drop(b);
        assert_eq!((spare_len(), second.free_count()), (1, 0), "the gone pool's released, room given");
        assert_eq!(Arc::strong_count(&second), 2);
    }
}
