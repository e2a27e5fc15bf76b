//! Vectors that go back to the thread that allocates them.
//!
//! The worker hands a step's received buffers of one socket to the application as one event
//! (`Event::Data`'s `more`); the application empties the vector on its own thread. Freed there,
//! every such vector went back to the worker's malloc arena from the other thread: with
//! thousands of connections (a few segments per socket per step) both threads met on that
//! arena's lock at every step (futex wake-ups in the worker's profile). The application gives
//! the emptied vector back instead; the worker reuses it for the next event.

use crossbeam_queue::ArrayQueue;
use slimtcp_api::spares::{worth_keeping, KEPT as SPARES};

/// Empty vectors of `T` on their way back to the thread that fills them.
#[derive(Debug)]
pub struct SpareVecs<T> {
    spares: ArrayQueue<Vec<T>>,
}

impl<T> Default for SpareVecs<T> {
    fn default() -> Self {
        SpareVecs { spares: ArrayQueue::new(SPARES) }
    }
}

impl<T> SpareVecs<T> {
    /// An empty vector: a spare one if any came back, else a new one (allocated when filled).
    pub fn take(&self) -> Vec<T> {
        self.spares.pop().unwrap_or_default()
    }

    /// Keeps `vec`, emptied, for [`take`](Self::take) (drops it when there are enough spares or
    /// it is too large to keep).
    pub fn give(&self, mut vec: Vec<T>) {
        if !worth_keeping(vec.capacity()) {
            return;
        }
        vec.clear();
        // Full: enough spares already; this one is freed here.
        let _ = self.spares.push(vec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slimtcp_api::spares::MAX_KEPT_CAPACITY;

    #[test]
    fn a_given_vector_comes_back_empty_with_its_allocation() {
        let spares = SpareVecs::default();
        assert_eq!(spares.take().capacity(), 0, "nothing given yet: a new, unallocated vector");
        let mut v = Vec::with_capacity(8);
        v.extend([1u32, 2, 3]);
        let at = v.as_ptr();
        spares.give(v);
        let back = spares.take();
        assert!(back.is_empty());
        assert_eq!((back.as_ptr(), back.capacity()), (at, 8), "the same allocation");
    }

    #[test]
    fn unallocated_oversized_and_surplus_vectors_are_not_kept() {
        let spares = SpareVecs::<u8>::default();
        spares.give(Vec::new());
        spares.give(Vec::with_capacity(MAX_KEPT_CAPACITY + 1));
        assert_eq!(spares.spares.len(), 0);
        for _ in 0..SPARES + 3 {
            spares.give(Vec::with_capacity(4));
        }
        assert_eq!(spares.spares.len(), SPARES);
    }
}
