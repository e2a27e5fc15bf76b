//! The bulk-transfer workload (`tests/workload`) on a simulated link with a virtual clock:
//! verifies every byte arrived exactly once, in order, and that every connection closed cleanly
//! on both sides.

#[path = "../workload/mod.rs"]
mod workload;

use slimtcp::sim::{SimPair, B_IP};
use workload::Transfer;

/// Outcome of a run (printed by the tests, for the record).
#[derive(Debug)]
#[allow(dead_code)]
pub struct Report {
    pub connections: usize,
    pub bytes_per_connection: u64,
    pub verified: usize,
    pub virtual_ms: u64,
    pub retransmits_a: u64,
    pub retransmits_b: u64,
}

/// Runs `connections` transfers of `bytes` each from A to B; panics (naming `seed`) on any
/// byte mismatch, error, or hang.
pub fn bulk_transfer(sim: &mut SimPair, connections: usize, bytes: u64, seed: u64) -> Report {
    let now = sim.now();
    let mut t = Transfer::start(&mut sim.a, &mut sim.b, now, B_IP, connections, bytes, seed);
    let ok = sim.run_until(50_000_000, |sim| t.step(&mut sim.a, &mut sim.b)).expect("simulation");
    assert!(ok, "did not finish: {}; t={}", t.describe(&sim.a, &sim.b), sim.now());
    let verified = t.verify(&mut sim.b);
    Report {
        connections,
        bytes_per_connection: bytes,
        verified,
        virtual_ms: sim.now().total_millis(),
        retransmits_a: sim.a.counters().tcp_retransmits,
        retransmits_b: sim.b.counters().tcp_retransmits,
    }
}

/// Seeds to run: `SLIMTCP_SEED=n` replays one; otherwise the given defaults.
pub fn seeds(defaults: &[u64]) -> Vec<u64> {
    match std::env::var("SLIMTCP_SEED").ok().and_then(|s| s.parse().ok()) {
        Some(s) => vec![s],
        None => defaults.to_vec(),
    }
}
