//! The sandbox of the real `slimtcp-vhost` (issue 14, "Sandboxing"): by default, while a guest
//! echoes through it, the tenant's worker and control threads run under seccomp filters
//! (`Seccomp: 2` in `/proc/PID/task/TID/status`), the set-up thread does not, and no system
//! call was refused on the way; with `--no-seccomp`, no thread is filtered.

mod e2e;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

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
    let ns = Netns::create(tag).expect("namespace");
    let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-sandbox-{tag}-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let socket = dir.0.join("vhost.sock");
    let log = dir.0.join("backend.log");
    let tap = Netns::unique_ifname("tsb");
    let backend = slimtcp_vhost_bin();
    let socket_arg = socket.display().to_string();
    let mut args = vec![
        backend.to_str().expect("utf-8 path"),
        "--socket",
        &socket_arg,
        "--tap",
        &tap,
        "--ip",
        "10.72.0.2/24",
        "--host-ip",
        "10.72.0.1/24",
    ];
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
