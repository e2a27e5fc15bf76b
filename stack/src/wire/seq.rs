//! TCP sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 section 3.4). They live
//! with the wire formats that carry them; `tcp` re-exports them.

use std::cmp::Ordering;
use std::ops::{Add, AddAssign, Sub};

/// A TCP sequence number. Ordering is defined by wrapping distance, so it is only
/// meaningful between numbers less than 2^31 apart, as in every TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SeqNumber(pub u32);

impl SeqNumber {
    /// The signed distance `self - other`, interpreting the wrap-around.
    pub fn diff(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// `self - other` as a byte count; zero when `self` is before `other`.
    pub fn since(self, other: SeqNumber) -> usize {
        let d = self.diff(other);
        if d < 0 {
            0
        } else {
            d as usize
        }
    }

    /// True when `low <= self < high` in sequence space.
    pub fn in_window(self, low: SeqNumber, high: SeqNumber) -> bool {
        self >= low && self < high
    }

    /// The later of two sequence numbers.
    pub fn max(self, other: SeqNumber) -> SeqNumber {
        if self >= other {
            self
        } else {
            other
        }
    }

    /// The earlier of two sequence numbers.
    pub fn min(self, other: SeqNumber) -> SeqNumber {
        if self <= other {
            self
        } else {
            other
        }
    }
}

impl PartialOrd for SeqNumber {
    fn partial_cmp(&self, other: &SeqNumber) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SeqNumber {
    fn cmp(&self, other: &SeqNumber) -> Ordering {
        self.diff(*other).cmp(&0)
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    fn add(self, rhs: usize) -> SeqNumber {
        // Offsets are bounded by windows (< 2^30), so truncation is the intended modular add.
        SeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl Sub<usize> for SeqNumber {
    type Output = SeqNumber;
    fn sub(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs as u32))
    }
}

impl std::fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_wraps_around() {
        let a = SeqNumber(u32::MAX - 10);
        let b = a + 20;
        assert_eq!(b, SeqNumber(9));
        assert!(b > a);
        assert_eq!(b.diff(a), 20);
        assert_eq!(b.since(a), 20);
        assert_eq!(a.since(b), 0);
    }

    #[test]
    fn window_membership_across_wrap() {
        let low = SeqNumber(u32::MAX - 1);
        let high = low + 4;
        assert!(low.in_window(low, high));
        assert!((low + 3).in_window(low, high));
        assert!(!(low + 4).in_window(low, high));
        assert!(!(low - 1).in_window(low, high));
    }
}
