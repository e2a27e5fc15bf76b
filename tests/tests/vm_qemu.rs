//! The real-VM tier: a real QEMU (10.x, TCG) attaches a VM to `slimtcp-vhost` as a vhost-user
//! net device, and a stock Debian kernel drives it with its own virtio-net driver.
//!
//! The guest (`scripts/build-guest-image.sh`: Debian kernel + busybox initramfs) loads
//! virtio_pci and virtio_net, checks that the device 1af4:1041 is there, brings its interface up
//! (the driver posts receive buffers) and pings the host (the driver transmits ARP frames, which
//! are not protocol requests: the backend must give them back without harm). Then the test stops
//! and continues the VM over QMP (QEMU sends GET_VRING_BASE and restarts the rings), tells the
//! guest to go on through a file on a 9p share, and the guest transmits again, checks that its
//! transmit buffers came back after the restart, and leaves through isa-debug-exit.
//!
//! Afterwards the backend must still be alive and serve the next VMMs on the same socket: a
//! second VM, killed (SIGKILL) once its kernel has transmitted, and then a guest-library
//! instance doing a TCP echo with a Linux server in the namespace.
//!
//! The harness (image, backend process, QEMU, QMP, skipping) is `vm/mod.rs`.

mod vm;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;
use std::time::{Duration, Instant};

use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;
use slimtcp_testkit::wait::wait_for;
use std::io::Write;

use vm::{
    count, counter, last_session_counters, log_shows, read_lossy, Qmp, TapTenant, TempDir, Vm, VmSpec,
    BACKEND_UP,
};

/// The subnet of this test's TAP link: the backend's stack is .2, Linux .1, the guest kernel's
/// own interface .3 (its frames never reach the link: the device speaks the SlimTCP protocol).
const HOST_IP: &str = "10.73.0.1";
const STACK_IP: &str = "10.73.0.2/24";
const GUEST_KERNEL_IP: &str = "10.73.0.3/24";
const ECHO_PORT: u16 = 7000;
/// The guest's success status 0x10 through isa-debug-exit: QEMU exits with (0x10 << 1) | 1.
const GUEST_OK_EXIT: i32 = 33;
/// Queue pairs offered by the backend and configured in QEMU.
const QUEUES: usize = 2;

const BOOT_TO_PHASE1: Duration = Duration::from_secs(60);
const LOG_LINE: Duration = Duration::from_secs(10);
const GUEST_FINISH: Duration = Duration::from_secs(60);

/// Waits until the guest wrote `phase1` (device found, interface up, frames transmitted).
fn wait_phase1(vm: &mut Vm) -> Result<(), String> {
    let phase1 = vm.share.join("phase1");
    let mut exited = None;
    let qemu = &mut vm.qemu;
    let reached = wait_for(BOOT_TO_PHASE1, || {
        if let Ok(Some(status)) = qemu.child().try_wait() {
            exited = Some(status);
            return true;
        }
        phase1.exists()
    });
    match (exited, reached) {
        (Some(status), _) => Err(format!("QEMU exited early: {status}")),
        (None, false) => Err("the guest did not reach phase 1".into()),
        (None, true) => Ok(()),
    }
}

/// The stock kernel's scenario (see the module documentation): no application mode.
fn boot(
    dir: &std::path::Path,
    name: &str,
    socket: &std::path::Path,
    kernel: &std::path::Path,
    initrd: &std::path::Path,
) -> Vm {
    Vm::boot(&VmSpec {
        name,
        dir,
        socket,
        kernel,
        initrd,
        queues: QUEUES,
        append: format!(
            "slimvm.ip={GUEST_KERNEL_IP} slimvm.peer={HOST_IP} slimvm.wait={}",
            GUEST_FINISH.as_secs()
        ),
        run: None,
        reconnect_ms: None,
    })
}

/// The guest library on the host, on the same socket: the guest app's echo over vhost-user.
fn echo_through_guest_library(socket: &std::path::Path, server: SocketAddrV4) {
    let out = Command::new(env!("CARGO_BIN_EXE_slimtcp-vm-guest"))
        .arg("--device")
        .arg(format!("vhost-user:{}", socket.display()))
        .args(["echo", "--server", &server.to_string(), "--count", "16", "--size", "4096"])
        .output()
        .expect("slimtcp-vm-guest");
    assert!(
        out.status.success(),
        "the guest library's echo failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_stock_kernel_drives_the_device_through_stop_cont_and_the_backend_outlives_the_vm() {
    slimtcp_testkit::require_netns!("vm_qemu");
    let Some((_vm_lock, kernel, initrd)) = vm::require_vm("vm_qemu", false) else { return };
    let started = Instant::now();

    let ns = Netns::create("vmqemu").expect("namespace");
    let dir = TempDir::new("vm-qemu");
    let tenant = TapTenant::new(&dir.0, "vmq", STACK_IP, &format!("{HOST_IP}/24"), QUEUES);
    let socket = tenant.socket.clone();
    let mut backend = tenant.start(&ns, &dir.0, "backend");
    let backend_log = backend.log.clone();

    // The first VM: the whole scenario, and a clean exit.
    let mut vm = boot(&dir.0, "vm1", &socket, &kernel, &initrd);
    let share = vm.share.clone();
    let context = |vm: &Vm, what: &str| vm.context(what, &backend_log);
    let mut qmp = Qmp::connect(&vm.qmp, BACKEND_UP);

    // Phase 1: the kernel has the device, its interface is up and it has transmitted.
    if let Err(e) = wait_phase1(&mut vm) {
        panic!("{}", context(&vm, &e));
    }
    assert!(log_shows(&backend_log, "VMM connected", LOG_LINE), "{}", context(&vm, "no VMM connected"));

    // stop: QEMU stops the vhost device (GET_VRING_BASE per ring) before `stop` returns.
    qmp.execute("stop");
    let stop_handled = !read_lossy(&backend_log).contains("connection ended")
        && log_shows(&backend_log, "stopped by the VMM", LOG_LINE);
    qmp.execute("cont");
    std::fs::write(share.join("go"), b"go").expect("tell the guest to go on");

    let status = vm.wait_exit(GUEST_FINISH);
    let backend_text = read_lossy(&backend_log);
    let guest_result = read_lossy(&share.join("result"));
    let early_end: Vec<&str> = backend_text.lines().filter(|l| l.contains("connection ended")).collect();
    assert!(
        early_end.is_empty(),
        "{}",
        context(&vm, &format!("the backend dropped QEMU's connection: {early_end:?}"))
    );
    let status = status.unwrap_or_else(|| panic!("{}", context(&vm, "the VM did not finish")));
    assert_eq!(
        status.code(),
        Some(GUEST_OK_EXIT),
        "{}",
        context(&vm, &format!("guest result: {}", guest_result.trim()))
    );
    assert!(stop_handled, "{}", context(&vm, "no ring stop logged after QMP stop"));

    // The VM is gone: the backend ends the session, logs its counters and waits for the next.
    assert!(
        log_shows(&backend_log, "session counters:", LOG_LINE),
        "{}",
        context(&vm, "no session counters after the VM left")
    );
    let backend_text = read_lossy(&backend_log);
    let counters = last_session_counters(&backend_text, None).expect("session counters parse");
    // Every chain the kernel transmitted is an Ethernet frame, not a request: taken (counted in
    // `requests`), given back unanswered, no error completion and no message written.
    // The guest's last transmit count (frames whose buffers came back): each was one chain.
    let guest_tx: u64 = guest_result
        .split("tx_packets=")
        .nth(1)
        .and_then(|s| s.split("->").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no tx_packets in the guest's result {guest_result:?}"));
    assert!(guest_tx > 0, "the guest transmitted nothing: {guest_result:?}");
    assert!(
        counter(&counters, "requests") >= guest_tx,
        "the backend took fewer transmit chains than the kernel saw completed ({guest_tx}): {counters:?}"
    );
    assert_eq!(
        counter(&counters, "unanswerable chains"),
        counter(&counters, "requests"),
        "every chain of the kernel's driver is an Ethernet frame, not a request: {counters:?}"
    );
    assert_eq!(counter(&counters, "errors"), 0, "{counters:?}");
    assert_eq!(counter(&counters, "rx messages"), 0, "{counters:?}");
    assert!(
        backend_text.contains("VMM disconnected"),
        "{}",
        context(&vm, "the VM's departure was not a normal disconnect")
    );
    assert!(
        matches!(backend.child.child().try_wait(), Ok(None)),
        "{}",
        context(&vm, "the backend process ended with the VM")
    );

    // A second VM on the same socket, killed (SIGKILL) once its kernel has transmitted: a VMM
    // that vanishes without stopping the device. The backend ends that session too.
    let mut vm2 = boot(&dir.0, "vm2", &socket, &kernel, &initrd);
    if let Err(e) = wait_phase1(&mut vm2) {
        panic!("{}", context(&vm2, &format!("second VM: {e}")));
    }
    vm2.qemu.child().kill().expect("kill the second VM");
    let _ = vm2.qemu.child().wait();
    assert!(
        wait_for(LOG_LINE, || count(&read_lossy(&backend_log), "session counters:") == 2),
        "{}",
        context(&vm2, "no second session's counters after the killed VM")
    );
    let backend_text = read_lossy(&backend_log);
    let counters2 = last_session_counters(&backend_text, None).expect("session counters parse");
    assert!(counter(&counters2, "requests") > 0, "the killed VM's frames were not seen: {counters2:?}");
    assert_eq!(
        count(&backend_text, "connection ended"),
        0,
        "{}",
        context(&vm2, "a connection ended in error")
    );
    assert!(
        matches!(backend.child.child().try_wait(), Ok(None)),
        "{}",
        context(&vm2, "the backend process ended with the killed VM")
    );

    // The next VMM on the same socket: the guest library, TCP echo with Linux in the namespace.
    let (_, server) = linux_peer::spawn_tcp_echo_server(
        &ns,
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, ECHO_PORT)),
        1,
        Duration::from_secs(60),
    )
    .expect("echo server");
    echo_through_guest_library(&socket, SocketAddrV4::new(HOST_IP.parse().expect("ip"), ECHO_PORT));
    server.join().expect("echo server");
    assert!(matches!(backend.child.child().try_wait(), Ok(None)), "{}", context(&vm2, "the backend died"));
    let _ = writeln!(
        std::io::stderr(),
        "vm_qemu: VM with stop/cont, a killed VM and the guest library in {:.1} s; counters of the first VM's \
         session: {counters:?}; of the killed VM's: {counters2:?}",
        started.elapsed().as_secs_f64()
    );
}
