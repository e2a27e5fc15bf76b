//! The real-VM tier's harness: the guest image (scripts/build-guest-image.sh, and the static guest
//! apps of scripts/build-guest-apps.sh), the real `slimtcp-vhost` process in a namespace, QEMU
//! (10.x, TCG) booting the guest attached to it, and QMP.
//!
//! Needs root (namespace, TAP), `qemu-system-x86_64` and the image. Without QEMU or the image a
//! test says SKIP, unless `SLIMTCP_REQUIRE_NETNS` is set (as `make test` does, after installing
//! QEMU and building the image): then it fails. `SLIMTCP_VM_KEEP=1` keeps the logs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use slimtcp_testkit::netns::{ChildGuard, Netns};
use slimtcp_testkit::skip::REQUIRE_ENV;
use slimtcp_testkit::wait::wait_for;

use slimtcp_system_tests::{slimtcp_vhost_bin, workspace_root};

/// The guest's success status 0x10 through isa-debug-exit: QEMU exits with (0x10 << 1) | 1.
pub const GUEST_OK_EXIT: i32 = 33;
/// How long the backend may take to listen.
pub const BACKEND_UP: Duration = Duration::from_secs(20);
/// Set to keep the test's directory (backend log, guest serial log, QEMU's output, the share).
const KEEP_ENV: &str = "SLIMTCP_VM_KEEP";

/// A directory removed when dropped (kept, and named on stderr, if [`KEEP_ENV`] is set).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory for test `name`.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("slimtcp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var(KEEP_ENV).is_ok_and(|v| !v.is_empty() && v != "0") {
            let _ = writeln!(std::io::stderr(), "logs kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Says SKIP (or fails under `SLIMTCP_REQUIRE_NETNS`) and returns true if `reason` is set.
pub fn skip_because(test: &str, reason: Option<String>) -> bool {
    let Some(reason) = reason else { return false };
    let required = std::env::var(REQUIRE_ENV).map(|v| !v.is_empty() && v != "0").unwrap_or(false);
    if required {
        panic!("{test}: {reason} ({REQUIRE_ENV} is set; `make test` installs QEMU and builds the image)");
    }
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
    true
}

/// `qemu-system-x86_64`, if it runs.
pub fn qemu_unavailable() -> Option<String> {
    match Command::new("qemu-system-x86_64").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!("qemu-system-x86_64 --version failed ({})", out.status)),
        Err(e) => Some(format!("qemu-system-x86_64 not found ({e}); run scripts/install-deps.sh")),
    }
}

fn vm_dir() -> PathBuf {
    std::env::var_os("VM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target").join("vm"))
}

fn run_script(name: &str) -> Result<(), String> {
    let script = workspace_root().join("scripts").join(name);
    match Command::new(&script).env("VM_DIR", vm_dir()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{} failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run {}: {e}", script.display())),
    }
}

/// The guest kernel and an initramfs: the base image (`with_apps` false) or the base plus the
/// static guest apps. The scripts rebuild what changed and otherwise return at once.
pub fn guest_image(with_apps: bool) -> Result<(PathBuf, PathBuf), String> {
    let dir = vm_dir();
    let kernel = dir.join("vmlinux");
    let initrd = dir.join(if with_apps { "initramfs-apps.cpio.gz" } else { "initramfs.cpio.gz" });
    let mut built = run_script("build-guest-image.sh");
    if with_apps && built.is_ok() {
        built = run_script("build-guest-apps.sh");
    }
    match built {
        Ok(()) if kernel.exists() && initrd.exists() => Ok((kernel, initrd)),
        Ok(()) => Err(format!("the image scripts left no {} in {}", initrd.display(), dir.display())),
        // Offline, say: an image built earlier still serves.
        Err(e) if kernel.exists() && initrd.exists() => {
            let _ = writeln!(std::io::stderr(), "using the existing image: {e}");
            Ok((kernel, initrd))
        }
        Err(e) => Err(e),
    }
}

/// One VM scenario at a time per test binary: QEMU under TCG takes a core, and the image
/// scripts must not run twice at once.
static VM_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// QEMU and the image (with the lock that keeps this test binary's VM scenarios apart), or a
/// reason to skip (see [`skip_because`]).
pub fn require_vm(
    test: &str,
    with_apps: bool,
) -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf, PathBuf)> {
    let guard = VM_LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if skip_because(test, qemu_unavailable()) {
        return None;
    }
    let image = guest_image(with_apps);
    if skip_because(test, image.as_ref().err().cloned()) {
        return None;
    }
    image.ok().map(|(kernel, initrd)| (guard, kernel, initrd))
}

pub fn read_lossy(path: &Path) -> String {
    std::fs::read(path).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

/// The last `n` lines of a file, for failure messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = read_lossy(path);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Waits until `path`'s text contains `needle` or `timeout` passes.
pub fn log_shows(path: &Path, needle: &str, timeout: Duration) -> bool {
    wait_for(timeout, || read_lossy(path).contains(needle))
}

pub fn count(text: &str, needle: &str) -> usize {
    text.matches(needle).count()
}

/// A `slimtcp-vhost` process in a namespace, its log in a file.
pub struct Backend {
    pub child: ChildGuard,
    pub log: PathBuf,
}

impl Backend {
    /// Starts `slimtcp-vhost ARGS` in `ns` and waits until it serves `sockets` tenant sockets.
    pub fn start(ns: &Netns, dir: &Path, name: &str, args: &[&str], sockets: usize) -> Backend {
        let log = dir.join(format!("{name}.log"));
        let bin = slimtcp_vhost_bin();
        let mut argv = vec![bin.to_str().expect("utf-8 path")];
        argv.extend_from_slice(args);
        let mut cmd = ns.command(&argv);
        cmd.env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("backend log"));
        let child = ChildGuard::new(cmd.spawn().expect("backend process"));
        let up = wait_for(BACKEND_UP, || count(&read_lossy(&log), "serving on") >= sockets);
        assert!(up, "the backend did not come up:\n{}", tail(&log, 20));
        Backend { child, log }
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.child().try_wait(), Ok(None))
    }

    pub fn text(&self) -> String {
        read_lossy(&self.log)
    }
}

/// One tenant on a TAP, the way the VM tests start the backend:
/// `slimtcp-vhost --socket SOCKET --tap TAP --ip STACK --host-ip HOST --queues N`.
pub struct TapTenant {
    /// The vhost-user socket (in the test's directory).
    pub socket: PathBuf,
    args: Vec<String>,
}

impl TapTenant {
    /// A tenant whose socket is `dir/vhost.sock`, on a fresh TAP named after `tap_prefix`, with
    /// the stack at `stack_ip` and Linux at `host_ip` (both ADDR/PREFIX).
    pub fn new(dir: &Path, tap_prefix: &str, stack_ip: &str, host_ip: &str, queues: usize) -> TapTenant {
        let socket = dir.join("vhost.sock");
        let tap = Netns::unique_ifname(tap_prefix);
        let args = [
            "--socket",
            socket.to_str().expect("utf-8 path"),
            "--tap",
            &tap,
            "--ip",
            stack_ip,
            "--host-ip",
            host_ip,
            "--queues",
            &queues.to_string(),
        ]
        .map(str::to_owned)
        .to_vec();
        TapTenant { socket, args }
    }

    /// Starts a backend process for it in `ns` (its log `dir/NAME.log`); again after a kill.
    pub fn start(&self, ns: &Netns, dir: &Path, name: &str) -> Backend {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Backend::start(ns, dir, name, &args, 1)
    }
}

/// The numbers of the last `session counters:` line (of tenant `tenant`, if given), by name.
pub fn last_session_counters(log: &str, tenant: Option<&str>) -> Option<Vec<(String, u64)>> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("session counters: ") && tenant.is_none_or(|t| l.contains(t)))?;
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

pub fn counter(counters: &[(String, u64)], name: &str) -> u64 {
    counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v).unwrap_or_else(|| {
        panic!("no counter {name:?} in {counters:?}");
    })
}

/// A QMP session on QEMU's control socket: commands in, their `return` (or `error`) out;
/// asynchronous events in between are skipped.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    pub fn connect(path: &Path, timeout: Duration) -> Qmp {
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
    pub fn execute(&mut self, command: &str) -> String {
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

/// How to boot one VM.
pub struct VmSpec<'a> {
    /// Files are named after it.
    pub name: &'a str,
    /// The test's directory.
    pub dir: &'a Path,
    /// The backend's vhost-user socket.
    pub socket: &'a Path,
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    /// Queue pairs of the device (the backend's `--queues`).
    pub queues: usize,
    /// Extra kernel command line (`slimvm.*` parameters, `hugepages=N`).
    pub append: String,
    /// The application-mode script (`/share/run.sh`; adds `slimvm.run=1`).
    pub run: Option<String>,
    /// QEMU reconnects to a restarted backend after this many ms (`reconnect-ms`).
    pub reconnect_ms: Option<u32>,
}

/// One QEMU run: its process (killed on drop), and its files under the test's directory.
pub struct Vm {
    pub qemu: ChildGuard,
    pub share: PathBuf,
    pub serial: PathBuf,
    pub output: PathBuf,
    pub qmp: PathBuf,
}

impl Vm {
    pub fn boot(spec: &VmSpec<'_>) -> Vm {
        let name = spec.name;
        let share = spec.dir.join(format!("{name}-share"));
        std::fs::create_dir_all(&share).expect("share dir");
        let serial = spec.dir.join(format!("{name}-serial.log"));
        let output = spec.dir.join(format!("{name}-qemu.log"));
        let qmp = spec.dir.join(format!("{name}-qmp.sock"));
        let mut append = format!("console=ttyS0 panic=-1 loglevel=4 {}", spec.append);
        if let Some(script) = &spec.run {
            std::fs::write(share.join("run.sh"), script).expect("run.sh");
            append.push_str(" slimvm.run=1");
        }
        let reconnect = spec.reconnect_ms.map(|ms| format!(",reconnect-ms={ms}")).unwrap_or_default();
        let out = std::fs::File::create(&output).expect("qemu log");
        let mut cmd = Command::new("qemu-system-x86_64");
        cmd.args(["-machine", "q35", "-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", "512M"])
            .args(["-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"])
            .args(["-object", "memory-backend-memfd,id=mem,size=512M,share=on", "-numa", "node,memdev=mem"])
            .arg("-chardev")
            .arg(format!("socket,id=c0,path={}{reconnect}", spec.socket.display()))
            .args(["-netdev", &format!("vhost-user,id=n0,chardev=c0,queues={}", spec.queues)])
            .args(["-device", "virtio-net-pci,netdev=n0,mq=on,disable-legacy=on"])
            .arg("-virtfs")
            .arg(format!("local,path={},mount_tag=share,security_model=none,id=fs0", share.display()))
            .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"])
            .arg("-serial")
            .arg(format!("file:{}", serial.display()))
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .arg("-kernel")
            .arg(spec.kernel)
            .arg("-initrd")
            .arg(spec.initrd)
            .args(["-append", &append])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("qemu log"))
            .stderr(out);
        let qemu = ChildGuard::new(cmd.spawn().expect("qemu-system-x86_64"));
        Vm { qemu, share, serial, output, qmp }
    }

    /// Waits for QEMU to exit, up to `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.qemu.child().try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the application-mode script printed so far.
    pub fn run_log(&self) -> String {
        read_lossy(&self.share.join("run.log"))
    }

    /// `what`, then the tails of the guest's serial console, the backend log and QEMU's output.
    pub fn context(&self, what: &str, backend_log: &Path) -> String {
        format!(
            "{what}\n--- guest serial (tail) ---\n{}\n--- backend log ---\n{}\n--- qemu ---\n{}",
            tail(&self.serial, 40),
            tail(backend_log, 30),
            tail(&self.output, 10)
        )
    }
}
