//! The sender's SACK scoreboard (RFC 2018, a small part of RFC 6675): which ranges above
//! SND.UNA the peer reported holding, so that fast recovery retransmits every hole once, at once,
//! instead of one hole per round trip (NewReno), and go-back-N skips what the peer holds.
//!
//! Bounded: at most [`MAX_SACKED`] separate ranges; when a new block would make one more, the
//! highest range is forgotten (the lowest holes matter first; forgetting a block only costs a
//! needless retransmission). After a retransmission timeout, go-back-N skips what the peer
//! SACKed; a second timeout in a row clears the board (RFC 2018 section 8: the receiver may have
//! reneged, which then costs one more timeout, not a stall).

use super::SeqNumber;

/// Separate SACKed ranges remembered at most.
pub const MAX_SACKED: usize = 8;

/// SACKed ranges `[left, right)` above SND.UNA, sorted, disjoint, not adjacent. Kept on the heap
/// only while the peer reports any: most connections never see a loss, and their state stays
/// one word.
#[derive(Debug, Clone, Default)]
pub struct Scoreboard {
    held: Option<Box<Ranges>>,
}

#[derive(Debug, Clone, Copy)]
struct Ranges {
    ranges: [(SeqNumber, SeqNumber); MAX_SACKED],
    len: usize,
}

impl Scoreboard {
    /// True when the peer reported nothing beyond SND.UNA.
    pub fn is_empty(&self) -> bool {
        self.held.is_none()
    }

    /// The ranges held.
    pub fn ranges(&self) -> &[(SeqNumber, SeqNumber)] {
        match &self.held {
            Some(h) => &h.ranges[..h.len],
            None => &[],
        }
    }

    /// Forgets everything (after a timeout).
    pub fn clear(&mut self) {
        self.held = None;
    }

    /// Records a SACK block. The caller checked `snd_una < left < right <= snd_max`.
    pub fn add(&mut self, left: SeqNumber, right: SeqNumber) {
        let mut all = [(SeqNumber(0), SeqNumber(0)); MAX_SACKED + 1];
        let len = self.ranges().len();
        all[..len].copy_from_slice(self.ranges());
        all[len] = (left, right);
        let all = &mut all[..=len];
        all.sort_unstable_by_key(|a| a.0);
        let held = self.held.get_or_insert_with(|| {
            Box::new(Ranges { ranges: [(SeqNumber(0), SeqNumber(0)); MAX_SACKED], len: 0 })
        });
        let mut n = 0;
        for &(l, r) in all.iter() {
            if n > 0 && l <= held.ranges[n - 1].1 {
                held.ranges[n - 1].1 = held.ranges[n - 1].1.max(r);
            } else if n < MAX_SACKED {
                held.ranges[n] = (l, r);
                n += 1;
            }
        }
        held.len = n;
    }

    /// Forgets what lies below `una` (it was acknowledged).
    pub fn advance(&mut self, una: SeqNumber) {
        let Some(held) = self.held.as_deref_mut() else { return };
        let mut n = 0;
        for i in 0..held.len {
            let (l, r) = held.ranges[i];
            if r > una {
                held.ranges[n] = (l.max(una), r);
                n += 1;
            }
        }
        held.len = n;
        if n == 0 {
            self.held = None;
        }
    }

    /// The highest SACKed sequence number (exclusive), if any.
    pub fn high(&self) -> Option<SeqNumber> {
        self.ranges().last().map(|r| r.1)
    }

    /// `seq`, moved past the SACKed range that contains it, if one does.
    pub fn skip(&self, seq: SeqNumber) -> SeqNumber {
        self.ranges().iter().find(|(l, r)| seq >= *l && seq < *r).map_or(seq, |r| r.1)
    }

    /// The start of the first SACKed range above `seq` (where a retransmission must stop).
    pub fn next_left(&self, seq: SeqNumber) -> Option<SeqNumber> {
        self.ranges().iter().map(|r| r.0).find(|l| *l > seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u32) -> SeqNumber {
        SeqNumber(v)
    }

    #[test]
    fn blocks_merge_and_advance() {
        let mut b = Scoreboard::default();
        b.add(s(300), s(400));
        b.add(s(100), s(200));
        b.add(s(200), s(250));
        b.add(s(350), s(500));
        assert_eq!(b.ranges(), &[(s(100), s(250)), (s(300), s(500))]);
        assert_eq!((b.skip(s(120)), b.skip(s(260)), b.next_left(s(260))), (s(250), s(260), Some(s(300))));
        assert_eq!(b.high(), Some(s(500)));
        b.advance(s(320));
        assert_eq!(b.ranges(), &[(s(320), s(500))]);
        b.advance(s(600));
        assert!(b.is_empty());
    }

    #[test]
    fn the_highest_ranges_go_when_full() {
        let mut b = Scoreboard::default();
        for i in 0..MAX_SACKED as u32 + 3 {
            b.add(s(1000 - 100 * i), s(1050 - 100 * i));
        }
        assert_eq!(b.ranges().len(), MAX_SACKED);
        assert_eq!(
            b.ranges()[0],
            (s(1000 - 100 * (MAX_SACKED as u32 + 2)), s(1050 - 100 * (MAX_SACKED as u32 + 2)))
        );
    }
}
