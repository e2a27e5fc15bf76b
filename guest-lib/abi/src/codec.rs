//! Reading and writing fixed little-endian fields at constant offsets.
//!
//! A [`Fields`] is created only over a slice at least as long as the struct it reads, so its
//! accessors index inside the slice; the ranges come from [`crate::layout`], whose compile-time
//! assertions keep every field inside its struct.

use core::net::Ipv4Addr;
use core::ops::Range;

use crate::AbiError;

/// A read-only view of one fixed-size struct inside a frame.
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
    /// Offset of the struct within the frame, for error reports.
    base: usize,
}

impl<'a> Fields<'a> {
    /// The `size` bytes at `base` of `frame`, or `Truncated`.
    pub(crate) fn new(frame: &'a [u8], base: usize, size: usize) -> Result<Self, AbiError> {
        let needed = base + size;
        match frame.get(base..needed) {
            Some(buf) => Ok(Fields { buf, base }),
            None => Err(AbiError::Truncated { needed, got: frame.len() }),
        }
    }

    fn array<const N: usize>(&self, r: Range<usize>) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.buf[r]);
        a
    }

    pub(crate) fn u8(&self, r: Range<usize>) -> u8 {
        self.buf[r.start]
    }
    pub(crate) fn u16(&self, r: Range<usize>) -> u16 {
        u16::from_le_bytes(self.array(r))
    }
    pub(crate) fn u32(&self, r: Range<usize>) -> u32 {
        u32::from_le_bytes(self.array(r))
    }
    pub(crate) fn u64(&self, r: Range<usize>) -> u64 {
        u64::from_le_bytes(self.array(r))
    }
    pub(crate) fn ipv4(&self, r: Range<usize>) -> Ipv4Addr {
        Ipv4Addr::from(self.array::<4>(r))
    }
    pub(crate) fn bytes<const N: usize>(&self, r: Range<usize>) -> [u8; N] {
        self.array(r)
    }

    /// `Ok` when every byte of the reserved field is zero.
    pub(crate) fn reserved(&self, r: Range<usize>) -> Result<(), AbiError> {
        let start = r.start;
        match self.buf[r].iter().position(|&b| b != 0) {
            None => Ok(()),
            Some(i) => Err(AbiError::ReservedNonZero { offset: self.base + start + i }),
        }
    }
}

/// A writable view of one fixed-size struct inside a frame. Reserved bytes are zero because
/// [`FieldsMut::new`] clears the whole struct first.
pub(crate) struct FieldsMut<'a> {
    buf: &'a mut [u8],
}

impl<'a> FieldsMut<'a> {
    pub(crate) fn new(frame: &'a mut [u8], base: usize, size: usize) -> Result<Self, AbiError> {
        let got = frame.len();
        match frame.get_mut(base..base + size) {
            Some(buf) => {
                buf.fill(0);
                Ok(FieldsMut { buf })
            }
            None => Err(AbiError::BufferTooSmall { needed: base + size, got }),
        }
    }

    pub(crate) fn put(&mut self, r: Range<usize>, bytes: &[u8]) {
        self.buf[r].copy_from_slice(bytes);
    }
    pub(crate) fn u8(&mut self, r: Range<usize>, v: u8) {
        self.put(r, &[v]);
    }
    pub(crate) fn u16(&mut self, r: Range<usize>, v: u16) {
        self.put(r, &v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, r: Range<usize>, v: u32) {
        self.put(r, &v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, r: Range<usize>, v: u64) {
        self.put(r, &v.to_le_bytes());
    }
    pub(crate) fn ipv4(&mut self, r: Range<usize>, v: Ipv4Addr) {
        self.put(r, &v.octets());
    }
}

/// A C-like enum with wire codes: `code`, `from_code`, `ALL`, and a `parse` that reports an
/// undefined code as `BadValue` naming the field.
macro_rules! code_enum {
    ($(#[$m:meta])* $name:ident : $repr:ty, $field:literal { $($(#[$vm:meta])* $var:ident = $val:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr($repr)]
        pub enum $name {
            $($(#[$vm])* $var = $val,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$var,)*];

            /// The wire code.
            pub fn code(self) -> $repr {
                self as $repr
            }

            /// The value for a wire code, if defined.
            pub fn from_code(code: $repr) -> Option<Self> {
                match code {
                    $($val => Some($name::$var),)*
                    _ => None,
                }
            }

            #[allow(dead_code)]
            pub(crate) fn parse(code: $repr) -> Result<Self, AbiError> {
                Self::from_code(code).ok_or(AbiError::BadValue { field: $field, value: u64::from(code) })
            }
        }
    };
}
