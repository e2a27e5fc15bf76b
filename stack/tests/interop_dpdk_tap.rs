//! Tier 3 over DPDK: the interop suite of `interop_tap.rs` again, with the stack on a DPDK
//! `net_tap` port (`--no-huge --no-pci --no-shconf`) instead of a plain TAP device.
//!
//! One EAL serves the whole test binary (DPDK starts once per process). Each test makes its own
//! namespace and creates its own `net_tap` port with `rte_vdev_init` from a thread inside that
//! namespace, so the kernel interface (and every descriptor DPDK keeps for it) lives there; the
//! kernel side gets `.1` of the test's subnet, the stack `.2` with its own MAC (the port is
//! promiscuous: the kernel interface shares the port's MAC). The workloads are the very ones the
//! TAP suite runs (`common::scenarios`), generic over the NIC. The tap_echo example, built with
//! the `dpdk` feature, runs as a process with `--dpdk` and is driven by Linux clients. The TAP
//! offload suite's session (`tap_offload`) runs on a `net_tap` port with and without the port's
//! checksum offloads, its frames checked by tshark on the port's kernel interface.

#[macro_use]
extern crate slimtcp_testkit;

mod common;
mod dpdk_common;
mod tap_offload;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{
    check_capture, scenarios, tap_echo, IdleWait, PcapFile, StackRunner, Step, Testbed, BULK_TIMEOUT,
};
use dpdk_common::{LoanSender, MemfdRegion};
use slimtcp::nic::dpdk::{create_vdev, DpdkNic, DpdkNicStats, Eal, ExtMemRegion, PortConfig};
use slimtcp::nic::tap::configure_host_side;
use slimtcp::nic::Nic;
use slimtcp_testkit::capture::Capture;
use slimtcp_testkit::data::pattern;
use slimtcp_testkit::linux_peer::spawn_tcp_server_recv;
use slimtcp_testkit::netns::Netns;
use tap_offload::frames::checksum_fields;
use tap_offload::{run_session_on, Bed, Session, LINUX_TCP_PORT, STACK_TCP_PORT};

const SUITE: &str = "dpdk net_tap";
/// A poll-mode device has nothing to sleep on: an idle stack loop pauses this long so the kernel
/// peer gets the (shared) cores; a busy loop never waits.
const IDLE_PAUSE: Duration = Duration::from_micros(50);

impl IdleWait for DpdkNic {
    fn idle(&self, timeout: Duration) -> Result<(), String> {
        std::thread::sleep(timeout.min(IDLE_PAUSE));
        Ok(())
    }
}

fn eal() -> &'static Eal {
    Eal::init(dpdk_common::eal_args(&[])).expect("the EAL starts")
}

/// Numbers the `net_tap` ports of this process.
static NEXT_VDEV: AtomicU32 = AtomicU32::new(1);

/// A `net_tap` port whose kernel interface `bed.tap` is created inside `bed`'s namespace, up and
/// addressed `host_ip/24` on the kernel side; the port is configured and started.
fn open_dpdk_tap(bed: &Testbed) -> DpdkNic {
    open_dpdk_tap_in(&bed.ns, &bed.tap, bed.host_ip, bed.prefix_len, true)
}

/// A `net_tap` port whose kernel interface `iface` lives in `ns`, addressed `host/prefix` on the
/// kernel side, with or without the port's checksum offloads; configured and started.
fn open_dpdk_tap_in(
    ns: &Netns,
    iface: &str,
    host: std::net::Ipv4Addr,
    prefix: u8,
    checksum_offload: bool,
) -> DpdkNic {
    let eal = eal();
    let vdev = format!("net_tap{}", NEXT_VDEV.fetch_add(1, Ordering::Relaxed));
    let iface = iface.to_owned();
    ns.run(move || {
        create_vdev(eal, &vdev, &format!("iface={iface}")).expect("create the net_tap port");
        let mut cfg = PortConfig::new(&vdev);
        cfg.promiscuous = true;
        cfg.checksum_offload = checksum_offload;
        let nic = DpdkNic::open(eal, &cfg).expect("configure the net_tap port").pop().expect("one queue");
        configure_host_side(&iface, host, prefix).expect("address the kernel side");
        nic
    })
}

#[test]
fn linux_client_sends_100mb_to_stack_server() {
    require_netns!("linux_client_sends_100mb_to_stack_server");
    let bed = Testbed::new("dlc2ss", 11);
    let nic = open_dpdk_tap(&bed);
    scenarios::linux_client_sends_to_stack_server(SUITE, &bed, nic, 201);
}

#[test]
fn stack_server_sends_100mb_to_linux_client() {
    require_netns!("stack_server_sends_100mb_to_linux_client");
    let bed = Testbed::new("dss2lc", 12);
    let nic = open_dpdk_tap(&bed);
    scenarios::stack_server_sends_to_linux_client(SUITE, &bed, nic, 202);
}

#[test]
fn stack_client_sends_100mb_to_linux_server() {
    require_netns!("stack_client_sends_100mb_to_linux_server");
    let bed = Testbed::new("dsc2ls", 13);
    let nic = open_dpdk_tap(&bed);
    scenarios::stack_client_sends_to_linux_server(SUITE, &bed, nic, 203);
}

#[test]
fn stack_client_receives_100mb_from_linux_server() {
    require_netns!("stack_client_receives_100mb_from_linux_server");
    let bed = Testbed::new("dls2sc", 14);
    let nic = open_dpdk_tap(&bed);
    scenarios::stack_client_receives_from_linux_server(SUITE, &bed, nic, 204);
}

#[test]
fn ping_and_arp_both_ways() {
    require_netns!("ping_and_arp_both_ways");
    let bed = Testbed::new("dping", 15);
    let nic = open_dpdk_tap(&bed);
    scenarios::ping_and_arp_both_ways(SUITE, &bed, nic);
}

#[test]
fn udp_echo_with_linux() {
    require_netns!("udp_echo_with_linux");
    let bed = Testbed::new("dudp", 16);
    let nic = open_dpdk_tap(&bed);
    scenarios::udp_echo_with_linux(&bed, nic);
}

/// tap_echo with `--dpdk`, a process of its own (its own EAL) started inside the namespace, so
/// DPDK creates the `net_tap` interface there; `--host-ip` addresses its kernel side.
#[test]
fn tap_echo_example_with_dpdk_serves_nc_and_python() {
    require_netns!("tap_echo_example_with_dpdk_serves_nc_and_python");
    let bed = Testbed::new("dtapecho", 17);
    let mut eal: Vec<String> = dpdk_common::EAL_BASE.iter().map(|s| s.to_string()).collect();
    eal.push(format!("--vdev=net_tap0,iface={}", bed.tap));
    let eal = eal.join(" ");
    tap_echo::tap_echo_serves_nc_and_python(&bed, &["--dpdk", &eal], "net_tap0");
}

/// A stack client sends 64 MiB that live in a registered memfd region (guest memory stand-in) to
/// a Linux server: sent by reference (headers mbuf + payload segment attached to the region), so
/// neither the stack nor the NIC copies a payload byte; Linux's SHA-256 matches; every loan is
/// handed back (after ACK and completion: net_tap completes once it has written the frame).
#[test]
fn stack_sends_external_memory_to_linux_without_copy() {
    require_netns!("stack_sends_external_memory_to_linux_without_copy");
    const TOTAL: usize = 64 << 20;
    const LOAN: usize = 256 * 1024;
    let seed = 205;
    let bed = Testbed::new("dext", 18);
    let mut nic = open_dpdk_tap(&bed);
    let mut guest = MemfdRegion::new(TOTAL);
    pattern(seed, 0, guest.bytes_mut());
    // SAFETY: `guest` stays mapped until the end of the test, after the stack (and with it the
    // NIC's clone of the region) and `region` are dropped.
    let region = unsafe { ExtMemRegion::register(eal(), guest.as_mut_ptr(), guest.len(), 4096) }
        .expect("register the region");
    nic.attach_region(&region).expect("attach the region");
    let guest = Arc::new(guest);

    let (addr, linux) = spawn_tcp_server_recv(&bed.ns, bed.host_addr(0).into(), BULK_TIMEOUT)
        .expect("the Linux server listens");
    let SocketAddr::V4(addr) = addr else { panic!("IPv4 listener expected, got {addr}") };
    let memory = Arc::clone(&guest);
    let stack = StackRunner::spawn(&bed.ns, nic, bed.iface_config(), BULK_TIMEOUT, move |iface, now| {
        let h = iface.tcp_connect(now, addr).map_err(|e| format!("tcp_connect: {e}"))?;
        let mut sender = LoanSender::new(h, TOTAL, LOAN);
        Ok(move |iface: &mut slimtcp::iface::Interface<DpdkNic>, _now| {
            if sender.step(iface, &memory)? {
                let stats = iface.nic().stats();
                Ok(Step::Done((sender.loaned(), sender.returned(), iface.counters(), stats)))
            } else {
                Ok(Step::Progress)
            }
        })
    });
    let received = linux.join().expect("the Linux server receives until end of stream");
    let (loaned, returned, counters, nic_stats) = stack.result(BULK_TIMEOUT).expect("the stack finishes");
    stack.stop();
    eprintln!(
        "{SUITE}: external memory -> linux: {} MiB, {} external frames, stack copied {} B, NIC copied {} B, \
         {loaned} loans, {returned} returned, {} retransmissions",
        received.bytes >> 20,
        counters.tx_external_frames,
        counters.tx_payload_copied_bytes,
        nic_stats.tx_copied_bytes,
        counters.tcp_retransmits
    );
    assert!(received.matches_pattern(seed, TOTAL as u64), "Linux received the region's bytes intact");
    assert_eq!(counters.tx_payload_copied_bytes, 0, "the stack copied no payload byte");
    assert_eq!(nic_stats.tx_copied_bytes, 0, "the NIC copied no byte");
    assert!(counters.tx_external_bytes >= TOTAL as u64, "all payload sent by reference");
    assert_eq!((loaned, returned), (TOTAL / LOAN, TOTAL / LOAN), "every loan handed back");
    drop(region);
    drop(guest);
}

/// Stack frames a capture must hold at least in the offload session (it sends about 12,000).
const MIN_CAPTURED: u64 = 1000;

/// The TAP offload suite's session (a 16 MiB stream each way at once, UDP echoes, every byte
/// checked) on a `net_tap` port with `checksum_offload`, the kernel of the port's namespace the
/// peer, the port's kernel interface captured; returns the session and the capture.
fn offload_session(
    what: &str,
    name: &str,
    subnet: u8,
    checksum_offload: bool,
) -> (Session<DpdkNicStats>, Bed, PcapFile) {
    let bed = Bed::local(name, subnet);
    let nic = open_dpdk_tap_in(bed.tap_ns(), &bed.tap, bed.host_ip, 24, checksum_offload);
    let caps = nic.capabilities().checksum;
    eprintln!("{what}: the port's checksum offloads in use: {caps:?}");
    assert_eq!(
        (caps.tcp.tx, caps.udp.tx, caps.ipv4.tx),
        (checksum_offload, checksum_offload, checksum_offload),
        "{what}: net_tap offers IPv4/TCP/UDP transmit checksum offload, used only when asked for"
    );
    let pcap = PcapFile::new(name);
    let capture = Capture::start(bed.tap_ns(), &bed.tap, pcap.path()).expect("capture the port's interface");
    let session = run_session_on(what, &bed, nic, DpdkNic::stats);
    capture.stop().expect("stop the capture");
    (session, bed, pcap)
}

/// What tshark makes of the stack's frames in `pcap`, and what their checksum fields held:
/// every one well-formed with a complete, correct checksum.
fn assert_wire_checksums_right(what: &str, bed: &Bed, pcap: &PcapFile) {
    let report = check_capture(
        pcap.path(),
        Some(&format!("ip.src == {}", bed.stack_ip)),
        &[STACK_TCP_PORT, LINUX_TCP_PORT],
    );
    eprintln!("{what}: tshark on the stack's frames: {report}");
    assert!(report.packets >= MIN_CAPTURED, "{what}: too few stack frames captured: {report}");
    assert!(report.is_clean(), "{what}: bad frames from the stack: {report}");
    let fields = checksum_fields(pcap.path(), bed.stack_mac);
    eprintln!("{what}: the stack's checksum fields on the wire: {fields:?}");
    assert_eq!(fields.complete, fields.frames, "{what}: {fields:?}");
}

/// With the port's offload the stack leaves every TCP/UDP checksum (and the IPv4 header's) to the
/// port, whose driver fills them before the kernel sees the frame: tshark finds them all right.
#[test]
fn with_the_ports_checksum_offload_every_checksum_on_the_wire_is_right() {
    require_netns!("with_the_ports_checksum_offload_every_checksum_on_the_wire_is_right");
    let what = "dpdk net_tap, checksum offload";
    let (session, bed, pcap) = offload_session(what, "dcsum-on", 74, true);
    let l4_frames = session.counters.tcp_segs_out + session.counters.udp_out;
    assert_eq!(session.counters.tcp_resets_sent, 0, "{what}: no control segment (built in software)");
    assert_eq!(
        session.nic.tx_checksum_offloaded, l4_frames,
        "{what}: every TCP/UDP frame left its sum to the port: {:?}",
        session.nic
    );
    assert_wire_checksums_right(what, &bed, &pcap);
}

/// Without it the stack computes every checksum itself, and they are right on the wire too.
#[test]
fn without_the_ports_checksum_offload_the_stacks_own_checksums_are_right() {
    require_netns!("without_the_ports_checksum_offload_the_stacks_own_checksums_are_right");
    let what = "dpdk net_tap, software checksums";
    let (session, bed, pcap) = offload_session(what, "dcsum-off", 75, false);
    assert_eq!(session.nic.tx_checksum_offloaded, 0, "{what}: {:?}", session.nic);
    assert_wire_checksums_right(what, &bed, &pcap);
}
