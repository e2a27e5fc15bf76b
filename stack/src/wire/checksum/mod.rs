//! The Internet checksum (RFC 1071): the 16-bit ones-complement of the ones-complement sum.
//!
//! Every function here returns a *sum*, folded to 16 bits but **not inverted**, so partial sums
//! can be combined. The value written into a header is the inversion of the total:
//!
//! ```
//! use slimtcp::wire::{checksum, IpProtocol, Ipv4Addr};
//! let segment = [0u8; 20]; // a TCP header with its checksum field zeroed
//! let src = Ipv4Addr::new(10, 0, 0, 1);
//! let dst = Ipv4Addr::new(10, 0, 0, 2);
//! let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, segment.len() as u32);
//! let field = !checksum::combine(&[pseudo, checksum::data(&segment)]);
//! # let _ = field;
//! ```
//!
//! A received packet verifies when the sum over it (checksum field included) is `0xffff`.

use super::{IpProtocol, Ipv4Addr};

#[cfg(target_arch = "x86_64")]
mod avx2;

/// Folds a wide ones-complement accumulator down to 16 bits (end-around carries): adding a word
/// to itself rotated by half its width leaves the end-around sum of its halves in the upper
/// half, 64 -> 32 -> 16 bits in two such steps.
#[inline(always)]
fn fold(sum: u64) -> u16 {
    let half = (sum.wrapping_add(sum.rotate_right(32)) >> 32) as u32;
    (half.wrapping_add(half.rotate_right(16)) >> 16) as u16
}

/// Ones-complement add of two 64-bit words with end-around carry.
#[inline(always)]
fn add64(acc: u64, word: u64) -> u64 {
    let (sum, carry) = acc.overflowing_add(word);
    sum + u64::from(carry)
}

/// The ones-complement sum of `bytes` as big-endian 16-bit words, folded to 16 bits and **not**
/// inverted. An odd trailing byte is padded with a zero byte on the right.
///
/// Sums native-endian words (the ones-complement sum is independent of word size and byte order
/// up to a final byte swap): with AVX2, where the CPU has it, sixteen 16-bit words per
/// instruction triple ([`avx2`]); otherwise 64-bit words with end-around carry.
pub fn data(bytes: &[u8]) -> u16 {
    // A header without options (every IPv4 header this stack sends or receives, a TCP header
    // summed apart from its payload): five words, no loop.
    if let Ok(header) = <&[u8; 20]>::try_from(bytes) {
        return header20(header);
    }
    // The folded native-endian sum is the big-endian sum with its bytes swapped on LE hosts.
    #[cfg(target_arch = "x86_64")]
    if bytes.len() >= WIDE_MIN {
        return u16::from_be(fold(sum_native_long(bytes)));
    }
    u16::from_be(fold(sum_native_scalar(bytes)))
}

/// Copies `src` into the front of `dst` (as many bytes as both have) and returns [`data`] of
/// the bytes copied: one pass where a copy and then a checksum of the copy would read the bytes
/// twice (Linux's `csum_and_copy`). Reading the copy back right after writing it also waits for
/// the writes to reach the cache, which a frame buffer taken cold makes slow; here the sum is
/// taken from the source. With AVX2, where the CPU has it and the slice is long enough, each
/// 32-byte block is loaded once, stored and summed ([`avx2`]).
pub fn copy_summed(src: &[u8], dst: &mut [u8]) -> u16 {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    #[cfg(target_arch = "x86_64")]
    if n >= WIDE_MIN && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of the function.
        return u16::from_be(fold(unsafe { avx2::copy_sum_native(src, dst) }));
    }
    // Short (or no AVX2): summed from the source, which the copy reads anyway, not from the
    // copy.
    let sum = data(src);
    dst.copy_from_slice(src);
    sum
}

/// [`copy_summed`] of the `dst.len()` bytes at `src`, memory that another party may write at
/// any moment (a guest's: never a `&[u8]`). The sum is always that of the bytes written into
/// `dst`: with AVX2 each 32-byte block is read by one load and stored and summed from it; short
/// copies (and CPUs without AVX2) copy first and sum the copy. A byte written meanwhile is
/// copied as its old or its new value, as vm-memory's own copies of guest memory do.
///
/// # Safety
/// `dst.len()` bytes from `src` must be readable (mapped) for the whole call and must not
/// overlap `dst`.
pub unsafe fn copy_summed_shared(src: *const u8, dst: &mut [u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    if dst.len() >= WIDE_MIN && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above); the range at `src` is readable and
        // apart from `dst` (the caller's promises).
        return u16::from_be(fold(unsafe { avx2::copy_sum_shared(src, dst) }));
    }
    // SAFETY: as above; the copy is vm-memory's kind (a `memcpy` of bytes that may change).
    unsafe { std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
    data(dst)
}

/// [`data`] of a 20-byte header (IPv4 or TCP without options): five 32-bit words, no loop and
/// no tail.
#[inline]
fn header20(bytes: &[u8; 20]) -> u16 {
    let word = |i: usize| u64::from(u32::from_ne_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]));
    u16::from_be(fold(word(0) + word(4) + word(8) + word(12) + word(16)))
}

/// Slices shorter than this (headers, small segments) stay on the scalar path: the vector
/// path's set-up and lane sums cost more than they save.
#[cfg(target_arch = "x86_64")]
const WIDE_MIN: usize = 128;

/// The ones-complement sum of a long slice as native-endian words, not folded (any fold of it
/// to 16 bits is the same sum: 2^64 - 1 is a multiple of 2^16 - 1): the vector path where the
/// CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn sum_native_long(bytes: &[u8]) -> u64 {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above), the only requirement of the function.
        return unsafe { avx2::sum_native(bytes) };
    }
    sum_native_scalar(bytes)
}

/// The scalar sum: 64-bit words into a 128-bit accumulator (an add and an add-with-carry per
/// word; it cannot overflow below 2^64 words), then the tail; the two halves are summed with
/// end-around carry.
#[inline(always)]
fn sum_native_scalar(bytes: &[u8]) -> u64 {
    let mut acc = 0u128;
    let mut rest = bytes;
    while let Some((word, after)) = rest.split_first_chunk::<8>() {
        acc += u128::from(u64::from_ne_bytes(*word));
        rest = after;
    }
    // The last 0-7 bytes as a 4-, a 2- and a 1-byte piece (fixed-size reads, no copy of a
    // variable length): each starts at an even offset, so its bytes keep their 16-bit lanes, and
    // where a lane lands in the 64-bit sum does not matter (2^16 = 1 modulo 2^16 - 1).
    let mut tail = 0u64;
    if let Some((four, after)) = rest.split_first_chunk::<4>() {
        tail += u64::from(u32::from_ne_bytes(*four));
        rest = after;
    }
    if let Some((two, after)) = rest.split_first_chunk::<2>() {
        tail += u64::from(u16::from_ne_bytes(*two));
        rest = after;
    }
    if let [last] = rest {
        // Zero padding on the right.
        tail += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    acc += u128::from(tail);
    add64(acc as u64, (acc >> 64) as u64)
}

/// Ones-complement sum of partial sums, folded to 16 bits, not inverted.
#[inline]
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The sum of the IPv4 pseudo-header (RFC 793/768): source, destination, zero+protocol and the
/// upper-layer length. Not inverted; this alone is what a device with tx checksum offload expects
/// in the checksum field.
pub fn pseudo_header(src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, length: u32) -> u16 {
    let s = u32::from(src);
    let d = u32::from(dst);
    let sum = u64::from(s >> 16)
        + u64::from(s & 0xffff)
        + u64::from(d >> 16)
        + u64::from(d & 0xffff)
        + u64::from(u8::from(protocol))
        + u64::from(length >> 16)
        + u64::from(length & 0xffff);
    fold(sum)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::nic::fault::Rng;

    /// Straightforward RFC 1071 reference: 16-bit words, 32-bit accumulator.
    fn reference(bytes: &[u8]) -> u16 {
        let mut sum: u64 = 0;
        let mut i = 0;
        while i + 1 < bytes.len() {
            sum += u64::from(u16::from_be_bytes([bytes[i], bytes[i + 1]]));
            i += 2;
        }
        if i < bytes.len() {
            sum += u64::from(bytes[i]) << 8;
        }
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        assert_eq!(data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
    }

    #[test]
    fn empty_and_odd() {
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(data(&[0xff; 64]), 0xffff);
    }

    /// Runs `check` on `rounds` random slices of a `len`-byte buffer starting below `starts`;
    /// every `carries`-th round sets the top bits of every byte (long runs of carries).
    fn for_random_slices(
        seed: u64,
        len: usize,
        rounds: usize,
        carries: usize,
        starts: u64,
        check: impl Fn(&[u8]),
    ) {
        let mut rng = Rng::new(seed);
        let mut buf = vec![0u8; len];
        for round in 0..rounds {
            rng.fill_bytes(&mut buf);
            if round % carries == 0 {
                buf.iter_mut().for_each(|b| *b |= 0xf8);
            }
            let end = rng.gen_range(0..(buf.len() + 1) as u64) as usize;
            let start = (rng.gen_range(0..starts) as usize).min(end); // unaligned starts too
            check(&buf[start..end]);
        }
    }

    #[test]
    fn matches_reference_on_random_data() {
        for_random_slices(0x5eed_c0de, 1600, 400, 7, 4, |slice| {
            assert_eq!(data(slice), reference(slice), "len {}", slice.len());
        });
    }

    #[test]
    fn every_tail_length_matches_the_reference() {
        let mut rng = Rng::new(0x7a11);
        let mut buf = [0u8; 48];
        for fill in [0x00u8, 0xff, 0x5a] {
            buf.fill(fill);
            for len in 0..=buf.len() {
                assert_eq!(data(&buf[..len]), reference(&buf[..len]), "fill {fill:#x} len {len}");
            }
        }
        for _ in 0..50 {
            rng.fill_bytes(&mut buf);
            for len in 0..=buf.len() {
                assert_eq!(data(&buf[..len]), reference(&buf[..len]), "len {len}");
            }
        }
    }

    #[test]
    fn the_vector_and_scalar_paths_agree() {
        for_random_slices(0xa5a5, 9000, 200, 3, 8, |slice| {
            let scalar = u16::from_be(fold(sum_native_scalar(slice)));
            assert_eq!(data(slice), scalar, "len {}", slice.len());
            #[cfg(target_arch = "x86_64")]
            assert_eq!(u16::from_be(fold(sum_native_long(slice))), scalar, "len {}", slice.len());
        });
        // A jumbo frame of all ones: the most carries any lane can hold.
        let ones = vec![0xffu8; 9000];
        assert_eq!(data(&ones), reference(&ones));
    }

    #[test]
    fn slices_longer_than_one_vector_group_match_the_reference() {
        // Extreme words (all ones, all zeros: the largest and the most negative flipped lane
        // sums) and random ones, over several groups of 32-bit lanes and a partial one.
        #[cfg(target_arch = "x86_64")]
        let group = 32 * avx2::GROUP_BLOCKS;
        #[cfg(not(target_arch = "x86_64"))]
        let group = 1 << 19;
        let len = 2 * group + 4099;
        let mut rng = Rng::new(0x6e0b);
        let mut random = vec![0u8; len];
        rng.fill_bytes(&mut random);
        for bytes in [vec![0xffu8; len], vec![0u8; len], random] {
            for slice in [&bytes[..], &bytes[..group], &bytes[1..group + 33]] {
                assert_eq!(data(slice), reference(slice), "len {}", slice.len());
            }
        }
    }

    #[test]
    fn copy_summed_copies_and_sums_like_a_copy_then_data() {
        // Short and long slices, unaligned starts on both sides, every tail length, carries.
        for_random_slices(0xc0b1, 9000, 300, 5, 8, |src| {
            for dst_start in [0usize, 1, 3] {
                let mut dst = vec![0x5au8; src.len() + dst_start + 7];
                let sum = copy_summed(src, &mut dst[dst_start..]);
                assert_eq!(&dst[dst_start..dst_start + src.len()], src, "len {}", src.len());
                assert!(dst[dst_start + src.len()..].iter().all(|&b| b == 0x5a), "nothing past the copy");
                assert_eq!(sum, reference(src), "len {} dst_start {dst_start}", src.len());
                // The same from a raw address (memory another party may write).
                dst.fill(0x5a);
                let to = &mut dst[dst_start..dst_start + src.len()];
                // SAFETY: `src` is readable for `to.len()` bytes and apart from `dst`.
                let shared = unsafe { copy_summed_shared(src.as_ptr(), to) };
                assert_eq!(&dst[dst_start..dst_start + src.len()], src, "shared, len {}", src.len());
                assert!(dst[dst_start + src.len()..].iter().all(|&b| b == 0x5a), "shared: nothing past");
                assert_eq!(shared, reference(src), "shared, len {} dst_start {dst_start}", src.len());
            }
        });
        // A shorter destination takes what fits, and the sum is of that.
        let src = [0xffu8; 300];
        let mut dst = [0u8; 131];
        assert_eq!(copy_summed(&src, &mut dst), reference(&src[..131]));
        assert_eq!(dst, [0xff; 131]);
    }

    #[test]
    fn a_shared_copy_sums_what_it_wrote_while_the_source_changes() {
        use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
        // A guest rewriting its send buffer while the backend copies it: every byte lands as
        // its old or new value, and the sum must be that of the copy, never of a second read.
        let source: Vec<AtomicU8> = (0..1460).map(|i| AtomicU8::new(i as u8)).collect();
        let (stop, rewrites) = (AtomicBool::new(false), AtomicUsize::new(0));
        /// Stops the writer however the copies end (a failed assertion too).
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|scope| {
            let _stop_writer = StopOnDrop(&stop);
            scope.spawn(|| {
                let mut round = 0u8;
                while !stop.load(Ordering::Relaxed) {
                    round = round.wrapping_add(0x35);
                    source.iter().for_each(|b| b.store(round, Ordering::Relaxed));
                    rewrites.fetch_add(1, Ordering::Relaxed);
                }
            });
            let mut dst = vec![0u8; source.len()];
            let mut copies = 0;
            // Copies for as long as the writer needs to rewrite the source many times over.
            while copies < 2_000 || rewrites.load(Ordering::Relaxed) < 2_000 {
                // SAFETY: `source` is 1460 readable bytes (`AtomicU8` has `u8`'s layout), apart
                // from `dst`; the writer only changes their values.
                let sum = unsafe { copy_summed_shared(source.as_ptr().cast(), &mut dst) };
                assert_eq!(sum, data(&dst), "copy {copies}");
                copies += 1;
            }
        });
    }

    #[test]
    fn header20_matches_data() {
        let mut rng = Rng::new(20);
        let mut h = [0u8; 20];
        for fill in [0x00u8, 0xff] {
            h.fill(fill);
            assert_eq!(header20(&h), reference(&h));
        }
        for _ in 0..1000 {
            rng.fill_bytes(&mut h);
            assert_eq!(header20(&h), reference(&h));
        }
    }

    #[test]
    fn combine_is_split_invariant_at_even_offsets() {
        let mut rng = Rng::new(7);
        let mut buf = vec![0u8; 301];
        rng.fill_bytes(&mut buf);
        for cut in (0..buf.len()).step_by(2) {
            let (a, b) = buf.split_at(cut);
            assert_eq!(combine(&[data(a), data(b)]), reference(&buf));
        }
        assert_eq!(combine(&[]), 0);
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[0x8000, 0x8000]), 0x0001);
    }

    #[test]
    fn pseudo_header_matches_bytes() {
        let src = Ipv4Addr::new(192, 168, 1, 10);
        let dst = Ipv4Addr::new(172, 16, 254, 1);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&[0, 6, 0x05, 0xdc]);
        assert_eq!(pseudo_header(src, dst, IpProtocol::Tcp, 1500), reference(&bytes));
        // A length above 16 bits is summed as two words.
        let mut bytes2 = bytes[..10].to_vec();
        bytes2.extend_from_slice(&[0x00, 0x01, 0x00, 0x02]);
        bytes2[9] = 17;
        assert_eq!(pseudo_header(src, dst, IpProtocol::Udp, 0x0001_0002), reference(&bytes2));
    }
}
