//! The workloads, written once against [`Pair`]: bulk transfer A -> B, 64-byte round trips, and
//! a fixed number of segments (the callgrind measurement).

use std::time::{Duration, Instant};

use slimtcp::nic::fault::Rng;

use super::{Pair, PeerError, Side};

/// Length of the repeating byte pattern of a bulk stream (a prime, so it never lines up with
/// segment or buffer sizes).
const PERIOD: usize = 65_521;
/// Bytes per application read.
const READ_CHUNK: usize = 64 * 1024;
/// Steps without any byte received before a transfer counts as stalled.
const STALL_STEPS: u64 = 1_000_000;
/// Steps between two looks at the clock in a timed run.
const CLOCK_EVERY: u64 = 64;
/// Payload bytes of one round-trip message.
pub const RTT_BYTES: usize = 64;

/// The stream's bytes: `pattern()[offset % PERIOD ..]` holds the bytes from stream `offset` on,
/// for at least `PERIOD` bytes.
fn pattern() -> Vec<u8> {
    let mut one = vec![0u8; PERIOD];
    Rng::new(0x9e37_79b9).fill_bytes(&mut one);
    [one.as_slice(), one.as_slice()].concat()
}

/// How a bulk transfer ends.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// After this long (checked every few steps).
    Elapsed(Duration),
    /// Once this many bytes arrived.
    Bytes(u64),
}

/// What a bulk transfer measured (after the connection was up).
#[derive(Debug, Clone)]
pub struct Bulk {
    /// The stack.
    pub stack: &'static str,
    /// Segment size.
    pub mss: u16,
    /// Payload bytes B received (and checked, when `verified`).
    pub bytes: u64,
    /// Wall-clock time of the transfer.
    pub elapsed: Duration,
    /// Frames A sent (data segments) and B sent (ACKs, window updates) during the transfer.
    pub frames_a_to_b: u64,
    /// See `frames_a_to_b`.
    pub frames_b_to_a: u64,
    /// Whether every received byte was compared with the byte sent.
    pub verified: bool,
}

impl Bulk {
    /// Payload bits per second.
    pub fn goodput_bps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64()
    }

    /// Full segments per second (payload bytes / MSS per second, as `slimtcp-perf` counts).
    pub fn segments_per_s(&self) -> f64 {
        self.bytes as f64 / f64::from(self.mss) / self.elapsed.as_secs_f64()
    }
}

/// Connects a pair of `P` with `mss` and sends A -> B until `until`; with `verify`, compares
/// every received byte with the pattern sent.
pub fn bulk<P: Pair>(mss: u16, until: Until, verify: bool) -> Result<Bulk, PeerError> {
    let mut pair = P::connect(mss)?;
    let pat = pattern();
    let mut buf = vec![0u8; READ_CHUNK];
    let (frames_ab0, frames_ba0) = pair.frames();
    let (mut sent, mut received) = (0u64, 0u64);
    let (mut steps, mut idle) = (0u64, 0u64);
    let limit = match until {
        Until::Bytes(total) => total,
        Until::Elapsed(_) => u64::MAX,
    };
    let start = Instant::now();
    loop {
        if received >= limit {
            break;
        }
        while sent < limit {
            let off = (sent % PERIOD as u64) as usize;
            let len = usize::try_from((limit - sent).min(PERIOD as u64)).unwrap_or(PERIOD);
            let n = pair.send(Side::A, &pat[off..off + len])?;
            sent += n as u64;
            if n < len {
                break;
            }
        }
        pair.step()?;
        let before = received;
        loop {
            let n = pair.recv(Side::B, &mut buf)?;
            if n == 0 {
                break;
            }
            if verify {
                check(&pat, received, &buf[..n])?;
            }
            received += n as u64;
        }
        steps += 1;
        idle = if received == before { idle + 1 } else { 0 };
        if idle > STALL_STEPS {
            return Err(PeerError::Stalled { steps: idle, received, expected: limit.min(sent) });
        }
        if let Until::Elapsed(d) = until {
            if steps % CLOCK_EVERY == 0 && start.elapsed() >= d {
                break;
            }
        }
    }
    let elapsed = start.elapsed();
    let (frames_ab, frames_ba) = pair.frames();
    Ok(Bulk {
        stack: P::NAME,
        mss,
        bytes: received,
        elapsed,
        frames_a_to_b: frames_ab - frames_ab0,
        frames_b_to_a: frames_ba - frames_ba0,
        verified: verify,
    })
}

/// Compares `got`, which starts at stream offset `at`, with the pattern.
fn check(pat: &[u8], at: u64, got: &[u8]) -> Result<(), PeerError> {
    let mut done = 0;
    while done < got.len() {
        let pos = at + done as u64;
        let off = (pos % PERIOD as u64) as usize;
        let take = (got.len() - done).min(PERIOD);
        let (want, have) = (&pat[off..off + take], &got[done..done + take]);
        if want != have {
            let first = want.iter().zip(have).position(|(w, h)| w != h).unwrap_or(0);
            return Err(PeerError::Corrupt { offset: pos + first as u64 });
        }
        done += take;
    }
    Ok(())
}

/// What a round-trip run measured.
#[derive(Debug, Clone)]
pub struct RoundTrips {
    /// One time per measured round trip, in order.
    pub rtts: Vec<Duration>,
    /// Frames on the link per measured round trip (both directions: data, echo, pure ACKs).
    pub frames_per_round_trip: f64,
}

/// Round-trip times of `count` 64-byte messages A -> B -> A (after `warmup` unmeasured ones),
/// each echo checked against its message.
pub fn round_trips<P: Pair>(mss: u16, warmup: usize, count: usize) -> Result<RoundTrips, PeerError> {
    let mut pair = P::connect(mss)?;
    let mut rtts = Vec::with_capacity(count);
    let mut frames_at_warmup = (0, 0);
    let mut at_b = [0u8; RTT_BYTES];
    let mut at_a = [0u8; RTT_BYTES];
    for i in 0..warmup + count {
        let msg = [(i % 251) as u8; RTT_BYTES];
        if i == warmup {
            frames_at_warmup = pair.frames();
        }
        let start = Instant::now();
        if pair.send(Side::A, &msg)? != RTT_BYTES {
            return Err(PeerError::Stack { stack: P::NAME, what: "a 64-byte send was cut short".into() });
        }
        exchange(&mut pair, Side::B, &mut at_b)?;
        if pair.send(Side::B, &at_b)? != RTT_BYTES {
            return Err(PeerError::Stack { stack: P::NAME, what: "a 64-byte echo was cut short".into() });
        }
        exchange(&mut pair, Side::A, &mut at_a)?;
        let rtt = start.elapsed();
        if at_a != msg {
            return Err(PeerError::Corrupt { offset: (i * RTT_BYTES) as u64 });
        }
        if i >= warmup {
            rtts.push(rtt);
        }
    }
    let (ab, ba) = pair.frames();
    let frames = (ab - frames_at_warmup.0) + (ba - frames_at_warmup.1);
    Ok(RoundTrips { rtts, frames_per_round_trip: frames as f64 / count.max(1) as f64 })
}

/// Steps until `side` has read `buf.len()` bytes into `buf`.
fn exchange<P: Pair>(pair: &mut P, side: Side, buf: &mut [u8]) -> Result<(), PeerError> {
    let mut got = 0;
    let mut idle = 0u64;
    while got < buf.len() {
        pair.step()?;
        let n = pair.recv(side, &mut buf[got..])?;
        got += n;
        idle = if n == 0 { idle + 1 } else { 0 };
        if idle > STALL_STEPS {
            return Err(PeerError::Stalled { steps: idle, received: got as u64, expected: buf.len() as u64 });
        }
    }
    Ok(())
}

/// The value below which `p` percent of the sorted `v` lie.
pub fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}
