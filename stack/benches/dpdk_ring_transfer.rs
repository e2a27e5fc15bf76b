//! One SlimTCP connection transferring bulk data to another over DPDK `net_ring` (two ports of a
//! ring pair in one process, zero-copy: the receiver gets the sender's mbufs), both stacks polled
//! from one thread on the real clock. The DPDK counterpart of `memwire_transfer`: same workload,
//! reported as segments per second at MSS 64 and 1460.
//!
//! Run with `cargo bench -p slimtcp --features dpdk --bench dpdk_ring_transfer`.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use slimtcp::api::SocketError;
use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::dpdk::{create_ring_pair, DpdkNic, Eal, PortConfig};
use slimtcp::time::Instant;
use slimtcp::wire::EthernetAddress;

const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// As the DPDK tests: no hugepages, no PCI, no shared config, core 0 (this thread).
const EAL_ARGS: &[&str] =
    &["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "0", "--log-level=warning"];

/// Bytes moved per iteration, per MSS (as `memwire_transfer`).
fn bytes_for(mss: u16) -> usize {
    usize::from(mss) * 8192
}

/// A ring pair's two ports, opened once per MSS (ports and pools live for the process) and
/// reused by every iteration.
fn nics(tag: &str) -> (DpdkNic, DpdkNic) {
    let eal = Eal::init(EAL_ARGS).expect("EAL starts");
    let (na, nb) =
        create_ring_pair(eal, &format!("bench_{tag}_a"), &format!("bench_{tag}_b"), 1024).expect("ring pair");
    let open = |name: &str| {
        let mut pc = PortConfig::new(name);
        pc.promiscuous = true; // the stacks use MACs of their own (a no-op on net_ring)
        DpdkNic::open(eal, &pc).expect("open port").pop().expect("one queue")
    };
    (open(&na), open(&nb))
}

/// Two interfaces at MSS `mss` over the NICs (returned by the interfaces when done).
struct Pair {
    start: std::time::Instant,
    a: Interface<DpdkNic>,
    b: Interface<DpdkNic>,
}

impl Pair {
    fn new(nics: (DpdkNic, DpdkNic), mss: u16) -> Self {
        let mut ca = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0x0a]), A_IP, 24);
        let mut cb = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0x0b]), B_IP, 24);
        ca.tcp.mss = mss;
        cb.tcp.mss = mss;
        Pair {
            start: std::time::Instant::now(),
            a: Interface::new(nics.0, ca),
            b: Interface::new(nics.1, cb),
        }
    }

    fn now(&self) -> Instant {
        Instant::from_std(self.start)
    }

    fn poll(&mut self) {
        let now = self.now();
        self.a.poll(now).expect("poll a");
        self.b.poll(now).expect("poll b");
    }
}

/// One transfer of `bytes_for(mss)` on a fresh connection between the long-lived stacks. The
/// connection is aborted afterwards (not part of the measured workload's cost in memwire either:
/// there, the whole pair is dropped).
fn transfer(p: &mut Pair, mss: u16, port: u16) -> u64 {
    let listener = p.b.tcp_listen(port, 4).expect("listen");
    let conn = p.a.tcp_connect(p.now(), SocketAddrV4::new(B_IP, port)).expect("connect");
    let total = bytes_for(mss);
    let chunk = vec![0x5au8; 64 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let (mut sent, mut received, mut server) = (0usize, 0usize, None);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while received < total {
        while sent < total {
            let n = (total - sent).min(chunk.len());
            match p.a.tcp_send(conn, &chunk[..n]) {
                Ok(k) => sent += k,
                Err(SocketError::WouldBlock) => break,
                Err(e) => panic!("send: {e}"),
            }
        }
        if server.is_none() {
            server = p.b.tcp_accept(listener).ok();
        }
        if let Some(s) = server {
            while let Ok(n) = p.b.tcp_recv(s, &mut buf) {
                if n == 0 {
                    break;
                }
                received += n;
            }
        }
        assert!(std::time::Instant::now() < deadline, "mss {mss}: {received} of {total} bytes after 60 s");
        p.poll();
    }
    p.a.tcp_abort(conn).expect("abort");
    if let Some(s) = server {
        p.b.tcp_abort(s).expect("abort");
    }
    p.b.tcp_close(listener).expect("close listener");
    for _ in 0..4 {
        p.poll();
    }
    black_box(received as u64)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("dpdk_ring_one_connection");
    group.sample_size(10);
    for mss in [64u16, 1460] {
        let segments = (bytes_for(mss) / usize::from(mss)) as u64;
        let mut pair = Pair::new(nics(&mss.to_string()), mss);
        // Resolve ARP once, outside the measurement (memwire's first SYN waits for it too, but
        // on a virtual clock that costs nothing).
        pair.a.ping(pair.now(), B_IP, 1, 1, 8).expect("ping");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pair.a.take_ping_reply().is_none() {
            assert!(std::time::Instant::now() < deadline, "no ping reply");
            pair.poll();
        }
        let mut port = 10_000u16;
        group.throughput(Throughput::Elements(segments));
        group.bench_with_input(BenchmarkId::new("segments", mss), &mss, |bench, &mss| {
            bench.iter(|| {
                port = port.wrapping_add(1).max(10_000);
                transfer(&mut pair, mss, port)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
