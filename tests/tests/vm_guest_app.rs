//! The real-VM tier with a guest application: QEMU (10.x, TCG) boots a stock Debian kernel
//! attached to a real `slimtcp-vhost` (TAP, the Linux kernel as the peer in a namespace), and
//! inside the VM `slimtcp-vm-guest` drives the device from user space over the guest library's
//! `pci` transport (uio_pci_generic, hugepages): a 64 B echo, 100 MB guest -> Linux and 100 MB
//! Linux -> guest (SHA-256 on the receiving side), 256 concurrent connections with epoll, UDP
//! with addresses, the C example (`c-echo`, linked statically against libslimtcp_guest.a), and
//! `slimtcp-perf --nic pci` sending to a Linux receiver. Slow echoes (Linux answers after 300 ms)
//! check that the app sleeps on the device's interrupt (INTx through uio) and is woken by it. Every byte is
//! checked; the backend's session counters must show no payload (TCP or UDP) copied on transmit.

mod vm;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use slimtcp_system_tests::workspace_bin;
use slimtcp_testkit::data::{hex, pattern_digest};
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;
use vm::{counter, last_session_counters, TapTenant, TempDir, Vm, VmSpec, GUEST_OK_EXIT};

const HOST_IP: &str = "10.74.0.1";
const STACK_IP: &str = "10.74.0.2/24";
const BULK: u64 = 100_000_000;
const SEND_SEED: u64 = 1;
const RECV_SEED: u64 = 2;
const CONNECTIONS: usize = 256;
/// The bytes each of the `many` connections sends (and gets echoed).
const MANY_SIZE: usize = 4096;
/// Everything in the VM, boot included, ends by then (TCG is slow; usually well under).
const VM_LIMIT: Duration = Duration::from_secs(400);
const PEER_LIMIT: Duration = Duration::from_secs(420);

/// An echo server in `ns` on `port` that answers each read after `delay` (one connection): the
/// guest's waits are long enough to sleep on the device's interrupt.
fn spawn_slow_echo(ns: &Netns, port: u16, delay: Duration) -> slimtcp_testkit::netns::NsThread<u64> {
    let listener = ns
        .run(|| std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))))
        .expect("slow echo bind");
    ns.spawn("slow-echo", move || {
        let Ok((mut conn, _)) = listener.accept() else { return 0 };
        let mut buf = [0u8; 4096];
        let mut echoed = 0;
        while let Ok(n) = conn.read(&mut buf) {
            if n == 0 {
                break;
            }
            std::thread::sleep(delay);
            if conn.write_all(&buf[..n]).is_err() {
                break;
            }
            echoed += n as u64;
        }
        echoed
    })
    .expect("slow echo thread")
}

#[test]
fn a_guest_app_in_a_vm_moves_exact_data_with_linux_over_the_pci_transport() {
    slimtcp_testkit::require_netns!("vm_guest_app");
    let Some((_vm_lock, kernel, initrd)) = vm::require_vm("vm_guest_app", true) else { return };
    let started = Instant::now();
    let ns = Netns::create("vmapp").expect("namespace");
    let dir = TempDir::new("vm-guest-app");
    let tenant = TapTenant::new(&dir.0, "vma", STACK_IP, &format!("{HOST_IP}/24"), 2);
    let socket = tenant.socket.clone();
    let mut backend = tenant.start(&ns, &dir.0, "backend");

    // The Linux side.
    let any = |port| SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
    let (_, echo) = linux_peer::spawn_tcp_echo_server(&ns, any(7000), 1, PEER_LIMIT).expect("echo server");
    let (_, sink) = linux_peer::spawn_tcp_server_recv(&ns, any(9000), PEER_LIMIT).expect("receiver");
    let (_, source) =
        linux_peer::spawn_tcp_server_send(&ns, any(9001), BULK, RECV_SEED, PEER_LIMIT).expect("sender");
    let (_, many) =
        linux_peer::spawn_tcp_echo_server(&ns, any(7001), CONNECTIONS, PEER_LIMIT).expect("echo server");
    let (_, udp) = linux_peer::spawn_udp_echo_server(&ns, any(7002), 200, PEER_LIMIT).expect("udp echo");
    let (_, c_echo) = linux_peer::spawn_tcp_echo_server(&ns, any(7003), 1, PEER_LIMIT).expect("echo server");
    let slow = spawn_slow_echo(&ns, 7004, Duration::from_millis(300));
    let perf = ns
        .spawn_cmd(&[
            workspace_bin("slimtcp-perf").to_str().expect("utf-8 path"),
            "--kernel",
            "--listen",
            "--bind-port",
            "5201",
            "--connections",
            "1",
        ])
        .expect("slimtcp-perf receiver");

    let app = "/bin/slimtcp-vm-guest --device pci";
    // First the set-up errors a user meets, each one line naming what to do (`!`: must fail).
    let setup_errors = format!(
        "! /bin/slimtcp-vm-guest --device pci:0000:00:1f.0 echo --server {HOST_IP}:1 2>/tmp/e1\n\
         grep -q 'not a modern virtio-net device' /tmp/e1 && cat /tmp/e1\n\
         ! /bin/slimtcp-vm-guest --device pci:0000:00:09.0 echo --server {HOST_IP}:1 2>/tmp/e2\n\
         grep -q 'does not exist' /tmp/e2 && cat /tmp/e2\n\
         ! {app} --memory 1073741824 echo --server {HOST_IP}:1 2>/tmp/e3\n\
         grep -q 'echo 512 > /proc/sys/vm/nr_hugepages' /tmp/e3 && cat /tmp/e3\n"
    );
    let run = format!(
        "set -e\n{setup_errors}\
         {app} echo --server {HOST_IP}:7000 --count 200 --size 64\n\
         irqs() {{ awk '/uio_pci_generic/ {{ print $2 }}' /proc/interrupts; }}\n\
         before=$(irqs)\n\
         {app} echo --server {HOST_IP}:7004 --count 5 --size 64\n\
         after=$(irqs)\n\
         echo \"vm-guest: INTx interrupts during 5 slow echoes: $before -> $after\"\n\
         [ \"$after\" -gt \"$before\" ]\n\
         {app} send --server {HOST_IP}:9000 --bytes {BULK} --seed {SEND_SEED} --zero-copy\n\
         {app} recv --server {HOST_IP}:9001 --bytes {BULK} --seed {RECV_SEED}\n\
         {app} many --server {HOST_IP}:7001 --connections {CONNECTIONS} --size {MANY_SIZE}\n\
         {app} udp --server {HOST_IP}:7002 --count 200\n\
         /bin/c-echo pci {HOST_IP} 7003 200 1000\n\
         /bin/slimtcp-perf --nic pci --connect-ip {HOST_IP} --connect-port 5201 --connections 1 --duration 3\n\
"
    );
    let mut vm = Vm::boot(&VmSpec {
        name: "vm",
        dir: &dir.0,
        socket: &socket,
        kernel: &kernel,
        initrd: &initrd,
        queues: 2,
        append: "hugepages=64".into(),
        run: Some(run),
        reconnect_ms: None,
    });
    let status = vm.wait_exit(VM_LIMIT);
    let log = vm.run_log();
    let context = |what: &str| vm.context(&format!("{what}\n--- run.log ---\n{log}"), &backend.log);
    let status = status.unwrap_or_else(|| panic!("{}", context("the VM did not finish in time")));
    assert_eq!(status.code(), Some(GUEST_OK_EXIT), "{}", context("the guest app failed"));

    // Far sides: Linux got the guest's stream, the guest got Linux's (its digest printed).
    let got = sink.join().expect("Linux receiver");
    assert!(
        got.matches_pattern(SEND_SEED, BULK),
        "Linux received {} B, not the guest's {BULK} B stream",
        got.bytes
    );
    let sent = source.join().expect("Linux sender");
    assert_eq!(sent.bytes, BULK);
    let digest = hex(&pattern_digest(RECV_SEED, BULK));
    assert!(log.contains(&format!("sha256={digest}")), "{}", context("the guest's digest differs"));
    echo.join().expect("echo server");
    assert_eq!(many.join().expect("many echo server").len(), CONNECTIONS);
    assert_eq!(udp.join().expect("udp echo"), 200);
    c_echo.join().expect("the C example's echo server");
    assert_eq!(slow.join().expect("slow echo"), 5 * 64, "the slow echoes");
    assert!(log.contains("c-echo: ok 200 messages"), "{}", context("the C example did not echo"));
    let perf_lines: Vec<&str> = log.lines().filter(|l| l.starts_with("pps=")).collect();
    assert!(!perf_lines.is_empty(), "{}", context("slimtcp-perf printed no pps= lines"));
    drop(perf);

    // The VM left (isa-debug-exit): the session's counters are logged.
    assert!(
        vm::log_shows(&backend.log, "session counters:", Duration::from_secs(10)),
        "{}",
        context("no counters")
    );
    let counters = last_session_counters(&backend.text(), None).expect("session counters");
    assert_eq!(counter(&counters, "tx copied by backend"), 0, "{counters:?}");
    // TCP segments and UDP datagrams go by reference from guest memory: nothing copied but
    // segments and datagrams shorter than EXTERNAL_MIN_PAYLOAD (the echoes, the small
    // datagrams), which cost less copied, and `COPY` sends: only the 256 `many` sockets' may
    // go so (past half the ring's descriptors held, if those chains grew old in the slow TCG
    // guest); the bulk stream's share of chains keeps it zero copy.
    let udp_sent: u64 = log
        .split("udp_sent_bytes=")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}", context("no udp_sent_bytes in the guest's output")));
    let copy_sends = counter(&counters, "tx sends copied");
    assert_eq!(
        counter(&counters, "stack tx payload copied"),
        counter(&counters, "stack tx short payload copied") + copy_sends,
        "{counters:?}"
    );
    assert!(copy_sends <= (CONNECTIONS * MANY_SIZE) as u64, "only `many` copies: {counters:?}");
    assert_eq!(counter(&counters, "NIC copied guest payload"), 0, "{counters:?}");
    assert!(counter(&counters, "tx by reference") >= BULK + udp_sent, "{counters:?}");
    assert!(counter(&counters, "rx copied") >= BULK, "{counters:?}");
    assert!(backend.alive(), "the backend died");
    let summary: Vec<&str> = log.lines().filter(|l| l.contains(" ok ") || l.contains("summary")).collect();
    eprintln!(
        "vm_guest_app: {:.0} s in all; guest: {summary:#?}; perf: {:?}; session counters: {counters:?}",
        started.elapsed().as_secs_f64(),
        perf_lines.last()
    );
}
