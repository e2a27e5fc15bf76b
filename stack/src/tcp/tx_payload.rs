//! What an application loans the stack to send without a copy, and how the stack reads it.
//!
//! Two kinds of memory are loaned. The application's own buffers (`Vec<u8>`, the host
//! runtime's `TxBuf`) are the stack's alone while it holds them: it may read them as a slice.
//! A guest's memory is not: the guest may write it at any moment (a buggy or hostile guest
//! does), so a `&[u8]` over it would be a data race. Such a payload offers no slice; the stack
//! reads it only through [`TxPayload::copy_to`] (which the owner implements with volatile
//! copies) and hands its address to a NIC that sends it in place. A guest that writes its bytes
//! while they are sent changes only its own stream.

use std::ptr::NonNull;

use crate::wire::checksum;

/// A buffer whose bytes the stack may transmit without copying; returned once acknowledged.
pub trait TxPayload: std::any::Any + Send + std::fmt::Debug {
    /// Length in bytes.
    fn len(&self) -> usize;

    /// True when there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies bytes `offset..` into `dst`, as many as both have; returns how many.
    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize;

    /// [`copy_to`](Self::copy_to), also returning the ones-complement sum
    /// ([`checksum::data`]) of the bytes written into `dst`: in one pass over a slice
    /// ([`checksum::copy_summed`]) or over external memory, which others may write
    /// ([`checksum::copy_summed_shared`]: what was written is what is summed, whatever the
    /// owner's memory holds meanwhile); else the copy and then its sum.
    fn copy_to_summed(&self, offset: usize, dst: &mut [u8]) -> (usize, u16) {
        if let Some(src) = self.as_slice() {
            let src = src.get(offset..).unwrap_or_default();
            let n = src.len().min(dst.len());
            self.read_ahead(offset, n);
            return (n, checksum::copy_summed(&src[..n], &mut dst[..n]));
        }
        if let Some(addr) = self.external_addr() {
            let n = self.len().saturating_sub(offset).min(dst.len());
            if n == 0 {
                return (0, 0);
            }
            self.read_ahead(offset, n);
            // SAFETY: `len()` bytes from `external_addr()` stay mapped while the stack holds the
            // payload (the method's promise), and `offset + n <= len()` (so the offset pointer
            // is inside them); `dst` is the stack's own buffer, never the external memory.
            let sum = unsafe { checksum::copy_summed_shared(addr.as_ptr().add(offset), &mut dst[..n]) };
            return (n, sum);
        }
        let n = self.copy_to(offset, dst);
        (n, checksum::data(&dst[..n]))
    }

    /// Called before bytes `offset..offset + n` are copied into a segment: a payload whose bytes
    /// another core wrote (a guest's memory; a host application's buffer when the runtime runs
    /// the application on its own thread) asks for its next bytes here ([`ask_ahead`]). Default:
    /// nothing (bytes written on the sending core are in its caches already).
    #[inline]
    fn read_ahead(&self, offset: usize, n: usize) {
        let _ = (offset, n);
    }

    /// The bytes as a slice, when nobody else reads or writes them while the stack holds the
    /// payload. Default `None` (the stack then reads through `copy_to`).
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }

    /// The address of the first byte when a NIC may transmit the bytes straight from where they
    /// are (zero copy: external memory such as a registered guest-memory region). The
    /// implementation promises that `len()` bytes from there stay mapped (readable) while the
    /// stack holds the payload, i.e. until it is handed back by `take_completed` (or dropped by
    /// the stack); the stack itself also copies from there into its frames
    /// ([`copy_to_summed`](Self::copy_to_summed)), reading each byte once. Default `None` (the
    /// stack copies the bytes into its frames through `copy_to`).
    fn external_addr(&self) -> Option<NonNull<u8>> {
        None
    }

    /// The owner's name for this loan (a socket and a send of it), read when the stack hands
    /// the loan back: the owner finds what completed without knowing the payload's type.
    /// Default `None`.
    fn tag(&self) -> Option<LoanTag> {
        None
    }
}

/// What an owner calls one of its loans (see [`TxPayload::tag`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoanTag {
    /// The owner's socket.
    pub socket: u32,
    /// The send on that socket.
    pub seq: u64,
}

/// `slice[offset..]` into `dst`: the `copy_to` of payloads that are plain slices.
pub fn copy_from_slice_at(slice: &[u8], offset: usize, dst: &mut [u8]) -> usize {
    let Some(src) = slice.get(offset..) else { return 0 };
    let n = src.len().min(dst.len());
    dst[..n].copy_from_slice(&src[..n]);
    n
}

impl TxPayload for Vec<u8> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        copy_from_slice_at(self, offset, dst)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(self)
    }
}

/// All of `payload`'s bytes copied into a new vector (taking a loan's bytes back into the
/// stack's or the owner's own memory).
pub fn copy_all(payload: &dyn TxPayload) -> Vec<u8> {
    let mut bytes = vec![0; payload.len()];
    let n = payload.copy_to(0, &mut bytes);
    bytes.truncate(n);
    bytes
}

/// Bytes read per copy when summing a payload that offers no slice (even, so that only the last
/// piece can end on an odd byte).
const SUM_PIECE: usize = 1024;
/// The piece for short payloads: its zeroing costs a few stores, not a kilobyte's.
const SHORT_SUM_PIECE: usize = 256;

/// The ones-complement sum (`checksum::data`) of bytes `offset..offset + len` of `payload`, read
/// in place when it is a plain slice, else through small copies.
pub fn payload_sum(payload: &dyn TxPayload, offset: usize, len: usize) -> u16 {
    if let Some(bytes) = payload.as_slice().and_then(|s| s.get(offset..offset + len)) {
        return checksum::data(bytes);
    }
    if len <= SHORT_SUM_PIECE {
        sum_through_copies::<SHORT_SUM_PIECE>(payload, offset, len)
    } else {
        sum_through_copies::<SUM_PIECE>(payload, offset, len)
    }
}

/// [`payload_sum`] through copies into a stack piece of `PIECE` bytes.
fn sum_through_copies<const PIECE: usize>(payload: &dyn TxPayload, offset: usize, len: usize) -> u16 {
    let mut piece = [0u8; PIECE];
    let mut sums = [0u16; 2];
    let mut done = 0;
    while done < len {
        let want = (len - done).min(PIECE);
        let got = payload.copy_to(offset + done, &mut piece[..want]);
        if got == 0 {
            break;
        }
        sums[1] = checksum::data(&piece[..got]);
        sums[0] = checksum::combine(&sums);
        done += got;
    }
    sums[0]
}

/// How far past the bytes being copied a payload's next bytes are asked for ([`ask_ahead`]).
const READ_AHEAD: usize = 4096;

/// For [`TxPayload::read_ahead`] of a payload of `len` bytes at `base`, whose bytes another core
/// wrote: before bytes `offset..offset + n` are copied into a segment, asks for the bytes
/// [`READ_AHEAD`] further on ([`lines`](slimtcp_api::prefetch::lines)), the part the segment
/// before did not ask for (segments take a payload's bytes in order). The next segments then
/// find them on their way instead of waiting for each line, at its first load, to come from the
/// other core (fair bench, sends at MSS 1460 / 512: guest +7% / +4%, host runtime +5% / +7%; MSS
/// 64 unchanged). A hint only: nothing is read, and any address is allowed.
#[inline(never)]
pub fn ask_ahead(base: *const u8, len: usize, offset: usize, n: usize) {
    let rest = len.saturating_sub(offset);
    let from = READ_AHEAD.max(n);
    let upto = (n + READ_AHEAD).min(rest);
    if upto > from {
        // Computed without `add`'s in-bounds rule: the hint never dereferences it.
        slimtcp_api::prefetch::lines(base.wrapping_add(offset + from), upto - from);
    }
}

/// Bytes a NIC could send by reference (a plain `Vec` with an address), for tests.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct AddressedBytes(pub Vec<u8>);

#[cfg(test)]
impl TxPayload for AddressedBytes {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        copy_from_slice_at(&self.0, offset, dst)
    }
    fn external_addr(&self) -> Option<NonNull<u8>> {
        NonNull::new(self.0.as_ptr().cast_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Like guest memory: no slice; bytes through copies only, or (`address`) also an address
    /// the stack may read, like a guest's registered memory.
    #[derive(Debug)]
    struct Foreign {
        bytes: Vec<u8>,
        address: bool,
    }

    impl TxPayload for Foreign {
        fn len(&self) -> usize {
            self.bytes.len()
        }
        fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
            copy_from_slice_at(&self.bytes, offset, dst)
        }
        fn external_addr(&self) -> Option<NonNull<u8>> {
            self.address.then(|| NonNull::new(self.bytes.as_ptr().cast_mut())).flatten()
        }
    }

    #[test]
    fn sums_through_copies_match_sums_of_the_slice() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let copy_only = Foreign { bytes: bytes.clone(), address: false };
        for (offset, len) in
            [(0, 5000), (1, 4999), (3, 1024), (1023, 2049), (4999, 1), (10, 0), (5, 255), (7, 256), (9, 257)]
        {
            assert_eq!(
                payload_sum(&copy_only, offset, len),
                checksum::data(&bytes[offset..offset + len]),
                "bytes {offset}+{len}"
            );
        }
    }

    #[test]
    fn a_summing_copy_sums_what_it_wrote_from_a_slice_an_address_or_copies() {
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 11 + i / 7) as u8).collect();
        let copy_only = Foreign { bytes: bytes.clone(), address: false };
        let external = Foreign { bytes: bytes.clone(), address: true };
        for (offset, dst_len) in
            [(0, 5000), (1, 1460), (3, 127), (7, 128), (4000, 2000), (4999, 10), (5000, 10), (6000, 10)]
        {
            let expect = &bytes[offset.min(5000)..(offset + dst_len).min(5000)];
            for payload in [&bytes as &dyn TxPayload, &copy_only, &external] {
                let mut dst = vec![0u8; dst_len];
                let (n, sum) = payload.copy_to_summed(offset, &mut dst);
                assert_eq!(&dst[..n], expect, "bytes {offset}+{dst_len}");
                assert_eq!(sum, checksum::data(expect), "sum of {offset}+{dst_len}");
            }
        }
    }

    #[test]
    fn copies_stop_at_the_end_of_either_side() {
        let v = vec![1u8, 2, 3, 4];
        let mut dst = [0u8; 3];
        assert_eq!(v.copy_to(2, &mut dst), 2);
        assert_eq!(dst, [3, 4, 0]);
        assert_eq!(v.copy_to(9, &mut dst), 0);
    }
}
