//! Tokens of external transmissions in flight: a slab whose token names a slot and the slot's
//! generation, so registering and completing a transmission cost no hashing, and a stale or
//! unknown token finds nothing. It grows to the most transmissions ever in flight at once (each
//! holds a frame, so far below 2^32) and reuses freed slots.

/// Values in flight, each named by a token until taken back.
#[derive(Debug)]
pub(super) struct TokenSlab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

impl<T> Default for TokenSlab<T> {
    fn default() -> Self {
        TokenSlab { slots: Vec::new(), free: Vec::new(), live: 0 }
    }
}

fn token(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

impl<T> TokenSlab<T> {
    /// Holds `value` and returns its token.
    pub(super) fn insert(&mut self, value: T) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot { generation: 0, value: None });
                // Bounded by the frames in flight (see the module documentation).
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.value = Some(value);
        self.live += 1;
        token(index, slot.generation)
    }

    /// Takes back the value named by `token`; `None` for a token not (or no longer) held.
    pub(super) fn remove(&mut self, token: u64) -> Option<T> {
        let (index, generation) = ((token & u64::from(u32::MAX)) as u32, (token >> 32) as u32);
        let slot = self.slots.get_mut(index as usize).filter(|s| s.generation == generation)?;
        let value = slot.value.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.live -= 1;
        Some(value)
    }

    /// Values held.
    pub(super) fn len(&self) -> usize {
        self.live
    }

    /// True when nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_its_value_once() {
        let mut slab = TokenSlab::default();
        let a = slab.insert("a");
        let b = slab.insert("b");
        assert_ne!(a, b);
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.remove(a), Some("a"));
        assert_eq!(slab.remove(a), None, "taken already");
        let c = slab.insert("c");
        assert_ne!(c, a, "a reused slot has a new generation");
        assert_eq!(slab.remove(a), None, "the stale token does not find the new value");
        assert_eq!(slab.remove(u64::MAX), None, "an unknown token finds nothing");
        assert_eq!((slab.remove(b), slab.remove(c)), (Some("b"), Some("c")));
        assert!(slab.is_empty());
    }

    #[test]
    fn slots_are_reused_so_the_slab_stays_at_its_peak() {
        let mut slab = TokenSlab::default();
        for round in 0..1000 {
            let tokens: Vec<u64> = (0..8).map(|i| slab.insert(round * 8 + i)).collect();
            for (i, t) in tokens.into_iter().enumerate().rev() {
                assert_eq!(slab.remove(t), Some(round * 8 + i as u64));
            }
        }
        assert_eq!(slab.slots.len(), 8);
        assert!(slab.is_empty());
    }
}
