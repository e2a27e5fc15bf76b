//! The real-VM tier with an unmodified application: QEMU (10.x, TCG) boots the guest attached to
//! a real `slimtcp-vhost` (TAP, the Linux kernel as the peer in a namespace), and inside the VM
//! Debian's own dynamically linked `iperf3 -c` runs with `LD_PRELOAD=libslimtcp_preload.so
//! SLIMTCP_DEVICE=pci` (the overlay of scripts/build-guest-apps.sh carries both and their shared
//! libraries) against a kernel `iperf3 -s` on the host. The preload library attaches over the
//! `pci` transport (uio_pci_generic, hugepages), iperf3 exits 0, and the client's sent bytes and
//! the server's received bytes agree (the server stops counting at the test's end, with data
//! still in flight); the backend's session counters show the stream leaving guest memory.

mod vm;

use std::process::Stdio;
use std::time::{Duration, Instant};

use slimtcp_system_tests::iperf3;
use slimtcp_testkit::netns::{ChildGuard, Netns};
use slimtcp_testkit::wait::wait_for;
use vm::{counter, last_session_counters, TapTenant, TempDir, Vm, VmSpec, GUEST_OK_EXIT};

/// The kernel's end of the tenant's TAP link, where the iperf3 server listens.
const HOST_IP: &str = "10.75.0.1";
/// The tenant's address (the stack's, in the backend).
const GUEST_IP: &str = "10.75.0.2";
const PORT: u16 = 5201;
/// The client's `-t`: modest, the guest runs under TCG.
const SECONDS: u32 = 5;
/// The preload library's shared memory (`SLIMTCP_MEMORY_MB`), and the 2 MiB pages reserved at
/// boot for it (with a margin).
const MEMORY_MB: usize = 64;
const HUGEPAGES: usize = MEMORY_MB / 2 + 8;
/// How far the server's count may trail the client's: iperf3's server stops counting when told
/// the test ended, with data still in flight (between two Linux kernels too).
const IN_FLIGHT: u64 = 8 << 20;
/// Less than this moved means the test measured nothing.
const MIN_BYTES: u64 = 1_000_000;
/// Everything in the VM, boot included, ends by then (usually well under).
const VM_LIMIT: Duration = Duration::from_secs(300);
/// The server exits by itself (`-1`) once the client is done.
const SERVER_EXIT: Duration = Duration::from_secs(30);
/// Where the overlay puts the preload library.
const PRELOAD: &str = "/lib/libslimtcp_preload.so";

/// Waits until something in `ns` listens on TCP `port`.
fn listening(ns: &Netns, port: u16) -> bool {
    wait_for(Duration::from_secs(20), || {
        let out = ns.exec_ok(&["ss", "-Htln", &format!("sport = :{port}")]).unwrap_or_default();
        !out.trim().is_empty()
    })
}

#[test]
fn preloaded_iperf3_in_a_vm_sends_to_linux_over_the_pci_transport() {
    slimtcp_testkit::require_netns!("vm_preload");
    let Some((_vm_lock, kernel, initrd)) = vm::require_vm("vm_preload", true) else { return };
    let started = Instant::now();
    let ns = Netns::create("vmpre").expect("namespace");
    let dir = TempDir::new("vm-preload");
    let tenant = TapTenant::new(&dir.0, "vmp", &format!("{GUEST_IP}/24"), &format!("{HOST_IP}/24"), 2);
    let socket = tenant.socket.clone();
    let mut backend = tenant.start(&ns, &dir.0, "backend");

    // The Linux side: a kernel iperf3 server for one test, its JSON report in a file.
    let server_json = dir.0.join("server.json");
    let server_err = dir.0.join("server.err");
    let mut cmd = ns.command(&["iperf3", "-s", "-4", "-1", "-J", "-p", &PORT.to_string()]);
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&server_json).expect("server log"))
        .stderr(std::fs::File::create(&server_err).expect("server log"));
    let mut server = ChildGuard::new(cmd.spawn().expect("iperf3 -s"));
    assert!(
        listening(&ns, PORT),
        "the kernel iperf3 server does not listen: {}",
        vm::read_lossy(&server_err)
    );

    // The guest: the modules (uio_pci_generic among them) are loaded by /init, the hugepages
    // reserved at boot; iperf3's JSON goes to the share, its stderr (the banner) to run.log.
    let run = format!(
        "grep -E 'HugePages_(Total|Free)' /proc/meminfo\n\
         rc=0\n\
         LD_PRELOAD={PRELOAD} SLIMTCP_DEVICE=pci SLIMTCP_LOG=info SLIMTCP_MEMORY_MB={MEMORY_MB} \
         /usr/bin/iperf3 -c {HOST_IP} -p {PORT} -t {SECONDS} -J >/tmp/client.json 2>/tmp/client.err || rc=$?\n\
         cat /tmp/client.err\n\
         cp /tmp/client.json /share/client.json\n\
         echo \"vm-preload: iperf3 exit status $rc\"\n\
         exit $rc\n"
    );
    let mut vm = Vm::boot(&VmSpec {
        name: "vm",
        dir: &dir.0,
        socket: &socket,
        kernel: &kernel,
        initrd: &initrd,
        queues: 2,
        append: format!("hugepages={HUGEPAGES}"),
        run: Some(run),
        reconnect_ms: None,
    });
    let status = vm.wait_exit(VM_LIMIT);
    let log = vm.run_log();
    let client_json = vm.share.join("client.json");
    let context = |what: &str| {
        vm.context(
            &format!(
                "{what}\n--- run.log ---\n{log}\n--- client.json ---\n{}\n--- server ---\n{}{}",
                vm::read_lossy(&client_json),
                vm::read_lossy(&server_json),
                vm::read_lossy(&server_err)
            ),
            &backend.log,
        )
    };
    let status = status.unwrap_or_else(|| panic!("{}", context("the VM did not finish in time")));
    assert!(log.contains("vm-preload: iperf3 exit status 0"), "{}", context("the guest's iperf3 failed"));
    assert_eq!(status.code(), Some(GUEST_OK_EXIT), "{}", context("the guest's script failed"));
    let banner = log
        .lines()
        .find(|l| l.contains("slimtcp-preload") && l.contains("attached to"))
        .unwrap_or_else(|| panic!("{}", context("no banner from the preload library")));
    assert!(banner.contains("attached to pci ("), "not the pci transport: {banner}");
    assert!(banner.contains(&format!("address {GUEST_IP},")), "not the tenant's address: {banner}");

    // The server exits by itself after its one test.
    let server_done = wait_for(SERVER_EXIT, || matches!(server.child().try_wait(), Ok(Some(_))));
    assert!(server_done, "{}", context("the kernel iperf3 server did not finish"));
    let server_status = server.child().wait().expect("iperf3 -s status");
    assert!(server_status.success(), "{}", context("the kernel iperf3 server failed"));

    // Byte counts: the server may trail the client by what was in flight at the test's end.
    let client = iperf3::report(&vm::read_lossy(&client_json), "the guest's iperf3 -c -J");
    let server = iperf3::report(&vm::read_lossy(&server_json), "the kernel's iperf3 -s -J");
    let (sent, received) = iperf3::tcp_bytes(&client, &server);
    assert!(received > MIN_BYTES, "only {received} B moved (client sent {sent} B)");
    assert!(received <= sent, "the server received {received} B of the {sent} B sent");
    assert!(sent - received <= IN_FLIGHT, "the server counted {received} B of the {sent} B sent");
    assert_eq!(client["start"]["connected"][0]["local_host"], GUEST_IP, "the client's address");

    // The backend: the session's counters (logged when the VM left) show the stream, sent by
    // reference from guest memory.
    assert!(
        vm::log_shows(&backend.log, "session counters:", Duration::from_secs(10)),
        "{}",
        context("no session counters")
    );
    let counters = last_session_counters(&backend.text(), None).expect("session counters");
    assert!(counter(&counters, "tx by reference") >= received, "{counters:?}");
    assert_eq!(counter(&counters, "tx copied by backend"), 0, "{counters:?}");
    assert!(backend.alive(), "the backend died");
    let mbps = server["end"]["sum_received"]["bits_per_second"].as_f64().unwrap_or(0.0) / 1e6;
    eprintln!(
        "vm_preload: {:.0} s in all; client sent {sent} B, server received {received} B \
         ({} B in flight, {mbps:.0} Mbit/s at the server); {banner}; session counters: {counters:?}",
        started.elapsed().as_secs_f64(),
        sent - received,
    );
}
