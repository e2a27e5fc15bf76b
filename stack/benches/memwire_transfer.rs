//! One SlimTCP connection transferring bulk data to another over the in-memory link, both stacks
//! polled from one thread (a virtual clock, so no sleeps: the time measured is CPU time of both
//! stacks). Reported as segments per second at MSS 64 and 1460; `make bench` collects the table.

use std::hint::black_box;
use std::net::SocketAddrV4;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use slimtcp::api::SocketError;
use slimtcp::nic::memwire::LinkConfig;
use slimtcp::sim::{default_configs, SimPair, B_IP};

/// Bytes moved per iteration, per MSS (enough segments to amortise the handshake).
fn bytes_for(mss: u16) -> usize {
    usize::from(mss) * 8192
}

fn transfer(mss: u16) -> u64 {
    let (mut a, mut b) = default_configs();
    a.tcp.mss = mss;
    b.tcp.mss = mss;
    let mut sim = SimPair::new(LinkConfig::default(), a, b).expect("pair");
    let listener = sim.b.tcp_listen(9, 4).expect("listen");
    let conn = sim.a.tcp_connect(sim.now(), SocketAddrV4::new(B_IP, 9)).expect("connect");
    let total = bytes_for(mss);
    let chunk = vec![0x5au8; 64 * 1024];
    let mut buf = vec![0u8; 64 * 1024];
    let (mut sent, mut received, mut server) = (0usize, 0usize, None);
    let done = sim
        .run_until(u64::MAX, |sim| {
            while sent < total {
                let n = (total - sent).min(chunk.len());
                match sim.a.tcp_send(conn, &chunk[..n]) {
                    Ok(k) => sent += k,
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => panic!("send: {e}"),
                }
            }
            if server.is_none() {
                server = sim.b.tcp_accept(listener).ok();
            }
            if let Some(s) = server {
                while let Ok(n) = sim.b.tcp_recv(s, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    received += n;
                }
            }
            received >= total
        })
        .expect("sim");
    assert!(done);
    black_box(received as u64)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("memwire_one_connection");
    group.sample_size(10);
    for mss in [64u16, 1460] {
        let segments = (bytes_for(mss) / usize::from(mss)) as u64;
        group.throughput(Throughput::Elements(segments));
        group.bench_with_input(BenchmarkId::new("segments", mss), &mss, |bench, &mss| {
            bench.iter(|| transfer(mss))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
