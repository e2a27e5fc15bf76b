//! The real-VM tier under faults: two VMs on two tenants of one `slimtcp-vhost` process, a hostile
//! guest (garbage descriptor chains through the real device), a guest app killed mid-transfer, QMP `stop`/`cont` mid-transfer, and the backend restarted while a
//! VM runs (QEMU reconnects). Each VM runs the guest app over the `pci` transport (see
//! vm_guest_app.rs); every transfer that must complete is checked byte for byte by Linux.

mod vm;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;
use vm::{log_shows, Backend, Qmp, TapTenant, TempDir, Vm, VmSpec, GUEST_OK_EXIT};

const VM_LIMIT: Duration = Duration::from_secs(300);
const PEER_LIMIT: Duration = Duration::from_secs(320);
const MARK: Duration = Duration::from_secs(120);
const BULK: u64 = 100_000_000;
/// Longer than any test runs at TCG speed: a transfer that is interrupted, never finished.
const ENDLESS: u64 = 50_000_000_000;

fn any(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
}

fn spec<'a>(
    name: &'a str,
    dir: &'a std::path::Path,
    socket: &'a std::path::Path,
    image: &'a (std::path::PathBuf, std::path::PathBuf),
    run: String,
) -> VmSpec<'a> {
    VmSpec {
        name,
        dir,
        socket,
        kernel: &image.0,
        initrd: &image.1,
        queues: 2,
        append: "hugepages=64".into(),
        run: Some(run),
        reconnect_ms: None,
    }
}

#[test]
fn two_vms_on_two_tenants_survive_a_killed_app_and_stop_cont() {
    slimtcp_testkit::require_netns!("vm_faults");
    let Some((_vm_lock, kernel, initrd)) = vm::require_vm("vm_faults", true) else { return };
    let image = (kernel, initrd);
    let started = Instant::now();
    let ns = Netns::create("vmflt").expect("namespace");
    let dir = TempDir::new("vm-faults");
    let (sock_a, sock_b) = (dir.0.join("a.sock"), dir.0.join("b.sock"));
    let (tap_a, tap_b) = (Netns::unique_ifname("vfa"), Netns::unique_ifname("vfb"));
    let ten_a = format!(
        "name=alpha,socket={},tap={tap_a},ip=10.75.1.2/24,host-ip=10.75.1.1/24,queues=2",
        sock_a.display()
    );
    let ten_b = format!(
        "name=beta,socket={},tap={tap_b},ip=10.75.2.2/24,host-ip=10.75.2.1/24,mac=02:00:00:00:75:02,queues=2",
        sock_b.display()
    );
    let mut backend = Backend::start(&ns, &dir.0, "backend", &["--tenant", &ten_a, "--tenant", &ten_b], 2);

    // Tenant alpha's VM: hostile chains on one pair (errors back, then the other pair echoes),
    // an endless send, killed; then a fresh app run: echo and a verified send.
    let (_, killed_sink) = linux_peer::spawn_tcp_server_recv(&ns, any(9100), PEER_LIMIT).expect("receiver");
    let (_, echo_a) = linux_peer::spawn_tcp_echo_server(&ns, any(7100), 2, PEER_LIMIT).expect("echo");
    let (_, sink_a) = linux_peer::spawn_tcp_server_recv(&ns, any(9101), PEER_LIMIT).expect("receiver");
    // Tenant beta's VM: one send, stopped and continued by the test mid-way.
    let (_, sink_b) = linux_peer::spawn_tcp_server_recv(&ns, any(9200), PEER_LIMIT).expect("receiver");

    let app = "/bin/slimtcp-vm-guest --device pci";
    let run_a = format!(
        "{app} hostile --server 10.75.1.1:7100 || exit 9\n\
         {app} send --server 10.75.1.1:9100 --bytes {ENDLESS} &\n\
         pid=$!\n\
         sleep 2\n\
         kill -9 $pid\n\
         wait $pid\n\
         echo \"vm-guest: killed the sender (status $?)\"\n\
         set -e\n\
         {app} echo --server 10.75.1.1:7100 --count 100 --size 64\n\
         {app} send --server 10.75.1.1:9101 --bytes {BULK} --seed 11\n"
    );
    let run_b = format!("set -e\n{app} send --server 10.75.2.1:9200 --bytes {} --seed 12\n", 3 * BULK);
    let mut vm_a = Vm::boot(&spec("alpha", &dir.0, &sock_a, &image, run_a));
    let mut vm_b = Vm::boot(&spec("beta", &dir.0, &sock_b, &image, run_b));

    // Beta: stop for a second once its transfer runs, then continue.
    let mut qmp = Qmp::connect(&vm_b.qmp, vm::BACKEND_UP);
    let b_log = vm_b.share.join("run.log");
    assert!(
        log_shows(&b_log, "send connected", MARK),
        "{}",
        vm_b.context("beta never connected", &backend.log)
    );
    qmp.execute("stop");
    std::thread::sleep(Duration::from_secs(1));
    qmp.execute("cont");

    let status_a = vm_a.wait_exit(VM_LIMIT);
    let status_b = vm_b.wait_exit(VM_LIMIT);
    let ctx =
        |vm: &Vm, what: &str| vm.context(&format!("{what}\n--- run.log ---\n{}", vm.run_log()), &backend.log);
    assert_eq!(status_a.and_then(|s| s.code()), Some(GUEST_OK_EXIT), "{}", ctx(&vm_a, "alpha failed"));
    assert_eq!(status_b.and_then(|s| s.code()), Some(GUEST_OK_EXIT), "{}", ctx(&vm_b, "beta failed"));

    let got_b = sink_b.join().expect("beta's receiver");
    assert!(got_b.matches_pattern(12, 3 * BULK), "beta's transfer across stop/cont: {} B", got_b.bytes);
    let got_a = sink_a.join().expect("alpha's receiver");
    assert!(got_a.matches_pattern(11, BULK), "alpha's transfer after the killed app: {} B", got_a.bytes);
    echo_a.join().expect("alpha's echo");
    // The killed app's connection was reset when the next app said hello: it ended, short.
    let killed = killed_sink.join();
    assert!(
        killed.as_ref().map_or(true, |t| t.bytes < ENDLESS),
        "the killed sender's connection completed?! {killed:?}"
    );
    let text = backend.text();
    assert!(text.contains("sockets of the previous one reset"), "{}", ctx(&vm_a, "no pair restart logged"));
    assert!(text.contains("stopped by the VMM"), "{}", ctx(&vm_b, "no ring stop logged"));
    assert!(backend.alive(), "the backend died");
    eprintln!(
        "vm_faults: two VMs in {:.0} s; alpha: {:?}; beta: {:?}; killed connection: {killed:?}",
        started.elapsed().as_secs_f64(),
        vm_a.run_log().lines().filter(|l| l.contains(" ok ")).collect::<Vec<_>>(),
        vm_b.run_log().lines().filter(|l| l.contains(" ok ")).collect::<Vec<_>>(),
    );
}

#[test]
fn a_backend_restart_gives_the_app_enetdown_and_the_next_run_works() {
    slimtcp_testkit::require_netns!("vm_faults");
    let Some((_vm_lock, kernel, initrd)) = vm::require_vm("vm_faults", true) else { return };
    let image = (kernel, initrd);
    let ns = Netns::create("vmrst").expect("namespace");
    let dir = TempDir::new("vm-restart");
    let tenant = TapTenant::new(&dir.0, "vmr", "10.76.0.2/24", "10.76.0.1/24", 2);
    let socket = tenant.socket.clone();
    let backend = tenant.start(&ns, &dir.0, "backend1");
    let (_, _dead_sink) = linux_peer::spawn_tcp_server_recv(&ns, any(9300), PEER_LIMIT).expect("receiver");
    let (_, echo) = linux_peer::spawn_tcp_echo_server(&ns, any(7300), 1, PEER_LIMIT).expect("echo");

    let app = "/bin/slimtcp-vm-guest --device pci";
    // The first run must fail with ENETDOWN; then runs are retried until the backend is back.
    let run = format!(
        "if {app} send --server 10.76.0.1:9300 --bytes {ENDLESS} 2>/share/send.err; then exit 1; fi\n\
         cat /share/send.err\n\
         grep -q ENETDOWN /share/send.err || exit 2\n\
         n=0\n\
         until {app} echo --server 10.76.0.1:7300 --count 50 --size 64; do\n\
           n=$((n + 1)); [ $n -lt 20 ] || exit 3; sleep 1\n\
         done\n"
    );
    let mut vm = Vm::boot(&VmSpec { reconnect_ms: Some(500), ..spec("vm", &dir.0, &socket, &image, run) });
    let run_log = vm.share.join("run.log");
    assert!(log_shows(&run_log, "send connected", MARK), "{}", vm.context("never connected", &backend.log));

    // SIGKILL: no goodbye. Then a new backend process on the same socket and TAP.
    drop(backend);
    let _ = std::fs::remove_file(&socket);
    let backend2 = tenant.start(&ns, &dir.0, "backend2");
    let status = vm.wait_exit(VM_LIMIT);
    let log = vm.run_log();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(GUEST_OK_EXIT),
        "{}",
        vm.context(&format!("the guest did not recover\n--- run.log ---\n{log}"), &backend2.log)
    );
    echo.join().expect("echo after the restart");
    eprintln!(
        "vm_faults restart: {}",
        log.lines().filter(|l| l.starts_with("vm-guest")).collect::<Vec<_>>().join(" | ")
    );
}
