//! Spec: `slimtcp-perf --nic dpdk` runs over DPDK `net_memif` between two processes, each with
//! its own EAL: a receiver whose port is the memif server and a sender whose port is the memif
//! client. Both count the same bytes.
//!
//! A memif client cannot start its port before the server listens, so the sender starts once
//! the server's socket is there (DPDK 22.11 makes it an abstract socket: it shows in
//! `/proc/net/unix`, not in the file system, and goes away with the process). Every name is
//! unique per test (socket, EAL file prefix); a failing test kills both processes.

#![cfg(feature = "dpdk")]

mod common;

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{boolean, number, summary, BIN};
use slimtcp_testkit::netns::ChildGuard;
use slimtcp_testkit::wait_for;

/// Limit for the server's socket to appear and for the receiver to end.
const LIMIT: Duration = Duration::from_secs(30);

/// One memif link between two processes: its socket and the EAL arguments of each side.
struct MemifLink {
    socket: String,
    tag: String,
}

impl MemifLink {
    fn new(tag: &str) -> Self {
        let id = format!("{}-{tag}", std::process::id());
        MemifLink { socket: format!("/tmp/slimt-perf-memif-{id}.sock"), tag: id }
    }

    /// EAL arguments of side `role` (`server` or `client`): no hugepages, IOVA as VA, one vdev.
    fn eal(&self, role: &str, lcore: &str) -> Vec<String> {
        [
            "--file-prefix",
            &format!("slimt-perf-{role}-{}", self.tag),
            "--no-huge",
            "-m",
            "256",
            "--no-pci",
            "--no-shconf",
            "--iova-mode=va",
            "-l",
            lcore,
            "--log-level=warning",
            "--vdev",
            &format!("net_memif0,role={role},socket={}", self.socket),
            "--",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    }

    /// Whether a process listens on the socket (abstract or in the file system).
    fn server_listens(&self) -> bool {
        let unix = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
        unix.lines()
            .any(|l| l.ends_with(&format!(" @{}", self.socket)) || l.ends_with(&format!(" {}", self.socket)))
    }
}

impl Drop for MemifLink {
    fn drop(&mut self) {
        // Only a file-system socket (socket-abstract=no) leaves something behind; the EAL leaves
        // its (empty) runtime directory, under /var/run/dpdk for root.
        let _ = std::fs::remove_file(&self.socket);
        for role in ["server", "client"] {
            remove_eal_runtime_dir(&format!("slimt-perf-{role}-{}", self.tag));
        }
    }
}

/// Removes the empty runtime directory an EAL with `--file-prefix prefix` left behind.
fn remove_eal_runtime_dir(prefix: &str) {
    let mut bases = vec!["/var/run/dpdk".to_owned(), "/tmp/dpdk".to_owned()];
    if let Ok(xdg) = std::env::var("XDG_RUNTIME_DIR") {
        bases.push(format!("{xdg}/dpdk"));
    }
    for base in bases {
        let _ = std::fs::remove_dir(format!("{base}/{prefix}"));
    }
}

fn perf(eal: Vec<String>, ours: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(eal).args(ours).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Waits (bounded) for a guarded child and collects what it wrote.
fn finish(mut guard: ChildGuard, limit: Duration) -> Output {
    let mut status = None;
    let ended = wait_for(limit, || {
        status = guard.child().try_wait().ok().flatten();
        status.is_some()
    });
    assert!(ended, "slimtcp-perf did not end within {limit:?}");
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    if let Some(out) = guard.child().stdout.as_mut() {
        out.read_to_end(&mut stdout).expect("stdout");
    }
    if let Some(err) = guard.child().stderr.as_mut() {
        err.read_to_end(&mut stderr).expect("stderr");
    }
    Output { status: status.expect("exited"), stdout, stderr }
}

/// Runs a receiver (memif server) and a sender (memif client) at `mss` for `seconds`; returns
/// the two JSON summaries (sender, receiver).
fn transfer(tag: &str, mss: &str, seconds: &str, extra: &[&str]) -> (String, String) {
    let link = MemifLink::new(tag);
    let mut rx_args = vec![
        "--nic",
        "dpdk",
        "--iface",
        "net_memif0",
        "--bind-ip",
        "10.88.0.2",
        "--bind-eth",
        "02:00:00:00:88:02",
        "--listen",
        "--bind-port",
        "5001",
        "--connections",
        "1",
        "--duration",
        "30",
        "--runtime",
        "single",
        "--json",
    ];
    rx_args.extend_from_slice(extra);
    let receiver = ChildGuard::new(perf(link.eal("server", "0"), &rx_args).spawn().expect("receiver starts"));
    assert!(wait_for(LIMIT, || link.server_listens()), "the memif server never listened on {}", link.socket);
    let mut tx_args = vec![
        "--nic",
        "dpdk",
        "--iface",
        "net_memif0",
        "--bind-ip",
        "10.88.0.1",
        "--bind-eth",
        "02:00:00:00:88:01",
        "--mss",
        mss,
        "--connect-ip",
        "10.88.0.2",
        "--connect-port",
        "5001",
        "--connections",
        "1",
        "--duration",
        seconds,
        "--runtime",
        "single",
        "--json",
    ];
    tx_args.extend_from_slice(extra);
    let sender = ChildGuard::new(perf(link.eal("client", "1"), &tx_args).spawn().expect("sender starts"));
    let sent = finish(sender, LIMIT);
    let received = finish(receiver, LIMIT);
    // Both end at about the same moment, each closing its memif port while its peer goes away:
    // neither may crash doing so (DPDK memif's disconnect race, `nic/dpdk/interrupt_thread.rs`).
    for (who, out) in [("sender", &sent), ("receiver", &received)] {
        assert!(
            out.status.success(),
            "the {who} failed: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    (summary(&sent), summary(&received))
}

#[test]
fn a_sender_and_a_receiver_in_two_processes_count_the_same_bytes_over_memif() {
    let (tx, rx) = transfer("bulk", "1460", "2", &[]);
    assert!(boolean(&tx, "drained"), "the sender's data was not all acknowledged: {tx}");
    assert!(number(&tx, "bytes") > 0.0, "{tx}");
    assert!(number(&rx, "total_bytes") > 0.0, "{rx}");
    assert_eq!(number(&tx, "total_bytes"), number(&rx, "total_bytes"), "sender {tx} vs receiver {rx}");
    assert_eq!(number(&rx, "connections"), 1.0, "{rx}");
}

#[test]
fn small_segments_with_the_zero_copy_api_arrive_in_full_over_memif() {
    let (tx, rx) = transfer("zc64", "64", "1", &["--zero-copy"]);
    assert!(boolean(&tx, "drained"), "{tx}");
    assert!(number(&rx, "total_bytes") > 0.0, "{rx}");
    assert_eq!(number(&tx, "total_bytes"), number(&rx, "total_bytes"), "sender {tx} vs receiver {rx}");
}
