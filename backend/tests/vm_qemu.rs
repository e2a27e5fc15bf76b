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
//! Needs root (namespace, TAP), `qemu-system-x86_64` and the guest image. The test runs the
//! image script itself (it caches the image under target/vm); without QEMU or the
//! image it says SKIP, unless `SLIMTCP_REQUIRE_NETNS` is set (as `make test` does, after
//! installing QEMU and building the image): then it fails. `SLIMTCP_VM_KEEP=1` keeps the logs.

mod e2e;

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::{ChildGuard, Netns};
use slimtcp_testkit::skip::REQUIRE_ENV;
use slimtcp_testkit::wait::wait_for;

/// The subnet of this test's TAP link: the backend's stack is .2, Linux .1, the guest kernel's
/// own interface .3 (its frames never reach the link: the device speaks the SlimTCP protocol).
const HOST_IP: &str = "10.73.0.1";
const STACK_IP: &str = "10.73.0.2/24";
const GUEST_KERNEL_IP: &str = "10.73.0.3/24";
const ECHO_PORT: u16 = 7000;
/// The guest's success status 0x10 through isa-debug-exit: QEMU exits with (0x10 << 1) | 1.
const GUEST_OK_EXIT: i32 = 33;
/// Queue pairs offered by the backend and configured in QEMU.
const QUEUES: &str = "2";

const BACKEND_UP: Duration = Duration::from_secs(20);
const BOOT_TO_PHASE1: Duration = Duration::from_secs(60);
const LOG_LINE: Duration = Duration::from_secs(10);
const GUEST_FINISH: Duration = Duration::from_secs(60);

/// Set to keep the test's directory (backend log, guest serial log, QEMU's output, the share).
const KEEP_ENV: &str = "SLIMTCP_VM_KEEP";

/// A directory removed when dropped (kept, and named on stderr, if [`KEEP_ENV`] is set).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var(KEEP_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
            let _ = writeln!(std::io::stderr(), "vm_qemu: logs kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

/// Says SKIP (or fails under `SLIMTCP_REQUIRE_NETNS`) and returns true if `reason` is set.
fn skip_because(reason: Option<String>) -> bool {
    let Some(reason) = reason else { return false };
    let required = std::env::var(REQUIRE_ENV).map(|v| !v.is_empty() && v != "0").unwrap_or(false);
    if required {
        panic!("vm_qemu: {reason} ({REQUIRE_ENV} is set; `make test` installs QEMU and builds the image)");
    }
    let _ = writeln!(std::io::stderr(), "SKIP vm_qemu: {reason}");
    true
}

/// `qemu-system-x86_64`, if it runs.
fn qemu_unavailable() -> Option<String> {
    match Command::new("qemu-system-x86_64").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("qemu-system-x86_64 --version failed ({})", out.status)),
        Err(e) => Some(format!("qemu-system-x86_64 not found ({e}); run scripts/install-deps.sh")),
    }
}

/// The guest kernel and initramfs from scripts/build-guest-image.sh, which rebuilds them when
/// the kernel package or the script changed and otherwise returns at once (cached in target/vm).
fn guest_image() -> Result<(PathBuf, PathBuf), String> {
    let dir = std::env::var_os("VM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target").join("vm"));
    let kernel = dir.join("vmlinux");
    let initrd = dir.join("initramfs.cpio.gz");
    let script = workspace_root().join("scripts").join("build-guest-image.sh");
    let built = match Command::new(&script).env("VM_DIR", &dir).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run {}: {e}", script.display())),
    };
    match built {
        Ok(()) if kernel.exists() && initrd.exists() => Ok((kernel, initrd)),
        Ok(()) => Err(format!("{} left no image in {}", script.display(), dir.display())),
        // Offline, say: an image built earlier still serves.
        Err(e) if kernel.exists() && initrd.exists() => {
            let _ = writeln!(std::io::stderr(), "vm_qemu: using the existing image: {e}");
            Ok((kernel, initrd))
        }
        Err(e) => Err(e),
    }
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

/// The last `n` lines of a file, for failure messages.
fn tail(path: &Path, n: usize) -> String {
    let text = read_lossy(path);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A QMP session on QEMU's control socket: commands in, their `return` (or `error`) out;
/// asynchronous events in between are skipped.
struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    fn connect(path: &Path, timeout: Duration) -> Qmp {
        let up = wait_for(timeout, || path.exists());
        assert!(up, "QEMU did not create its QMP socket {}", path.display());
        let stream = UnixStream::connect(path).expect("connect to QMP");
        stream.set_read_timeout(Some(timeout)).expect("QMP read timeout");
        let writer = stream.try_clone().expect("QMP stream clone");
        let mut qmp = Qmp { reader: BufReader::new(stream), writer };
        let greeting = qmp.line();
        assert!(greeting.contains("\"QMP\""), "not a QMP greeting: {greeting}");
        qmp.execute("qmp_capabilities");
        qmp
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("read from QMP");
        assert!(n > 0, "QMP connection closed");
        line
    }

    /// Runs `command` and returns its answer line; panics on an `error` answer.
    fn execute(&mut self, command: &str) -> String {
        writeln!(self.writer, "{{\"execute\": \"{command}\"}}").expect("write to QMP");
        loop {
            let line = self.line();
            if line.contains("\"return\"") {
                return line;
            }
            assert!(!line.contains("\"error\""), "QMP {command}: {line}");
        }
    }
}

/// Waits until `path`'s text contains `needle` or `timeout` passes.
fn log_shows(path: &Path, needle: &str, timeout: Duration) -> bool {
    wait_for(timeout, || read_lossy(path).contains(needle))
}

/// The numbers of the last `session counters:` line, by name (`requests` -> 12, ...).
fn last_session_counters(log: &str) -> Option<Vec<(String, u64)>> {
    let line = log.lines().rev().find(|l| l.contains("session counters: "))?;
    let body = line.split("session counters: ").nth(1)?;
    Some(
        body.split(", ")
            .filter_map(|item| {
                let words: Vec<&str> = item.split(' ').collect();
                let (value_at, _) = words.iter().enumerate().find(|(_, w)| w.parse::<u64>().is_ok())?;
                Some((words[..value_at].join(" "), words[value_at].parse().ok()?))
            })
            .collect(),
    )
}

fn counter(counters: &[(String, u64)], name: &str) -> u64 {
    counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap_or_else(|| {
        panic!("no counter {name:?} in {counters:?}");
    })
}

/// Waits for `child` to exit, up to `timeout`.
fn wait_exit(child: &mut ChildGuard, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.child().try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The guest library on the same socket: one TCP connection to the Linux echo server, 64 KiB
/// in 4 KiB messages, each echo checked.
fn echo_through_guest_library(socket: &Path, server: SocketAddrV4) {
    let mut api =
        GuestSockets::connect_vhost_user(socket, GuestConfig::default()).expect("guest library attaches");
    e2e::echo_messages(&mut api, server, 73, 16, 4096);
}

/// One QEMU run: its process (killed on drop), and its files under the test's directory.
struct Vm {
    qemu: ChildGuard,
    share: PathBuf,
    serial: PathBuf,
    output: PathBuf,
    qmp: PathBuf,
}

impl Vm {
    /// Boots the guest image attached to the backend's `socket`; files are named after `name`.
    /// QEMU itself needs no namespace: it reaches the backend through the socket path.
    fn boot(dir: &Path, name: &str, socket: &Path, kernel: &Path, initrd: &Path) -> Vm {
        let share = dir.join(format!("{name}-share"));
        std::fs::create_dir_all(&share).expect("share dir");
        let serial = dir.join(format!("{name}-serial.log"));
        let output = dir.join(format!("{name}-qemu.log"));
        let qmp = dir.join(format!("{name}-qmp.sock"));
        let append = format!(
            "console=ttyS0 panic=-1 loglevel=4 slimvm.ip={GUEST_KERNEL_IP} slimvm.peer={HOST_IP} slimvm.wait={}",
            GUEST_FINISH.as_secs()
        );
        let out = std::fs::File::create(&output).expect("qemu log");
        let mut cmd = Command::new("qemu-system-x86_64");
        cmd.args(["-machine", "q35", "-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", "256M"])
            .args(["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"])
            .args(["-object", "memory-backend-memfd,id=mem,size=256M,share=on", "-numa", "node,memdev=mem"])
            .arg("-chardev")
            .arg(format!("socket,id=c0,path={}", socket.display()))
            .args(["-netdev", &format!("vhost-user,id=n0,chardev=c0,queues={QUEUES}")])
            .args(["-device", "virtio-net-pci,netdev=n0,mq=on,disable-legacy=on"])
            .arg("-virtfs")
            .arg(format!("local,path={},mount_tag=share,security_model=none,id=fs0", share.display()))
            .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
            .arg("-serial")
            .arg(format!("file:{}", serial.display()))
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .arg("-kernel")
            .arg(kernel)
            .arg("-initrd")
            .arg(initrd)
            .args(["-append", &append])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("qemu log"))
            .stderr(out);
        let qemu = ChildGuard::new(cmd.spawn().expect("qemu-system-x86_64"));
        Vm { qemu, share, serial, output, qmp }
    }

    /// Waits until the guest wrote `phase1` (device found, interface up, frames transmitted).
    fn wait_phase1(&mut self) -> Result<(), String> {
        let phase1 = self.share.join("phase1");
        let mut exited = None;
        let qemu = &mut self.qemu;
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

    /// `what`, then the tails of the guest's serial console, the backend log and QEMU's output.
    fn context(&self, what: &str, backend_log: &Path) -> String {
        format!(
            "{what}\n--- guest serial (tail) ---\n{}\n--- backend log ---\n{}\n--- qemu ---\n{}",
            tail(&self.serial, 25),
            tail(backend_log, 30),
            tail(&self.output, 10)
        )
    }
}

fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

#[test]
fn a_stock_kernel_drives_the_device_through_stop_cont_and_the_backend_outlives_the_vm() {
    slimtcp_testkit::require_netns!("vm_qemu");
    if skip_because(qemu_unavailable()) {
        return;
    }
    let image = guest_image();
    if skip_because(image.as_ref().err().cloned()) {
        return;
    }
    let (kernel, initrd) = image.expect("checked above");
    let started = Instant::now();

    let ns = Netns::create("vmqemu").expect("namespace");
    let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-vm-qemu-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let socket = dir.0.join("vhost.sock");
    let backend_log = dir.0.join("backend.log");
    let tap = Netns::unique_ifname("vmq");

    // The backend, in the namespace, its log in a file.
    let host_ip_prefix = format!("{HOST_IP}/24");
    let mut backend = {
        let mut cmd = ns.command(&[
            env!("CARGO_BIN_EXE_slimtcp-vhost"),
            "--socket",
            socket.to_str().expect("utf-8 path"),
            "--tap",
            &tap,
            "--ip",
            STACK_IP,
            "--host-ip",
            &host_ip_prefix,
            "--queues",
            QUEUES,
        ]);
        cmd.env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&backend_log).expect("backend log"));
        ChildGuard::new(cmd.spawn().expect("backend process"))
    };
    assert!(
        log_shows(&backend_log, "serving on", BACKEND_UP) && wait_for(BACKEND_UP, || socket.exists()),
        "the backend did not come up:\n{}",
        tail(&backend_log, 20)
    );

    // The first VM: the whole scenario, and a clean exit.
    let mut vm = Vm::boot(&dir.0, "vm1", &socket, &kernel, &initrd);
    let share = vm.share.clone();
    let context = |vm: &Vm, what: &str| vm.context(what, &backend_log);
    let mut qmp = Qmp::connect(&vm.qmp, BACKEND_UP);

    // Phase 1: the kernel has the device, its interface is up and it has transmitted.
    if let Err(e) = vm.wait_phase1() {
        panic!("{}", context(&vm, &e));
    }
    assert!(log_shows(&backend_log, "VMM connected", LOG_LINE), "{}", context(&vm, "no VMM connected"));

    // stop: QEMU stops the vhost device (GET_VRING_BASE per ring) before `stop` returns.
    qmp.execute("stop");
    let stop_handled = !read_lossy(&backend_log).contains("connection ended")
        && log_shows(&backend_log, "stopped by the VMM", LOG_LINE);
    qmp.execute("cont");
    std::fs::write(share.join("go"), b"go").expect("tell the guest to go on");

    let status = wait_exit(&mut vm.qemu, GUEST_FINISH);
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
    let counters = last_session_counters(&backend_text).expect("session counters parse");
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
        matches!(backend.child().try_wait(), Ok(None)),
        "{}",
        context(&vm, "the backend process ended with the VM")
    );

    // A second VM on the same socket, killed (SIGKILL) once its kernel has transmitted: a VMM
    // that vanishes without stopping the device. The backend ends that session too.
    let mut vm2 = Vm::boot(&dir.0, "vm2", &socket, &kernel, &initrd);
    if let Err(e) = vm2.wait_phase1() {
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
    let counters2 = last_session_counters(&backend_text).expect("session counters parse");
    assert!(counter(&counters2, "requests") > 0, "the killed VM's frames were not seen: {counters2:?}");
    assert_eq!(
        count(&backend_text, "connection ended"),
        0,
        "{}",
        context(&vm2, "a connection ended in error")
    );
    assert!(
        matches!(backend.child().try_wait(), Ok(None)),
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
    assert!(matches!(backend.child().try_wait(), Ok(None)), "{}", context(&vm2, "the backend died"));
    let _ = writeln!(
        std::io::stderr(),
        "vm_qemu: VM with stop/cont, a killed VM and the guest library in {:.1} s; counters of the first VM's \
         session: {counters:?}; of the killed VM's: {counters2:?}",
        started.elapsed().as_secs_f64()
    );
}
