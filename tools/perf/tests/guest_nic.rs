//! Spec: `slimtcp-perf --nic guest:SOCKET_PATH` runs the same workload over the guest library,
//! attached over vhost-user to a `slimtcp-vhost` backend whose TAP link leads to a Linux
//! receiver (`slimtcp-perf --kernel --listen`) in a namespace the test creates; both ends count
//! the same bytes.

mod common;

use std::time::{Duration, Instant};

use common::{boolean, number, summary, BIN};
use slimtcp::iface::InterfaceConfig;
use slimtcp::wire::EthernetAddress;
use slimtcp_testkit::{require_netns, wait_for, Netns};
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant, StopHandle, TenantConfig};

#[test]
fn guest_library_sender_to_a_linux_receiver_through_the_backend() {
    require_netns!();
    let ns = Netns::create("pguest").expect("namespace");
    let dir = std::env::temp_dir().join(format!("slimtcp-perf-guest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let socket = dir.join("vhost.sock");
    let ifname = Netns::unique_ifname("pgst");
    let cfg = TenantConfig {
        socket: socket.clone(),
        iface: InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0x78, 2]), [10, 78, 0, 2].into(), 24),
        pairs: 1,
        core: None,
        name: "perf-guest".into(),
        sandbox: Sandbox::default(),
        limits: Default::default(),
    };
    let backend = ns
        .spawn("backend", move || {
            let make_nic = move || {
                let tap = slimtcp::nic::tap::TapNic::open(&ifname).map_err(|e| e.to_string())?;
                tap.set_up().map_err(|e| e.to_string())?;
                tap.set_host_address([10, 78, 0, 1].into(), 24).map_err(|e| e.to_string())?;
                Ok(tap)
            };
            serve_tenant(&cfg, make_nic, &StopHandle::default(), Some(1))
        })
        .expect("backend thread");
    let t0 = Instant::now();
    while !socket.exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "no backend socket");
        std::thread::sleep(Duration::from_millis(10));
    }
    // The backend creates its TAP interface for the first VMM connection, so the Linux
    // receiver listens on the wildcard address (which exists already).
    let receiver = ns
        .command(&[
            BIN,
            "--kernel",
            "--tcp",
            "--listen",
            "--bind-ip",
            "0.0.0.0",
            "--bind-port",
            "5001",
            "--connections",
            "1",
            "--duration",
            "30",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("linux receiver");
    // The sender does not retry a refused connect: start it once the receiver listens (its
    // namespace's TCP table, seen through the receiver's /proc entry).
    let tcp_table = format!("/proc/{}/net/tcp", receiver.id());
    let listening = wait_for(Duration::from_secs(20), || {
        std::fs::read_to_string(&tcp_table).unwrap_or_default().lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // local_address 00000000:1389 (port 5001), state 0A (LISTEN)
            f.len() > 3 && f[1].ends_with(":1389") && f[3] == "0A"
        })
    });
    assert!(listening, "the Linux receiver never listened");
    let sock = socket.display().to_string();
    let nic = format!("guest:{sock}");
    let out = std::process::Command::new(BIN)
        .args([
            "--nic",
            &nic,
            "--tcp",
            "--mss",
            "1460",
            "--connect-ip",
            "10.78.0.1",
            "--connect-port",
            "5001",
            "--connections",
            "1",
            "--duration",
            "1",
            "--json",
        ])
        .output()
        .expect("slimtcp-perf runs");
    let sent = summary(&out);
    let received = summary(&receiver.wait_with_output().expect("receiver ends"));
    assert!(boolean(&sent, "drained"), "{sent}");
    assert!(number(&sent, "goodput_bps") > 0.0, "{sent}");
    assert!(sent.contains("\"nic\":\"guest:"), "{sent}");
    assert_eq!(
        number(&sent, "total_bytes"),
        number(&received, "total_bytes"),
        "sender {sent} vs Linux {received}"
    );
    backend.join().expect("backend thread").expect("backend served cleanly");
    let _ = std::fs::remove_dir_all(&dir);
}
