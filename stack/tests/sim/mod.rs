//! A bulk-transfer workload for simulations: side A opens N connections to side B and sends each
//! a deterministic byte stream; B hashes what it reads; both close. Verifies every byte arrived
//! exactly once, in order, and that every connection closed cleanly on both sides.

use std::collections::HashMap;
use std::net::SocketAddrV4;

use slimtcp::api::SocketError;
use slimtcp::iface::SocketHandle;
use slimtcp::sim::{SimPair, B_IP};
use slimtcp_testkit::data::{pattern, pattern_digest, StreamHasher};

pub const PORT: u16 = 5001;

struct Sender {
    handle: SocketHandle,
    seed: u64,
    sent: u64,
    closed: bool,
}

struct Receiver {
    handle: SocketHandle,
    hasher: StreamHasher,
    seed: Option<u64>,
    done: bool,
}

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
    let listener = sim.b.tcp_listen(PORT, connections + 16).expect("listen");
    let now = sim.now();
    let remote = SocketAddrV4::new(B_IP, PORT);
    let mut senders: Vec<Sender> = (0..connections)
        .map(|i| Sender {
            handle: sim.a.tcp_connect(now, remote).expect("connect"),
            seed: seed.wrapping_mul(1_000_003).wrapping_add(i as u64),
            sent: 0,
            closed: false,
        })
        .collect();
    // The receiver learns each stream's seed from the sender's local port.
    let seeds: HashMap<u16, u64> =
        senders.iter().map(|s| (sim.a.tcp_info(s.handle).expect("info").local.port(), s.seed)).collect();
    let mut receivers: Vec<Receiver> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let max_steps = 50_000_000u64;
    let ok = sim
        .run_until(max_steps, |sim| {
            for s in senders.iter_mut().filter(|s| !s.closed) {
                while s.sent < bytes {
                    let n = ((bytes - s.sent) as usize).min(chunk.len());
                    pattern(s.seed, s.sent, &mut chunk[..n]);
                    match sim.a.tcp_send(s.handle, &chunk[..n]) {
                        Ok(k) => s.sent += k as u64,
                        Err(SocketError::WouldBlock) => break,
                        Err(e) => panic!("seed {seed}: send failed: {e} ({})", e.name()),
                    }
                }
                if s.sent == bytes {
                    sim.a.tcp_close(s.handle).expect("close");
                    s.closed = true;
                }
            }
            while let Ok(h) = sim.b.tcp_accept(listener) {
                let port = sim.b.tcp_info(h).expect("info").remote.port();
                receivers.push(Receiver {
                    handle: h,
                    hasher: StreamHasher::new(),
                    seed: seeds.get(&port).copied(),
                    done: false,
                });
            }
            for r in receivers.iter_mut().filter(|r| !r.done) {
                loop {
                    match sim.b.tcp_recv(r.handle, &mut buf) {
                        Ok(0) => {
                            r.done = true;
                            sim.b.tcp_close(r.handle).expect("close");
                            break;
                        }
                        Ok(n) => r.hasher.update(&buf[..n]),
                        Err(SocketError::WouldBlock) => break,
                        Err(e) => panic!(
                            "seed {seed}: recv failed: {e} ({}) at {}; a: {:?}; b: {:?}",
                            e.name(),
                            sim.now(),
                            sim.a.counters(),
                            sim.b.counters()
                        ),
                    }
                }
            }
            receivers.len() == connections
                && receivers.iter().all(|r| r.done)
                && sim.a.socket_count() == 0
                && sim.b.socket_count() == 1
        })
        .expect("simulation");
    assert!(
        ok,
        "seed {seed}: did not finish: {} of {connections} accepted, {} done; sockets a={} b={}; t={}",
        receivers.len(),
        receivers.iter().filter(|r| r.done).count(),
        sim.a.socket_count(),
        sim.b.socket_count(),
        sim.now()
    );
    let mut verified = 0;
    for r in receivers {
        let stream_seed = r.seed.unwrap_or_else(|| panic!("seed {seed}: unknown stream"));
        assert_eq!(r.hasher.bytes(), bytes, "seed {seed}: stream {stream_seed} length");
        assert!(
            r.hasher.finish() == pattern_digest(stream_seed, bytes),
            "seed {seed}: stream {stream_seed} bytes differ"
        );
        verified += 1;
    }
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
