//! Cache prefetch hints: the one place that issues them. A frame received long after it was
//! written (thousands of connections' windows in flight) is in no cache any more; asking for
//! the next one's lines while the current one is processed lets the CPU fetch them meanwhile
//! instead of waiting for each line at its first read.

/// Bytes of a cache line.
const LINE: usize = 64;

/// Asks the CPU to bring the cache lines of `len` bytes from `start` into its caches. A hint
/// only: nothing is read or changed, and any address is allowed.
#[inline(always)]
pub fn lines(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = start.cast::<i8>();
        // SAFETY: a prefetch never faults and never changes memory, whatever the address
        // (computed without `add`'s in-bounds rule).
        let line = |offset: usize| unsafe { _mm_prefetch::<_MM_HINT_T0>(first.wrapping_add(offset)) };
        // Four lines a round: a frame's lines cost a few instructions each, not a loop's.
        let mut offset = 0;
        while offset + 4 * LINE <= len {
            line(offset);
            line(offset + LINE);
            line(offset + 2 * LINE);
            line(offset + 3 * LINE);
            offset += 4 * LINE;
        }
        while offset < len {
            line(offset);
            offset += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_address_is_a_valid_hint() {
        let bytes = [7u8; 300];
        lines(bytes.as_ptr(), bytes.len());
        lines(std::ptr::null(), 4096);
        lines(usize::MAX as *const u8, 256);
        lines(bytes.as_ptr(), 0);
        assert_eq!(bytes, [7u8; 300], "a hint changes nothing");
    }
}
