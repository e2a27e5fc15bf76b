//! Spec: `--udp` sends datagrams of `--mss` payload bytes and the receiver counts them. Over
//! `--nic memwire` (both ends in this process) both runtimes report nonzero goodput; with
//! `--kernel`, a sender and a lone receiver in two processes talk over loopback inside a
//! namespace the test creates, and the receiver counts what arrived.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{boolean, number, perf, summary, BIN};
use slimtcp_testkit::{require_netns, wait_for, Netns};

/// How long the kernel receiver may take to bind its port.
const BIND_LIMIT: Duration = Duration::from_secs(10);

/// The datagram counts every UDP summary carries, checked against each other.
fn datagram_counts(json: &str) -> (f64, f64) {
    let window = number(json, "datagrams");
    let total = number(json, "total_datagrams");
    assert!(window <= total, "the window is part of the run: {json}");
    (window, total)
}

#[test]
fn memwire_datagrams_of_64_and_1400_bytes_move_on_both_runtimes() {
    for runtime in ["single", "two-core"] {
        for mss in [64u16, 1400] {
            let args = format!(
                "--nic memwire --udp --mss {mss} --connections 2 --duration 1 --runtime {runtime} --json"
            );
            let json = summary(&perf(&args));
            assert!(number(&json, "goodput_bps") > 0.0, "{args}: no goodput: {json}");
            assert_eq!(number(&json, "mss"), f64::from(mss), "{json}");
            assert_eq!(number(&json, "connections"), 2.0, "{json}");
            assert!(boolean(&json, "drained"), "{json}");
            let (window, total) = datagram_counts(&json);
            assert!(window > 0.0, "{json}");
            assert!(number(&json, "datagrams_sent") >= total, "more received than sent: {json}");
            assert_eq!(number(&json, "total_bytes"), total * f64::from(mss), "whole datagrams only: {json}");
        }
    }
}

#[test]
fn memwire_zero_copy_datagrams_move() {
    let json =
        summary(&perf("--nic memwire --udp --mss 1400 --duration 1 --runtime single --zero-copy --json"));
    assert!(number(&json, "goodput_bps") > 0.0, "{json}");
    assert!(datagram_counts(&json).0 > 0.0, "{json}");
}

#[test]
fn kernel_sender_to_a_kernel_receiver_over_loopback_counts_datagrams() {
    require_netns!();
    let ns = Netns::create("pudp").expect("namespace");
    ns.exec_ok(&["ip", "link", "set", "lo", "up"]).expect("loopback up");
    // No --duration: the receiver ends its window once data stopped for a second.
    let receiver = ns
        .command(&[BIN, "--kernel", "--udp", "--listen", "--bind-port", "5011", "--mss", "1400", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("receiver starts");
    let bound = wait_for(BIND_LIMIT, || {
        ns.exec_ok(&["ss", "-Hlun", "sport = :5011"]).is_ok_and(|listing| !listing.trim().is_empty())
    });
    assert!(bound, "the receiver did not bind UDP port 5011");
    let sender = ns
        .command(&[
            BIN,
            "--kernel",
            "--udp",
            "--connect-ip",
            "127.0.0.1",
            "--connect-port",
            "5011",
            "--connections",
            "2",
            "--mss",
            "1400",
            "--duration",
            "1",
            "--json",
        ])
        .output()
        .expect("sender runs");
    let sent = summary(&sender);
    let received = summary(&receiver.wait_with_output().expect("receiver ends"));
    let sent_count = number(&sent, "datagrams_sent");
    let (_, received_count) = datagram_counts(&received);
    assert!(sent_count > 0.0, "{sent}");
    assert!(received_count > 0.0, "nothing counted: {received}");
    assert!(received_count <= sent_count, "more received than sent: {sent} vs {received}");
    assert_eq!(number(&received, "total_bytes"), received_count * 1400.0, "{received}");
    assert!(number(&received, "goodput_bps") > 0.0, "{received}");
    assert_eq!(number(&received, "connections"), 2.0, "two source ports: {received}");
    assert!(boolean(&received, "drained"), "{received}");
}
