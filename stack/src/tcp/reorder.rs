//! The bounded out-of-order queue: segments that arrived beyond a hole, kept in their packet
//! buffers until the hole is filled, so that one lost segment costs one retransmission.
//!
//! The paper's stack dropped every out-of-order segment (a lossless data-center fabric needs no
//! more). Real peers lose segments, and a sender without SACK information then resends all
//! that followed the hole. Worse, the Linux sender's RTO recovery (F-RTO, RFC 5682) probes with
//! *new* data beyond the hole; an in-order-only receiver drops it, so every timeout recovered
//! one window and the next timeout, doubled, followed (issue 14). This queue removes that.
//!
//! Bounds: only bytes inside the window we advertised are kept (so they are charged to the
//! receive window, and fit the receive buffer once in order), at most [`MAX_RANGES`] separate
//! ranges (a segment that would open one more is dropped, the peer sends it again), and a payload
//! that fills less than half of its buffer is copied into a buffer of its own size: the memory
//! held stays within twice the window. That memory is charged to the interface's receive budget
//! (`rx_memory.rs`); a segment whose storage would not fit is dropped.

use std::collections::VecDeque;

use super::SeqNumber;
use crate::nic::PacketBuf;
use crate::rx_memory::{RxBudget, RxCharge};

/// Separate sequence ranges held at most (holes the peer must fill).
pub const MAX_RANGES: usize = 8;

/// What [`ReorderQueue::insert`] did with a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// New bytes were stored.
    Stored,
    /// Every byte was already held.
    Duplicate,
    /// It would have opened a range beyond [`MAX_RANGES`]: dropped.
    TooManyRanges,
    /// Its storage would not fit the receive budget: dropped.
    NoMemory,
}

/// Out-of-order payload, sorted by sequence number, never overlapping. What it holds lives on
/// the heap only while it holds anything, with the charge for its storage: most connections
/// never see a segment out of order, and their state stays small (one word).
#[derive(Debug, Default)]
pub struct ReorderQueue {
    held: Option<Box<Held>>,
}

#[derive(Debug, Default)]
struct Held {
    /// Buffer storage held, charged to the receive budget (given back when dropped).
    memory: RxCharge,
    segs: VecDeque<(SeqNumber, PacketBuf)>,
    ranges: usize,
    bytes: usize,
    /// The sequence number of a FIN that arrived out of order.
    fin: Option<SeqNumber>,
    /// Where the segment stored last begins (its range leads the SACK blocks).
    last: Option<SeqNumber>,
}

impl ReorderQueue {
    /// True when nothing is held (no data, no FIN).
    pub fn is_empty(&self) -> bool {
        self.held.is_none()
    }

    /// Payload bytes held.
    pub fn bytes(&self) -> usize {
        self.held.as_ref().map_or(0, |h| h.bytes)
    }

    /// Bytes of buffer storage held.
    pub fn memory(&self) -> usize {
        self.held.as_ref().map_or(0, |h| h.memory.bytes())
    }

    /// Charges what the queue holds to `budget` from now on (what it stores later is charged
    /// to the budget [`insert`](Self::insert) names).
    pub fn bind(&mut self, budget: &RxBudget) {
        if let Some(held) = self.held.as_deref_mut() {
            held.memory.bind(budget);
        }
    }

    /// Forgets everything held (the connection closed), giving its storage back.
    pub fn clear(&mut self) {
        self.held = None;
    }

    /// Separate ranges held.
    pub fn ranges(&self) -> usize {
        self.held.as_ref().map_or(0, |h| h.ranges)
    }

    /// Remembers a FIN at sequence number `seq` (after the data before it).
    pub fn note_fin(&mut self, seq: SeqNumber) {
        self.held.get_or_insert_with(Box::default).fin = Some(seq);
    }

    /// True when the FIN held is the next thing expected at `rcv_nxt`.
    pub fn fin_is_next(&self, rcv_nxt: SeqNumber) -> bool {
        self.held.as_ref().is_some_and(|h| h.fin == Some(rcv_nxt) && h.segs.is_empty())
    }

    /// Like [`fin_is_next`](Self::fin_is_next), and forgets that FIN when it is.
    pub fn take_fin_at(&mut self, rcv_nxt: SeqNumber) -> bool {
        if self.fin_is_next(rcv_nxt) {
            // Nothing else is held (no segments): the queue is empty again.
            self.held = None;
            return true;
        }
        false
    }

    /// Stores `payload`, whose first byte has sequence number `seq`, its storage charged to
    /// `budget` (the receive queue's; `None`: to no budget). The caller has trimmed it to the
    /// advertised window; bytes already held are cut off.
    pub fn insert(&mut self, seq: SeqNumber, payload: PacketBuf, budget: Option<&RxBudget>) -> Insert {
        if payload.is_empty() {
            return Insert::Duplicate;
        }
        let held = self.held.get_or_insert_with(Box::default);
        if let Some(budget) = budget {
            held.memory.bind(budget);
        }
        let outcome = held.insert(seq, payload);
        self.release_if_empty();
        outcome
    }

    /// The ranges held, as `[left, right)` SACK blocks (RFC 2018 section 4): the range of the
    /// segment stored last first, then the others from the lowest up.
    pub fn sack_ranges(&self) -> ([(SeqNumber, SeqNumber); MAX_RANGES], usize) {
        match &self.held {
            Some(h) => h.sack_ranges(),
            None => ([(SeqNumber(0), SeqNumber(0)); MAX_RANGES], 0),
        }
    }

    /// The next held payload that continues the stream at `rcv_nxt` (trimmed to start there),
    /// removed from the queue; `None` while a hole remains before the first one.
    pub fn pop_ready(&mut self, rcv_nxt: SeqNumber) -> Option<PacketBuf> {
        let held = self.held.as_deref_mut()?;
        let ready = held.pop_ready(rcv_nxt);
        self.release_if_empty();
        ready
    }

    /// Gives the heap part back once it holds nothing.
    fn release_if_empty(&mut self) {
        if self.held.as_ref().is_some_and(|h| h.segs.is_empty() && h.fin.is_none()) {
            self.held = None;
        }
    }
}

impl Held {
    fn insert(&mut self, mut seq: SeqNumber, mut payload: PacketBuf) -> Insert {
        let mut end = seq + payload.len();
        if payload.is_empty() {
            return Insert::Duplicate;
        }
        let mut idx = self.segs.partition_point(|(s, _)| *s <= seq);
        let mut touches = false;
        if let Some((s, p)) = idx.checked_sub(1).and_then(|i| self.segs.get(i)) {
            let prev_end = *s + p.len();
            if prev_end >= end {
                return Insert::Duplicate;
            }
            if prev_end >= seq {
                touches = true;
                payload.advance(prev_end.since(seq));
                seq = prev_end;
            }
        }
        // Held segments the new one covers entirely go (once it is stored); it replaces them.
        let mut covered = idx;
        while let Some((s, p)) = self.segs.get(covered) {
            if *s + p.len() > end {
                break;
            }
            touches = true;
            covered += 1;
        }
        if let Some((s, _)) = self.segs.get(covered) {
            if *s <= end {
                touches = true;
                payload.truncate(s.since(seq));
                end = *s;
            }
        }
        if payload.is_empty() || end <= seq {
            return Insert::Duplicate;
        }
        if !touches && self.ranges >= MAX_RANGES {
            return Insert::TooManyRanges;
        }
        if payload.len() * 2 < payload.capacity() {
            let mut copy = PacketBuf::with_headroom(payload.len(), 0);
            if let Some(dst) = copy.append(payload.len()) {
                dst.copy_from_slice(payload.as_slice());
            }
            payload = copy;
        }
        let freed: usize = self.segs.range(idx..covered).map(|(_, p)| p.capacity()).sum();
        if !self.memory.admit(payload.capacity().saturating_sub(freed)) {
            return Insert::NoMemory;
        }
        for (_, p) in self.segs.drain(idx..covered) {
            self.bytes -= p.len();
            self.memory.sub(p.capacity());
        }
        self.bytes += payload.len();
        self.memory.add(payload.capacity());
        self.segs.insert(idx, (seq, payload));
        self.last = Some(seq);
        idx = 0;
        self.ranges = self.segs.len().min(1);
        while idx + 1 < self.segs.len() {
            let (s, p) = &self.segs[idx];
            if *s + p.len() != self.segs[idx + 1].0 {
                self.ranges += 1;
            }
            idx += 1;
        }
        Insert::Stored
    }

    fn sack_ranges(&self) -> ([(SeqNumber, SeqNumber); MAX_RANGES], usize) {
        let mut out = [(SeqNumber(0), SeqNumber(0)); MAX_RANGES];
        let mut n: usize = 0;
        for (s, p) in &self.segs {
            let end = *s + p.len();
            match n.checked_sub(1).map(|i| &mut out[i]) {
                Some(r) if r.1 == *s => r.1 = end,
                _ if n < MAX_RANGES => {
                    out[n] = (*s, end);
                    n += 1;
                }
                _ => break,
            }
        }
        if let Some(last) = self.last {
            if let Some(i) = out[..n].iter().position(|(l, r)| last >= *l && last < *r) {
                out[..=i].rotate_right(1);
            }
        }
        (out, n)
    }

    fn pop_ready(&mut self, rcv_nxt: SeqNumber) -> Option<PacketBuf> {
        loop {
            let (s, _) = self.segs.front()?;
            if *s > rcv_nxt {
                return None;
            }
            let (s, mut p) = self.segs.pop_front()?;
            self.bytes -= p.len();
            self.memory.sub(p.capacity());
            let next = self.segs.front().map(|(n, _)| *n);
            if next.is_none_or(|n| n != s + p.len()) {
                self.ranges = self.ranges.saturating_sub(1);
            }
            let skip = rcv_nxt.since(s);
            if skip < p.len() {
                p.advance(skip);
                if self.segs.is_empty() {
                    self.ranges = 0;
                }
                return Some(p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(bytes: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::with_headroom(bytes.len(), 0);
        b.append(bytes.len()).expect("room").copy_from_slice(bytes);
        b
    }

    fn drain(q: &mut ReorderQueue, mut at: SeqNumber) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(p) = q.pop_ready(at) {
            out.extend_from_slice(p.as_slice());
            at += p.len();
        }
        out
    }

    #[test]
    fn segments_beyond_a_hole_come_out_in_order_once_it_is_filled() {
        let mut q = ReorderQueue::default();
        let base = SeqNumber(u32::MAX - 3); // wraps inside the test
        assert_eq!(q.insert(base + 8, seg(b"ijkl"), None), Insert::Stored);
        assert_eq!(q.insert(base + 4, seg(b"efgh"), None), Insert::Stored);
        assert_eq!(q.ranges(), 1);
        assert!(q.pop_ready(base).is_none(), "the hole at base is still open");
        assert_eq!(drain(&mut q, base + 4), b"efghijkl");
        assert!(q.is_empty());
        assert_eq!((q.bytes(), q.memory(), q.ranges()), (0, 0, 0));
    }

    #[test]
    fn overlaps_and_duplicates_are_trimmed() {
        let mut q = ReorderQueue::default();
        let b = SeqNumber(1000);
        assert_eq!(q.insert(b + 10, seg(b"klmn"), None), Insert::Stored);
        assert_eq!(q.insert(b + 10, seg(b"klmn"), None), Insert::Duplicate);
        assert_eq!(q.insert(b + 11, seg(b"lm"), None), Insert::Duplicate);
        // Overlaps the front and the back of what is held, and extends both ways.
        assert_eq!(q.insert(b + 8, seg(b"ijklmnop"), None), Insert::Stored);
        assert_eq!(q.insert(b + 12, seg(b"mnopqr"), None), Insert::Stored);
        assert_eq!(q.bytes(), 10);
        // Delivery may start in the middle of the first held segment.
        assert_eq!(drain(&mut q, b + 9), b"jklmnopqr");
    }

    #[test]
    fn sack_ranges_lead_with_the_latest_segment() {
        let mut q = ReorderQueue::default();
        let b = SeqNumber(100);
        q.insert(b + 10, seg(b"aa"), None);
        q.insert(b + 20, seg(b"bb"), None);
        q.insert(b + 12, seg(b"cc"), None);
        q.insert(b + 30, seg(b"dd"), None);
        q.insert(b + 22, seg(b"ee"), None);
        let (r, n) = q.sack_ranges();
        assert_eq!(&r[..n], &[(b + 20, b + 24), (b + 10, b + 14), (b + 30, b + 32)]);
    }

    #[test]
    fn ranges_are_bounded() {
        let mut q = ReorderQueue::default();
        let b = SeqNumber(0);
        for i in 0..MAX_RANGES {
            assert_eq!(q.insert(b + 10 * (i + 1), seg(b"xx"), None), Insert::Stored);
        }
        assert_eq!(q.ranges(), MAX_RANGES);
        assert_eq!(q.insert(b + 1000, seg(b"yy"), None), Insert::TooManyRanges);
        // Extending a held range is always fine, and joining two makes room.
        assert_eq!(q.insert(b + 12, seg(b"zzzzzzzz"), None), Insert::Stored);
        assert_eq!(q.ranges(), MAX_RANGES - 1);
        assert_eq!(q.insert(b + 1000, seg(b"yy"), None), Insert::Stored);
    }

    #[test]
    fn small_payloads_do_not_pin_big_buffers() {
        let mut q = ReorderQueue::default();
        let mut big = PacketBuf::with_headroom(2048, 54);
        big.append(1).expect("room")[0] = 7;
        q.insert(SeqNumber(5), big, None);
        assert_eq!((q.bytes(), q.memory()), (1, 1));
    }

    #[test]
    fn held_storage_is_charged_to_the_budget_until_delivered_or_cleared() {
        let budget = RxBudget::new(100);
        let mut q = ReorderQueue::default();
        assert_eq!(q.insert(SeqNumber(10), seg(&[1; 30]), Some(&budget)), Insert::Stored);
        assert_eq!(q.insert(SeqNumber(50), seg(&[2; 30]), Some(&budget)), Insert::Stored);
        assert_eq!((q.memory(), budget.reading().used), (60, 60));
        assert_eq!(q.insert(SeqNumber(90), seg(&[3; 50]), Some(&budget)), Insert::NoMemory);
        assert_eq!(drain(&mut q, SeqNumber(10)), [1; 30]);
        assert_eq!((q.memory(), budget.reading().used), (30, 30), "delivery gives storage back");
        q.clear();
        assert_eq!((q.memory(), budget.reading().used), (0, 0), "so does clearing");
    }

    #[test]
    fn a_fin_is_delivered_after_the_data_before_it() {
        let mut q = ReorderQueue::default();
        q.insert(SeqNumber(10), seg(b"abc"), None);
        q.note_fin(SeqNumber(13));
        assert!(!q.take_fin_at(SeqNumber(13)), "data still held before the FIN");
        assert_eq!(drain(&mut q, SeqNumber(10)), b"abc");
        assert!(q.take_fin_at(SeqNumber(13)));
        assert!(q.is_empty());
    }
}
