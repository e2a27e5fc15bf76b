//! A live capture between two namespaces records real traffic completely, and the checker
//! finds Linux's own packets well-formed once offloads are off.

use std::net::SocketAddr;
use std::time::Duration;

use slimtcp_testkit::capture::Capture;
use slimtcp_testkit::check::{check_wellformed, check_wellformed_matching};
use slimtcp_testkit::linux_peer::{spawn_tcp_server_recv, tcp_client_send};
use slimtcp_testkit::{require_netns, Netns};

/// Two namespaces joined by a veth pair (10.77.0.1 in the first, 10.77.0.2 in the second),
/// offloads off; returns them and the first one's interface.
fn veth_pair() -> (Netns, Netns, String) {
    let a = Netns::create("slimt-capa").expect("namespace a");
    let b = Netns::create("slimt-capb").expect("namespace b");
    let (va, vb) = (Netns::unique_ifname("slimtv"), Netns::unique_ifname("slimtv"));
    let out = std::process::Command::new("ip")
        .args(["link", "add", &va, "netns", a.name(), "type", "veth", "peer", "name", &vb, "netns", b.name()])
        .output()
        .expect("run ip link add");
    assert!(out.status.success(), "veth: {}", String::from_utf8_lossy(&out.stderr));
    for (ns, dev, addr) in [(&a, &va, "10.77.0.1/24"), (&b, &vb, "10.77.0.2/24")] {
        ns.exec_ok(&["ip", "addr", "add", addr, "dev", dev]).expect("address");
        ns.exec_ok(&["ethtool", "-K", dev, "tx", "off", "rx", "off"]).expect("offloads off");
        ns.exec_ok(&["ip", "link", "set", dev, "up"]).expect("link up");
    }
    (a, b, va)
}

/// Captures on `iface` of `a` while `b` sends `bytes` to a Linux receiver in `a`; stops the
/// capture as soon as the receiver has everything.
fn capture_a_transfer(a: &Netns, b: &Netns, iface: &str, bytes: u64, name: &str) -> std::path::PathBuf {
    let pcap = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}.pcap", std::process::id()));
    let capture = Capture::start(a, iface, &pcap).expect("capture starts");
    let (addr, server) =
        spawn_tcp_server_recv(a, SocketAddr::from(([10, 77, 0, 1], 0)), Duration::from_secs(60))
            .expect("listen");
    let sent = tcp_client_send(b, addr, bytes, 3, Duration::from_secs(60)).expect("send");
    assert_eq!(server.join().expect("receive"), sent);
    capture.stop().expect("capture stops")
}

#[test]
fn traffic_over_a_veth_pair_is_captured_and_well_formed() {
    require_netns!("traffic_over_a_veth_pair_is_captured_and_well_formed");
    let (a, b, va) = veth_pair();
    let path = capture_a_transfer(&a, &b, &va, 1 << 20, "live");

    let report = check_wellformed(&path).expect("tshark checks");
    assert!(report.packets >= 10, "too few packets captured: {report}");
    assert!(report.is_clean(), "{report}");
    let syns = check_wellformed_matching(&path, Some("tcp.flags.syn == 1")).expect("filtered check");
    assert_eq!(syns.packets, 2, "SYN and SYN-ACK, the first packets, must be in the capture: {syns}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_short_exchange_stopped_at_once_is_captured_whole() {
    // A handshake, 100 bytes and the close: a millisecond, all of it in the kernel's open
    // capture block when the capture is stopped. Stopped without waiting for that block, the
    // file held no packet at all.
    require_netns!("a_short_exchange_stopped_at_once_is_captured_whole");
    let (a, b, va) = veth_pair();
    let path = capture_a_transfer(&a, &b, &va, 100, "short");

    let report = check_wellformed(&path).expect("tshark checks");
    assert!(report.is_clean(), "{report}");
    let syns = check_wellformed_matching(&path, Some("tcp.flags.syn == 1")).expect("filtered check");
    assert_eq!(syns.packets, 2, "SYN and SYN-ACK: {syns}");
    let fins = check_wellformed_matching(&path, Some("tcp.flags.fin == 1")).expect("filtered check");
    assert_eq!(fins.packets, 2, "both FINs, the last packets but an ACK: {fins}");
    let _ = std::fs::remove_file(&path);
}
