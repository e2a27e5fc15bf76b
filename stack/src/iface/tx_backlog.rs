//! A transmit backlog: frames built and not yet taken by the NIC, in order, with their bytes
//! counted as they are queued.
//!
//! The interface counts the bytes the NIC took (`Counters::tx_bytes`). A NIC takes frames from
//! the front of the backlog and leaves what its ring has no room for; counting what it took by
//! summing the backlog before and after each offer was two passes over up to
//! `burst * TX_BACKLOG_BURSTS` frames at every burst while a ring was full (the state of a NIC
//! at line rate). Here the sum is kept as frames are queued, per burst of frames, and the NIC
//! is offered a burst at a time: a burst it takes whole, or refuses whole, costs no pass; one it
//! takes a part of costs one pass over that burst's rest (and the frames behind it do not move).

use std::collections::VecDeque;

use crate::nic::{ExternalFrame, NicError, PacketBuf};

/// What a queued frame counts in bytes.
pub(super) trait FrameBytes {
    /// The whole frame's bytes.
    fn bytes(&self) -> u64;
    /// Of those, the bytes the NIC sends from external memory.
    fn external_bytes(&self) -> u64 {
        0
    }
}

impl FrameBytes for PacketBuf {
    fn bytes(&self) -> u64 {
        self.len() as u64
    }
}

impl FrameBytes for ExternalFrame {
    fn bytes(&self) -> u64 {
        (self.headers.len() + self.payload.len()) as u64
    }

    fn external_bytes(&self) -> u64 {
        self.payload.len() as u64
    }
}

/// What the NIC took from a backlog in one offer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Taken {
    /// Frames.
    pub frames: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Of those, the bytes sent from external memory.
    pub external_bytes: u64,
}

/// One burst's frames and their byte counts.
#[derive(Debug)]
struct Burst<F> {
    frames: Vec<F>,
    bytes: u64,
    external_bytes: u64,
}

impl<F> Burst<F> {
    fn new(frames: Vec<F>) -> Self {
        Burst { frames, bytes: 0, external_bytes: 0 }
    }
}

/// Frames waiting for the NIC, in the order they leave (see the module documentation), held as
/// bursts of at most `burst` frames: an offer hands the NIC one burst at a time, so a NIC that
/// takes part of one leaves behind only the rest of that burst (the frames behind it do not
/// move, and only that rest is summed again).
#[derive(Debug)]
pub(super) struct TxBacklog<F> {
    /// Whole bursts, oldest first ...
    sealed: VecDeque<Burst<F>>,
    /// ... then the one being filled (kept apart: queueing a frame is a vector push).
    filling: Burst<F>,
    /// Emptied bursts' vectors, for reuse.
    spare: Vec<Vec<F>>,
    burst: usize,
    /// Frames queued (all bursts): read for every frame built, so kept, not summed.
    len: usize,
}

impl<F: FrameBytes> TxBacklog<F> {
    /// An empty backlog handed to the NIC `burst` frames at a time.
    pub(super) fn new(burst: usize) -> Self {
        let burst = burst.max(1);
        TxBacklog {
            sealed: VecDeque::new(),
            filling: Burst::new(Vec::with_capacity(burst)),
            spare: Vec::new(),
            burst,
            len: 0,
        }
    }

    /// Frames queued.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is queued.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queues `frame` behind the others.
    #[inline]
    pub(super) fn push(&mut self, frame: F) {
        self.filling.bytes += frame.bytes();
        self.filling.external_bytes += frame.external_bytes();
        self.filling.frames.push(frame);
        self.len += 1;
        if self.filling.frames.len() >= self.burst {
            self.seal();
        }
    }

    /// Moves the full burst being filled behind the sealed ones and starts another.
    #[inline(never)]
    fn seal(&mut self) {
        let frames = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(self.burst));
        let full = std::mem::replace(&mut self.filling, Burst::new(frames));
        self.sealed.push_back(full);
    }

    /// Offers the backlog to `transmit` a burst at a time, until it leaves frames of one;
    /// `transmit` takes frames from the front of what it is given and leaves the rest
    /// (`Nic::transmit`'s contract). Returns what it took, and the error that stopped it, if
    /// any (what that call took is not counted, as before this backlog counted).
    #[inline]
    pub(super) fn offer(
        &mut self,
        transmit: impl FnMut(&mut Vec<F>) -> Result<usize, NicError>,
    ) -> (Taken, Result<(), NicError>) {
        // Most polls end with nothing queued: no call.
        if self.len == 0 {
            return (Taken::default(), Ok(()));
        }
        self.offer_queued(transmit)
    }

    /// [`offer`](Self::offer) of a backlog that holds frames.
    #[inline(never)]
    fn offer_queued(
        &mut self,
        mut transmit: impl FnMut(&mut Vec<F>) -> Result<usize, NicError>,
    ) -> (Taken, Result<(), NicError>) {
        let mut taken = Taken::default();
        let mut error = None;
        loop {
            let from_sealed = !self.sealed.is_empty();
            let front = match self.sealed.front_mut() {
                Some(b) => b,
                None if self.filling.frames.is_empty() => break,
                None => &mut self.filling,
            };
            let (result, took, left) = offer_burst(front, &mut transmit);
            if result.is_ok() {
                taken.frames += took.frames;
                taken.bytes += took.bytes;
                taken.external_bytes += took.external_bytes;
            }
            self.len -= took.frames;
            if from_sealed && left == 0 {
                if let Some(done) = self.sealed.pop_front() {
                    self.spare.push(done.frames);
                }
            }
            if let Err(e) = result {
                error = Some(e);
                break;
            }
            if left > 0 || !from_sealed {
                break;
            }
        }
        self.debug_check_len();
        (taken, error.map_or(Ok(()), Err))
    }

    /// In debug builds: `len` is the frames of every burst.
    fn debug_check_len(&self) {
        debug_assert_eq!(
            self.len,
            self.sealed.iter().map(|b| b.frames.len()).sum::<usize>() + self.filling.frames.len()
        );
    }
}

/// Offers one burst to `transmit`: (its result, what it took, frames left in the burst).
fn offer_burst<F: FrameBytes>(
    burst: &mut Burst<F>,
    transmit: &mut impl FnMut(&mut Vec<F>) -> Result<usize, NicError>,
) -> (Result<usize, NicError>, Taken, usize) {
    let offered = burst.frames.len();
    let result = transmit(&mut burst.frames);
    let left = burst.frames.len();
    let (bytes_left, external_left) = if left == 0 {
        (0, 0)
    } else if left == offered {
        (burst.bytes, burst.external_bytes)
    } else {
        burst.frames.iter().fold((0, 0), |(b, e), f| (b + f.bytes(), e + f.external_bytes()))
    };
    let took = Taken {
        frames: offered - left,
        bytes: burst.bytes - bytes_left,
        external_bytes: burst.external_bytes - external_left,
    };
    burst.bytes = bytes_left;
    burst.external_bytes = external_left;
    debug_assert_eq!(burst.bytes, burst.frames.iter().map(FrameBytes::bytes).sum::<u64>());
    (result, took, left)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn frame(len: usize) -> PacketBuf {
        let mut buf = PacketBuf::with_headroom(len, 0);
        buf.append(len).unwrap();
        buf
    }

    fn backlog(burst: usize, lens: &[usize]) -> TxBacklog<PacketBuf> {
        let mut b = TxBacklog::new(burst);
        for &len in lens {
            b.push(frame(len));
        }
        b
    }

    /// A NIC with room for `room` frames: takes from the front of each offer while room is left;
    /// counts the offers in `calls`.
    fn nic_with_room<'a>(
        mut room: usize,
        calls: &'a mut usize,
    ) -> impl FnMut(&mut Vec<PacketBuf>) -> Result<usize, NicError> + 'a {
        move |frames| {
            *calls += 1;
            let n = room.min(frames.len());
            frames.drain(..n);
            room -= n;
            Ok(n)
        }
    }

    fn offer(b: &mut TxBacklog<PacketBuf>, room: usize) -> (Taken, usize) {
        let mut calls = 0;
        let (taken, result) = b.offer(nic_with_room(room, &mut calls));
        result.unwrap();
        (taken, calls)
    }

    fn taken(frames: usize, bytes: u64) -> Taken {
        Taken { frames, bytes, external_bytes: 0 }
    }

    #[test]
    fn counts_what_the_nic_took_whole_part_or_nothing() {
        let mut b = backlog(2, &[100, 200, 300, 400, 500]);
        assert_eq!(b.len(), 5);
        // Refused: one offer, nothing counted.
        assert_eq!(offer(&mut b, 0), (Taken::default(), 1));
        assert_eq!(b.len(), 5);
        // Part of the first burst: the second is not offered.
        assert_eq!(offer(&mut b, 1), (taken(1, 100), 1));
        b.push(frame(50));
        // The rest of the first burst and part of the second.
        assert_eq!(offer(&mut b, 2), (taken(2, 500), 2));
        // Everything: each burst offered once.
        assert_eq!(offer(&mut b, 100), (taken(3, 950), 2));
        assert!(b.is_empty());
        assert_eq!(offer(&mut b, 100), (Taken::default(), 0));
        // Bursts emptied are reused.
        b.push(frame(10));
        assert_eq!(offer(&mut b, 100), (taken(1, 10), 1));
    }

    #[test]
    fn an_error_counts_what_came_before_it_and_keeps_the_count_of_what_is_left() {
        let mut b = backlog(2, &[100, 200, 300, 400]);
        let mut calls = 0;
        let failing_second = |frames: &mut Vec<PacketBuf>| {
            calls += 1;
            if calls == 1 {
                frames.drain(..);
                return Ok(2);
            }
            frames.drain(..1);
            Err(NicError::LinkDown)
        };
        let (t, result) = b.offer(failing_second);
        assert!(matches!(result, Err(NicError::LinkDown)));
        assert_eq!(t, taken(2, 300));
        assert_eq!(b.len(), 1);
        assert_eq!(offer(&mut b, 100), (taken(1, 400), 1));
    }
}
