//! A socket's held sends by sequence number: a queue, since sends are made in order and almost
//! always complete in order (out of order only when the NIC finishes a transmission late).

use std::collections::VecDeque;

use super::HeldSend;

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

    /// Holds send `seq` (sequence numbers only grow).
    pub fn insert(&mut self, seq: u64, send: HeldSend<S>) {
        if self.count == 0 {
            self.slots.clear();
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

    /// Takes send `seq` out.
    pub fn remove(&mut self, seq: u64) -> Option<HeldSend<S>> {
        let at = usize::try_from(seq.checked_sub(self.first)?).ok()?;
        let send = self.slots.get_mut(at)?.take()?;
        self.count -= 1;
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.first += 1;
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
        for seq in [3, 4, 6, 7] {
            h.insert(seq, send(seq as usize));
        }
        assert_eq!(h.len(), 4);
        assert!(h.get_mut(5).is_none() && h.get_mut(2).is_none() && h.get_mut(9).is_none());
        assert_eq!(h.remove(6).map(|s| s.len), Some(6), "out of order");
        assert_eq!(h.remove(6).map(|s| s.len), None, "once");
        assert_eq!(h.remove(3).map(|s| s.len), Some(3));
        h.get_mut(4).expect("held").loans_left = 0;
        h.insert(8, send(8));
        let all: Vec<usize> = h.take_all().map(|s| s.len).collect();
        assert_eq!(all, [4, 7, 8]);
        assert!(h.is_empty());
        h.insert(20, send(20));
        assert_eq!(h.remove(20).map(|s| s.len), Some(20), "starts over where the next one is");
        assert!(h.is_empty());
    }
}
