//! The guest path's cost per segment on one thread, for callgrind: a guest driver (the tests'
//! minimal one, not the guest library) sends `ENGINE_COST_BYTES` (default 32 MiB) over one TCP
//! connection through the tenant engine to a SlimTCP peer on the in-memory wire, which reads
//! it; the peer's listener advertises MSS `ENGINE_COST_MSS` (default 1460). Everything is
//! stepped from this thread, so an instruction count is the work of the driver, the engine and
//! both stacks, with no polling of idle threads in it. Prints the segments the peer received.
//!
//! ```sh
//! cargo bench -p slimtcp-vhost --bench engine_cost --no-run   # then, for each size:
//! ENGINE_COST_MSS=64 ENGINE_COST_BYTES=4000000 valgrind --tool=callgrind TARGET/engine_cost-HASH
//! ```
//! Instructions per segment: the difference of two runs' totals over the difference of their
//! segments (so set-up does not count). `docs/benchmarks.md` has the figures.

#[path = "../tests/common/mod.rs"]
#[allow(dead_code, unused_imports)]
mod common;

use std::sync::Arc;

use common::engine_bench::{bench, hello, socket_of, QSIZE};
use common::{Ring, F_NEXT};
use slimtcp::tcp::TcpConfig;
use slimtcp_abi::{Request, RequestBody, RequestFlags, RxMessage, SocketId, SocketKind};
use vm_memory::{Bytes, GuestAddress};

const PORT: u16 = 5001;
/// Sends in flight at once, each its own header and payload slot in guest memory: 256 KiB, the
/// socket's default send credit.
const SLOTS: u64 = 16;
const SEND: u32 = 16 * 1024;
const SLOT_BASE: u64 = 2 << 20;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let mss = env("ENGINE_COST_MSS", 1460);
    let total = env("ENGINE_COST_BYTES", 32 << 20);
    let mem = Arc::new(common::guest_memory());
    let mut b = bench(1, None);
    let tcp = TcpConfig { mss: u16::try_from(mss).expect("an MSS"), ..b.peer.config().tcp.clone() };
    let listener = b.peer.tcp_listen_with(PORT, 4, Some(tcp)).expect("peer listen");
    let mut p0 = common::PairDriver::new(&mem, 0, QSIZE, 0);
    let rings = slimtcp_vhost::queues::LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    p0.post(64, 4096);
    p0.request(&hello(1), &[]);
    p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp }), &[]);
    let mut seen = vec![Vec::new()];
    common::engine_bench::run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| {
        socket_of(&s[0], 2).is_some()
    });
    let sock = socket_of(&seen[0], 2).expect("socket");
    let remote = std::net::SocketAddrV4::new(common::engine_bench::PEER_IP, PORT);
    p0.request(&Request::new(3, sock, RequestBody::Connect { remote }), &[]);
    common::engine_bench::run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| {
        socket_of(&s[0], 3).is_some()
    });
    let conn = b.peer.tcp_accept(listener).expect("peer accepted");

    // Each slot: the request's fixed part at `base`, its payload 4 KiB later.
    let payload = vec![0x5a_u8; SEND as usize];
    let slot_addr = |i: u64| SLOT_BASE + i * (u64::from(SEND) + 4096);
    for i in 0..SLOTS {
        mem.write_slice(&payload, GuestAddress(slot_addr(i) + 4096)).expect("payload");
    }
    let mut free: Vec<u64> = (0..SLOTS).collect();
    let mut slot_of_head = std::collections::HashMap::new();
    let (mut queued, mut received, mut refused) = (0usize, 0usize, 0u32);
    let mut buf = vec![0u8; 64 * 1024];
    let mut cookie = 10u64;
    while received < total {
        while queued < total {
            let Some(i) = free.pop() else { break };
            let req = Request {
                flags: RequestFlags::QUIET,
                ..Request::new(cookie, sock, RequestBody::Send { len: SEND })
            };
            cookie += 1;
            let head = send(&mut p0.tx, &mem, &req, slot_addr(i));
            slot_of_head.insert(head, i);
            queued += SEND as usize;
        }
        b.step(&rings, &mem);
        for (m, _) in p0.messages() {
            if let RxMessage::Complete { result: Err(e), .. } = m {
                refused += 1;
                queued -= SEND as usize;
                assert!(refused < 1000, "sends refused: {e:?}");
            }
        }
        for head in p0.tx_returned.drain(..) {
            if let Some(i) = slot_of_head.remove(&head) {
                free.push(i);
            }
        }
        while let Ok(n) = b.peer.tcp_recv(conn, &mut buf) {
            if n == 0 {
                break;
            }
            received += n;
        }
    }
    let stats = b.peer.tcp_info(conn).expect("peer connection").stats;
    println!(
        "mss {mss} bytes {received} segments {} (duplicates {}), sends refused {refused}",
        stats.segs_in, stats.out_of_window
    );
}

/// Publishes a send request whose fixed part goes at `base` and whose payload is already at
/// `base + 4096`.
fn send(ring: &mut Ring<'_>, mem: &slimtcp_vhost::guest_mem::GuestMem, req: &Request, base: u64) -> u16 {
    let mut fixed = [0u8; 64];
    let n = req.emit(&mut fixed).expect("emit");
    mem.write_slice(&fixed[..n], GuestAddress(base)).expect("fixed part");
    ring.add_raw(&[(base, n as u32, F_NEXT, None), (base + 4096, SEND, 0, None)])
}
