//! Retransmission timeout estimation per RFC 6298, with Karn's rule left to the caller
//! (only segments never retransmitted are sampled) and exponential backoff.

use std::time::Duration;

use super::SeqNumber;
use crate::time::Instant;

/// Clock granularity G of RFC 6298, in microseconds (our clock's unit; 1 ms keeps RTO sane).
const GRANULARITY_US: u64 = 1_000;

/// Smoothed RTT state and the current RTO, in microseconds held in 32 bits (a connection's
/// state stays small; 71 minutes is far above any RTO a caller may configure, and longer
/// durations saturate there).
#[derive(Debug, Clone)]
pub struct RttEstimator {
    /// Valid once `sampled`.
    srtt: u32,
    rttvar: u32,
    rto: u32,
    min: u32,
    max: u32,
    sampled: bool,
}

/// The segment being timed for the next RTT sample: where it ends and when it was sent (Karn's
/// rule: it is forgotten when anything it covers is sent again). Packed to 4-byte alignment,
/// so that it sits among a connection's 32-bit fields: 12 bytes instead of 16, `Option`
/// included (the instant's niche).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct RttProbe {
    /// The sequence number just past the segment.
    pub end: SeqNumber,
    /// When it was sent.
    pub sent: Instant,
}

/// `d` in microseconds, saturating at `u32::MAX`.
fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// `us` microseconds, saturated to 32 bits, as a duration.
fn duration(us: u64) -> Duration {
    Duration::from_micros(us.min(u64::from(u32::MAX)))
}

impl RttEstimator {
    /// A fresh estimator: RTO = `initial` until the first sample.
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        let (min, max) = (micros(min), micros(max));
        RttEstimator {
            srtt: 0,
            rttvar: 0,
            rto: micros(initial).clamp(min, max.max(min)),
            min,
            max,
            sampled: false,
        }
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        duration(u64::from(self.rto))
    }

    /// The smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.sampled.then(|| duration(u64::from(self.srtt)))
    }

    /// SRTT + max(G, 4 RTTVAR) in microseconds (RFC 6298 section 2.3, before the clamp).
    fn raw_rto(&self) -> u64 {
        u64::from(self.srtt) + GRANULARITY_US.max(u64::from(self.rttvar) * 4)
    }

    /// How long an ACK for a segment sent now may take before it counts as lost: RFC 6298's
    /// SRTT + max(G, 4 RTTVAR), without the RTO's floor and backoff (fast recovery uses it to
    /// see a lost retransmission; the RTO itself keeps its floor). `None` before any sample.
    pub fn loss_delay(&self) -> Option<Duration> {
        self.sampled.then(|| duration(self.raw_rto()))
    }

    /// Feeds one RTT measurement (RFC 6298 section 2.2 and 2.3).
    pub fn sample(&mut self, r: Duration) {
        let r = u64::from(micros(r));
        if self.sampled {
            let srtt = u64::from(self.srtt);
            let delta = srtt.abs_diff(r);
            // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|; SRTT = 7/8 SRTT + 1/8 R
            self.rttvar = saturate((u64::from(self.rttvar) * 3 + delta) / 4);
            self.srtt = saturate((srtt * 7 + r) / 8);
        } else {
            self.srtt = saturate(r);
            self.rttvar = saturate(r / 2);
            self.sampled = true;
        }
        self.rto = self.clamped(self.raw_rto());
    }

    /// `us` within the configured bounds.
    fn clamped(&self, us: u64) -> u32 {
        saturate(us.clamp(u64::from(self.min), u64::from(self.max.max(self.min))))
    }

    /// Undoes the backoff once the peer acknowledges new data, as BSD does (`t_rxtshift = 0`):
    /// without timestamps, Karn's rule may keep a new sample from coming for a long time (all
    /// that is acknowledged was retransmitted), and the doubled RTO would stall every later
    /// loss. Before any sample, the RTO stays as it is.
    pub fn reset_backoff(&mut self) {
        if self.sampled {
            self.rto = self.clamped(self.raw_rto());
        }
    }

    /// Doubles the RTO after a timeout (RFC 6298 section 5.5), up to the maximum.
    pub fn backoff(&mut self) {
        self.rto = saturate((u64::from(self.rto) * 2).min(u64::from(self.max)));
    }
}

/// A microsecond count that fits 32 bits, or the largest that does.
fn saturate(us: u64) -> u32 {
    u32::try_from(us).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn a_probe_takes_twelve_bytes_none_included() {
        assert_eq!(std::mem::size_of::<Option<RttProbe>>(), 12);
        assert_eq!(std::mem::align_of::<Option<RttProbe>>(), 4);
        let probe = RttProbe { end: SeqNumber(7), sent: Instant::from_micros(9) };
        assert_eq!(Some(probe).map(|p| (p.end, p.sent)), Some((SeqNumber(7), Instant::from_micros(9))));
    }

    #[test]
    fn first_sample_sets_srtt_and_rto() {
        let mut e = RttEstimator::new(ms(1000), ms(1), ms(60_000));
        assert_eq!(e.rto(), ms(1000));
        e.sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        // RTO = SRTT + 4 * RTTVAR = 100 + 4 * 50
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn later_samples_smooth() {
        let mut e = RttEstimator::new(ms(1000), ms(1), ms(60_000));
        e.sample(ms(100));
        e.sample(ms(200));
        // RTTVAR = 3/4*50 + 1/4*100 = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rto(), Duration::from_micros(112_500 + 250_000));
    }

    #[test]
    fn backoff_doubles_and_clamps() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(3000));
        e.backoff();
        assert_eq!(e.rto(), ms(2000));
        e.backoff();
        assert_eq!(e.rto(), ms(3000));
    }

    #[test]
    fn an_rto_beyond_32_bits_of_microseconds_saturates() {
        let mut e = RttEstimator::new(Duration::from_secs(10_000), ms(200), Duration::from_secs(100_000));
        assert_eq!(e.rto(), Duration::from_micros(u64::from(u32::MAX)));
        e.backoff();
        assert_eq!(e.rto(), Duration::from_micros(u64::from(u32::MAX)));
        e.sample(Duration::from_secs(100_000));
        assert!(e.srtt().is_some_and(|s| s <= Duration::from_micros(u64::from(u32::MAX))));
    }

    #[test]
    fn minimum_applies() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(60_000));
        e.sample(Duration::from_micros(10));
        assert_eq!(e.rto(), ms(200));
    }
}
