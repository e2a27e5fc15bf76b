//! The bulk-transfer workload shared by the simulation and the DPDK tests: side A opens N
//! connections to side B and sends each a deterministic byte stream; B hashes what it reads;
//! both close. [`Transfer::step`] does one round of application work on two interfaces of any
//! NIC type; the caller owns the loop (virtual or real clock) and polls the interfaces.

use std::collections::HashMap;
use std::net::SocketAddrV4;

use slimtcp::api::SocketError;
use slimtcp::iface::{Interface, SocketHandle};
use slimtcp::nic::Nic;
use slimtcp::time::Instant;
use slimtcp_testkit::data::{hex, pattern, pattern_digest, StreamHasher};

/// The port B listens on.
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

/// One run of the workload (see the module documentation).
pub struct Transfer {
    listener: SocketHandle,
    senders: Vec<Sender>,
    receivers: Vec<Receiver>,
    /// Each stream's seed, by the sender's local port (how B tells the streams apart).
    seeds: HashMap<u16, u64>,
    connections: usize,
    bytes: u64,
    seed: u64,
    chunk: Vec<u8>,
    buf: Vec<u8>,
}

impl Transfer {
    /// Listens on B and opens `connections` connections from A to `b_ip`, each to carry `bytes`
    /// of its own stream derived from `seed`.
    pub fn start<NA: Nic, NB: Nic>(
        a: &mut Interface<NA>,
        b: &mut Interface<NB>,
        now: Instant,
        b_ip: std::net::Ipv4Addr,
        connections: usize,
        bytes: u64,
        seed: u64,
    ) -> Transfer {
        let listener = b.tcp_listen(PORT, connections + 16).expect("listen");
        let remote = SocketAddrV4::new(b_ip, PORT);
        let senders: Vec<Sender> = (0..connections)
            .map(|i| Sender {
                handle: a.tcp_connect(now, remote).expect("connect"),
                seed: seed.wrapping_mul(1_000_003).wrapping_add(i as u64),
                sent: 0,
                closed: false,
            })
            .collect();
        let seeds =
            senders.iter().map(|s| (a.tcp_info(s.handle).expect("info").local.port(), s.seed)).collect();
        Transfer {
            listener,
            senders,
            receivers: Vec::new(),
            seeds,
            connections,
            bytes,
            seed,
            chunk: vec![0u8; 64 * 1024],
            buf: vec![0u8; 64 * 1024],
        }
    }

    /// One round of application work: send what the sockets take, accept, read, close. True
    /// once every stream arrived and both sides closed everything but B's listener.
    pub fn step<NA: Nic, NB: Nic>(&mut self, a: &mut Interface<NA>, b: &mut Interface<NB>) -> bool {
        let (bytes, seed) = (self.bytes, self.seed);
        for s in self.senders.iter_mut().filter(|s| !s.closed) {
            while s.sent < bytes {
                // Generate only what the socket will take (matters on the real clock).
                let space = a.tcp_info(s.handle).expect("info").send_space;
                if space == 0 {
                    break;
                }
                let n = ((bytes - s.sent) as usize).min(self.chunk.len()).min(space);
                pattern(s.seed, s.sent, &mut self.chunk[..n]);
                match a.tcp_send(s.handle, &self.chunk[..n]) {
                    Ok(k) => s.sent += k as u64,
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => panic!("seed {seed}: send failed: {e} ({})", e.name()),
                }
            }
            if s.sent == bytes {
                a.tcp_close(s.handle).expect("close");
                s.closed = true;
            }
        }
        while let Ok(h) = b.tcp_accept(self.listener) {
            let port = b.tcp_info(h).expect("info").remote.port();
            self.receivers.push(Receiver {
                handle: h,
                hasher: StreamHasher::new(),
                seed: self.seeds.get(&port).copied(),
                done: false,
            });
        }
        for r in self.receivers.iter_mut().filter(|r| !r.done) {
            loop {
                match b.tcp_recv(r.handle, &mut self.buf) {
                    Ok(0) => {
                        r.done = true;
                        b.tcp_close(r.handle).expect("close");
                        break;
                    }
                    Ok(n) => r.hasher.update(&self.buf[..n]),
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => panic!(
                        "seed {seed}: recv failed: {e} ({}); a: {:?}; b: {:?}",
                        e.name(),
                        a.counters(),
                        b.counters()
                    ),
                }
            }
        }
        // A's connections through TIME-WAIT, B's through LAST-ACK: only B's listener is left.
        self.receivers.len() == self.connections
            && self.receivers.iter().all(|r| r.done)
            && a.socket_count() == 0
            && b.socket_count() == 1
    }

    /// Where the run stands, for a failure message.
    pub fn describe<NA: Nic, NB: Nic>(&self, a: &Interface<NA>, b: &Interface<NB>) -> String {
        format!(
            "seed {}: {} of {} sent, {} accepted, {} at EOF; sockets a={} b={}",
            self.seed,
            self.senders.iter().filter(|s| s.closed).count(),
            self.connections,
            self.receivers.len(),
            self.receivers.iter().filter(|r| r.done).count(),
            a.socket_count(),
            b.socket_count()
        )
    }

    /// Checks every stream's length and SHA-256, closes B's listener; returns how many streams
    /// were verified. Panics (naming the seed) on any difference.
    pub fn verify<NB: Nic>(self, b: &mut Interface<NB>) -> usize {
        let (bytes, seed) = (self.bytes, self.seed);
        let mut verified = 0;
        for r in self.receivers {
            let stream = r.seed.unwrap_or_else(|| panic!("seed {seed}: a stream from an unknown port"));
            assert_eq!(r.hasher.bytes(), bytes, "seed {seed}: stream {stream} length");
            let (got, want) = (r.hasher.finish(), pattern_digest(stream, bytes));
            assert!(got == want, "seed {seed}: stream {stream}: sha256 {} != {}", hex(&got), hex(&want));
            verified += 1;
        }
        b.tcp_close(self.listener).expect("close listener");
        verified
    }
}
