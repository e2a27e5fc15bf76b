//! TCP options (RFC 9293 3.2, RFC 7323): the kinds, a well-formedness-checking iterator over
//! a header's options area, and the options the stack acts on ([`KnownOptions`]).

use super::field::{get_u32, sub};
use super::tcp::MAX_WINDOW_SCALE;
use super::{TcpSack, WireError};

/// Option kinds.
pub(super) mod kind {
    pub(in super::super) const END: u8 = 0;
    pub(in super::super) const NOP: u8 = 1;
    pub(in super::super) const MSS: u8 = 2;
    pub(in super::super) const WINDOW_SCALE: u8 = 3;
    pub(in super::super) const SACK_PERMITTED: u8 = 4;
    pub(in super::super) const SACK: u8 = 5;
    pub(in super::super) const TIMESTAMPS: u8 = 8;
}

/// One TCP option, as yielded by [`TcpOptionIter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of option list (kind 0); iteration stops after it.
    EndOfList,
    /// No-operation padding (kind 1).
    NoOperation,
    /// Maximum segment size (kind 2, length 4).
    MaxSegmentSize(u16),
    /// Window scale shift count as sent, not clamped (kind 3, length 3).
    WindowScale(u8),
    /// SACK permitted (kind 4, length 2).
    SackPermitted,
    /// SACK blocks, raw (kind 5).
    Sack(&'a [u8]),
    /// Timestamps (kind 8, length 10).
    Timestamps {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// Any other option, or a known kind with an unexpected length: `data` excludes kind and
    /// length bytes.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (after the kind and length bytes).
        data: &'a [u8],
    },
}

/// Iterator over the options area of a TCP header. Yields `Err(Malformed)` once (then stops) for
/// an option whose length is below 2 or runs past the options area.
#[derive(Debug, Clone)]
pub struct TcpOptionIter<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptionIter<'a> {
    /// Iterates over an options area (the bytes between the fixed header and `header_len`).
    pub fn new(options: &'a [u8]) -> Self {
        TcpOptionIter { rest: options }
    }
}

impl<'a> Iterator for TcpOptionIter<'a> {
    type Item = Result<TcpOption<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, after_kind) = self.rest.split_first()?;
        match kind {
            kind::END => {
                self.rest = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            kind::NOP => {
                self.rest = after_kind;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let len = match after_kind.first() {
            Some(&len) if len >= 2 && usize::from(len) <= self.rest.len() => usize::from(len),
            _ => {
                self.rest = &[];
                return Some(Err(WireError::Malformed));
            }
        };
        let data = sub(self.rest, 2, len);
        self.rest = sub(self.rest, len, usize::MAX);
        let option = match (kind, data) {
            (kind::MSS, &[hi, lo]) => TcpOption::MaxSegmentSize(u16::from_be_bytes([hi, lo])),
            (kind::WINDOW_SCALE, &[shift]) => TcpOption::WindowScale(shift),
            (kind::SACK_PERMITTED, &[]) => TcpOption::SackPermitted,
            (kind::SACK, blocks) => TcpOption::Sack(blocks),
            (kind::TIMESTAMPS, ts) if ts.len() == 8 => {
                TcpOption::Timestamps { tsval: get_u32(ts, 0), tsecr: get_u32(ts, 4) }
            }
            (kind, data) => TcpOption::Unknown { kind, data },
        };
        Some(Ok(option))
    }
}

/// The options the stack acts on, read from a header's options area (the others are skipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct KnownOptions {
    pub max_seg_size: Option<u16>,
    /// Clamped to [`MAX_WINDOW_SCALE`].
    pub window_scale: Option<u8>,
    pub sack: TcpSack,
}

impl KnownOptions {
    /// Walks `options` (an options area); a malformed option is an error.
    pub fn parse(options: &[u8]) -> Result<Self, WireError> {
        let mut known = KnownOptions::default();
        for option in TcpOptionIter::new(options) {
            match option? {
                TcpOption::MaxSegmentSize(mss) => known.max_seg_size = Some(mss),
                TcpOption::WindowScale(shift) => known.window_scale = Some(shift.min(MAX_WINDOW_SCALE)),
                TcpOption::SackPermitted => known.sack.permitted = true,
                TcpOption::Sack(raw) => {
                    let permitted = known.sack.permitted;
                    known.sack = TcpSack::parse_blocks(raw);
                    known.sack.permitted = permitted;
                }
                _ => {}
            }
        }
        Ok(known)
    }
}
