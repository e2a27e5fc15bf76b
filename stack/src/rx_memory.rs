//! The receive memory budget of one interface: every byte of buffer storage its sockets hold
//! for received data (TCP receive and reorder queues, UDP queues) is charged to one
//! [`RxBudget`], at the buffer's true size, not its payload.
//!
//! Each socket bounds its own memory by its window, but a tenant has thousands of sockets: a
//! guest that never reads, fed by remote senders, would otherwise hold `sockets x 2 x window`
//! (4096 x 512 KiB = 2 GiB at the defaults). With the budget:
//! - **back-pressure**: a receive window never offers more than half the room left in the
//!   budget (memory per payload byte is at most 2, see `recv_buffer.rs`), so windows close
//!   before the budget is hit;
//! - **a hard limit**: a segment or datagram whose storage would not fit is dropped and counted
//!   ([`RxReading::refused`]); TCP data is sent again by the peer once windows reopen.
//!
//! Bytes moved from a reorder queue to its receive queue were admitted already and are charged
//! without a check: the budget may be passed by those, never by new data.
//!
//! One interface's sockets live on one thread; the counters are atomics only so that other
//! threads (gauges, stats) can read them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::nic::pool::PoolOwner;
use crate::nic::PacketBuf;

/// Size of the chunks small TCP payloads are copied into (see `tcp/recv_buffer.rs`).
pub const COMPACT_CHUNK: usize = 4096;

/// Free compact chunks a budget keeps for reuse (256 KiB): a queue its application reads
/// promptly cycles through a few, with no allocation and no zeroing per chunk.
const CHUNKS_KEPT: usize = 64;

/// The budget (see the module documentation). Clones share it.
#[derive(Debug, Clone)]
pub struct RxBudget(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
    refused: AtomicU64,
    /// Free compact chunks (not charged: a chunk is charged by the queue that holds it).
    chunks: PoolOwner,
}

/// One reading of an [`RxBudget`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxReading {
    /// Bytes of receive storage held now.
    pub used: usize,
    /// The most ever held.
    pub peak: usize,
    /// The configured limit.
    pub limit: usize,
    /// Segments and datagrams dropped because their storage would not fit.
    pub refused: u64,
}

impl RxBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        RxBudget(Arc::new(Shared {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
            chunks: PoolOwner::new(CHUNKS_KEPT, COMPACT_CHUNK),
        }))
    }

    /// What is held, the peak, the limit and the refusals.
    pub fn reading(&self) -> RxReading {
        RxReading {
            used: self.0.used.load(Ordering::Relaxed),
            peak: self.0.peak.load(Ordering::Relaxed),
            limit: self.0.limit,
            refused: self.0.refused.load(Ordering::Relaxed),
        }
    }

    /// The configured limit.
    pub fn limit(&self) -> usize {
        self.0.limit
    }

    /// Bytes that may still be charged.
    pub fn room(&self) -> usize {
        self.0.limit.saturating_sub(self.0.used.load(Ordering::Relaxed))
    }

    fn add(&self, n: usize) {
        let now = self.0.used.fetch_add(n, Ordering::Relaxed) + n;
        // Looked at before it is written: a new peak is rare once a flow runs, and the
        // read-modify-write `fetch_max` would be a locked instruction at every segment.
        if now > self.0.peak.load(Ordering::Relaxed) {
            self.0.peak.fetch_max(now, Ordering::Relaxed);
        }
    }

    fn sub(&self, n: usize) {
        self.0.used.fetch_sub(n, Ordering::Relaxed);
    }
}

/// The storage one queue holds, charged to a budget (or to none) and given back when dropped.
#[derive(Debug, Default)]
pub struct RxCharge {
    budget: Option<RxBudget>,
    bytes: usize,
}

impl RxCharge {
    /// Bytes charged.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Charges what is held from now on to `budget` (moving what is held already; nothing to do
    /// when it is charged there already).
    pub fn bind(&mut self, budget: &RxBudget) {
        if let Some(old) = &self.budget {
            if Arc::ptr_eq(&old.0, &budget.0) {
                return;
            }
            old.sub(self.bytes);
        }
        budget.add(self.bytes);
        self.budget = Some(budget.clone());
    }

    /// The budget charged, if any.
    pub fn budget(&self) -> Option<&RxBudget> {
        self.budget.as_ref()
    }

    /// Bytes this queue may still take (unbounded without a budget).
    pub fn room(&self) -> usize {
        self.budget.as_ref().map_or(usize::MAX, RxBudget::room)
    }

    /// An empty chunk of [`COMPACT_CHUNK`] bytes for small payloads (not charged yet): one of
    /// the budget's free chunks, back there when dropped (on any thread), or a new one for a
    /// queue without a budget.
    pub fn compact_chunk(&self) -> PacketBuf {
        match &self.budget {
            Some(b) => b.0.chunks.take(0),
            None => PacketBuf::with_headroom(COMPACT_CHUNK, 0),
        }
    }

    /// True when `n` more bytes fit the budget; a refusal is counted.
    pub fn admit(&self, n: usize) -> bool {
        let Some(b) = &self.budget else { return true };
        if n <= b.room() {
            return true;
        }
        b.0.refused.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Charges `n` bytes (admitted, or already admitted elsewhere).
    pub fn add(&mut self, n: usize) {
        self.bytes += n;
        if let Some(b) = &self.budget {
            b.add(n);
        }
    }

    /// Gives `n` bytes back.
    pub fn sub(&mut self, n: usize) {
        debug_assert!(n <= self.bytes, "giving back {n} of {} bytes", self.bytes);
        let n = n.min(self.bytes);
        self.bytes -= n;
        if let Some(b) = &self.budget {
            b.sub(n);
        }
    }
}

impl Drop for RxCharge {
    fn drop(&mut self) {
        let n = self.bytes;
        self.sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_shared_bounded_and_given_back_on_drop() {
        let budget = RxBudget::new(10_000);
        let mut a = RxCharge::default();
        a.add(500); // before binding: moved over
        a.bind(&budget);
        let mut b = RxCharge::default();
        b.bind(&budget);
        assert!(b.admit(9_500));
        b.add(9_500);
        assert!(!a.admit(1), "the budget is full");
        assert_eq!(budget.reading(), RxReading { used: 10_000, peak: 10_000, limit: 10_000, refused: 1 });
        b.sub(4_000);
        assert_eq!(a.room(), 4_000);
        drop(b);
        assert_eq!(budget.reading().used, 500);
        drop(a);
        assert_eq!(budget.reading(), RxReading { used: 0, peak: 10_000, limit: 10_000, refused: 1 });
    }

    #[test]
    fn compact_chunks_go_back_to_the_budget_and_are_taken_again() {
        let budget = RxBudget::new(1 << 20);
        let mut charge = RxCharge::default();
        charge.bind(&budget);
        let mut chunk = charge.compact_chunk();
        assert_eq!((chunk.capacity(), chunk.len()), (COMPACT_CHUNK, 0));
        chunk.append(3).expect("room").copy_from_slice(b"old");
        // Dropped on another thread (where an application reads), it still goes back.
        std::thread::spawn(move || drop(chunk)).join().expect("thread");
        assert_eq!(budget.0.chunks.free_count(), 1);
        let again = charge.compact_chunk();
        assert_eq!(budget.0.chunks.free_count(), 0, "the free chunk is reused");
        assert_eq!((again.capacity(), again.len()), (COMPACT_CHUNK, 0), "empty, old bytes hidden");
        assert_eq!(budget.reading().used, 0, "a chunk is charged by the queue that holds it");
        // Without a budget: a new chunk each time.
        assert_eq!(RxCharge::default().compact_chunk().capacity(), COMPACT_CHUNK);
    }

    #[test]
    fn without_a_budget_everything_fits() {
        let mut c = RxCharge::default();
        assert!(c.admit(usize::MAX));
        c.add(1 << 40);
        assert_eq!((c.bytes(), c.room()), (1 << 40, usize::MAX));
    }
}
