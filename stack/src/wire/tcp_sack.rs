//! The SACK options (RFC 2018) a segment carries: SACK-permitted in a SYN, and up to
//! [`MAX_SACK_BLOCKS`] blocks in an ACK (SlimTCP sends them from its reorder queue, and feeds
//! those it receives to its scoreboard).

use super::SeqNumber;

/// Blocks in one segment at most: 4 fit the 40-byte option space without timestamps.
pub const MAX_SACK_BLOCKS: usize = 4;

/// SACK-permitted and the SACK blocks of one segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSack {
    /// The SACK-permitted option (SYNs only).
    pub permitted: bool,
    blocks: [(SeqNumber, SeqNumber); MAX_SACK_BLOCKS],
    count: u8,
}

impl TcpSack {
    /// No SACK option at all.
    pub const NONE: TcpSack =
        TcpSack { permitted: false, blocks: [(SeqNumber(0), SeqNumber(0)); MAX_SACK_BLOCKS], count: 0 };

    /// Only the SACK-permitted option.
    pub const PERMITTED: TcpSack = TcpSack { permitted: true, ..TcpSack::NONE };

    /// The blocks `[left, right)` in the order given (the first one should hold the segment that
    /// arrived last, RFC 2018 section 4); blocks beyond [`MAX_SACK_BLOCKS`] are left out.
    pub fn blocks(ranges: impl IntoIterator<Item = (SeqNumber, SeqNumber)>) -> TcpSack {
        let mut sack = TcpSack::NONE;
        for r in ranges.into_iter().take(MAX_SACK_BLOCKS) {
            sack.blocks[usize::from(sack.count)] = r;
            sack.count += 1;
        }
        sack
    }

    /// The blocks of a received SACK option's data (8 bytes each; a trailing partial block and
    /// blocks beyond [`MAX_SACK_BLOCKS`] are ignored).
    pub fn parse_blocks(raw: &[u8]) -> TcpSack {
        TcpSack::blocks(raw.chunks_exact(8).map(|b| {
            let left = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            let right = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            (SeqNumber(left), SeqNumber(right))
        }))
    }

    /// The blocks carried.
    pub fn ranges(&self) -> &[(SeqNumber, SeqNumber)] {
        &self.blocks[..usize::from(self.count)]
    }

    /// True when neither option is present (the segment fits the option-less template).
    pub const fn is_none(&self) -> bool {
        !self.permitted && self.count == 0
    }

    /// Bytes these options take in the header: NOP NOP SACK-permitted (4), and NOP NOP kind
    /// length + 8 per block.
    pub const fn option_len(&self) -> usize {
        let mut len = 0;
        if self.permitted {
            len += 4;
        }
        if self.count > 0 {
            len += 4 + 8 * self.count as usize;
        }
        len
    }

    /// Writes the options into `buf` (exactly [`option_len`](Self::option_len) bytes).
    pub fn emit(&self, buf: &mut [u8]) {
        use super::tcp_option::kind;
        let mut at = 0;
        if self.permitted {
            buf[..4].copy_from_slice(&[kind::NOP, kind::NOP, kind::SACK_PERMITTED, 2]);
            at = 4;
        }
        if self.count > 0 {
            buf[at..at + 4].copy_from_slice(&[kind::NOP, kind::NOP, kind::SACK, 2 + 8 * self.count]);
            at += 4;
            for (left, right) in self.ranges() {
                buf[at..at + 4].copy_from_slice(&left.0.to_be_bytes());
                buf[at + 4..at + 8].copy_from_slice(&right.0.to_be_bytes());
                at += 8;
            }
        }
    }
}

impl Default for TcpSack {
    fn default() -> Self {
        TcpSack::NONE
    }
}
