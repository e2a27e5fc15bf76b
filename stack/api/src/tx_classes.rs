//! The size classes of transmit buffers, one set for every provider's pool (the host runtime's
//! heap buffers, the guest library's carved from its DMA region): a send takes the smallest
//! class that holds it, so thousands of connections' 16 KiB sends hold 16 KiB each, not 64.

/// Buffers up to this size come from the small class.
pub const SMALL_TX: usize = 2048;
/// Buffers up to this size come from the medium class (a 16 KiB socket buffer's whole window:
/// the sends of thousands of connections with small buffers).
pub const MEDIUM_TX: usize = 16 * 1024;
/// Buffers up to this size come from the large class; larger ones cannot be allocated (the
/// largest send a provider takes in one buffer).
pub const LARGE_TX: usize = 64 * 1024;

/// The classes' buffer sizes, smallest first.
pub const TX_CLASSES: [usize; 3] = [SMALL_TX, MEDIUM_TX, LARGE_TX];

/// The index in [`TX_CLASSES`] of the smallest class holding `len` bytes; `None` above
/// [`LARGE_TX`].
pub fn tx_class_of(len: usize) -> Option<usize> {
    TX_CLASSES.iter().position(|&size| len <= size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_length_takes_the_smallest_class_that_holds_it() {
        for (len, class) in
            [(0, 0), (SMALL_TX, 0), (SMALL_TX + 1, 1), (MEDIUM_TX, 1), (MEDIUM_TX + 1, 2), (LARGE_TX, 2)]
        {
            assert_eq!(tx_class_of(len), Some(class), "{len} bytes");
        }
        assert_eq!(tx_class_of(LARGE_TX + 1), None);
    }
}
