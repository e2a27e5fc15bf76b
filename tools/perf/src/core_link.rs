//! How fast two cores pass data to each other right now, measured without the stack: the
//! yardstick beside the benchmarks whose two ends run on two cores (the paper's method over memif,
//! the two-core runtime).
//!
//! On a VM the host decides where the two vCPUs run, and it moves them: on this project's 2-vCPU
//! machine the same two threads see a cache line go to the other and back in ~100 ns or in
//! ~430 ns, and a plain ring of frames moves 55-220 Gb/s or 11-20 Gb/s, from one run to the next
//! (see `docs/benchmarks.md`, "The machine's placements"). A benchmark figure means little
//! without the state of the machine it ran on; the benchmarks record this probe around their runs.
//!
//! Two measurements, each on two threads pinned to the two cores:
//! - **round trip**: one thread stores a counter, the other sees it and stores it back (one cache
//!   line each way); the median of several batches;
//! - **ring**: one thread copies frames into buffers taken from a free queue and passes them on;
//!   the other copies each one out, checks it is the frame it expects and gives the buffer back
//!   (the two copies and two queue operations of a shared-memory NIC ring such as memif's).

use std::hint::spin_loop;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use slimtcp::cpu::{pin_current_thread, CpuError};

/// What can stop a probe.
#[derive(Debug, thiserror::Error)]
pub enum CoreLinkError {
    /// A thread could not be pinned to its core.
    #[error("cannot pin a probe thread to core {core}")]
    Pin {
        /// The core.
        core: usize,
        /// Why.
        #[source]
        source: CpuError,
    },
    /// A probe thread panicked.
    #[error("a probe thread panicked")]
    ThreadPanicked,
    /// The consumer got a frame other than the next one (the ring lost or reordered a frame).
    #[error("ring frame {got} arrived where frame {expected} was due")]
    Reordered {
        /// The frame due.
        expected: u64,
        /// The frame that came.
        got: u64,
    },
    /// Both sides were given the same core (each would spin through the other's time slice).
    #[error("the probe needs two different cores (got core {0} twice)")]
    SameCore(usize),
    /// The settings cannot measure anything.
    #[error("the probe needs at least one batch of round trips, ring slots and a frame of 8 to {max} bytes", max = RING_BUFFER)]
    Settings,
}

/// Bytes of each ring buffer (a memif or DPDK mbuf data room).
pub const RING_BUFFER: usize = 2048;

/// How much a probe measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSettings {
    /// Round trips per batch.
    pub round_trips: u32,
    /// Batches of round trips (the median is reported).
    pub batches: u32,
    /// How long the ring is driven.
    pub ring_time: Duration,
    /// Bytes copied per frame.
    pub frame: usize,
    /// Buffers in the ring.
    pub slots: usize,
}

impl Default for ProbeSettings {
    /// About half a second: 5 x 100,000 round trips, the ring for 0.2 s with MSS-1460 frames
    /// (1514 bytes) in 1,024 slots (memif's default ring).
    fn default() -> Self {
        ProbeSettings {
            round_trips: 100_000,
            batches: 5,
            ring_time: Duration::from_millis(200),
            frame: 1514,
            slots: 1024,
        }
    }
}

/// One probe's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreLink {
    /// The two cores.
    pub cores: (usize, usize),
    /// Median time for a cache line to go to the other core and back, in ns.
    pub round_trip_ns: f64,
    /// Frame bytes the ring moved from the first core to the second, in Gb/s.
    pub ring_gbps: f64,
    /// Frames the ring moved (every one checked).
    pub ring_frames: u64,
}

/// Measures the link between cores `a` and `b` (see the module documentation).
pub fn probe(a: usize, b: usize, settings: &ProbeSettings) -> Result<CoreLink, CoreLinkError> {
    if settings.slots == 0 || !(8..=RING_BUFFER).contains(&settings.frame) {
        return Err(CoreLinkError::Settings);
    }
    let round_trip_ns = round_trip_only(a, b, settings)?;
    let (ring_gbps, ring_frames) = ring(a, b, settings)?;
    Ok(CoreLink { cores: (a, b), round_trip_ns, ring_gbps, ring_frames })
}

/// Only the round trip of [`probe`] (ns): for benches that probe before every run.
pub fn round_trip_only(a: usize, b: usize, settings: &ProbeSettings) -> Result<f64, CoreLinkError> {
    if settings.round_trips == 0 || settings.batches == 0 {
        return Err(CoreLinkError::Settings);
    }
    if a == b {
        return Err(CoreLinkError::SameCore(a));
    }
    round_trip(a, b, settings)
}

/// A counter alone on its cache line (the two sides' counters never share one).
#[repr(align(128))]
#[derive(Default)]
struct Line(AtomicU64);

/// Spins until `line` holds `value`.
fn wait_for(line: &Line, value: u64) {
    while line.0.load(Ordering::Acquire) != value {
        spin_loop();
    }
}

fn pin(core: usize) -> Result<(), CoreLinkError> {
    pin_current_thread(core).map_err(|source| CoreLinkError::Pin { core, source })
}

/// Runs `first` on a thread pinned to `a` and `second` on one pinned to `b`, at the same time
/// (the caller's own thread keeps its affinity). Both start only once both are pinned; if either
/// cannot be pinned, neither runs its work.
fn on_two_cores<R>(
    a: usize,
    b: usize,
    first: impl FnOnce() -> Result<R, CoreLinkError> + Send,
    second: impl FnOnce() -> Result<(), CoreLinkError> + Send,
) -> Result<R, CoreLinkError>
where
    R: Send,
{
    let start = Barrier::new(2);
    let pinned = [AtomicBool::new(false), AtomicBool::new(false)];
    // Pins this thread to `core`, waits for the other side: Ok(true) when both are pinned.
    let side = |core: usize, me: usize| -> Result<bool, CoreLinkError> {
        let result = pin(core);
        pinned[me].store(result.is_ok(), Ordering::Release);
        start.wait();
        result?;
        Ok(pinned[1 - me].load(Ordering::Acquire))
    };
    std::thread::scope(|s| {
        let one = s.spawn(|| side(a, 0).and_then(|both| if both { first().map(Some) } else { Ok(None) }));
        let two = s.spawn(|| if side(b, 1)? { second() } else { Ok(()) });
        let one = one.join().map_err(|_| CoreLinkError::ThreadPanicked)?;
        two.join().map_err(|_| CoreLinkError::ThreadPanicked)??;
        // Neither side failed to pin (that error would have returned above), so `first` ran.
        one?.ok_or(CoreLinkError::ThreadPanicked)
    })
}

fn round_trip(a: usize, b: usize, settings: &ProbeSettings) -> Result<f64, CoreLinkError> {
    let ping = Line::default();
    let pong = Line::default();
    let total = u64::from(settings.round_trips) * u64::from(settings.batches);
    let mut batches = on_two_cores(
        a,
        b,
        || {
            let mut ns = Vec::with_capacity(settings.batches as usize);
            let mut n = 0u64;
            for _ in 0..settings.batches {
                let t0 = Instant::now();
                for _ in 0..settings.round_trips {
                    n += 1;
                    ping.0.store(n, Ordering::Release);
                    wait_for(&pong, n);
                }
                ns.push(t0.elapsed().as_nanos() as f64 / f64::from(settings.round_trips));
            }
            Ok(ns)
        },
        || {
            for n in 1..=total {
                wait_for(&ping, n);
                pong.0.store(n, Ordering::Release);
            }
            Ok(())
        },
    )?;
    batches.sort_by(f64::total_cmp);
    Ok(batches[batches.len() / 2])
}

/// (Gb/s of frame bytes, frames) of the ring between `a` (producer) and `b` (consumer).
fn ring(a: usize, b: usize, settings: &ProbeSettings) -> Result<(f64, u64), CoreLinkError> {
    let free: ArrayQueue<Box<[u8]>> = ArrayQueue::new(settings.slots);
    let full: ArrayQueue<Box<[u8]>> = ArrayQueue::new(settings.slots);
    for _ in 0..settings.slots {
        // Never full: as many buffers as slots.
        let _ = free.push(vec![0u8; RING_BUFFER].into_boxed_slice());
    }
    // Set by the producer when it stops, by the consumer when it gives up (so the producer never
    // waits for buffers that will not come back).
    let done = AtomicBool::new(false);
    let gave_up = AtomicBool::new(false);
    let frame = settings.frame;
    let produced = on_two_cores(
        a,
        b,
        || {
            let mut source = vec![0u8; frame];
            source.iter_mut().enumerate().for_each(|(i, byte)| *byte = i as u8);
            let t0 = Instant::now();
            let mut sent = 0u64;
            'run: while t0.elapsed() < settings.ring_time {
                // A burst between clock reads, as a NIC's transmit loop would.
                for _ in 0..32 {
                    let mut buf = loop {
                        match free.pop() {
                            Some(buf) => break buf,
                            None if gave_up.load(Ordering::Acquire) => break 'run,
                            None => spin_loop(),
                        }
                    };
                    source[..8].copy_from_slice(&sent.to_le_bytes());
                    buf[..frame].copy_from_slice(&source);
                    // Never full: at most `slots` buffers exist.
                    let _ = full.push(buf);
                    sent += 1;
                }
            }
            let elapsed = t0.elapsed();
            done.store(true, Ordering::Release);
            Ok((sent, elapsed))
        },
        || {
            let mut sink = vec![0u8; frame];
            let mut expected = 0u64;
            loop {
                let Some(buf) = full.pop() else {
                    if done.load(Ordering::Acquire) && full.is_empty() {
                        return Ok(());
                    }
                    spin_loop();
                    continue;
                };
                sink.copy_from_slice(&buf[..frame]);
                let mut seq = [0u8; 8];
                seq.copy_from_slice(&std::hint::black_box(&sink)[..8]);
                let got = u64::from_le_bytes(seq);
                if got != expected {
                    gave_up.store(true, Ordering::Release);
                    return Err(CoreLinkError::Reordered { expected, got });
                }
                expected += 1;
                let _ = free.push(buf);
            }
        },
    )?;
    let (frames, elapsed) = produced;
    let gbps = (frames * frame as u64 * 8) as f64 / elapsed.as_secs_f64() / 1e9;
    Ok((gbps, frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short() -> ProbeSettings {
        ProbeSettings {
            round_trips: 2_000,
            batches: 3,
            ring_time: Duration::from_millis(20),
            ..Default::default()
        }
    }

    /// The cores this process may run on (the probe's two, or one core twice).
    fn two_cores() -> (usize, usize) {
        let allowed = slimtcp::cpu::current_affinity().expect("affinity");
        let mut cores = (0..libc::CPU_SETSIZE as usize).filter(|&c| allowed.contains(c));
        let a = cores.next().expect("a core");
        (a, cores.next().unwrap_or(a))
    }

    #[test]
    fn the_ring_delivers_every_frame_in_order_and_the_round_trip_is_measured() {
        let (a, b) = two_cores();
        if a == b {
            eprintln!("one core only: the probe needs two (nothing measured)");
            return;
        }
        let link = probe(a, b, &short()).expect("probe");
        assert_eq!(link.cores, (a, b));
        assert!(link.ring_frames > 0, "{link:?}");
        assert!(link.round_trip_ns > 0.0 && link.ring_gbps > 0.0, "{link:?}");
    }

    #[test]
    fn a_core_that_cannot_be_pinned_is_an_error_and_nothing_waits_for_it() {
        let (a, _) = two_cores();
        let past = libc::CPU_SETSIZE as usize;
        assert!(matches!(probe(a, past, &short()), Err(CoreLinkError::Pin { core, .. }) if core == past));
        assert!(matches!(probe(past, a, &short()), Err(CoreLinkError::Pin { core, .. }) if core == past));
    }

    #[test]
    fn one_core_twice_is_refused() {
        let (a, _) = two_cores();
        assert!(matches!(probe(a, a, &short()), Err(CoreLinkError::SameCore(core)) if core == a));
    }

    #[test]
    fn settings_that_measure_nothing_are_refused() {
        let (a, b) = two_cores();
        for bad in [
            ProbeSettings { round_trips: 0, ..short() },
            ProbeSettings { batches: 0, ..short() },
            ProbeSettings { slots: 0, ..short() },
            ProbeSettings { frame: 4, ..short() },
            ProbeSettings { frame: RING_BUFFER + 1, ..short() },
        ] {
            assert!(matches!(probe(a, b, &bad), Err(CoreLinkError::Settings)), "{bad:?}");
        }
    }
}
