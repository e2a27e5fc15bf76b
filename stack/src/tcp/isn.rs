//! Initial sequence numbers per RFC 6528: ISN = M + F(4-tuple, secret), where M is a 4-microsecond
//! clock and F a keyed hash (SipHash with a per-process random key).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::SocketAddrV4;

use super::SeqNumber;
use crate::time::Instant;

/// Generates initial sequence numbers that are unpredictable to off-path attackers.
#[derive(Debug, Clone, Default)]
pub struct IsnGenerator {
    secret: RandomState,
}

impl IsnGenerator {
    /// A generator with a fresh random secret.
    pub fn new() -> Self {
        Self::default()
    }

    /// The ISN for a connection between `local` and `remote` at time `now`.
    pub fn isn(&self, local: SocketAddrV4, remote: SocketAddrV4, now: Instant) -> SeqNumber {
        let f = self.secret.hash_one((local, remote)) as u32;
        let m = (now.total_micros() / 4) as u32;
        SeqNumber(m.wrapping_add(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differs_per_tuple_and_advances_with_time() {
        let g = IsnGenerator::new();
        let a: SocketAddrV4 = "10.0.0.1:1000".parse().expect("addr");
        let b: SocketAddrV4 = "10.0.0.2:80".parse().expect("addr");
        let c: SocketAddrV4 = "10.0.0.2:81".parse().expect("addr");
        let t0 = Instant::from_millis(0);
        assert_ne!(g.isn(a, b, t0), g.isn(a, c, t0));
        let later = g.isn(a, b, Instant::from_micros(400));
        assert_eq!(later.diff(g.isn(a, b, t0)), 100);
    }
}
