//! Spec: over `--nic tap:IFNAME` inside a namespace the test creates, slimtcp-perf talks to the
//! Linux kernel's TCP both ways, and the byte counts agree on both ends.
//!
//! The TAP interface is created (and given the kernel's address) before the tool attaches to
//! it; all traffic stays on that link (10.77.x.0/24) inside the namespace.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Stdio;
use std::time::Duration;

use common::{boolean, number, summary, BIN};
use slimtcp_testkit::linux_peer::{spawn_tcp_client_send, spawn_tcp_server_recv};
use slimtcp_testkit::{require_netns, Netns};

/// Limit for a Linux peer.
const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// A namespace with TAP interface `ifname` whose kernel side is `10.77.<net>.1/24`.
fn tap_namespace(net: u8) -> (Netns, String) {
    let ns = Netns::create("perf").expect("namespace");
    let ifname = Netns::unique_ifname("ptap");
    let host = format!("10.77.{net}.1/24");
    ns.exec_ok(&["ip", "tuntap", "add", "dev", &ifname, "mode", "tap"]).expect("tuntap add");
    ns.exec_ok(&["ip", "addr", "add", &host, "dev", &ifname]).expect("address");
    ns.exec_ok(&["ip", "link", "set", &ifname, "up"]).expect("link up");
    (ns, ifname)
}

#[test]
fn slimtcp_sender_to_a_linux_receiver_delivers_every_byte_it_reports() {
    require_netns!();
    let (ns, ifname) = tap_namespace(1);
    let listen = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 77, 1, 1), 5001));
    let (_, linux) = spawn_tcp_server_recv(&ns, listen, PEER_TIMEOUT).expect("linux receiver");
    let nic = format!("tap:{ifname}");
    let out = ns
        .command(&[
            BIN,
            "--nic",
            &nic,
            "--bind-ip",
            "10.77.1.2",
            "--bind-eth",
            "02:00:00:00:77:02",
            "--tcp",
            "--mss",
            "1460",
            "--connect-ip",
            "10.77.1.1",
            "--connect-port",
            "5001",
            "--connections",
            "1",
            "--duration",
            "1",
            "--runtime",
            "single",
            "--json",
        ])
        .output()
        .expect("slimtcp-perf runs");
    let json = summary(&out);
    let received = linux.join().expect("linux receiver finishes");
    assert!(boolean(&json, "drained"), "{json}");
    assert!(received.bytes > 0, "Linux received nothing");
    assert_eq!(number(&json, "total_bytes"), received.bytes as f64, "sender's count vs Linux's: {json}");
    assert!(number(&json, "bytes") > 0.0, "{json}");
}

#[test]
fn linux_sender_to_a_slimtcp_listener_is_counted_exactly() {
    require_netns!();
    let (ns, ifname) = tap_namespace(2);
    let nic = format!("tap:{ifname}");
    // --connections 1: the listener ends once one connection has come and gone; --duration
    // bounds it in case none comes. Two-core runtime: the application thread and the worker.
    let child = ns
        .command(&[
            BIN,
            "--nic",
            &nic,
            "--bind-ip",
            "10.77.2.2",
            "--bind-eth",
            "02:00:00:00:77:03",
            "--tcp",
            "--listen",
            "--bind-port",
            "5002",
            "--connections",
            "1",
            "--duration",
            "30",
            "--runtime",
            "two-core",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("slimtcp-perf starts");
    let total: u64 = 8 << 20;
    let target = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 77, 2, 2), 5002));
    // The Linux client retries refused connects until the listener is up.
    let sent = spawn_tcp_client_send(&ns, target, total, 7, PEER_TIMEOUT).expect("linux sender").join();
    let out = child.wait_with_output().expect("slimtcp-perf ends");
    let sent = sent.expect("linux sender finishes");
    assert_eq!(sent.bytes, total);
    let json = summary(&out);
    assert_eq!(number(&json, "total_bytes"), total as f64, "{json}");
    assert_eq!(number(&json, "connections"), 1.0, "{json}");
}
