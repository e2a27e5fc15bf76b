//! A guest that breaks its transmit ring (avail.idx far beyond the queue size) makes the vhost
//! crates log an error on every poll of that ring: at busy-poll rate, a log flood. The daemon's
//! log is rate-limited per thread (backend/src/log_limit.rs): the flood is cut to a burst plus a
//! few lines a second with a count of what was suppressed, and the other tenant of the same
//! process moves its data, exactly, meanwhile.

mod vm;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use slimtcp::api::{Proto, Shutdown, SocketApi};
use slimtcp_guest::{DeviceSpec, GuestConfig, GuestDevice, GuestSockets};
use slimtcp_testkit::data::pattern;
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;
use vm::{Backend, TempDir};

const BULK: u64 = 20_000_000;
const FLOOD_FOR: Duration = Duration::from_secs(3);

#[test]
fn a_broken_ring_floods_no_log_and_stalls_no_other_tenant() {
    slimtcp_testkit::require_netns!("log_flood");
    let ns = Netns::create("logfl").expect("namespace");
    let dir = TempDir::new("log-flood");
    let (sock_a, sock_b) = (dir.0.join("a.sock"), dir.0.join("b.sock"));
    let (tap_a, tap_b) = (Netns::unique_ifname("lfa"), Netns::unique_ifname("lfb"));
    let ten_a =
        format!("name=alpha,socket={},tap={tap_a},ip=10.77.1.2/24,host-ip=10.77.1.1/24", sock_a.display());
    let ten_b = format!(
        "name=beta,socket={},tap={tap_b},ip=10.77.2.2/24,host-ip=10.77.2.1/24,mac=02:00:00:00:77:02",
        sock_b.display()
    );
    let backend = Backend::start(&ns, &dir.0, "backend", &["--tenant", &ten_a, "--tenant", &ten_b], 2);

    // Alpha: a raw queue pair whose transmit avail.idx jumps 5000 entries past a 256-entry ring.
    let cfg = GuestConfig { queue_size: 256, ..GuestConfig::default() };
    let mut dev = GuestDevice::open(&DeviceSpec::VhostUser(sock_a.clone()), cfg).expect("alpha attaches");
    let qp = dev.take_queue_pair(0).expect("pair 0");
    let avail = qp.tx.ring.addrs().avail_host as *mut u16;
    // SAFETY: the avail ring of our own transmit queue, mapped in this process (memfd); idx is
    // the u16 at offset 2. The device reads it; writing nonsense is the point of the test.
    unsafe { avail.add(1).write_volatile(5000u16.to_le()) };
    let _ = qp.tx.kick.notify();
    let flood_started = Instant::now();

    // Beta, meanwhile: 20 MB to Linux, exactly.
    let (bound, sink) = linux_peer::spawn_tcp_server_recv(
        &ns,
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 9400)),
        Duration::from_secs(60),
    )
    .expect("receiver");
    let mut api = GuestSockets::connect_vhost_user(&sock_b, GuestConfig::default()).expect("beta attaches");
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, SocketAddrV4::new(Ipv4Addr::new(10, 77, 2, 1), bound.port())).expect("connect");
    let mut buf = vec![0u8; 64 * 1024];
    let mut sent = 0u64;
    while sent < BULK {
        let n = buf.len().min((BULK - sent) as usize);
        pattern(77, sent, &mut buf[..n]);
        let mut part = &buf[..n];
        while !part.is_empty() {
            let k = api.send(fd, part).expect("send");
            part = &part[k..];
        }
        sent += n as u64;
    }
    api.shutdown(fd, Shutdown::Write).expect("shutdown");
    let got = sink.join().expect("receiver");
    assert!(got.matches_pattern(77, BULK), "beta's transfer during the flood: {} B", got.bytes);
    api.close(fd).expect("close");
    if let Some(rest) = FLOOD_FOR.checked_sub(flood_started.elapsed()) {
        std::thread::sleep(rest);
    }
    let seconds = flood_started.elapsed().as_secs_f64();
    drop(qp);
    drop(dev);

    let text = backend.text();
    let noisy: Vec<&str> = text.lines().filter(|l| l.contains(" ERROR ") || l.contains(" WARN ")).collect();
    let suppressed: u64 = text
        .lines()
        .filter(|l| l.contains(" similar lines suppressed"))
        .filter_map(|l| l.split(" similar lines suppressed").next()?.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    // Each thread: a burst of 20, then 5 a second (plus the suppressed-count lines).
    let bound_lines = 2 * (20 + (5.0 * (seconds + 1.0)) as usize) * 2;
    assert!(
        noisy.len() <= bound_lines,
        "{} warning/error lines in {seconds:.1} s (bound {bound_lines}):\n{}",
        noisy.len(),
        noisy[..noisy.len().min(30)].join("\n")
    );
    assert!(suppressed > 1000, "the flood was not there to limit ({suppressed} suppressed): {noisy:?}");
    eprintln!(
        "log_flood: {} warning/error lines in {seconds:.1} s, {suppressed} suppressed; beta moved {BULK} B exactly",
        noisy.len()
    );
}
