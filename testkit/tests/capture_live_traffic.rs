//! A live capture between two namespaces records real traffic completely, and the checker
//! finds Linux's own packets well-formed once offloads are off.

use std::net::SocketAddr;
use std::time::Duration;

use slimtcp_testkit::capture::Capture;
use slimtcp_testkit::check::{check_wellformed, check_wellformed_matching};
use slimtcp_testkit::linux_peer::{spawn_tcp_server_recv, tcp_client_send};
use slimtcp_testkit::{require_netns, Netns};

#[test]
fn traffic_over_a_veth_pair_is_captured_and_well_formed() {
    require_netns!("traffic_over_a_veth_pair_is_captured_and_well_formed");
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

    let pcap = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("live-{}.pcap", std::process::id()));
    let capture = Capture::start(&a, &va, &pcap).expect("capture starts");
    let (addr, server) =
        spawn_tcp_server_recv(&a, SocketAddr::from(([10, 77, 0, 1], 0)), Duration::from_secs(60))
            .expect("listen");
    let sent = tcp_client_send(&b, addr, 1 << 20, 3, Duration::from_secs(60)).expect("send 1 MiB");
    assert_eq!(server.join().expect("receive"), sent);
    let path = capture.stop().expect("capture stops");

    let report = check_wellformed(&path).expect("tshark checks");
    assert!(report.packets >= 10, "too few packets captured: {report}");
    assert!(report.is_clean(), "{report}");
    let syns = check_wellformed_matching(&path, Some("tcp.flags.syn == 1")).expect("filtered check");
    assert_eq!(syns.packets, 2, "SYN and SYN-ACK, the first packets, must be in the capture: {syns}");
    let _ = std::fs::remove_file(&path);
}
