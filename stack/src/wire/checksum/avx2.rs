//! The checksum's AVX2 loop, for slices long enough to pay for its set-up.
//!
//! Each 32-byte block is sixteen native-endian 16-bit words, summed in adjacent pairs into
//! eight 32-bit lanes by one multiply-add (`vpmaddwd` by ones) after flipping each word's top
//! bit, so the signed multiply-add sees `word - 2^15` and cannot overflow; the flips are added
//! back once per group. Three instructions per block (xor with the load folded in, multiply-add,
//! add), four blocks per loop step.

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
    let mut lanes = [0i32; 8];
    // SAFETY: `lanes` is 32 bytes long, the store's width; it needs no alignment.
    unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), _mm256_add_epi32(even, odd)) };
    let flipped: i64 = lanes.iter().map(|&lane| i64::from(lane)).sum();
    // Each of the 16 words of a block was counted 2^15 low; the corrected sum is the exact,
    // non-negative sum of the words.
    let words = (group.len() / 32 * 16) as i64;
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
    let words = unsafe { _mm256_loadu_si256(block.as_ptr().cast()) };
    _mm256_madd_epi16(_mm256_xor_si256(words, _mm256_set1_epi16(i16::MIN)), _mm256_set1_epi16(1))
}
