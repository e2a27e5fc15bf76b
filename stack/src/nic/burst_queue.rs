//! A FIFO of frames kept as the bursts they were sent in (memwire's faultless directions): a
//! burst handed over whole moves in as its vector, and one received whole moves out as its
//! vector, so neither touches its frames (a NIC's ring moves descriptors, not buffers); a burst
//! received in parts gives its front frames in one bulk move. Emptied vectors are kept, with
//! their capacity, for the next bursts: a steady flow allocates nothing.

use std::collections::VecDeque;

use super::buf::move_all;
use super::PacketBuf;

/// Most emptied burst vectors kept for reuse (a direction holds at most its capacity in frames,
/// so its bursts in flight are bounded anyway; this bounds what a burst of single frames leaves).
const SPARE_MAX: usize = 256;

/// The queue (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct BurstQueue {
    /// Bursts in the order they were sent; none is empty.
    bursts: VecDeque<Vec<PacketBuf>>,
    /// Frames in all bursts.
    len: usize,
    /// Emptied vectors for the next bursts.
    spare: Vec<Vec<PacketBuf>>,
}

impl BurstQueue {
    /// Frames queued.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// True when no frame is queued.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Queues the first `count` frames of `frames` (all of them: the vector itself, `frames`
    /// left empty with a spare vector's capacity) as one burst.
    pub(super) fn push_burst(&mut self, frames: &mut Vec<PacketBuf>, count: usize) {
        let count = count.min(frames.len());
        if count == 0 {
            return;
        }
        let mut burst = self.spare.pop().unwrap_or_default();
        if count == frames.len() {
            std::mem::swap(&mut burst, frames);
        } else {
            burst.extend(frames.drain(..count));
        }
        self.len += count;
        self.bursts.push_back(burst);
    }

    /// Queues one frame (behind the last burst).
    pub(super) fn push(&mut self, frame: PacketBuf) {
        match self.bursts.back_mut() {
            Some(last) => last.push(frame),
            None => {
                let mut burst = self.spare.pop().unwrap_or_default();
                burst.push(frame);
                self.bursts.push_back(burst);
            }
        }
        self.len += 1;
    }

    /// Moves up to `max` frames from the front to the back of `out`, in order; returns how many.
    pub(super) fn take(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> usize {
        let mut taken = 0;
        while taken < max {
            let want = max - taken;
            let Some(front) = self.bursts.front_mut() else { break };
            if front.len() > want {
                out.extend(front.drain(..want));
                taken += want;
                break;
            }
            let Some(mut burst) = self.bursts.pop_front() else { break };
            taken += burst.len();
            // Into an empty `out` the burst's vector becomes it, `out`'s own kept for reuse.
            move_all(&mut burst, out);
            self.keep(burst);
        }
        self.len -= taken;
        taken
    }

    /// Takes the first frame, if any (one frame at a time, not the receive path: that is
    /// [`take`](Self::take)).
    pub(super) fn pop_front(&mut self) -> Option<PacketBuf> {
        let front = self.bursts.front_mut()?;
        // A queued burst is never empty.
        let frame = (!front.is_empty()).then(|| front.remove(0))?;
        if front.is_empty() {
            if let Some(burst) = self.bursts.pop_front() {
                self.keep(burst);
            }
        }
        self.len -= 1;
        Some(frame)
    }

    /// Keeps an emptied burst vector for the next bursts (up to [`SPARE_MAX`]).
    #[inline]
    fn keep(&mut self, emptied: Vec<PacketBuf>) {
        debug_assert!(emptied.is_empty());
        if self.spare.len() < SPARE_MAX {
            self.spare.push(emptied);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(range: std::ops::Range<u8>) -> Vec<PacketBuf> {
        range.map(|i| PacketBuf::from_slice(&[i])).collect()
    }

    fn firsts(frames: &[PacketBuf]) -> Vec<u8> {
        frames.iter().map(|f| f.as_slice()[0]).collect()
    }

    #[test]
    fn frames_leave_in_the_order_they_came_whatever_the_cuts() {
        let mut q = BurstQueue::default();
        let mut a = frames(0..5);
        q.push_burst(&mut a, 5);
        assert!(a.is_empty(), "a whole burst moves in");
        let mut b = frames(5..9);
        q.push_burst(&mut b, 2);
        assert_eq!(firsts(&b), [7, 8], "the rest stays with the sender");
        q.push(PacketBuf::from_slice(&[20]));
        assert_eq!(q.len(), 8);
        let mut out = Vec::new();
        assert_eq!(q.take(&mut out, 3), 3);
        assert_eq!(firsts(&out), [0, 1, 2]);
        assert_eq!(q.take(&mut out, 4), 4, "across a burst's end");
        assert_eq!(firsts(&out), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(q.pop_front().map(|f| f.as_slice()[0]), Some(20));
        assert!(q.is_empty());
        assert_eq!(q.take(&mut out, 4), 0);
        assert_eq!(q.pop_front().map(|f| f.len()), None);
    }

    #[test]
    fn a_burst_taken_whole_moves_as_its_vector_and_vectors_are_reused() {
        let mut q = BurstQueue::default();
        let mut sent = frames(0..32);
        let at = sent.as_ptr();
        q.push_burst(&mut sent, 32);
        let mut out = Vec::with_capacity(32);
        assert_eq!(q.take(&mut out, 32), 32);
        assert_eq!(out.as_ptr(), at, "the sender's vector, frames untouched");
        assert_eq!(firsts(&out), (0..32).collect::<Vec<u8>>());
        // The receiver's own vector was kept: the next sender gets it back, capacity and all.
        let mut next = frames(0..4);
        q.push_burst(&mut next, 4);
        assert!(next.is_empty() && next.capacity() >= 32, "the kept vector, for the next burst");
        assert!(q.spare.is_empty());
    }

    #[test]
    fn a_queue_bounds_the_vectors_it_keeps() {
        let mut q = BurstQueue::default();
        for i in 0..(SPARE_MAX + 10) {
            q.push_burst(&mut vec![PacketBuf::from_slice(&[i as u8])], 1);
        }
        let mut out = Vec::new();
        assert_eq!(q.take(&mut out, usize::MAX), SPARE_MAX + 10);
        assert_eq!(q.spare.len(), SPARE_MAX);
        assert!(q.is_empty() && q.bursts.is_empty());
    }
}
