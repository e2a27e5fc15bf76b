//! Why a message could not be parsed or emitted.

use crate::Errno;

/// A message that does not follow the protocol, or a buffer too small to emit into. Offsets are
/// relative to the start of the frame (the virtio-net header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AbiError {
    /// The frame ends before the message does.
    Truncated {
        /// Bytes the message needs.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
    /// The output buffer is smaller than the message.
    BufferTooSmall {
        /// Bytes the message needs.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
    /// The frame's length disagrees with the length its message declares.
    LengthMismatch {
        /// The length the message declares (header, body and payload).
        expected: usize,
        /// The frame's (or chain's) length.
        got: usize,
    },
    /// The magic is not [`crate::MAGIC`]: not a SlimTCP message.
    BadMagic([u8; 4]),
    /// An op code this version does not define.
    UnknownOp(u8),
    /// A receive-queue message kind this version does not define.
    UnknownKind(u8),
    /// A reserved byte (or undefined flag bit) is not zero.
    ReservedNonZero {
        /// Offset of the first offending byte.
        offset: usize,
    },
    /// A field holds a value outside its range.
    BadValue {
        /// The field's name, as in `docs/protocol.md`.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// An unknown socket option.
    UnknownOption(u32),
    /// The virtio-net header of a received message is not the one the device writes.
    BadVirtioHeader,
}

impl AbiError {
    /// The errno the host puts in the error completion of a request that failed to parse.
    pub fn errno(self) -> Errno {
        match self {
            AbiError::UnknownOp(_) => Errno::EOPNOTSUPP,
            AbiError::UnknownOption(_) => Errno::ENOPROTOOPT,
            AbiError::BadMagic(_) | AbiError::UnknownKind(_) | AbiError::BadVirtioHeader => Errno::EPROTO,
            AbiError::Truncated { .. }
            | AbiError::BufferTooSmall { .. }
            | AbiError::LengthMismatch { .. }
            | AbiError::ReservedNonZero { .. }
            | AbiError::BadValue { .. } => Errno::EINVAL,
        }
    }
}

impl core::fmt::Display for AbiError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            AbiError::Truncated { needed, got } => {
                write!(f, "message truncated: needs {needed} bytes, got {got}")
            }
            AbiError::BufferTooSmall { needed, got } => {
                write!(f, "buffer too small: the message needs {needed} bytes, the buffer has {got}")
            }
            AbiError::LengthMismatch { expected, got } => {
                write!(f, "length mismatch: the message declares {expected} bytes, the frame has {got}")
            }
            AbiError::BadMagic(m) => write!(f, "bad magic {m:02x?}: not a SlimTCP message"),
            AbiError::UnknownOp(op) => write!(f, "unknown op 0x{op:02x}"),
            AbiError::UnknownKind(k) => write!(f, "unknown message kind 0x{k:02x}"),
            AbiError::ReservedNonZero { offset } => write!(f, "reserved byte at offset {offset} is not zero"),
            AbiError::BadValue { field, value } => write!(f, "field {field} has invalid value {value}"),
            AbiError::UnknownOption(o) => write!(f, "unknown socket option {o}"),
            AbiError::BadVirtioHeader => write!(f, "unexpected virtio-net header on a received message"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for AbiError {}
