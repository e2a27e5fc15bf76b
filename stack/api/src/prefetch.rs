//! Cache prefetch hints: the one place that issues them. A frame received long after it was
//! written (thousands of connections' windows in flight) is in no cache any more; asking for
//! the next one's lines while the current one is processed lets the CPU fetch them meanwhile
//! instead of waiting for each line at its first read. A buffer about to be written is asked
//! for the same way, to be owned ([`lines_for_write`]).

/// Bytes of a cache line.
#[cfg(target_arch = "x86_64")]
const LINE: usize = 64;

/// Asks the CPU to bring the cache lines of `len` bytes from `start` into its caches ready to be
/// written (`prefetchw`: owned, every other core's copy given up), where the CPU can; nothing
/// elsewhere (a read prefetch of a line another core holds would cost a second transaction at
/// the write). A buffer coming back from another core (a frame the application read, now to be
/// written again) is then fetched while other work runs, not at its first store. A hint only:
/// nothing is read or changed, and any address is allowed.
#[inline(always)]
pub fn lines_for_write(start: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    if write_prefetch_available() {
        let line = |offset: usize| {
            // SAFETY: `prefetchw` never faults and changes no memory, whatever the address
            // (computed without `add`'s in-bounds rule); the CPU has it (checked above).
            unsafe {
                std::arch::asm!("prefetchw [{0}]", in(reg) start.wrapping_add(offset), options(nostack, preserves_flags));
            }
        };
        each_line(len, line);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

/// Calls `line` with the offset of every cache line of `len` bytes, four a round: a frame's
/// lines cost a few instructions each, not a loop's.
#[inline(always)]
#[cfg(target_arch = "x86_64")]
fn each_line(len: usize, line: impl Fn(usize)) {
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

/// Whether the CPU has `prefetchw` (CPUID 0x8000_0001, ECX bit 8: `PRFCHW`, AMD's
/// "3DNowPrefetch"), asked once.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn write_prefetch_available() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    const UNKNOWN: u8 = 0;
    const YES: u8 = 1;
    static AVAILABLE: AtomicU8 = AtomicU8::new(UNKNOWN);
    match AVAILABLE.load(Ordering::Relaxed) {
        UNKNOWN => {
            let has = detect_write_prefetch();
            AVAILABLE.store(if has { YES } else { 2 }, Ordering::Relaxed);
            has
        }
        known => known == YES,
    }
}

#[cfg(target_arch = "x86_64")]
#[cold]
fn detect_write_prefetch() -> bool {
    use std::arch::x86_64::__cpuid;
    const EXTENDED: u32 = 0x8000_0001;
    // SAFETY: `cpuid` exists on every x86_64 CPU; leaf 0x8000_0000 gives the highest extended
    // leaf, asked for only when present. (`__cpuid` is a safe function from Rust 1.87 on, an
    // unsafe one before: hence the allowance.)
    #[allow(unused_unsafe)]
    unsafe {
        __cpuid(0x8000_0000).eax >= EXTENDED && __cpuid(EXTENDED).ecx & (1 << 8) != 0
    }
}

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
        each_line(len, line);
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
        lines_for_write(bytes.as_ptr(), bytes.len());
        lines_for_write(std::ptr::null(), 4096);
        lines_for_write(usize::MAX as *const u8, 256);
        assert_eq!(bytes, [7u8; 300], "a hint changes nothing");
    }
}
