//! Access to a tenant's virtqueues from the worker: the live vhost-user vrings, or plain
//! `Queue`s (tests drive the data path with virtio-queue's mock split queues).

use std::cell::RefCell;

use vhost_user_backend::{VringRwLock, VringT};
use virtio_queue::{Queue, QueueT};

use crate::guest_mem::GuestMem;

/// The rings of one tenant, by virtio-net index (2k receive, 2k+1 transmit, 2N control).
pub trait Vrings {
    /// Number of rings.
    fn count(&self) -> usize;
    /// Runs `f` on ring `idx` when it is ready and enabled; `None` otherwise.
    fn with<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> Option<R>;
    /// Runs `f` on ring `idx` even when it is stopped (not ready), to give back what the device
    /// holds while the VMM stops the ring; `None` when there is no such ring.
    fn with_stopping<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> Option<R>;
    /// Interrupts the driver of ring `idx` if it asked for it (EVENT_IDX) after new used entries.
    fn notify(&self, idx: usize, mem: &GuestMem);
}

/// The live vrings of a vhost-user connection, cloned from the daemon's handles.
impl Vrings for [VringRwLock] {
    fn count(&self) -> usize {
        self.len()
    }

    fn with<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> Option<R> {
        let vring = self.get(idx)?;
        let mut state = vring.get_mut();
        if !state.is_enabled() || !state.get_queue().ready() {
            return None;
        }
        Some(f(state.get_queue_mut()))
    }

    fn with_stopping<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> Option<R> {
        let vring = self.get(idx)?;
        let mut state = vring.get_mut();
        Some(f(state.get_queue_mut()))
    }

    fn notify(&self, idx: usize, mem: &GuestMem) {
        let Some(vring) = self.get(idx) else { return };
        let mut state = vring.get_mut();
        if state.get_queue_mut().needs_notification(mem).unwrap_or(true) {
            if let Err(e) = state.signal_used_queue() {
                log::debug!("ring {idx}: interrupt failed: {e}");
            }
        }
    }
}

/// Plain queues owned by the caller (tests, fuzzing): every queue counts as ready.
#[derive(Debug)]
pub struct LocalRings {
    queues: Vec<RefCell<Queue>>,
    notified: RefCell<Vec<u64>>,
}

impl LocalRings {
    /// Rings over `queues`, index = position.
    pub fn new(queues: Vec<Queue>) -> Self {
        let n = queues.len();
        LocalRings {
            queues: queues.into_iter().map(RefCell::new).collect(),
            notified: RefCell::new(vec![0; n]),
        }
    }

    /// Interrupts requested per ring so far.
    pub fn notifications(&self, idx: usize) -> u64 {
        self.notified.borrow().get(idx).copied().unwrap_or(0)
    }

    /// Runs `f` on a queue directly (test drivers use it to inspect the used ring).
    pub fn queue_mut<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> R {
        f(&mut self.queues[idx].borrow_mut())
    }
}

impl Vrings for LocalRings {
    fn count(&self) -> usize {
        self.queues.len()
    }

    fn with<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> Option<R> {
        let q = self.queues.get(idx)?;
        let mut q = q.borrow_mut();
        if !q.ready() {
            return None;
        }
        Some(f(&mut q))
    }

    fn with_stopping<R>(&self, idx: usize, f: impl FnOnce(&mut Queue) -> R) -> Option<R> {
        let q = self.queues.get(idx)?;
        let mut q = q.borrow_mut();
        Some(f(&mut q))
    }

    fn notify(&self, idx: usize, mem: &GuestMem) {
        let Some(q) = self.queues.get(idx) else { return };
        if q.borrow_mut().needs_notification(mem).unwrap_or(true) {
            if let Some(n) = self.notified.borrow_mut().get_mut(idx) {
                *n += 1;
            }
        }
    }
}

/// Pops the next available chain's head index, if any (errors of a broken avail ring count as
/// "nothing available").
pub(crate) fn pop_head<'m>(
    q: &mut Queue,
    mem: &'m GuestMem,
) -> Option<virtio_queue::DescriptorChain<&'m GuestMem>> {
    q.pop_descriptor_chain(mem)
}

/// Puts `head` on the used ring with `len`; a failure (a broken used ring) is logged.
pub(crate) fn add_used(q: &mut Queue, mem: &GuestMem, head: u16, len: u32) {
    if let Err(e) = q.add_used(mem, head, len) {
        log::debug!("add_used({head}): {e}");
    }
}
