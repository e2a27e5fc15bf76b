//! Hostile chains inside a tenant that carries data: queue pair 1 of tenant B's device (the same
//! VMM connection, the same worker as the workload's pair 0) is driven by hand and fed nothing
//! but bad transmit chains, continuously: addresses outside guest memory or overflowing the
//! address space, a device-writable request buffer, garbage headers before any hello, chains too
//! short for a header, a header followed by a payload descriptor outside memory. The device
//! must give every one back (no stall, no leak) while pair 0's connections keep exact data.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use slimtcp_guest::ring::Segment;
use slimtcp_guest::QueuePair;

use crate::error::SoakError;

/// How long the chains still out may take to come back once the flood stops.
const RETURN_WAIT: Duration = Duration::from_secs(20);
/// Pause between flood rounds (the worker also serves the data pair).
const ROUND_PAUSE: Duration = Duration::from_micros(500);

/// Counters of the flood.
#[derive(Debug, Default)]
pub struct ChainStats {
    /// Chains added to the ring.
    pub sent: AtomicU64,
    /// Chains the device gave back.
    pub returned: AtomicU64,
}

/// The chains of one round, each a different kind of bad request.
fn hostile_chains(base: u64, size: u64) -> [Vec<Segment>; 6] {
    let seg = |gpa: u64, len: u32, writable: bool| Segment { gpa, len, writable };
    [
        vec![seg(base + size + 4096, 64, false)],
        vec![seg(u64::MAX - 16, 64, false)],
        vec![seg(base, 64, true)],
        vec![seg(base + 4096, 48, false)],
        vec![seg(base + 8192, 3, false)],
        vec![seg(base + 12288, 48, false), seg(base + size * 4, 1 << 20, false)],
    ]
}

/// Floods `qp` until `stop`; the thread returns a finding when chains did not come back.
pub fn spawn(
    mut qp: QueuePair,
    stop: std::sync::Arc<AtomicBool>,
    stats: std::sync::Arc<ChainStats>,
) -> Result<JoinHandle<Option<String>>, SoakError> {
    let name = "soak-b-hostile-chains".to_string();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let (base, size) = (qp.memory.gpa(), qp.memory.len() as u64);
            let (mut sent, mut back) = (0u64, 0u64);
            while !stop.load(Ordering::Acquire) {
                for chain in hostile_chains(base, size) {
                    if qp.tx.ring.add(&chain).is_ok() {
                        sent += 1;
                    }
                }
                if let Err(e) = qp.tx.flush() {
                    return Some(format!("tenant b, hostile pair: kick failed: {e}"));
                }
                while let Ok(Some(_)) = qp.tx.ring.pop_used() {
                    back += 1;
                }
                stats.sent.store(sent, Ordering::Relaxed);
                stats.returned.store(back, Ordering::Relaxed);
                std::thread::sleep(ROUND_PAUSE);
            }
            let deadline = Instant::now() + RETURN_WAIT;
            while back < sent && Instant::now() < deadline {
                while let Ok(Some(_)) = qp.tx.ring.pop_used() {
                    back += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            stats.returned.store(back, Ordering::Relaxed);
            (back != sent).then(|| {
                format!("tenant b, hostile pair: {back} of {sent} hostile chains came back within {RETURN_WAIT:?}")
            })
        })
        .map_err(|source| SoakError::Spawn { name, source })
}
