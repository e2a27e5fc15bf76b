//! The checksum's AVX2 loop, for slices long enough to pay for its set-up.
//!
//! Each 32-byte block is sixteen native-endian 16-bit words, summed in adjacent pairs into
//! eight 32-bit lanes by one multiply-add (`vpmaddwd` by ones) after flipping each word's top
//! bit, so the signed multiply-add sees `word - 2^15` and cannot overflow; the flips are added
//! back once per group. Three instructions per block (xor with the load folded in, multiply-add,
//! add), four blocks per loop step. The copying variant stores each loaded block into the
//! destination before summing it (a copy and its sum in one pass), two blocks per step.

use std::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_set1_epi16,
    _mm256_setzero_si256, _mm256_storeu_si256, _mm256_xor_si256,
};

use super::{add64, sum_native_scalar};

/// Blocks of 32 bytes one group sums in 32-bit lanes: a block adds less than 2^16 in magnitude
/// to a lane, so fewer than 2^15 blocks cannot overflow one.
pub(super) const GROUP_BLOCKS: usize = 1 << 14;

/// The sum of `bytes` as native-endian words, not folded: groups of [`GROUP_BLOCKS`] blocks
/// (each a multiple of 32 bytes long, so every group starts at an even offset), their exact
/// sums added with end-around carry.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn sum_native(bytes: &[u8]) -> u64 {
    bytes.chunks(32 * GROUP_BLOCKS).fold(0, |sum, group| {
        let tail = &group[group.len() / 32 * 32..];
        add64(add64(sum, sum_blocks(group)), sum_native_scalar(tail))
    })
}

/// [`sum_native`] of `src`, copied into `dst` on the way (the same length): each block is
/// loaded once, stored into `dst` and summed from the register.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn copy_sum_native(src: &[u8], dst: &mut [u8]) -> u64 {
    let n = src.len().min(dst.len());
    let (src, dst) = (&src[..n], &mut dst[..n]);
    let whole = n / 32 * 32;
    let mut sum = 0;
    for (from, to) in src[..whole].chunks(32 * GROUP_BLOCKS).zip(dst[..whole].chunks_mut(32 * GROUP_BLOCKS)) {
        sum = add64(sum, copy_sum_blocks(from, to));
    }
    let (tail_src, tail_dst) = (&src[whole..], &mut dst[whole..]);
    tail_dst.copy_from_slice(tail_src);
    add64(sum, sum_native_scalar(tail_src))
}

/// [`sum_blocks`] of `src` (whole blocks, at most [`GROUP_BLOCKS`]), each block stored into
/// `dst` (the same length) as it is summed.
#[target_feature(enable = "avx2")]
fn copy_sum_blocks(src: &[u8], dst: &mut [u8]) -> u64 {
    let mut even = _mm256_setzero_si256();
    let mut odd = _mm256_setzero_si256();
    let mut steps = src.chunks_exact(64);
    let mut steps_to = dst.chunks_exact_mut(64);
    for (step, to) in (&mut steps).zip(&mut steps_to) {
        let (low_to, high_to) = to.split_at_mut(32);
        even = _mm256_add_epi32(even, copy_pair_sums(&step[..32], low_to));
        odd = _mm256_add_epi32(odd, copy_pair_sums(&step[32..], high_to));
    }
    for (block, to) in steps.remainder().chunks_exact(32).zip(steps_to.into_remainder().chunks_exact_mut(32))
    {
        even = _mm256_add_epi32(even, copy_pair_sums(block, to));
    }
    exact_sum(_mm256_add_epi32(even, odd), src.len() / 32)
}

/// [`pair_sums`] of a 32-byte block of `src`, stored into the first 32 bytes of `dst` from the
/// same register.
#[target_feature(enable = "avx2")]
#[inline]
fn copy_pair_sums(src: &[u8], dst: &mut [u8]) -> __m256i {
    let (src, dst) = (&src[..32], &mut dst[..32]);
    // SAFETY: `src` is 32 bytes long, the load's width; it needs no alignment.
    let words = unsafe { _mm256_loadu_si256(src.as_ptr().cast()) };
    // SAFETY: `dst` is 32 writable bytes, the store's width; it needs no alignment.
    unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), words) };
    flipped_pair_sums(words)
}

/// The exact sum of the words of the whole 32-byte blocks of `group` (at most
/// [`GROUP_BLOCKS`]; a shorter tail is left out).
#[target_feature(enable = "avx2")]
fn sum_blocks(group: &[u8]) -> u64 {
    let mut even = _mm256_setzero_si256();
    let mut odd = _mm256_setzero_si256();
    let mut steps = group.chunks_exact(128);
    for step in &mut steps {
        even = _mm256_add_epi32(even, pair_sums(&step[0..32]));
        odd = _mm256_add_epi32(odd, pair_sums(&step[32..64]));
        even = _mm256_add_epi32(even, pair_sums(&step[64..96]));
        odd = _mm256_add_epi32(odd, pair_sums(&step[96..128]));
    }
    for block in steps.remainder().chunks_exact(32) {
        even = _mm256_add_epi32(even, pair_sums(block));
    }
    exact_sum(_mm256_add_epi32(even, odd), group.len() / 32)
}

/// The exact sum of `blocks` blocks' words from their flipped pair sums in `lanes`.
#[target_feature(enable = "avx2")]
fn exact_sum(lanes: __m256i, blocks: usize) -> u64 {
    let mut lane = [0i32; 8];
    // SAFETY: `lane` is 32 bytes long, the store's width; it needs no alignment.
    unsafe { _mm256_storeu_si256(lane.as_mut_ptr().cast(), lanes) };
    let flipped: i64 = lane.iter().map(|&l| i64::from(l)).sum();
    // Each of the 16 words of a block was counted 2^15 low; the corrected sum is the exact,
    // non-negative sum of the words.
    let words = (blocks * 16) as i64;
    (flipped + words * (1 << 15)) as u64
}

/// The first 32 bytes' sixteen words (a block: callers pass exactly that), top bits flipped,
/// summed in adjacent pairs: eight 32-bit lanes, each `a + b - 2^16` for the pair's unsigned
/// words `a`, `b`.
#[target_feature(enable = "avx2")]
#[inline]
fn pair_sums(block: &[u8]) -> __m256i {
    let block = &block[..32];
    // SAFETY: `block` is 32 bytes long, the load's width; it needs no alignment.
    flipped_pair_sums(unsafe { _mm256_loadu_si256(block.as_ptr().cast()) })
}

/// Sixteen words' top bits flipped, summed in adjacent pairs (see [`pair_sums`]).
#[target_feature(enable = "avx2")]
#[inline]
fn flipped_pair_sums(words: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_xor_si256(words, _mm256_set1_epi16(i16::MIN)), _mm256_set1_epi16(1))
}
