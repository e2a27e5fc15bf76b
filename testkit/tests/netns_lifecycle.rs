//! Namespaces are created with loopback up, entered by threads and commands, and always deleted.

use slimtcp_testkit::{require_netns, Netns, PREFIX};

fn listed(name: &str) -> bool {
    let out = std::process::Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).lines().any(|l| l.split_whitespace().next() == Some(name))
}

fn netns_inode_of_this_thread() -> String {
    std::fs::read_link("/proc/thread-self/ns/net").expect("readlink ns/net").to_string_lossy().into_owned()
}

#[test]
fn a_namespace_exists_while_alive_and_is_deleted_on_drop() {
    require_netns!("a_namespace_exists_while_alive_and_is_deleted_on_drop");
    let ns = Netns::create("slimt-life").expect("create namespace");
    let name = ns.name().to_owned();
    assert!(name.starts_with(PREFIX));
    assert!(listed(&name), "{name} not listed");
    drop(ns);
    assert!(!listed(&name), "{name} still listed after drop");
}

#[test]
fn a_panicking_test_still_deletes_its_namespace() {
    require_netns!("a_panicking_test_still_deletes_its_namespace");
    let mut name = String::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let ns = Netns::create("slimt-panic").expect("create namespace");
        name = ns.name().to_owned();
        panic!("test body fails");
    }));
    assert!(result.is_err());
    assert!(!name.is_empty());
    assert!(!listed(&name), "{name} survived the panic");
}

#[test]
fn run_executes_on_a_thread_inside_the_namespace_with_loopback_up() {
    require_netns!("run_executes_on_a_thread_inside_the_namespace_with_loopback_up");
    let ns = Netns::create("slimt-run").expect("create namespace");
    let outside = netns_inode_of_this_thread();
    let inside = ns.run(netns_inode_of_this_thread);
    assert_ne!(inside, outside);
    assert_eq!(netns_inode_of_this_thread(), outside, "the caller must stay where it was");
    // Loopback works inside: a listener and a connection on 127.0.0.1.
    let connected = ns.run(|| {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind on lo");
        std::net::TcpStream::connect(l.local_addr().expect("local addr")).is_ok()
    });
    assert!(connected);
    let link = ns.exec_ok(&["ip", "-o", "link", "show", "lo"]).expect("ip link inside");
    assert!(link.contains(",UP"), "lo is not up: {link}");
}

#[test]
fn a_panic_inside_run_reaches_the_caller() {
    require_netns!("a_panic_inside_run_reaches_the_caller");
    let ns = Netns::create("slimt-rpanic").expect("create namespace");
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ns.run(|| panic!("inner failure"))));
    let payload = result.expect_err("the panic must propagate");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"inner failure"));
}

#[test]
fn spawned_threads_run_inside_and_join_with_their_result() {
    require_netns!("spawned_threads_run_inside_and_join_with_their_result");
    let ns = Netns::create("slimt-spawn").expect("create namespace");
    let inside = ns.run(netns_inode_of_this_thread);
    let t = ns.spawn("helper", netns_inode_of_this_thread).expect("spawn");
    assert_eq!(t.join().expect("join"), inside);
}

#[test]
fn a_spawned_command_is_killed_when_its_guard_drops() {
    require_netns!("a_spawned_command_is_killed_when_its_guard_drops");
    let ns = Netns::create("slimt-cmd").expect("create namespace");
    let guard = ns.spawn_cmd(&["sleep", "600"]).expect("spawn sleep");
    let proc_dir = std::path::PathBuf::from(format!("/proc/{}", guard.id()));
    assert!(proc_dir.exists());
    drop(guard);
    assert!(!proc_dir.exists(), "the child was not killed and reaped");
}

#[test]
fn exec_reports_exit_status_and_output() {
    require_netns!("exec_reports_exit_status_and_output");
    let ns = Netns::create("slimt-exec").expect("create namespace");
    let out = ns.exec(&["sh", "-c", "echo hi; exit 3"]).expect("exec");
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert!(ns.exec_ok(&["false"]).is_err());
}
