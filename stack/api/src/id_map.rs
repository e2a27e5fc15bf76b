//! Maps keyed by socket ids, handles, descriptors and cookies: small integers the server, the
//! stack or the application's own library choose (never a peer or a guest), so they need no
//! keyed hash against collision attacks: one multiply.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from ids (`u32`, `u64` or types hashing one of them) to `V`.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of one integer (the high bits of its product with 2^64 / phi).
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by integer keys; kept correct for any other.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_over_the_buckets() {
        let mut m: IdMap<u32, u32> = IdMap::default();
        for id in 1..=10_000u32 {
            m.insert(id, id * 2);
        }
        assert!((1..=10_000u32).all(|id| m.get(&id) == Some(&(id * 2))));
        let mut buckets = [0usize; 64];
        for id in 1..=10_000u32 {
            let mut h = IdHasher::default();
            h.write_u32(id);
            buckets[(h.finish() >> 58) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| (100..=220).contains(&n)), "{buckets:?}");
    }
}
