//! Emptied vectors kept for reuse, and the rules for keeping one.
//!
//! With thousands of connections, a queue that keeps its storage while its connection is idle
//! is cold by the connection's next turn, and every entry written into it waits for memory.
//! A queue that gives its storage back once emptied, and takes a kept one at its next first
//! entry, writes into storage that another queue has just used (last given, first taken).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::thread::LocalKey;

/// Spare vectors kept, at most (beyond them, one is freed where it is given back).
pub const KEPT: usize = 256;

/// A vector with room for more entries than this is not kept (one burst after a long stall).
pub const MAX_KEPT_CAPACITY: usize = 1024;

/// Whether an emptied vector of `capacity` entries is worth keeping.
pub fn worth_keeping(capacity: usize) -> bool {
    capacity > 0 && capacity <= MAX_KEPT_CAPACITY
}

/// Empty vectors of `T` kept by the thread that fills and empties them, last given first taken.
#[derive(Debug)]
pub struct LocalSpares<T> {
    kept: Vec<Vec<T>>,
}

impl<T> Default for LocalSpares<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> LocalSpares<T> {
    /// None kept yet.
    pub const fn new() -> Self {
        LocalSpares { kept: Vec::new() }
    }

    /// An empty vector: the one kept last, if any, else a new one (allocated when filled).
    pub fn take(&mut self) -> Vec<T> {
        self.kept.pop().unwrap_or_default()
    }

    /// Keeps `vec`, emptied, for [`take`](Self::take), unless [`KEPT`] are kept already or it
    /// is not [`worth_keeping`].
    pub fn give(&mut self, mut vec: Vec<T>) {
        if worth_keeping(vec.capacity()) && self.kept.len() < KEPT {
            vec.clear();
            self.kept.push(vec);
        }
    }

    /// Gives `queue` storage when it has none: the vector kept last, if any.
    pub fn storage_for(&mut self, queue: &mut VecDeque<T>) {
        if queue.capacity() == 0 {
            *queue = VecDeque::from(self.take());
        }
    }

    /// Vectors kept now.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// The storage of `queue`, taken, once the queue is empty (for [`LocalSpares::give`]); `None`
/// while it holds entries or no storage.
pub fn take_emptied<T>(queue: &mut VecDeque<T>) -> Option<Vec<T>> {
    (queue.is_empty() && queue.capacity() > 0).then(|| Vec::from(std::mem::take(queue)))
}

/// One thread's spares of one kind: a `thread_local!` of [`LocalSpares`], for queues that live
/// in structures with no place for a shared pool (a connection's state).
pub type ThreadSpares<T> = LocalKey<RefCell<LocalSpares<T>>>;

/// Gives `queue` storage when it has none: the spare given last to `spares` on this thread, if
/// any (before its first entry after [`release_when_empty`]).
#[inline]
pub fn storage_for<T: 'static>(spares: &'static ThreadSpares<T>, queue: &mut VecDeque<T>) {
    if queue.capacity() == 0 {
        take_spare(spares, queue);
    }
}

/// Gives the storage of `queue` to `spares` on this thread once it is empty, so that an idle
/// queue holds none. True when it is empty.
#[inline]
pub fn release_when_empty<T: 'static>(spares: &'static ThreadSpares<T>, queue: &mut VecDeque<T>) -> bool {
    if !queue.is_empty() {
        return false;
    }
    if queue.capacity() > 0 {
        give_spare(spares, queue);
    }
    true
}

// Out of line: a queue's every entry passes the tests above, only its first after an empty
// spell and its last before one get here; inlined, these would weigh on every caller's code.
#[cold]
#[inline(never)]
fn take_spare<T: 'static>(spares: &'static ThreadSpares<T>, queue: &mut VecDeque<T>) {
    spares.with(|s| s.borrow_mut().storage_for(queue));
}

#[cold]
#[inline(never)]
fn give_spare<T: 'static>(spares: &'static ThreadSpares<T>, queue: &mut VecDeque<T>) {
    if let Some(storage) = take_emptied(queue) {
        spares.with(|s| s.borrow_mut().give(storage));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_given_is_taken_first_emptied_and_only_useful_ones_are_kept() {
        let mut spares = LocalSpares::<u8>::new();
        assert_eq!(spares.take().capacity(), 0, "nothing kept: a new, unallocated vector");
        spares.give(Vec::new());
        spares.give(Vec::with_capacity(MAX_KEPT_CAPACITY + 1));
        assert!(spares.is_empty(), "unallocated and oversized vectors are not kept");
        let older = Vec::<u8>::with_capacity(16);
        let mut newer = Vec::with_capacity(8);
        newer.push(1);
        let at = newer.as_ptr();
        spares.give(older);
        spares.give(newer);
        let back = spares.take();
        assert!(back.is_empty());
        assert_eq!((back.as_ptr(), back.capacity()), (at, 8), "the last given, emptied");
        for _ in 0..KEPT + 3 {
            spares.give(Vec::with_capacity(4));
        }
        assert_eq!(spares.len(), KEPT);
    }

    thread_local! {
        static NUMBERS: RefCell<LocalSpares<u32>> = const { RefCell::new(LocalSpares::new()) };
    }

    #[test]
    fn a_queue_gives_its_storage_back_once_empty_and_the_next_takes_it() {
        let mut a = VecDeque::new();
        storage_for(&NUMBERS, &mut a);
        assert_eq!(a.capacity(), 0, "nothing kept yet: a new queue allocates when filled");
        a.extend([1, 2, 3]);
        let storage = a.as_slices().0.as_ptr();
        assert!(!release_when_empty(&NUMBERS, &mut a), "not empty: kept");
        a.clear();
        assert!(release_when_empty(&NUMBERS, &mut a));
        assert_eq!(a.capacity(), 0, "an idle queue holds no storage");
        let mut b = VecDeque::new();
        storage_for(&NUMBERS, &mut b);
        b.push_back(4);
        assert_eq!(b.as_slices().0.as_ptr(), storage, "the next queue writes into it");
        assert_eq!(NUMBERS.with(|s| s.borrow().len()), 0);
    }
}
