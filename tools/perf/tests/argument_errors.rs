//! Spec: a bad command line is one error line on stderr and exit code 2; nothing runs.

mod common;

use common::perf;

fn one_line_error(args: &str) -> String {
    let out = perf(args);
    assert_eq!(out.status.code(), Some(2), "{args}: exit code");
    assert!(out.stdout.is_empty(), "{args}: nothing on stdout");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{args}: one line, got {stderr:?}");
    assert!(stderr.starts_with("slimtcp-perf: error: "), "{stderr}");
    stderr
}

#[test]
fn unknown_options_and_bad_values_are_one_line() {
    assert!(one_line_error("--nic memwire --bogus").contains("--bogus"));
    assert!(one_line_error("--nic memwire --mss 2000").contains("--mss"));
    assert!(one_line_error("--nic memwire --mss lots").contains("--mss"));
    assert!(one_line_error("--nic memwire --win-scale 15").contains("--win-scale"));
    assert!(one_line_error("--nic memwire --connections 0").contains("--connections"));
    assert!(one_line_error("--nic memwire --runtime quad").contains("--runtime"));
    assert!(one_line_error("--nic ether").contains("--nic"));
    assert!(one_line_error("--nic memwire --duration 0").contains("--duration"));
    assert!(one_line_error("--nic memwire --arp 10.0.0.1").contains("--arp"));
    assert!(one_line_error("--nic memwire --socket-buffer 1024").contains("--socket-buffer"));
    assert!(one_line_error("--nic memwire --socket-buffer auto").contains("--socket-buffer"));
}

#[test]
fn missing_and_conflicting_roles_are_one_line() {
    assert!(one_line_error("--nic tap:slimtx --bind-ip 10.1.0.2").contains("--listen"));
    assert!(one_line_error("--nic tap:slimtx --listen --bind-port 5").contains("--bind-ip"));
    assert!(one_line_error("--nic tap:slimtx --bind-ip 10.1.0.2 --listen").contains("--bind-port"));
    assert!(one_line_error("--nic tap:slimtx --bind-ip 10.1.0.2 --connect-ip 10.1.0.1")
        .contains("--connect-port"));
    assert!(one_line_error("--kernel --zero-copy --listen --bind-port 5").contains("--zero-copy"));
    assert!(one_line_error("--nic memwire --tcp --udp").contains("--udp"));
    assert!(one_line_error("--kernel --udp --zero-copy --listen --bind-port 5").contains("--zero-copy"));
    assert!(one_line_error("--nic tap:slimtx --udp --bind-ip 10.1.0.2").contains("--listen"));
}

#[test]
fn the_default_dpdk_nic_needs_the_feature() {
    if cfg!(feature = "dpdk") {
        return;
    }
    let e = one_line_error("-l 0,1 -- --iface 0 --bind-ip 10.0.0.2 --tcp --listen --bind-port 5000");
    assert!(e.contains("`dpdk` feature"), "{e}");
}

#[test]
fn help_describes_the_default_runtime() {
    let out = perf("--help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("two-core when this machine has at least 3 cores"), "{help}");
}
