//! The list where received buffers go back when an application drops them.
//!
//! A received buffer may be dropped on any thread; the runtime that lent it (the host runtime's
//! worker, the guest library's poll loop) takes what came back once per step, and gives the
//! bytes back to their sockets' windows. The list is a mutex-guarded vector plus a flag, so a
//! step with nothing returned takes no lock, and the taker swaps vectors with it (the two
//! allocations are reused, nothing is allocated per buffer in steady state).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Released items of type `T` (see the module documentation).
#[derive(Debug, Default)]
pub struct ReleaseList<T> {
    list: Mutex<Vec<T>>,
    queued: AtomicBool,
}

impl<T> ReleaseList<T> {
    /// An empty list.
    pub fn new() -> Self {
        ReleaseList { list: Mutex::new(Vec::new()), queued: AtomicBool::new(false) }
    }

    /// Queues `item`.
    pub fn push(&self, item: T) {
        self.push_merged(item, |_, _| false);
    }

    /// Queues `item`, or folds it into the last item queued when `merge(last, &item)` says it
    /// did (e.g. the bytes of one socket released one after the other).
    pub fn push_merged(&self, item: T, merge: impl FnOnce(&mut T, &T) -> bool) {
        let mut list = self.lock();
        let merged = list.last_mut().is_some_and(|last| merge(last, &item));
        if !merged {
            list.push(item);
        }
        drop(list);
        // Raised only when down: the taker writes it once per take, and a flag left up needs no
        // write per item (the line would go back and forth with every one). Ordered by the
        // lock: a taker that lowered it before this item's push took the lock after lowering it,
        // so this load sees it lowered.
        if !self.queued.load(Ordering::Relaxed) {
            self.queued.store(true, Ordering::Release);
        }
    }

    /// Moves everything queued into `out` (which should be empty; its allocation is reused).
    pub fn take(&self, out: &mut Vec<T>) {
        // A push after the swap raises the flag again: taken by the next call at the latest.
        if self.queued.load(Ordering::Relaxed) && self.queued.swap(false, Ordering::Acquire) {
            std::mem::swap(&mut *self.lock(), out);
        }
    }

    /// Items queued now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Vec<T>> {
        // A panic while holding the lock leaves a whole vector: nothing to repair.
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_out_in_order_once_and_merge_when_asked() {
        let list = ReleaseList::new();
        let mut out = Vec::new();
        list.take(&mut out);
        assert!(out.is_empty(), "nothing queued");
        list.push((1u32, 10usize));
        let same_socket = |last: &mut (u32, usize), new: &(u32, usize)| {
            let same = last.0 == new.0;
            if same {
                last.1 += new.1;
            }
            same
        };
        list.push_merged((1, 5), same_socket);
        list.push_merged((2, 7), same_socket);
        list.push((1, 1));
        assert_eq!(list.len(), 3);
        list.take(&mut out);
        assert_eq!(out, vec![(1, 15), (2, 7), (1, 1)]);
        assert!(list.is_empty());
        out.clear();
        list.take(&mut out);
        assert!(out.is_empty(), "taken once");
    }

    #[test]
    fn pushes_from_other_threads_are_all_taken() {
        let list = std::sync::Arc::new(ReleaseList::new());
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let list = list.clone();
                std::thread::spawn(move || (0..1000u32).for_each(|i| list.push(t * 1000 + i)))
            })
            .collect();
        let mut seen = Vec::new();
        let mut out = Vec::new();
        for thread in threads {
            list.take(&mut out);
            seen.append(&mut out);
            thread.join().expect("thread");
        }
        list.take(&mut out);
        seen.append(&mut out);
        seen.sort_unstable();
        assert_eq!(seen, (0..4000).collect::<Vec<_>>());
    }
}
