//! Retransmission timeout estimation per RFC 6298, with Karn's rule left to the caller
//! (only segments never retransmitted are sampled) and exponential backoff.

use std::time::Duration;

/// Clock granularity G of RFC 6298 (our clock is microseconds; 1 ms keeps RTO sane).
const GRANULARITY: Duration = Duration::from_millis(1);

/// Smoothed RTT state and the current RTO.
#[derive(Debug, Clone)]
pub struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min: Duration,
    max: Duration,
}

impl RttEstimator {
    /// A fresh estimator: RTO = `initial` until the first sample.
    pub fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        RttEstimator { srtt: None, rttvar: Duration::ZERO, rto: initial.clamp(min, max), min, max }
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// The smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// How long an ACK for a segment sent now may take before it counts as lost: RFC 6298's
    /// SRTT + max(G, 4 RTTVAR), without the RTO's floor and backoff (fast recovery uses it to
    /// see a lost retransmission; the RTO itself keeps its floor). `None` before any sample.
    pub fn loss_delay(&self) -> Option<Duration> {
        self.srtt.map(|srtt| srtt + GRANULARITY.max(self.rttvar * 4))
    }

    /// Feeds one RTT measurement (RFC 6298 section 2.2 and 2.3).
    pub fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(r);
                // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|; SRTT = 7/8 SRTT + 1/8 R
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + r) / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        let rto = srtt + GRANULARITY.max(self.rttvar * 4);
        self.rto = rto.clamp(self.min, self.max);
    }

    /// Undoes the backoff once the peer acknowledges new data, as BSD does (`t_rxtshift = 0`):
    /// without timestamps, Karn's rule may keep a new sample from coming for a long time (all
    /// that is acknowledged was retransmitted), and the doubled RTO would stall every later
    /// loss. Before any sample, the RTO stays as it is.
    pub fn reset_backoff(&mut self) {
        if let Some(srtt) = self.srtt {
            self.rto = (srtt + GRANULARITY.max(self.rttvar * 4)).clamp(self.min, self.max);
        }
    }

    /// Doubles the RTO after a timeout (RFC 6298 section 5.5), up to the maximum.
    pub fn backoff(&mut self) {
        self.rto = (self.rto * 2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
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
    fn minimum_applies() {
        let mut e = RttEstimator::new(ms(1000), ms(200), ms(60_000));
        e.sample(Duration::from_micros(10));
        assert_eq!(e.rto(), ms(200));
    }
}
