//! The C API end to end: the C example (guest-lib/examples/c/echo.c), compiled with the
//! system's C compiler against the static library cargo built for this test, attaches over
//! vhost-user to a real `slimtcp-vhost` whose tenant NIC is a TAP in a namespace, and echoes
//! messages (copy and zero-copy sends, copy and in-place receives, epoll readiness) with a
//! Linux echo server there, checking every byte.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use slimtcp_system_tests::{profile_dir, slimtcp_vhost_bin, workspace_root};
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;

const LINUX_IP: Ipv4Addr = Ipv4Addr::new(10, 72, 0, 1);
const ECHO_PORT: u16 = 7000;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where cargo put `libslimtcp_guest.a` for this build: beside the test's dependencies (the
/// library is a dependency of this package, built with all its crate types), else beside the
/// binaries.
fn static_library_dir() -> PathBuf {
    let profile = profile_dir();
    [profile.join("deps"), profile.to_path_buf()]
        .into_iter()
        .find(|d| d.join("libslimtcp_guest.a").is_file())
        .unwrap_or_else(|| panic!("no libslimtcp_guest.a under {}", profile.display()))
}

/// Builds the example with its Makefile into `out`.
fn build_c_example(out: &Path) {
    let example = workspace_root().join("guest-lib/examples/c");
    let status = Command::new("make")
        .arg("-C")
        .arg(&example)
        .arg(format!("LIBDIR={}", static_library_dir().display()))
        .arg(format!("OUT={}", out.display()))
        .arg("LINK=static")
        .status()
        .expect("make runs");
    assert!(status.success(), "building the C example failed: {status}");
}

#[test]
fn the_c_example_echoes_through_the_backend_with_copy_and_zero_copy_paths() {
    slimtcp_testkit::require_netns!();
    let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-c-example-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let program = dir.0.join("c-echo");
    build_c_example(&program);

    let ns = Netns::create("cecho").expect("namespace");
    let socket = dir.0.join("vhost.sock");
    let tap = Netns::unique_ifname("cec");
    let tenant =
        format!("name=c,socket={},tap={tap},ip=10.72.0.2/24,host-ip={LINUX_IP}/24", socket.display());
    let backend = slimtcp_vhost_bin();
    let _backend =
        ns.spawn_cmd(&[backend.to_str().expect("utf-8 path"), "--tenant", &tenant]).expect("backend process");
    // On every address of the namespace: the TAP appears with the backend.
    let (_, server) = linux_peer::spawn_tcp_echo_server(
        &ns,
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, ECHO_PORT)),
        1,
        Duration::from_secs(120),
    )
    .expect("echo server");
    let up = slimtcp_testkit::wait::wait_for(Duration::from_secs(20), || socket.exists());
    assert!(up, "the backend did not create {}", socket.display());

    // 200 messages of 3000 bytes: each spans segments and, echoed, several receive buffers.
    let out = Command::new(&program)
        .arg(format!("vhost-user:{}", socket.display()))
        .arg(LINUX_IP.to_string())
        .arg(ECHO_PORT.to_string())
        .args(["200", "3000"])
        .output()
        .expect("the C example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "c-echo failed ({}):\n{stdout}{stderr}", out.status);
    assert_eq!(stdout.trim(), "c-echo: ok 200 messages, 600000 bytes");

    let peers = server.join().expect("echo server");
    assert_eq!(peers.iter().map(SocketAddr::ip).collect::<Vec<_>>(), [Ipv4Addr::new(10, 72, 0, 2)]);
}
