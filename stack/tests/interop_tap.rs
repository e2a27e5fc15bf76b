//! Tier 3: SlimTCP talking to the Linux kernel's TCP/IP over a TAP interface.
//!
//! Each test makes its own namespace (`slimt-*`) with a TAP interface `slimtap*` on its own subnet
//! `10.91.N.0/24` (kernel `.1`, stack `.2`), so the tests run in parallel. The stack runs
//! in-process on a thread inside the namespace; the Linux peer uses std::net sockets (testkit's
//! `linux_peer`) or command-line tools run with `ip netns exec`.

#[macro_use]
extern crate slimtcp_testkit;

mod common;

use common::{scenarios, tap_echo, Testbed};

/// The suite's TAP is opened without checksum offload (`Testbed::open_tap`): the kernel computes
/// full checksums on it, nothing to turn off before capturing, unlike on a veth pair. (The
/// offload's own suite: `interop_tap_offload`.)
fn assert_no_checksum_offload(bed: &Testbed) {
    let features = bed.ns.exec_ok(&["ethtool", "-k", &bed.tap]).expect("ethtool -k");
    assert!(features.lines().any(|l| l.trim() == "tx-checksumming: off"), "TAP offloads: {features}");
}

const SUITE: &str = "tap";

#[test]
fn linux_client_sends_100mb_to_stack_server() {
    require_netns!("linux_client_sends_100mb_to_stack_server");
    let bed = Testbed::new("lc2ss", 1);
    let tap = bed.open_tap();
    assert_no_checksum_offload(&bed);
    scenarios::linux_client_sends_to_stack_server(SUITE, &bed, tap, 101);
}

#[test]
fn stack_server_sends_100mb_to_linux_client() {
    require_netns!("stack_server_sends_100mb_to_linux_client");
    let bed = Testbed::new("ss2lc", 2);
    let tap = bed.open_tap();
    assert_no_checksum_offload(&bed);
    scenarios::stack_server_sends_to_linux_client(SUITE, &bed, tap, 102);
}

#[test]
fn stack_client_sends_100mb_to_linux_server() {
    require_netns!("stack_client_sends_100mb_to_linux_server");
    let bed = Testbed::new("sc2ls", 3);
    let tap = bed.open_tap();
    scenarios::stack_client_sends_to_linux_server(SUITE, &bed, tap, 103);
}

#[test]
fn stack_client_receives_100mb_from_linux_server() {
    require_netns!("stack_client_receives_100mb_from_linux_server");
    let bed = Testbed::new("ls2sc", 4);
    let tap = bed.open_tap();
    scenarios::stack_client_receives_from_linux_server(SUITE, &bed, tap, 104);
}

#[test]
fn ping_and_arp_both_ways() {
    require_netns!("ping_and_arp_both_ways");
    let bed = Testbed::new("ping", 5);
    let tap = bed.open_tap();
    scenarios::ping_and_arp_both_ways(SUITE, &bed, tap);
}

#[test]
fn udp_echo_with_linux() {
    require_netns!("udp_echo_with_linux");
    let bed = Testbed::new("udp", 6);
    let tap = bed.open_tap();
    scenarios::udp_echo_with_linux(&bed, tap);
}

#[test]
fn tap_echo_example_serves_nc_and_python() {
    require_netns!("tap_echo_example_serves_nc_and_python");
    let bed = Testbed::new("tapecho", 7);
    tap_echo::tap_echo_serves_nc_and_python(&bed, &["--tap", &bed.tap], &bed.tap);
}
