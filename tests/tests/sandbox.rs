//! The sandbox of the real `slimtcp-vhost` (issue 14, "Sandboxing"): by default, while a guest
//! echoes through it, the tenant's worker and control threads run under seccomp filters
//! (`Seccomp: 2` in `/proc/PID/task/TID/status`), the set-up thread does not, and no system
//! call was refused on the way; with `--no-seccomp`, no thread is filtered. With the `dpdk`
//! feature (and `slimtcp-vhost` built with it), the same for a tenant on a DPDK `net_tap` port.
//! A worker whose session ends in a panic or a NIC failure leaves closing the NIC to the
//! (unfiltered) serving thread.

mod e2e;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::nic::{Nic, NicCapabilities, NicError, PacketBuf};
use slimtcp::time::Instant;
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_system_tests::slimtcp_vhost_bin;
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::{ChildGuard, Netns};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each thread of `pid`: its name and its seccomp mode (0 none, 2 filter).
fn seccomp_of_threads(pid: u32) -> Vec<(String, u32)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the backend's threads").flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let mode = status
            .lines()
            .find_map(|l| l.strip_prefix("Seccomp:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a Seccomp line in /proc status");
        threads.push((comm.trim().to_owned(), mode));
    }
    threads
}

/// Runs the backend (one tenant on a TAP, with `extra` arguments), has a guest echo 256 KiB
/// through it, and returns the threads' seccomp modes seen meanwhile and the backend's log.
fn serve_an_echo(tag: &str, extra: &[&str]) -> (Vec<(String, u32)>, String) {
    let tap = Netns::unique_ifname("tsb");
    serve_an_echo_on(tag, &["--tap", &tap], extra)
}

/// [`serve_an_echo`] with the tenant's NIC given by `nic` (`--tap NAME` or `--dpdk ARGS`).
fn serve_an_echo_on(tag: &str, nic: &[&str], extra: &[&str]) -> (Vec<(String, u32)>, String) {
    let ns = Netns::create(tag).expect("namespace");
    let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-sandbox-{tag}-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let socket = dir.0.join("vhost.sock");
    let log = dir.0.join("backend.log");
    let backend = slimtcp_vhost_bin();
    let socket_arg = socket.display().to_string();
    let mut args = vec![backend.to_str().expect("utf-8 path"), "--socket", &socket_arg];
    args.extend_from_slice(nic);
    args.extend_from_slice(&["--ip", "10.72.0.2/24", "--host-ip", "10.72.0.1/24"]);
    args.extend_from_slice(extra);
    let mut cmd = ns.command(&args);
    cmd.stdin(Stdio::null()).stderr(std::fs::File::create(&log).expect("log file"));
    let child = ChildGuard::new(cmd.spawn().expect("backend process"));
    let up = slimtcp_testkit::wait::wait_for(Duration::from_secs(20), || socket.exists());
    assert!(up, "the backend did not create {}", socket.display());

    let (_, server) = linux_peer::spawn_tcp_echo_server(
        &ns,
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, 7000)),
        1,
        Duration::from_secs(60),
    )
    .expect("echo server");
    let mut guest =
        GuestSockets::connect_vhost_user(&socket, GuestConfig::default()).expect("guest attaches");
    e2e::echo_messages(&mut guest, SocketAddrV4::new([10, 72, 0, 1].into(), 7000), 3, 64, 4096);
    server.join().expect("echo server");
    // The connection's threads are all there while the guest is attached.
    let threads = seccomp_of_threads(child.id());
    drop(guest);
    drop(child);
    (threads, std::fs::read_to_string(&log).unwrap_or_default())
}

fn mode_of(threads: &[(String, u32)], name: &str) -> u32 {
    threads
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, m)| *m)
        .unwrap_or_else(|| panic!("no thread {name} in {threads:?}"))
}

#[test]
fn by_default_worker_and_control_threads_are_filtered_and_nothing_is_refused() {
    slimtcp_testkit::require_netns!();
    let (threads, log) = serve_an_echo("sbx-on", &[]);
    assert!(log.contains("sandbox: seccomp filters on worker and control threads"), "{log}");
    // Thread names are cut to 15 bytes by the kernel.
    for name in [
        "tenant0-worker",
        "tenant0-ctl",
        "tenant0-relay-i",
        "tenant0-relay-o",
        "tenant0-watch",
        "vring_worker",
    ] {
        assert_eq!(mode_of(&threads, name), 2, "{name} runs under a seccomp filter: {threads:?}");
    }
    assert_eq!(mode_of(&threads, "slimtcp-vhost"), 0, "the set-up thread is not filtered");
    assert!(!log.contains("made system call"), "a filter refused a call the backend needs:\n{log}");
}

#[test]
fn no_seccomp_filters_no_thread() {
    slimtcp_testkit::require_netns!();
    let (threads, log) = serve_an_echo("sbx-off", &["--no-seccomp"]);
    assert!(log.contains("sandbox: off (--no-seccomp)"), "{log}");
    assert_eq!(mode_of(&threads, "tenant0-worker"), 0);
    assert!(threads.iter().all(|(_, m)| *m == 0), "no thread is filtered: {threads:?}");
}

/// How [`WatchedNic`] ends the worker's session once armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The worker panics in its next receive.
    Panic,
    /// The next receive fails (a NIC failure: the interface is given up).
    Failure,
}

/// A memwire NIC that, once armed, ends the worker's session as its [`Ending`] says, and records
/// the name of the thread that drops (closes) it.
struct WatchedNic {
    nic: MemwireNic,
    ending: Ending,
    armed: Arc<AtomicBool>,
    dropped_on: Arc<Mutex<Option<String>>>,
}

impl Drop for WatchedNic {
    fn drop(&mut self) {
        let name = std::thread::current().name().unwrap_or("unnamed").to_owned();
        *self.dropped_on.lock().unwrap_or_else(PoisonError::into_inner) = Some(name);
    }
}

impl Nic for WatchedNic {
    fn capabilities(&self) -> NicCapabilities {
        self.nic.capabilities()
    }

    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        if self.armed.load(Ordering::Acquire) {
            match self.ending {
                Ending::Panic => panic!("the test's worker panic (expected)"),
                Ending::Failure => {
                    return Err(NicError::Io {
                        device: "watched".into(),
                        source: std::io::Error::other("the test's NIC failure (expected)"),
                    })
                }
            }
        }
        self.nic.receive(now, out, max)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        self.nic.alloc_tx()
    }

    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        self.nic.transmit(now, frames)
    }
}

/// A worker whose session ends with `ending` does not close its NIC itself: closing a NIC (a
/// DPDK port's stop and close) needs calls the worker's filter refuses, so the serving thread
/// (unfiltered; `backend` in [`e2e::Tenant`]) drops it.
fn the_serving_thread_closes_the_nic_when_the_worker(tag: &str, ending: Ending) {
    slimtcp_testkit::require_netns!();
    let (nic, _peer) = link(LinkConfig::default()).expect("memwire link");
    let armed = Arc::new(AtomicBool::new(false));
    let dropped_on = Arc::new(Mutex::new(None));
    let mut nic =
        Some(WatchedNic { nic, ending, armed: Arc::clone(&armed), dropped_on: Arc::clone(&dropped_on) });
    let t = e2e::Tenant::start(tag, move || nic.take().ok_or_else(|| "the NIC is opened once".to_owned()));
    let guest = t.guest();
    armed.store(true, Ordering::Release);
    let closed = slimtcp_testkit::wait::wait_for(e2e::LIMIT, || {
        dropped_on.lock().unwrap_or_else(PoisonError::into_inner).is_some()
    });
    assert!(closed, "the NIC was not closed after the worker's {ending:?}");
    drop(guest);
    let reports = t.finish_all();
    let closer = dropped_on.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(closer.as_deref(), Some("backend"), "closed by the serving thread, not the worker");
    assert_eq!(reports.len(), usize::from(ending == Ending::Failure), "a session report unless it panicked");
}

#[test]
fn a_worker_that_panics_leaves_closing_its_nic_to_the_serving_thread() {
    the_serving_thread_closes_the_nic_when_the_worker("sbx-panic", Ending::Panic);
}

#[test]
fn a_worker_whose_nic_fails_leaves_closing_it_to_the_serving_thread() {
    the_serving_thread_closes_the_nic_when_the_worker("sbx-fail", Ending::Failure);
}

/// A DPDK tenant of the real binary: its worker runs under the DPDK worker's filter. The EAL
/// arguments keep DPDK's shared configuration files (no `--no-shconf`): the backend adds
/// `--no-shconf` itself, or registering guest memory would open and lock files on the worker.
#[cfg(feature = "dpdk")]
#[test]
fn a_dpdk_tenants_worker_is_filtered_and_nothing_is_refused() {
    slimtcp_testkit::require_netns!();
    let iface = Netns::unique_ifname("dsb");
    let eal = format!(
        "--no-huge -m 256 --no-pci -l 0 --log-level=warning --file-prefix=slimtcp-sbx-{} --vdev=net_tap0,iface={iface}",
        std::process::id()
    );
    let (threads, log) = serve_an_echo_on("sbx-dpdk", &["--dpdk", &eal], &[]);
    // The EAL's runtime directory (its telemetry socket) outlives the killed backend.
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/slimtcp-sbx-{}", std::process::id()));
    assert!(
        !log.contains("built without the dpdk feature"),
        "build slimtcp-vhost with --features dpdk for this test:\n{log}"
    );
    assert!(log.contains("sandbox: seccomp filters on worker (DPDK worker allow-list)"), "{log}");
    assert!(log.contains("\"--no-shconf\"]"), "the backend added --no-shconf to the EAL arguments:\n{log}");
    assert!(log.contains("attached for zero-copy transmit"), "guest memory registered by the worker:\n{log}");
    for name in ["tenant0-worker", "tenant0-ctl", "tenant0-watch"] {
        assert_eq!(mode_of(&threads, name), 2, "{name} runs under a seccomp filter: {threads:?}");
    }
    assert!(!log.contains("made system call"), "a filter refused a call the DPDK tenant needs:\n{log}");
}
