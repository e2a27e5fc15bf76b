//! A socket's held sends by sequence number: a queue, since sends are made in order and almost
//! always complete in order (out of order only when the NIC finishes a transmission late).
//!
//! The queue holds storage only while it holds sends: emptied, its storage goes to the server's
//! spares, and its next send takes the one given last (`slimtcp_api::spares`). With thousands
//! of connections each holding a send now and then, storage kept by every idle one would be
//! cold at its next send; a spare was just used by another.

use std::collections::VecDeque;

use slimtcp_api::spares::{take_emptied, LocalSpares};

use super::HeldSend;

/// Spare storage of held sends, one pool per server.
pub(super) type HeldSpares<S> = LocalSpares<Option<HeldSend<S>>>;

/// Held sends, indexed by sequence number from `first`.
#[derive(Debug)]
pub(super) struct HeldSends<S> {
    first: u64,
    slots: VecDeque<Option<HeldSend<S>>>,
    count: usize,
}

impl<S> Default for HeldSends<S> {
    fn default() -> Self {
        HeldSends { first: 0, slots: VecDeque::new(), count: 0 }
    }
}

impl<S> HeldSends<S> {
    /// Sends held.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Holds send `seq` (sequence numbers only grow), in storage from `spares` when it holds
    /// none.
    pub fn insert(&mut self, seq: u64, send: HeldSend<S>, spares: &mut HeldSpares<S>) {
        if self.count == 0 {
            self.slots.clear();
            spares.storage_for(&mut self.slots);
            self.first = seq;
        }
        let Some(at) = seq.checked_sub(self.first).and_then(|i| usize::try_from(i).ok()) else {
            debug_assert!(false, "send {seq} older than the oldest held ({})", self.first);
            return;
        };
        while self.slots.len() <= at {
            self.slots.push_back(None);
        }
        if self.slots[at].replace(send).is_none() {
            self.count += 1;
        }
    }

    /// Send `seq`, when held.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut HeldSend<S>> {
        let at = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        self.slots.get_mut(at)?.as_mut()
    }

    /// Takes send `seq` out; the last one out gives the storage to `spares`.
    pub fn remove(&mut self, seq: u64, spares: &mut HeldSpares<S>) -> Option<HeldSend<S>> {
        let at = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        let send = self.slots.get_mut(at)?.take()?;
        self.count -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.first += 1;
        }
        if let Some(storage) = take_emptied(&mut self.slots) {
            spares.give(storage);
        }
        Some(send)
    }

    /// Takes every held send out, oldest first.
    pub fn take_all(&mut self) -> impl Iterator<Item = HeldSend<S>> {
        self.count = 0;
        std::mem::take(&mut self.slots).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(len: usize) -> HeldSend<u32> {
        HeldSend { token: len as u32, len, loans_left: 1 }
    }

    #[test]
    fn sends_come_out_by_number_in_any_order_and_all_in_order() {
        let mut h = HeldSends::default();
        let spares = &mut HeldSpares::new();
        for seq in [3, 4, 6, 7] {
            h.insert(seq, send(seq as usize), spares);
        }
        assert_eq!(h.len(), 4);
        assert!(h.get_mut(5).is_none() && h.get_mut(2).is_none() && h.get_mut(9).is_none());
        assert_eq!(h.remove(6, spares).map(|s| s.len), Some(6), "out of order");
        assert_eq!(h.remove(6, spares).map(|s| s.len), None, "once");
        assert_eq!(h.remove(3, spares).map(|s| s.len), Some(3));
        h.get_mut(4).expect("held").loans_left = 0;
        h.insert(8, send(8), spares);
        let all: Vec<usize> = h.take_all().map(|s| s.len).collect();
        assert_eq!(all, [4, 7, 8]);
        assert!(h.is_empty());
        h.insert(20, send(20), spares);
        assert_eq!(h.remove(20, spares).map(|s| s.len), Some(20), "starts over where the next one is");
        assert!(h.is_empty());
    }

    #[test]
    fn storage_is_held_only_while_sends_are() {
        let (mut a, mut b) = (HeldSends::default(), HeldSends::default());
        let spares = &mut HeldSpares::new();
        a.insert(1, send(1), spares);
        a.insert(2, send(2), spares);
        let storage = a.slots.as_slices().0.as_ptr();
        assert!(a.remove(2, spares).is_some());
        assert!(spares.is_empty(), "kept while a send is held");
        assert!(a.remove(1, spares).is_some());
        assert_eq!((a.slots.capacity(), spares.len()), (0, 1), "the last send out gives it back");
        b.insert(7, send(7), spares);
        assert_eq!(b.slots.as_slices().0.as_ptr(), storage, "the next first send takes it");
        assert!(spares.is_empty());
        assert_eq!(b.remove(7, spares).map(|s| s.len), Some(7));
    }
}
