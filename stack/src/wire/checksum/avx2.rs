//! The checksum's AVX2 loop, for slices long enough to pay for its set-up.
//!
//! Each 32-byte block is sixteen native-endian 16-bit words, summed in adjacent pairs into
//! eight 32-bit lanes by one multiply-add (`vpmaddwd` by ones) after flipping each word's top
//! bit, so the signed multiply-add sees `word - 2^15` and cannot overflow; the flips are added
//! back once per group. Three instructions per block (xor with the load folded in, multiply-add,
//! add), four blocks per loop step. The copying variant stores each loaded block into the
//! destination before summing it (a copy and its sum in one pass), two blocks per step. It reads
//! its source by raw pointer: memory another party may write (a guest's) is never a slice, and
//! there each block is read by exactly one load ([`load_once`]).

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

/// [`sum_native`] of `src`, copied into the front of `dst` on the way (as many bytes as both
/// have): each 32-byte block is loaded once, stored into `dst` and summed from the register.
///
/// # Safety
/// The CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn copy_sum_native(src: &[u8], dst: &mut [u8]) -> u64 {
    let n = src.len().min(dst.len());
    // SAFETY: `src` has `n` readable bytes and cannot overlap `dst`, borrowed exclusively; the
    // references tell the compiler so, and it may load ahead of earlier stores.
    unsafe { copy_sum::<false>(src.as_ptr(), &mut dst[..n]) }
}

/// [`copy_sum_native`] of the `dst.len()` bytes at `src`, memory another party may write
/// meanwhile (a guest's): each block is read by one load ([`load_once`]) and the last 0-31 bytes
/// are copied and then summed from `dst`, so the sum is always that of the bytes written.
///
/// # Safety
/// The CPU must support AVX2; `dst.len()` bytes from `src` must be readable and must not overlap
/// `dst`.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn copy_sum_shared(src: *const u8, dst: &mut [u8]) -> u64 {
    // SAFETY: the caller's promises are `copy_sum`'s.
    unsafe { copy_sum::<true>(src, dst) }
}

/// The copying sum of the `dst.len()` bytes at `src` into `dst`, in groups of at most
/// [`GROUP_BLOCKS`] blocks, then the tail; `SHARED`: the source may change meanwhile (see
/// [`copy_sum_shared`]).
///
/// # Safety
/// `dst.len()` bytes from `src` must be readable and must not overlap `dst`.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn copy_sum<const SHARED: bool>(src: *const u8, dst: &mut [u8]) -> u64 {
    let whole = dst.len() / 32 * 32;
    let mut sum = 0;
    for (group, to) in dst[..whole].chunks_mut(32 * GROUP_BLOCKS).enumerate() {
        // SAFETY: the group's bytes lie inside the caller's readable `dst.len()` bytes at `src`.
        sum = add64(sum, unsafe { copy_sum_blocks::<SHARED>(src.add(group * 32 * GROUP_BLOCKS), to) });
    }
    let tail = &mut dst[whole..];
    // SAFETY: the tail's bytes lie inside the readable range at `src`, apart from `dst` (the
    // caller's promises). Shared memory is copied like vm-memory copies guest memory (a byte
    // written meanwhile lands as either value) and the copy is summed; the sum of a source that
    // cannot change is taken from it, which the copy reads anyway.
    unsafe {
        std::ptr::copy_nonoverlapping(src.add(whole), tail.as_mut_ptr(), tail.len());
        let summed = if SHARED { &*tail } else { std::slice::from_raw_parts(src.add(whole), tail.len()) };
        add64(sum, sum_native_scalar(summed))
    }
}

/// [`sum_blocks`] of the `dst.len()` bytes at `src` (whole blocks, at most [`GROUP_BLOCKS`]),
/// each block stored into `dst` as it is summed.
///
/// # Safety
/// `dst.len()` bytes from `src` must be readable.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn copy_sum_blocks<const SHARED: bool>(src: *const u8, dst: &mut [u8]) -> u64 {
    let mut even = _mm256_setzero_si256();
    let mut odd = _mm256_setzero_si256();
    let mut steps_to = dst.chunks_exact_mut(64);
    let mut at = src;
    for to in &mut steps_to {
        let (low_to, high_to) = to.split_at_mut(32);
        // SAFETY: the step's 64 bytes at `at` are inside the caller's readable range.
        unsafe {
            even = _mm256_add_epi32(even, copy_pair_sums::<SHARED>(at, low_to));
            odd = _mm256_add_epi32(odd, copy_pair_sums::<SHARED>(at.add(32), high_to));
            at = at.add(64);
        }
    }
    if let Some(to) = steps_to.into_remainder().first_chunk_mut::<32>() {
        // SAFETY: the last block's 32 bytes at `at` are inside the caller's readable range.
        even = _mm256_add_epi32(even, unsafe { copy_pair_sums::<SHARED>(at, to) });
    }
    exact_sum(_mm256_add_epi32(even, odd), dst.len() / 32)
}

/// [`pair_sums`] of the 32-byte block at `src`, stored into the first 32 bytes of `dst` from the
/// same register; `SHARED`: read by [`load_once`].
///
/// # Safety
/// 32 bytes from `src` must be readable.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn copy_pair_sums<const SHARED: bool>(src: *const u8, dst: &mut [u8]) -> __m256i {
    let dst = &mut dst[..32];
    // SAFETY: 32 bytes at `src` are readable (the caller's promise); neither load needs
    // alignment.
    let words = unsafe {
        if SHARED {
            load_once(src)
        } else {
            _mm256_loadu_si256(src.cast())
        }
    };
    // SAFETY: `dst` is 32 writable bytes, the store's width; it needs no alignment.
    unsafe { _mm256_storeu_si256(dst.as_mut_ptr().cast(), words) };
    flipped_pair_sums(words)
}

/// The 32 bytes at `src` (any alignment), read by exactly one load instruction: the compiler may
/// neither repeat nor split it, so the block that is stored and the block that is summed are the
/// same even when another party (a guest) writes the source meanwhile.
///
/// # Safety
/// 32 bytes from `src` must be readable.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load_once(src: *const u8) -> __m256i {
    let words: __m256i;
    // SAFETY: `vmovdqu` reads the 32 bytes at `src`, readable by the caller's promise, with no
    // alignment requirement, and writes only the output register.
    unsafe {
        std::arch::asm!(
            "vmovdqu {words}, ymmword ptr [{src}]",
            words = out(ymm_reg) words,
            src = in(reg) src,
            options(nostack, preserves_flags, readonly),
        );
    }
    words
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
