//! Issue 14, loss recovery with real peers: SlimTCP and the Linux kernel's TCP across a router
//! namespace that drops frames with nftables (testkit's `lossnet`: random loss on the forwarding
//! hop, so neither sender is told about it), both directions at 0.1%, 1% and 5% loss each way,
//! every byte checked; and the flood-then-stall scenario: a sub-second burst that drops ~40,000
//! frames (everything toward the stack, a UDP flood included) in the middle of a Linux -> SlimTCP
//! transfer, after which the transfer must complete; the recovery time is printed.
//!
//! `loss_goodput_table` (ignored; `scripts/bench-loss.sh` runs it for `make bench`) measures
//! goodput at each loss rate beside Linux <-> Linux through the same router and rules.
//!
//! Addresses: the stack `10.91.S.2` behind the router's TAP (`10.91.S.1`), Linux peers at
//! `10.92.S.2` / `10.93.S.2` behind veth pairs.

#[macro_use]
extern crate slimtcp_testkit;

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slimtcp::api::SocketError;
use slimtcp::iface::{Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::tap::TapNic;
use slimtcp::wire::EthernetAddress;

use slimtcp_testkit::data::hex;
use slimtcp_testkit::linux_peer::{
    spawn_tcp_client_recv, spawn_tcp_client_send, spawn_tcp_server_recv, PeerError, PeerThread, Transfer,
};
use slimtcp_testkit::lossnet::{LossyRouter, Peer, PerTenThousand};
use slimtcp_testkit::netns::Netns;

use common::{AppResult, BulkOutcome, BulkRole, StackRunner, Step};

const PORT: u16 = 5001;
/// Loss rates of the tests and the table, in 1/10000: 0.1%, 1%, 5%.
const RATES: [PerTenThousand; 3] = [10, 100, 500];
/// Bytes per transfer in the correctness tests (small: 5% loss without SACK is slow).
const TEST_BYTES: u64 = 4 * 1024 * 1024;
/// Only bounds a hang; no timing is asserted.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(60);

/// A router namespace with the SlimTCP stack behind its TAP and one Linux peer behind a veth.
struct LossBed {
    router: LossyRouter,
    peer: Peer,
    tap: String,
    stack_ip: Ipv4Addr,
    host_ip: Ipv4Addr,
    stack_mac: EthernetAddress,
}

impl LossBed {
    fn new(name: &str, subnet: u8) -> LossBed {
        let router = LossyRouter::new(name).expect("router namespace");
        let peer = router.attach_peer(&format!("{name}-p"), 92, subnet).expect("peer namespace");
        LossBed {
            router,
            peer,
            tap: Netns::unique_ifname("slimtap"),
            stack_ip: Ipv4Addr::new(10, 91, subnet, 2),
            host_ip: Ipv4Addr::new(10, 91, subnet, 1),
            stack_mac: EthernetAddress([0x02, 0x00, 0x00, 0x91, subnet, 0x02]),
        }
    }

    /// Creates (again) the TAP in the router namespace; the stack owns it until it stops.
    fn open_tap(&self) -> TapNic {
        let (name, host) = (self.tap.clone(), self.host_ip);
        self.router.ns.run(move || {
            let tap = TapNic::open(&name).expect("create the TAP interface");
            tap.set_up().expect("bring the TAP interface up");
            tap.set_host_address(host, 24).expect("address the router side");
            tap
        })
    }

    fn iface_config(&self) -> InterfaceConfig {
        let mut cfg = InterfaceConfig::new(self.stack_mac, self.stack_ip, 24);
        cfg.gateway = Some(self.host_ip);
        // The send buffer bounds SlimTCP's bytes in flight (256 KiB by default; Linux autotunes
        // its own to megabytes): `SLIMTCP_LOSS_TX_BUFFER` changes it for experiments.
        cfg.tcp.tx_buffer = env_or("SLIMTCP_LOSS_TX_BUFFER", cfg.tcp.tx_buffer);
        cfg
    }

    fn stack_addr(&self) -> SocketAddr {
        SocketAddrV4::new(self.stack_ip, PORT).into()
    }

    /// The same random loss rate toward the stack and toward the peer.
    fn set_loss(&self, rate: PerTenThousand) {
        self.router.set_loss(&self.tap, rate).expect("loss toward the stack");
        self.router.set_loss(&self.peer.router_if, rate).expect("loss toward the peer");
    }

    fn dropped(&self) -> (u64, u64) {
        (self.router.dropped(&self.tap).unwrap_or(0), self.router.dropped(&self.peer.router_if).unwrap_or(0))
    }
}

/// The stack as a server for one connection running `role`; `progress` follows the bytes it
/// received (for the recovery timeline).
fn serve(
    listener: SocketHandle,
    role: impl Fn(SocketHandle) -> BulkRole,
    progress: Arc<AtomicU64>,
) -> impl FnMut(&mut Interface<TapNic>, slimtcp::time::Instant) -> AppResult<Step<BulkOutcome>> {
    let mut conn: Option<(SocketHandle, BulkRole)> = None;
    move |iface, _now| match conn.as_mut() {
        Some((h, r)) => {
            let step = r.step(iface);
            if let Ok(info) = iface.tcp_info(*h) {
                progress.store(info.stats.bytes_received, Ordering::Relaxed);
            }
            step
        }
        None => match iface.tcp_accept(listener) {
            Ok(h) => {
                iface.tcp_close(listener).map_err(|e| format!("closing the listener: {e}"))?;
                conn = Some((h, role(h)));
                Ok(Step::Progress)
            }
            Err(SocketError::WouldBlock) => Ok(Step::Idle),
            Err(e) => Err(format!("tcp_accept: {e}")),
        },
    }
}

/// How one transfer went.
#[derive(Debug, Clone, Copy)]
struct Run {
    bytes: u64,
    seconds: f64,
    retransmits: u64,
    dropped_to_stack: u64,
    dropped_to_linux: u64,
}

impl Run {
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.seconds.max(1e-9)
    }
}

fn check_exact(what: &str, stack: &BulkOutcome, linux: &Transfer, seed: u64, total: u64) {
    assert_eq!(stack.transfer, *linux, "{what}: the two ends disagree on what went through");
    assert!(
        linux.matches_pattern(seed, total),
        "{what}: {} bytes with SHA-256 {} instead of the {total} pattern bytes",
        linux.bytes,
        hex(&linux.digest)
    );
}

/// Linux (peer) client -> SlimTCP server, `total` bytes of stream `seed`, every byte checked.
/// `seconds` runs from the Linux client's start until it saw the stack close.
fn linux_to_stack(bed: &LossBed, total: u64, seed: u64, progress: Arc<AtomicU64>) -> Run {
    let linux = || spawn_tcp_client_send(&bed.peer.ns, bed.stack_addr(), total, seed, TRANSFER_TIMEOUT);
    let what = format!("linux -> stack, {total} bytes");
    transfer(bed, "l2s", &what, total, seed, BulkRole::receiver, progress, linux)
}

/// SlimTCP server -> Linux (peer) client, `total` bytes of stream `seed`, every byte checked.
fn stack_to_linux(bed: &LossBed, total: u64, seed: u64) -> Run {
    let role = move |h| BulkRole::sender(h, seed, total);
    let linux = || spawn_tcp_client_recv(&bed.peer.ns, bed.stack_addr(), TRANSFER_TIMEOUT);
    let what = format!("stack -> linux, {total} bytes");
    transfer(bed, "s2l", &what, total, seed, role, Arc::new(AtomicU64::new(0)), linux)
}

/// One transfer between a SlimTCP server whose connection plays `role` and the Linux client
/// `start_linux` starts; checks every byte and counts the drops on the way.
#[allow(clippy::too_many_arguments)]
fn transfer(
    bed: &LossBed,
    tag: &str,
    what: &str,
    total: u64,
    seed: u64,
    role: impl Fn(SocketHandle) -> BulkRole + Send + 'static,
    progress: Arc<AtomicU64>,
    start_linux: impl FnOnce() -> Result<PeerThread, PeerError>,
) -> Run {
    let stack = StackRunner::spawn(&bed.router.ns, bed.open_tap(), bed.iface_config(), TRANSFER_TIMEOUT, {
        move |iface, _| {
            let listener = iface.tcp_listen(PORT, 4).map_err(|e| e.to_string())?;
            Ok(serve(listener, role, progress))
        }
    });
    let capture = capture(bed, tag);
    let before = bed.dropped();
    let start = Instant::now();
    let linux = start_linux().expect("start the Linux client");
    let through = linux.join().expect("the Linux client finishes its side");
    let seconds = start.elapsed().as_secs_f64();
    let outcome = stack.result(TRANSFER_TIMEOUT).expect("the stack moves everything and closes");
    check_exact(what, &outcome, &through, seed, total);
    let after = bed.dropped();
    let _counters = stack.stop();
    drop(capture);
    Run {
        bytes: total,
        seconds,
        retransmits: outcome.retransmits,
        dropped_to_stack: after.0 - before.0,
        dropped_to_linux: after.1 - before.1,
    }
}

/// With `SLIMTCP_LOSS_PCAP=<dir>`, a capture of the TAP (the stack's side of the router).
fn capture(bed: &LossBed, what: &str) -> Option<slimtcp_testkit::capture::Capture> {
    let dir = std::env::var_os("SLIMTCP_LOSS_PCAP")?;
    let path = std::path::Path::new(&dir).join(format!("{what}-{}.pcap", bed.tap));
    eprintln!("capturing to {}", path.display());
    Some(
        slimtcp_testkit::capture::Capture::start(&bed.router.ns, &bed.tap, &path).expect("start the capture"),
    )
}

/// [`TEST_BYTES`], or `SLIMTCP_LOSS_BYTES` when set (for experiments).
fn test_bytes() -> u64 {
    std::env::var("SLIMTCP_LOSS_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(TEST_BYTES)
}

/// [`RATES`], or the comma-separated `SLIMTCP_LOSS_RATES` (in 1/10000) when set.
fn rates() -> Vec<PerTenThousand> {
    match std::env::var("SLIMTCP_LOSS_RATES") {
        Ok(v) => v.split(',').filter_map(|r| r.trim().parse().ok()).collect(),
        Err(_) => RATES.to_vec(),
    }
}

fn percent(rate: PerTenThousand) -> String {
    format!("{}%", f64::from(rate) / 100.0)
}

#[test]
fn linux_to_stack_with_random_loss_is_exact() {
    require_netns!("linux_to_stack_with_random_loss_is_exact");
    let bed = LossBed::new("loss-l2s", 40);
    for (i, rate) in rates().into_iter().enumerate() {
        bed.set_loss(rate);
        let r = linux_to_stack(&bed, test_bytes(), 400 + i as u64, Arc::new(AtomicU64::new(0)));
        eprintln!(
            "linux -> stack at {} loss each way: {:.1} MB/s, {} frames dropped toward the stack, {} toward Linux",
            percent(rate),
            r.mb_per_s(),
            r.dropped_to_stack,
            r.dropped_to_linux
        );
    }
}

#[test]
fn stack_to_linux_with_random_loss_is_exact() {
    require_netns!("stack_to_linux_with_random_loss_is_exact");
    let bed = LossBed::new("loss-s2l", 41);
    for (i, rate) in rates().into_iter().enumerate() {
        bed.set_loss(rate);
        let r = stack_to_linux(&bed, test_bytes(), 410 + i as u64);
        eprintln!(
            "stack -> linux at {} loss each way: {:.1} MB/s, {} retransmissions, {} frames dropped toward the stack, {} toward Linux",
            percent(rate),
            r.mb_per_s(),
            r.retransmits,
            r.dropped_to_stack,
            r.dropped_to_linux
        );
        assert!(r.retransmits > 0 || r.dropped_to_linux == 0, "drops toward Linux need retransmissions");
    }
}

/// Frames the burst drops at least (the report: 42 k).
const BURST_FRAMES: u64 = 40_000;
/// The burst ends after this long even if fewer frames were dropped.
const BURST_MAX: Duration = Duration::from_millis(900);
const BURST_TRANSFER: u64 = 64 * 1024 * 1024;

/// A UDP flood from the peer toward the stack (the frames the burst drops besides the
/// transfer's own), until `stop`.
fn flood(peer: &Peer, to: Ipv4Addr, stop: Arc<AtomicBool>) -> slimtcp_testkit::netns::NsThread<u64> {
    peer.ns
        .spawn("udp-flood", move || {
            let Ok(sock) = UdpSocket::bind("0.0.0.0:0") else { return 0 };
            let payload = [0x5au8; 64];
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..256 {
                    if sock.send_to(&payload, SocketAddrV4::new(to, 9)).is_ok() {
                        sent += 1;
                    }
                }
            }
            sent
        })
        .expect("start the flood")
}

/// How the burst drops frames toward the stack.
#[derive(Debug, Clone, Copy)]
enum Burst {
    /// Everything, as a dead link would.
    Blackout,
    /// 95% at random, as an overflowing TAP queue does: some segments get through the flood,
    /// so the receiver sees holes with data after them (the report).
    Overflow,
}

#[test]
fn burst_drop_during_linux_to_stack_transfer_recovers() {
    require_netns!("burst_drop_during_linux_to_stack_transfer_recovers");
    let bed = LossBed::new("loss-burst", 42);
    for (i, burst) in [Burst::Blackout, Burst::Overflow].into_iter().enumerate() {
        burst_during_transfer(&bed, burst, 420 + i as u64);
    }
}

/// A Linux -> SlimTCP transfer with a sub-second `burst` of ~40,000 dropped frames a quarter of
/// the way in; the transfer must complete exactly, and the recovery time is printed.
fn burst_during_transfer(bed: &LossBed, burst: Burst, seed: u64) {
    let progress = Arc::new(AtomicU64::new(0));
    let transfer = {
        let counter = Arc::clone(&progress);
        std::thread::scope(|s| {
            let t = s.spawn(move || linux_to_stack(bed, BURST_TRANSFER, seed, counter));
            // A quarter of the transfer at full speed, then the burst.
            let start = Instant::now();
            while progress.load(Ordering::Relaxed) < BURST_TRANSFER / 4 && start.elapsed() < TRANSFER_TIMEOUT
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            let (b0, t0) = (progress.load(Ordering::Relaxed), Instant::now());
            std::thread::sleep(Duration::from_millis(100));
            let rate_before = (progress.load(Ordering::Relaxed) - b0) as f64 / t0.elapsed().as_secs_f64();

            match burst {
                Burst::Blackout => bed.router.drop_all(&bed.tap),
                Burst::Overflow => bed.router.set_loss(&bed.tap, 9500),
            }
            .expect("burst rule");
            let burst_start = Instant::now();
            let stop = Arc::new(AtomicBool::new(false));
            let flooder = flood(&bed.peer, bed.stack_ip, Arc::clone(&stop));
            let mut dropped = 0;
            while burst_start.elapsed() < BURST_MAX {
                dropped = bed.router.dropped(&bed.tap).unwrap_or(0);
                if dropped >= BURST_FRAMES {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            bed.router.clear(&bed.tap).expect("end of the burst");
            let drops_end = Instant::now();
            stop.store(true, Ordering::Relaxed);
            let flooded = flooder.join().unwrap_or(0);
            let at_end = progress.load(Ordering::Relaxed);

            // The timeline after the burst, sampled every millisecond.
            let mut timeline = vec![(Duration::ZERO, at_end)];
            while !t.is_finished() {
                std::thread::sleep(Duration::from_millis(1));
                timeline.push((drops_end.elapsed(), progress.load(Ordering::Relaxed)));
            }
            let run = t.join().expect("transfer thread");
            let first_byte = timeline.iter().find(|(_, b)| *b > at_end).map(|(t, _)| *t);
            // At speed again: the first 20 ms window that moved at least half the rate before.
            let window = Duration::from_millis(20);
            let at_speed = timeline.iter().enumerate().find_map(|(i, &(t, b))| {
                let later = timeline[i..].iter().find(|(u, _)| *u >= t + window)?;
                ((later.1 - b) as f64 >= 0.5 * rate_before * window.as_secs_f64()).then_some(later.0)
            });
            eprintln!(
                "burst ({burst:?}): {dropped} frames dropped in {:.0} ms ({flooded} flood datagrams); rate before {:.1} MB/s; \
                 after the drops ended: first new byte at {first_byte:?}, at speed again at {at_speed:?}; \
                 transfer {run:?} ({:.1} MB/s overall)",
                (drops_end - burst_start).as_secs_f64() * 1e3,
                rate_before / 1e6,
                run.mb_per_s()
            );
            assert!(dropped > 0, "the burst dropped nothing");
            run
        })
    };
    assert_eq!(transfer.bytes, BURST_TRANSFER);
}

/// Linux -> Linux through the same router and rules (peer `a` sends to peer `b`), timed like the
/// SlimTCP runs: from the sender's start until it saw the receiver close.
fn linux_to_linux(a: &Peer, b: &Peer, total: u64, seed: u64) -> Run {
    let (addr, receiver) =
        spawn_tcp_server_recv(&b.ns, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT).into(), TRANSFER_TIMEOUT)
            .expect("the Linux receiver listens");
    let to = SocketAddr::from(SocketAddrV4::new(b.ip, addr.port()));
    let start = Instant::now();
    let sent = spawn_tcp_client_send(&a.ns, to, total, seed, TRANSFER_TIMEOUT)
        .expect("start the Linux sender")
        .join()
        .expect("the Linux sender sends everything and sees the receiver close");
    let seconds = start.elapsed().as_secs_f64();
    let received = receiver.join().expect("the Linux receiver receives everything");
    assert_eq!(sent, received, "linux -> linux: the two ends disagree");
    assert!(received.matches_pattern(seed, total), "linux -> linux: wrong bytes");
    Run { bytes: total, seconds, retransmits: 0, dropped_to_stack: 0, dropped_to_linux: 0 }
}

/// The median goodput of `runs` (MB/s).
fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs.get(runs.len() / 2).copied().unwrap_or(0.0)
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `make bench` (scripts/bench-loss.sh): goodput at each loss rate (each way), SlimTCP <-> Linux
/// over the TAP beside Linux <-> Linux over veth pairs, same router, same rules; the median of
/// `LOSS_BENCH_RUNS` runs of `LOSS_BENCH_BYTES` each. Writes `loss.md` and `loss.json` into
/// `LOSS_BENCH_OUT` (default `target/bench` of the workspace).
#[test]
#[ignore = "a benchmark: scripts/bench-loss.sh runs it"]
fn loss_goodput_table() {
    require_netns!("loss_goodput_table");
    let bytes: u64 = env_or("LOSS_BENCH_BYTES", 32 * 1024 * 1024);
    let runs: usize = env_or("LOSS_BENCH_RUNS", 3);
    let out = std::env::var("LOSS_BENCH_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench"));
    let bed = LossBed::new("loss-bench", 43);
    let other = bed.router.attach_peer("loss-bench-q", 93, 43).expect("second Linux peer");
    let mut rows = Vec::new();
    for rate in std::iter::once(0).chain(rates()) {
        bed.set_loss(rate);
        bed.router.set_loss(&other.router_if, rate).expect("loss toward the second peer");
        let mut l2s = Vec::new();
        let mut s2l = Vec::new();
        let mut l2l = Vec::new();
        for i in 0..runs as u64 {
            l2s.push(linux_to_stack(&bed, bytes, 500 + i, Arc::new(AtomicU64::new(0))).mb_per_s());
            s2l.push(stack_to_linux(&bed, bytes, 600 + i).mb_per_s());
            l2l.push(linux_to_linux(&bed.peer, &other, bytes, 700 + i).mb_per_s());
        }
        let (l2s, s2l, l2l) = (median(l2s), median(s2l), median(l2l));
        eprintln!(
            "loss {}: linux->slimtcp {l2s:.1} MB/s, slimtcp->linux {s2l:.1} MB/s, linux->linux {l2l:.1} MB/s",
            percent(rate)
        );
        rows.push((rate, l2s, s2l, l2l));
    }
    let mut md = format!(
        "# Goodput under random loss\n\nnftables `numgen random` drops on the router's forwarding hop, the same rate \
         each way; {} MiB per transfer, median of {runs}; MB/s = 10^6 bytes/s.\n\n\
         | loss each way | Linux -> SlimTCP | SlimTCP -> Linux | Linux -> Linux | Linux -> SlimTCP / Linux | SlimTCP -> Linux / Linux |\n\
         |---|---|---|---|---|---|\n",
        bytes / (1024 * 1024)
    );
    let mut json = String::from("[");
    for (i, (rate, l2s, s2l, l2l)) in rows.iter().enumerate() {
        let (r1, r2) = (l2s / l2l.max(1e-9), s2l / l2l.max(1e-9));
        md += &format!("| {} | {l2s:.1} | {s2l:.1} | {l2l:.1} | {r1:.2} | {r2:.2} |\n", percent(*rate));
        json += &format!(
            "{}{{\"loss_percent\": {}, \"linux_to_slimtcp_mb_s\": {l2s:.2}, \"slimtcp_to_linux_mb_s\": {s2l:.2}, \
             \"linux_to_linux_mb_s\": {l2l:.2}, \"ratio_linux_to_slimtcp\": {r1:.3}, \"ratio_slimtcp_to_linux\": {r2:.3}, \
             \"bytes\": {bytes}, \"runs\": {runs}}}",
            if i == 0 { "" } else { ", " },
            f64::from(*rate) / 100.0
        );
    }
    json += "]\n";
    std::fs::create_dir_all(&out).expect("create the output directory");
    std::fs::write(out.join("loss.md"), &md).expect("write loss.md");
    std::fs::write(out.join("loss.json"), &json).expect("write loss.json");
    eprintln!("{md}");
}
