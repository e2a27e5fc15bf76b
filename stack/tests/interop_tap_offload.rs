//! Tier 3: the TAP's checksum offload (virtio-net header), with and without, against the Linux
//! kernel; every byte checked, the frames on the wire checked by tshark.
//!
//! With offload the stack leaves its TCP/UDP checksums to the device (`NEEDS_CSUM`): the kernel
//! trusts them on local delivery and completes them where a real one is needed. The routed bed
//! makes it complete them: the TAP lives in a router namespace, and the Linux peer sits behind
//! it on a veth without checksum offload, where the router's kernel fills every checksum before
//! the frame leaves:
//!
//! ```text
//!   peer ns (10.92.N.2) --veth, tx-checksumming off-- router ns (10.92.N.1 | 10.91.N.1) --TAP-- SlimTCP (10.91.N.2)
//! ```
//!
//! A capture on the TAP shows the stack's frames as written; one on the veth shows them as the
//! device finished them. The local bed has the kernel of the TAP's own namespace as the peer,
//! which sends its frames with partial checksums (`NEEDS_CSUM`) itself. Each test makes its own
//! namespaces (`slimt-*`), removed on drop; traffic stays inside them.

#[macro_use]
extern crate slimtcp_testkit;

mod common;
mod tap_offload;

use std::time::Duration;

use slimtcp::iface::DropReason;
use slimtcp::nic::tap::TapConfig;
use slimtcp_testkit::capture::Capture;

use common::{check_capture, AppResult, PcapFile, StackRunner, Step};
use tap_offload::frames::{checksum_fields, inject, udp_frame, Damage, UdpAddrs};
use tap_offload::{run_session, Bed, Session, LINUX_TCP_PORT, STACK_TCP_PORT};

const OFFLOAD: TapConfig = TapConfig { checksum_offload: true };
const SOFTWARE: TapConfig = TapConfig { checksum_offload: false };

/// Stack frames a capture must hold at least (a session sends about 12,000; a capture may miss
/// some under load).
const MIN_CAPTURED: u64 = 1000;

/// TCP ports whose payload tshark dissects as plain data (pseudo-random test bytes).
const DATA_PORTS: [u16; 2] = [STACK_TCP_PORT, LINUX_TCP_PORT];

/// Every TCP/UDP frame the stack sent left its checksum to the TAP, and nothing was filled in
/// software: the TAP wrote each with `NEEDS_CSUM`.
fn assert_all_offloaded(what: &str, s: &Session) {
    let l4_frames = s.counters.tcp_segs_out + s.counters.udp_out;
    assert_eq!(s.counters.tcp_resets_sent, 0, "{what}: no control segment (those are built in software)");
    assert_eq!(s.nic.tx_checksum_offloaded, l4_frames, "{what}: frames sent with NEEDS_CSUM: {:?}", s.nic);
    assert_eq!(s.nic.tx_checksum_filled, 0, "{what}: checksums the TAP had to fill: {:?}", s.nic);
    assert_eq!(s.counters.dropped(DropReason::BadChecksum), 0, "{what}: {:?}", s.counters);
}

/// The tshark verdict on the stack's frames (by IP source: past the router the Ethernet source is
/// the router's) in `path`: at least `min` of them, all well-formed with good checksums.
fn assert_stack_frames_clean(what: &str, path: &std::path::Path, bed: &Bed, min: u64) {
    let report = check_capture(path, Some(&format!("ip.src == {}", bed.stack_ip)), &DATA_PORTS);
    eprintln!("{what}: tshark on the stack's frames: {report}");
    assert!(report.packets >= min, "{what}: too few stack frames captured: {report}");
    assert!(report.is_clean(), "{what}: bad frames from the stack: {report}");
}

#[test]
fn with_offload_the_kernel_completes_the_stacks_checksums_for_a_routed_linux_peer() {
    require_netns!("with_offload_the_kernel_completes_the_stacks_checksums_for_a_routed_linux_peer");
    let what = "offload, routed peer";
    let bed = Bed::routed("csum-on", 70);
    let tap = bed.open_tap(OFFLOAD);
    let link = bed.peer_link().expect("routed");
    let (on_tap, on_link) = (PcapFile::new("csum-on-tap"), PcapFile::new("csum-on-link"));
    let tap_capture = Capture::start(bed.tap_ns(), &bed.tap, on_tap.path()).expect("capture the TAP");
    let link_capture = Capture::start(bed.tap_ns(), link, on_link.path()).expect("capture the veth");

    let session = run_session(what, &bed, tap);
    tap_capture.stop().expect("stop the TAP capture");
    link_capture.stop().expect("stop the veth capture");

    assert_all_offloaded(what, &session);
    // As written to the TAP, every TCP/UDP checksum field holds the pseudo-header sum: the
    // stack computed no checksum over a segment.
    let fields = checksum_fields(on_tap.path(), bed.stack_mac);
    eprintln!("{what}: the stack's frames on the TAP: {fields:?}");
    assert!(fields.frames >= MIN_CAPTURED as usize, "{what}: {fields:?}");
    assert_eq!(fields.pseudo_header_only, fields.frames, "{what}: {fields:?}");
    // Past the router every checksum is right: the partial sums were the right ones. (Each
    // capture may miss frames under load, so the two are not compared frame by frame.)
    assert_stack_frames_clean(what, on_link.path(), &bed, MIN_CAPTURED);
}

#[test]
fn with_offload_the_local_kernel_as_peer_sends_partial_checksums_the_stack_trusts() {
    require_netns!("with_offload_the_local_kernel_as_peer_sends_partial_checksums_the_stack_trusts");
    let what = "offload, local kernel";
    let bed = Bed::local("csum-local", 71);
    let tap = bed.open_tap(OFFLOAD);
    let features = bed.tap_ns().exec_ok(&["ethtool", "-k", &bed.tap]).expect("ethtool -k");
    assert!(features.lines().any(|l| l.trim() == "tx-checksumming: on"), "TAP offloads: {features}");

    let session = run_session(what, &bed, tap);
    assert_all_offloaded(what, &session);
    // The kernel's segments and datagrams came with partial checksums, taken as verified.
    assert!(session.nic.rx_checksum_partial > 1000, "{what}: {:?}", session.nic);
    assert_eq!((session.nic.rx_gso_dropped, session.nic.rx_bad_header), (0, 0), "{what}: {:?}", session.nic);
}

#[test]
fn without_offload_the_stacks_software_checksums_are_right_on_the_wire() {
    require_netns!("without_offload_the_stacks_software_checksums_are_right_on_the_wire");
    let what = "no offload, routed peer";
    let bed = Bed::routed("csum-off", 72);
    let tap = bed.open_tap(SOFTWARE);
    let features = bed.tap_ns().exec_ok(&["ethtool", "-k", &bed.tap]).expect("ethtool -k");
    assert!(features.lines().any(|l| l.trim() == "tx-checksumming: off"), "TAP offloads: {features}");
    let on_tap = PcapFile::new("csum-off-tap");
    let capture = Capture::start(bed.tap_ns(), &bed.tap, on_tap.path()).expect("capture the TAP");

    let session = run_session(what, &bed, tap);
    capture.stop().expect("stop the capture");

    let t = session.nic;
    assert_eq!((t.tx_checksum_offloaded, t.tx_checksum_filled), (0, 0), "{what}: {t:?}");
    assert_eq!((t.rx_data_valid, t.rx_checksum_partial, t.rx_unverified), (0, 0, 0), "{what}: {t:?}");
    let fields = checksum_fields(on_tap.path(), bed.stack_mac);
    eprintln!("{what}: the stack's frames on the TAP: {fields:?}");
    assert_eq!(fields.complete, fields.frames, "{what}: {fields:?}");
    assert_stack_frames_clean(what, on_tap.path(), &bed, MIN_CAPTURED);
    // The peer's frames, forwarded to the TAP, carry real checksums too.
    let all = check_capture(on_tap.path(), None, &DATA_PORTS);
    eprintln!("{what}: tshark on the whole TAP capture: {all}");
    assert!(all.is_clean(), "{what}: {all}");
}

/// Frames the kernel hands over without a verdict (injected on its side of the TAP with an
/// `AF_PACKET` socket, so nothing checked them) are verified by the stack even with offload on:
/// a bad UDP checksum and a bad IPv4 header checksum are dropped as bad-checksum, the good
/// datagrams around them are delivered.
#[test]
fn with_offload_a_frame_without_a_verdict_and_a_bad_checksum_is_dropped() {
    require_netns!("with_offload_a_frame_without_a_verdict_and_a_bad_checksum_is_dropped");
    const PORT: u16 = 6100;
    let bed = Bed::local("csum-bad", 73);
    let tap = bed.open_tap(OFFLOAD);
    let host_mac = {
        let text =
            bed.tap_ns().exec_ok(&["cat", &format!("/sys/class/net/{}/address", bed.tap)]).expect("MAC");
        text.trim().parse().expect("a MAC address in sysfs")
    };
    let stack =
        StackRunner::spawn(bed.tap_ns(), tap, bed.iface_config(), Duration::from_secs(30), |iface, _| {
            let h = iface.udp_bind(PORT).map_err(|e| format!("udp_bind: {e}"))?;
            let mut seen: Vec<Vec<u8>> = Vec::new();
            let mut buf = vec![0u8; 2048];
            Ok(
                move |iface: &mut slimtcp::iface::Interface<slimtcp::nic::tap::TapNic>,
                      _|
                      -> AppResult<Step<_>> {
                    let mut progress = false;
                    while let Ok((n, _)) = iface.udp_recv_from(h, &mut buf) {
                        seen.push(buf[..n].to_vec());
                        progress = true;
                    }
                    if seen.last().is_some_and(|d| d == b"end") {
                        let report = (std::mem::take(&mut seen), iface.counters(), iface.nic().stats());
                        return Ok(Step::Done(report));
                    }
                    Ok(if progress { Step::Progress } else { Step::Idle })
                },
            )
        });
    let addrs = UdpAddrs {
        src_mac: host_mac,
        dst_mac: bed.stack_mac,
        src: bed.host_ip,
        dst: bed.stack_ip,
        src_port: 40000,
        dst_port: PORT,
    };
    let frames = vec![
        udp_frame(&addrs, b"one", Damage::None),
        udp_frame(&addrs, b"bad udp checksum", Damage::UdpChecksum),
        udp_frame(&addrs, b"bad ip checksum", Damage::Ipv4Checksum),
        udp_frame(&addrs, b"end", Damage::None),
    ];
    let ifname = bed.tap.clone();
    bed.tap_ns().run(move || inject(&ifname, &frames)).expect("inject the frames");
    let (seen, counters, tap) =
        stack.result(Duration::from_secs(10)).expect("the stack sees the last datagram");
    stack.stop();
    eprintln!("{counters:?}\n{tap:?}");
    assert_eq!(seen, vec![b"one".to_vec(), b"end".to_vec()], "only the good datagrams are delivered");
    assert_eq!(counters.dropped(DropReason::BadChecksum), 2, "{counters:?}");
    assert!(tap.rx_unverified >= 4, "the injected frames came without a verdict: {tap:?}");
}
