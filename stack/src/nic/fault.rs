//! Seeded fault injection for software links: loss, corruption, duplication, reordering, delay.
//!
//! A [`FaultInjector`] decides the fate of each frame handed to a link direction. It is driven by
//! its own small PRNG ([`Rng`], xoshiro256** seeded through splitmix64), so the same seed and the
//! same sequence of calls always give the same decisions.
//!
//! # Model
//!
//! For every frame, in this order:
//! 1. **loss**: with probability `loss` the frame is dropped; nothing else happens to it.
//! 2. **duplicate**: with probability `duplicate` a copy of the (still intact) frame is delivered
//!    as well, at the same time and right after the original.
//! 3. **corrupt**: with probability `corrupt` exactly one uniformly chosen bit of the original
//!    frame past its Ethernet header is flipped (frames of no more than a header cannot be
//!    corrupted and are not counted). This models damage the link's frame check sequence does
//!    not catch (in a router's or a NIC's memory, after the FCS was checked), which only the IP
//!    and TCP/UDP checksums can find: a real link drops a frame whose Ethernet header is
//!    damaged, so a flipped source MAC address never reaches a stack (it did here once, and a
//!    peer answered a SYN to the wrong address for a minute: the soak's lingering SYN-RECEIVED).
//! 4. **timing**: `deliver_at = now + delay + U[0, jitter]`. Jitter alone never reorders: a frame
//!    is never delivered before the frame sent before it (the time is clamped upwards), so the
//!    link stays FIFO unless `reorder` is set.
//! 5. **reorder**: with probability `reorder` the frame is held back by an extra `reorder_hold`
//!    and escapes the FIFO clamp, so every frame sent within `reorder_hold` after it overtakes it.
//!
//! Every frame draws the same number of random values whatever the configuration (unless the
//! configuration is [`FaultConfig::is_none`], which draws nothing), so changing one probability
//! does not reshuffle the decisions of the others.

use std::ops::Range;
use std::time::Duration;

use crate::nic::PacketBuf;
use crate::time::Instant;

/// Bytes of the Ethernet header, which corruption never touches (see the model above).
const ETHERNET_HEADER: usize = crate::wire::ethernet::HEADER_LEN;

/// Errors in a fault configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// A probability is not a number in `0.0..=1.0`.
    #[error("fault probability `{field}` = {value} is not within 0.0..=1.0")]
    InvalidProbability {
        /// Which field of [`FaultConfig`].
        field: &'static str,
        /// The rejected value.
        value: f64,
    },
}

/// Which faults a link direction injects. Probabilities are per frame; the default injects none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultConfig {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that a frame is held back by `reorder_hold` so later frames overtake it.
    pub reorder: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    /// Fixed one-way delay added to every frame.
    pub delay: Duration,
    /// Upper bound of the uniform extra delay added to every frame (FIFO order is kept).
    pub jitter: Duration,
    /// Extra delay of a reordered frame; frames sent within this time after it overtake it.
    pub reorder_hold: Duration,
}

/// Default hold of a reordered frame: long enough for a burst of small frames to overtake it.
pub const DEFAULT_REORDER_HOLD: Duration = Duration::from_micros(200);

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            loss: 0.0,
            reorder: 0.0,
            duplicate: 0.0,
            corrupt: 0.0,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder_hold: DEFAULT_REORDER_HOLD,
        }
    }
}

impl FaultConfig {
    /// True when no fault and no delay is configured: frames pass straight through.
    pub fn is_none(&self) -> bool {
        self.loss == 0.0
            && self.reorder == 0.0
            && self.duplicate == 0.0
            && self.corrupt == 0.0
            && self.delay.is_zero()
            && self.jitter.is_zero()
    }

    /// True when frames can be delivered out of the order they were sent.
    pub fn may_reorder(&self) -> bool {
        self.reorder > 0.0
    }

    /// Checks that every probability is within `0.0..=1.0`.
    pub fn validate(&self) -> Result<(), FaultError> {
        let fields = [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
            ("corrupt", self.corrupt),
        ];
        for (field, value) in fields {
            if !(0.0..=1.0).contains(&value) {
                return Err(FaultError::InvalidProbability { field, value });
            }
        }
        Ok(())
    }
}

/// A small, fast, seeded PRNG (xoshiro256**), for fault injection and reproducible tests.
///
/// Not cryptographically secure. The same seed always yields the same sequence.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is expanded from `seed` with splitmix64 (any seed, including 0).
    pub fn new(seed: u64) -> Self {
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform float in `[0.0, 1.0)` (53 random bits).
    pub fn gen_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (`p <= 0` never, `p >= 1` always).
    pub fn gen_bool(&mut self, p: f64) -> bool {
        self.gen_f64() < p
    }

    /// A uniform integer in `range` (unbiased); an empty range yields `range.start`.
    pub fn gen_range(&mut self, range: Range<u64>) -> u64 {
        let span = range.end.wrapping_sub(range.start);
        if range.end <= range.start {
            return range.start;
        }
        // Lemire's multiply-shift with rejection of the biased low zone.
        let threshold = span.wrapping_neg() % span;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(span);
            if (m as u64) >= threshold {
                return range.start + (m >> 64) as u64;
            }
        }
    }

    /// Fills `dest` with random bytes.
    pub fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

/// Counts of the faults an injector applied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames dropped (loss).
    pub dropped: u64,
    /// Frames with one bit flipped.
    pub corrupted: u64,
    /// Extra copies delivered.
    pub duplicated: u64,
    /// Frames held back so later frames overtake them.
    pub reordered: u64,
    /// Frames scheduled for delivery, copies included.
    pub delivered: u64,
}

/// What became of a frame handed to [`FaultInjector::apply`].
#[derive(Debug)]
pub enum Fate {
    /// Lost on the wire; the buffer is handed back so it can be recycled.
    Dropped(PacketBuf),
    /// To be delivered.
    Deliver {
        /// The frame (possibly with one bit flipped).
        frame: PacketBuf,
        /// When the receiver may see it.
        at: Instant,
        /// An intact copy, delivered at the same time right after `frame`.
        duplicate: Option<PacketBuf>,
    },
}

/// The fault decisions for one frame, before they are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// `None`: the frame is dropped. Otherwise when it is delivered.
    pub deliver_at: Option<Instant>,
    /// Index of the bit to flip (bit `i % 8` of byte `i / 8`, counted from the LSB).
    pub corrupt_bit: Option<usize>,
    /// Deliver a copy as well.
    pub duplicate: bool,
    /// The frame is held back by `reorder_hold`.
    pub reordered: bool,
}

/// Decides, per frame and deterministically from a seed, which faults a link direction applies.
#[derive(Debug, Clone)]
pub struct FaultInjector {
    config: FaultConfig,
    rng: Rng,
    stats: FaultStats,
    /// Latest delivery time of an in-order frame: later in-order frames are never earlier.
    fifo_floor: Instant,
    /// `config.is_none()`, computed once: a faultless link's per-frame path.
    faultless: bool,
}

impl FaultInjector {
    /// An injector applying `config`, with decisions drawn from `seed`.
    ///
    /// Probabilities outside `0.0..=1.0` behave as clamped; use [`FaultConfig::validate`] to reject
    /// them instead.
    pub fn new(config: FaultConfig, seed: u64) -> Self {
        FaultInjector {
            config,
            rng: Rng::new(seed),
            stats: FaultStats::default(),
            fifo_floor: Instant::ZERO,
            faultless: config.is_none(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FaultConfig {
        &self.config
    }

    /// Faults applied so far.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// On a faultless injector, the delivery time of a frame sent at `now` (counted as delivered,
    /// as [`decide`](Self::decide) would); `None` when the injector has faults to decide. A
    /// link's per-frame fast path: no decision to build, no frame to move through a [`Fate`].
    #[inline]
    pub fn pass_faultless(&mut self, now: Instant) -> Option<Instant> {
        self.pass_faultless_burst(now, 1)
    }

    /// [`pass_faultless`](Self::pass_faultless) for a burst of `frames` frames sent at `now`
    /// (all delivered at the same time).
    #[inline]
    pub fn pass_faultless_burst(&mut self, now: Instant, frames: usize) -> Option<Instant> {
        if !self.faultless {
            return None;
        }
        // Still clamp, so a caller whose `now` goes backwards cannot reorder frames.
        let at = now.max(self.fifo_floor);
        self.fifo_floor = at;
        self.stats.delivered += frames as u64;
        Some(at)
    }

    /// Decides the fate of a frame of `frame_len` bytes sent at `now`, and counts it.
    pub fn decide(&mut self, now: Instant, frame_len: usize) -> Decision {
        let cfg = self.config;
        if let Some(at) = self.pass_faultless(now) {
            return Decision { deliver_at: Some(at), corrupt_bit: None, duplicate: false, reordered: false };
        }
        // Draw a fixed set of values per frame so decisions stay aligned across configurations.
        let lose = self.rng.gen_bool(cfg.loss);
        let duplicate = self.rng.gen_bool(cfg.duplicate);
        let corrupt = self.rng.gen_bool(cfg.corrupt);
        let reordered = self.rng.gen_bool(cfg.reorder);
        let jitter_us = u64::try_from(cfg.jitter.as_micros()).unwrap_or(u64::MAX);
        let jitter = self.rng.gen_range(0..jitter_us.saturating_add(1));
        let past_header = frame_len.saturating_sub(ETHERNET_HEADER);
        let bits = u64::try_from(past_header).unwrap_or(u64::MAX).saturating_mul(8);
        let bit = self.rng.gen_range(0..bits).saturating_add(ETHERNET_HEADER as u64 * 8);

        if lose {
            self.stats.dropped += 1;
            return Decision { deliver_at: None, corrupt_bit: None, duplicate: false, reordered: false };
        }
        let corrupt_bit = if corrupt && bits > 0 { usize::try_from(bit).ok() } else { None };
        let mut at = now + cfg.delay + Duration::from_micros(jitter);
        if reordered {
            at += cfg.reorder_hold;
        } else {
            at = at.max(self.fifo_floor);
            self.fifo_floor = at;
        }
        self.stats.delivered += 1 + u64::from(duplicate);
        self.stats.duplicated += u64::from(duplicate);
        self.stats.corrupted += u64::from(corrupt_bit.is_some());
        self.stats.reordered += u64::from(reordered);
        Decision { deliver_at: Some(at), corrupt_bit, duplicate, reordered }
    }

    /// Decides the fate of `frame` sent at `now` and applies it (bit flip, copy).
    pub fn apply(&mut self, now: Instant, mut frame: PacketBuf) -> Fate {
        let decision = self.decide(now, frame.len());
        let Some(at) = decision.deliver_at else {
            return Fate::Dropped(frame);
        };
        let duplicate = decision.duplicate.then(|| frame.clone());
        if let Some(bit) = decision.corrupt_bit {
            flip_bit(frame.as_mut_slice(), bit);
        }
        Fate::Deliver { frame, at, duplicate }
    }
}

/// Flips bit `bit % 8` of byte `bit / 8`; out-of-range indices are ignored.
pub fn flip_bit(bytes: &mut [u8], bit: usize) {
    if let Some(b) = bytes.get_mut(bit / 8) {
        *b ^= 1 << (bit % 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u32) -> PacketBuf {
        let mut bytes = [0u8; 64];
        bytes[..4].copy_from_slice(&tag.to_be_bytes());
        PacketBuf::from_slice(&bytes)
    }

    fn tag(frame: &PacketBuf) -> u32 {
        let mut t = [0u8; 4];
        t.copy_from_slice(&frame.as_slice()[..4]);
        u32::from_be_bytes(t)
    }

    fn noisy() -> FaultConfig {
        FaultConfig {
            loss: 0.1,
            reorder: 0.1,
            duplicate: 0.1,
            corrupt: 0.1,
            delay: Duration::from_micros(50),
            jitter: Duration::from_micros(20),
            ..FaultConfig::default()
        }
    }

    #[test]
    fn rng_is_seeded_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let xs: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        for _ in 0..10_000 {
            let f = a.gen_f64();
            assert!((0.0..1.0).contains(&f));
            let r = a.gen_range(10..17);
            assert!((10..17).contains(&r));
        }
        assert_eq!(a.gen_range(5..5), 5);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            seen[(a.gen_range(0..7)) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn default_is_none_and_validates() {
        assert!(FaultConfig::default().is_none());
        assert!(!noisy().is_none());
        assert!(noisy().validate().is_ok());
        let bad = FaultConfig { corrupt: 1.5, ..FaultConfig::default() };
        assert_eq!(bad.validate(), Err(FaultError::InvalidProbability { field: "corrupt", value: 1.5 }));
        let nan = FaultConfig { loss: f64::NAN, ..FaultConfig::default() };
        assert!(nan.validate().is_err());
    }

    #[test]
    fn same_seed_same_decisions() {
        let run = |seed| {
            let mut inj = FaultInjector::new(noisy(), seed);
            (0..500u64)
                .map(|i| inj.decide(Instant::from_micros(i * 10), 100 + i as usize))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn no_faults_pass_through_at_now() {
        let mut inj = FaultInjector::new(FaultConfig::default(), 1);
        let now = Instant::from_millis(3);
        match inj.apply(now, frame(9)) {
            Fate::Deliver { frame, at, duplicate } => {
                assert_eq!(at, now);
                assert_eq!(tag(&frame), 9);
                assert!(duplicate.is_none());
            }
            Fate::Dropped(_) => panic!("dropped without loss"),
        }
        assert_eq!(inj.stats(), FaultStats { delivered: 1, ..FaultStats::default() });
    }

    #[test]
    fn full_loss_delivers_nothing() {
        let cfg = FaultConfig { loss: 1.0, duplicate: 1.0, ..FaultConfig::default() };
        let mut inj = FaultInjector::new(cfg, 5);
        for i in 0..100 {
            assert!(matches!(inj.apply(Instant::ZERO, frame(i)), Fate::Dropped(_)));
        }
        assert_eq!(inj.stats(), FaultStats { dropped: 100, ..FaultStats::default() });
    }

    #[test]
    fn full_duplication_doubles() {
        let cfg = FaultConfig { duplicate: 1.0, ..FaultConfig::default() };
        let mut inj = FaultInjector::new(cfg, 5);
        let mut delivered = 0;
        for i in 0..50 {
            match inj.apply(Instant::ZERO, frame(i)) {
                Fate::Deliver { frame, duplicate: Some(copy), .. } => {
                    assert_eq!(frame.as_slice(), copy.as_slice());
                    delivered += 2;
                }
                other => panic!("expected a duplicate, got {other:?}"),
            }
        }
        assert_eq!(delivered, 100);
        let s = inj.stats();
        assert_eq!((s.duplicated, s.delivered), (50, 100));
    }

    #[test]
    fn corruption_flips_exactly_one_bit() {
        let cfg = FaultConfig { corrupt: 1.0, ..FaultConfig::default() };
        let mut inj = FaultInjector::new(cfg, 11);
        let mut rng = Rng::new(3);
        let mut positions = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut bytes = vec![0u8; ETHERNET_HEADER + 1 + rng.gen_range(0..300) as usize];
            rng.fill_bytes(&mut bytes);
            let Fate::Deliver { frame, .. } = inj.apply(Instant::ZERO, PacketBuf::from_slice(&bytes)) else {
                panic!("dropped without loss");
            };
            let diff: u32 = bytes.iter().zip(frame.as_slice()).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(diff, 1);
            assert_eq!(frame.len(), bytes.len());
            let pos = bytes.iter().zip(frame.as_slice()).position(|(a, b)| a != b);
            assert!(pos.is_some_and(|p| p >= ETHERNET_HEADER), "the Ethernet header stays whole");
            positions.insert(pos);
        }
        assert!(positions.len() > 20, "bit flips should land all over the packet");
        assert_eq!(inj.stats().corrupted, 200);
        // An empty frame, or one of nothing but a header, cannot be corrupted.
        let before = inj.stats().corrupted;
        assert!(matches!(inj.apply(Instant::ZERO, PacketBuf::new_tx()), Fate::Deliver { .. }));
        let header = PacketBuf::from_slice(&[0xa5; ETHERNET_HEADER]);
        let Fate::Deliver { frame, .. } = inj.apply(Instant::ZERO, header) else {
            panic!("dropped without loss")
        };
        assert_eq!(frame.as_slice(), &[0xa5; ETHERNET_HEADER]);
        assert_eq!(inj.stats().corrupted, before);
    }

    #[test]
    fn reorder_lets_later_frames_overtake() {
        let cfg = FaultConfig { reorder: 0.2, ..FaultConfig::default() };
        let mut inj = FaultInjector::new(cfg, 2024);
        // A burst of 100 frames sent 1 us apart; deliver in (time, send order).
        let mut arrivals = Vec::new();
        for i in 0..100u32 {
            if let Fate::Deliver { frame, at, .. } = inj.apply(Instant::from_micros(i.into()), frame(i)) {
                arrivals.push((at, i, tag(&frame)));
            }
        }
        arrivals.sort();
        let order: Vec<u32> = arrivals.iter().map(|a| a.2).collect();
        let inversions = order.windows(2).filter(|w| w[0] > w[1]).count();
        assert!(inj.stats().reordered > 0);
        assert!(inversions > 0, "reordering should be visible: {order:?}");
        assert_eq!(order.len(), 100);
    }

    #[test]
    fn jitter_alone_keeps_fifo_order() {
        let cfg = FaultConfig { jitter: Duration::from_micros(500), ..FaultConfig::default() };
        let mut inj = FaultInjector::new(cfg, 9);
        let mut last = Instant::ZERO;
        let mut spread = std::collections::HashSet::new();
        for i in 0..200u64 {
            let d = inj.decide(Instant::from_micros(i * 100), 60);
            let at = d.deliver_at.expect("no loss configured");
            assert!(at >= last);
            assert!(at <= Instant::from_micros(i * 100 + 500) || at == last);
            spread.insert(at.total_micros() - i * 100);
            last = at;
        }
        assert!(spread.len() > 10, "jitter should vary the delay");
        assert_eq!(inj.stats().reordered, 0);
    }

    #[test]
    fn delay_sets_delivery_time() {
        let cfg = FaultConfig { delay: Duration::from_millis(2), ..FaultConfig::default() };
        let mut inj = FaultInjector::new(cfg, 1);
        let d = inj.decide(Instant::from_millis(5), 60);
        assert_eq!(d.deliver_at, Some(Instant::from_millis(7)));
    }
}
