//! Packet capture, specified on a memwire link whose end A is tapped: what is captured while
//! armed and nothing while disarmed, the limits that end a capture, drops on a full queue, one
//! capture at a time, and a pcap stream that holds exactly what crossed the wire (checked by
//! tshark for a real TCP transfer).

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use slimtcp::api::SocketError;
use slimtcp::iface::Interface;
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::nic::pcap::{read_pcap, read_pcap_bytes, PcapWriter};
use slimtcp::nic::{ExternalFrame, ExternalPayload, Nic, PacketBuf};
use slimtcp::sim::default_configs;
use slimtcp::time::{Instant, VirtualClock};

use super::{CaptureEnd, CaptureError, CaptureLimits, CaptureReport, CaptureTap, Tapped};

/// A `len`-byte frame whose bytes all derive from `tag`.
fn frame_bytes(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
}

/// A link whose end A is tapped, and the tap.
fn tapped_link(config: LinkConfig) -> (Tapped<MemwireNic>, MemwireNic, Arc<CaptureTap>) {
    let (a, b) = link(config).expect("memwire link");
    let tap = Arc::new(CaptureTap::new());
    (Tapped::new(a, Arc::clone(&tap)), b, tap)
}

/// Transmits `frames` in one burst; returns how many the NIC took.
fn send(nic: &mut impl Nic, frames: &[Vec<u8>]) -> usize {
    let mut burst: Vec<PacketBuf> = frames.iter().map(|f| PacketBuf::from_slice(f)).collect();
    nic.transmit(Instant::ZERO, &mut burst).expect("transmit")
}

/// Receives every frame due.
fn receive_all(nic: &mut impl Nic) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while nic.receive(Instant::ZERO, &mut out, usize::MAX).expect("receive") > 0 {}
    out.iter().map(|f| f.as_slice().to_vec()).collect()
}

fn pcap_in_memory() -> PcapWriter<Vec<u8>> {
    PcapWriter::new(Vec::new(), "the test's Vec").expect("pcap header")
}

/// The frames of a pcap stream written into memory.
fn frames_of(out: &PcapWriter<Vec<u8>>) -> Vec<Vec<u8>> {
    let frames = read_pcap_bytes(out.get_ref(), "the test's Vec").expect("a readable pcap stream");
    frames.into_iter().map(|(_, f)| f).collect()
}

fn limits(max_frames: Option<u64>) -> CaptureLimits {
    CaptureLimits { max_frames, ..CaptureLimits::default() }
}

#[test]
fn a_disarmed_tap_captures_nothing() {
    let (mut a, mut b, tap) = tapped_link(LinkConfig::default());
    assert!(!tap.is_armed());
    assert_eq!(send(&mut a, &[frame_bytes(1, 60), frame_bytes(2, 60)]), 2);
    assert_eq!(send(&mut b, &[frame_bytes(3, 60)]), 1);
    assert_eq!(receive_all(&mut b).len(), 2);
    assert_eq!(receive_all(&mut a).len(), 1);
    assert!(tap.recorder().is_none(), "no capture to record into");

    let mut capture = tap.arm(limits(None)).expect("arm");
    let mut out = pcap_in_memory();
    assert_eq!(capture.drain(&mut out).expect("drain"), 0, "frames before arming are not captured");
    assert!(frames_of(&out).is_empty());
}

#[test]
fn armed_with_a_frame_count_it_captures_exactly_that_many_then_disarms() {
    let (mut a, mut b, tap) = tapped_link(LinkConfig::default());
    let capture = tap.arm(limits(Some(5))).expect("arm");
    assert!(tap.is_armed());
    let sent: Vec<Vec<u8>> = (0..4).map(|i| frame_bytes(i, 64)).collect();
    let back: Vec<Vec<u8>> = (10..14).map(|i| frame_bytes(i, 80)).collect();
    assert_eq!(send(&mut a, &sent), 4);
    assert_eq!(send(&mut b, &back), 4);
    assert_eq!(receive_all(&mut a), back, "the tap never changes what crosses the NIC");

    assert!(!tap.is_armed(), "the fifth frame ends the capture");
    assert!(capture.is_finished());
    assert_eq!(capture.end(), Some(CaptureEnd::FrameLimit));
    let mut out = pcap_in_memory();
    let report = capture.finish(&mut out).expect("finish");
    let expected: Vec<Vec<u8>> = sent.iter().chain(&back[..1]).cloned().collect();
    assert_eq!(frames_of(&out), expected);
    assert_eq!(
        report,
        CaptureReport {
            frames_written: 5,
            frames_dropped: 0,
            bytes_written: 4 * 64 + 80,
            end: Some(CaptureEnd::FrameLimit)
        }
    );
}

#[test]
fn a_full_queue_counts_drops_and_never_holds_back_the_nic() {
    let (mut a, mut b, tap) = tapped_link(LinkConfig::default());
    let mut capture = tap.arm(CaptureLimits { queue_frames: 2, ..limits(Some(3)) }).expect("arm");
    let sent: Vec<Vec<u8>> = (0..5).map(|i| frame_bytes(i, 64)).collect();
    assert_eq!(send(&mut a, &sent), 5, "the NIC takes the whole burst");
    assert_eq!(receive_all(&mut b), sent);
    assert!(tap.is_armed(), "dropped frames do not count towards the frame limit");

    let mut out = pcap_in_memory();
    assert_eq!(capture.drain(&mut out).expect("drain"), 2);
    assert_eq!(send(&mut a, &[frame_bytes(9, 64)]), 1);
    assert!(!tap.is_armed(), "the third frame captured ends it");
    let report = capture.finish(&mut out).expect("finish");
    assert_eq!(frames_of(&out), vec![sent[0].clone(), sent[1].clone(), frame_bytes(9, 64)]);
    assert_eq!((report.frames_written, report.frames_dropped), (3, 3));
    assert_eq!(report.end, Some(CaptureEnd::FrameLimit));
}

#[test]
fn one_capture_at_a_time_until_its_handle_is_finished_or_dropped() {
    let (mut a, _b, tap) = tapped_link(LinkConfig::default());
    let first = tap.arm(limits(Some(1))).expect("arm");
    assert!(matches!(tap.arm(limits(None)), Err(CaptureError::Busy)));
    assert_eq!(send(&mut a, &[frame_bytes(1, 60)]), 1);
    assert!(first.is_finished() && !tap.is_armed());
    assert!(matches!(tap.arm(limits(None)), Err(CaptureError::Busy)), "ended but not finished");
    first.finish(&mut pcap_in_memory()).expect("finish");

    let second = tap.arm(limits(None)).expect("the tap is free again");
    assert_eq!(send(&mut a, &[frame_bytes(2, 60)]), 1);
    drop(second);
    assert!(!tap.is_armed(), "dropping the handle stops its capture");

    let mut third = tap.arm(limits(None)).expect("free after a drop");
    let mut out = pcap_in_memory();
    assert_eq!(send(&mut a, &[frame_bytes(3, 60)]), 1);
    third.drain(&mut out).expect("drain");
    assert_eq!(frames_of(&out), vec![frame_bytes(3, 60)], "nothing of an earlier capture leaks in");
}

#[test]
fn only_the_frames_the_inner_nic_took_are_captured() {
    let (mut a, _b, tap) = tapped_link(LinkConfig { capacity: 3, ..LinkConfig::default() });
    let mut capture = tap.arm(limits(None)).expect("arm");
    let burst: Vec<Vec<u8>> = (0..10).map(|i| frame_bytes(i, 64)).collect();
    let mut frames: Vec<PacketBuf> = burst.iter().map(|f| PacketBuf::from_slice(f)).collect();
    assert_eq!(a.transmit(Instant::ZERO, &mut frames).expect("transmit"), 3, "the link holds three");
    assert_eq!(frames.len(), 7, "the rest stays with the caller");
    let mut out = pcap_in_memory();
    capture.drain(&mut out).expect("drain");
    assert_eq!(frames_of(&out), burst[..3].to_vec());
}

#[test]
fn external_frames_are_captured_as_headers_then_payload() {
    let (mut a, mut b, tap) = tapped_link(LinkConfig::default());
    assert!(a.supports_external(), "forwarded from memwire");
    let mut capture = tap.arm(limits(None)).expect("arm");
    let headers = frame_bytes(0xa0, 54);
    let payload = frame_bytes(0x10, 1000);
    // SAFETY: `payload` is neither moved nor changed until the end of the test, after the NIC
    // reported the token complete below.
    let external = unsafe { ExternalPayload::new(payload.as_ptr(), payload.len(), 77) }.expect("non-null");
    let mut frames = vec![ExternalFrame { headers: PacketBuf::from_slice(&headers), payload: external }];
    assert_eq!(a.transmit_external(Instant::ZERO, &mut frames).expect("transmit"), 1);
    let mut done = Vec::new();
    assert_eq!(a.poll_tx_completions(&mut done), 1);
    assert_eq!(done, vec![77]);
    assert_eq!(a.external_copied_bytes(), 1000, "forwarded from memwire");

    let flat: Vec<u8> = headers.iter().chain(&payload).copied().collect();
    assert_eq!(receive_all(&mut b), vec![flat.clone()]);
    let mut out = pcap_in_memory();
    capture.drain(&mut out).expect("drain");
    assert_eq!(frames_of(&out), vec![flat]);
}

#[test]
fn the_pcap_holds_what_crossed_the_wire_both_ways_stamped_with_the_wall_clock() {
    let (mut a, mut b, tap) = tapped_link(LinkConfig::default());
    let mut capture = tap.arm(limits(None)).expect("arm");
    let mut out = pcap_in_memory();
    let before = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
    let mut crossed = Vec::new();
    for round in 0..20u8 {
        let out_frames: Vec<Vec<u8>> =
            (0..round % 4).map(|i| frame_bytes(round ^ i, 60 + 30 * i as usize)).collect();
        let in_frames: Vec<Vec<u8>> =
            (0..round % 3).map(|i| frame_bytes(!round ^ i, 1514 - i as usize)).collect();
        assert_eq!(send(&mut a, &out_frames), out_frames.len());
        assert_eq!(send(&mut b, &in_frames), in_frames.len());
        assert_eq!(receive_all(&mut a), in_frames);
        crossed.extend(out_frames);
        crossed.extend(in_frames);
        if round % 5 == 0 {
            capture.drain(&mut out).expect("drain while the capture runs");
        }
    }
    let report = capture.finish(&mut out).expect("finish");
    let after = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
    assert_eq!(report.end, Some(CaptureEnd::Stopped));
    assert_eq!(report.frames_written, crossed.len() as u64);
    assert_eq!(report.bytes_written, crossed.iter().map(|f| f.len() as u64).sum::<u64>());

    let frames = read_pcap_bytes(out.get_ref(), "the test's Vec").expect("a readable pcap stream");
    let times: Vec<u64> = frames.iter().map(|(at, _)| at.total_micros()).collect();
    let window = before.as_micros() as u64..=after.as_micros() as u64;
    assert!(times.iter().all(|t| window.contains(t)), "wall-clock times within {window:?}: {times:?}");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in capture order");
    assert_eq!(frames.into_iter().map(|(_, f)| f).collect::<Vec<_>>(), crossed);
}

#[test]
fn the_byte_cap_ends_a_capture_before_the_frame_that_would_exceed_it() {
    let (mut a, _b, tap) = tapped_link(LinkConfig::default());
    let capture = tap.arm(CaptureLimits { max_bytes: 150, ..limits(None) }).expect("arm");
    assert_eq!(send(&mut a, &[frame_bytes(1, 64), frame_bytes(2, 64), frame_bytes(3, 64)]), 3);
    assert!(!tap.is_armed());
    let mut out = pcap_in_memory();
    let report = capture.finish(&mut out).expect("finish");
    assert_eq!(frames_of(&out), vec![frame_bytes(1, 64), frame_bytes(2, 64)]);
    assert_eq!((report.bytes_written, report.end), (128, Some(CaptureEnd::ByteLimit)));
}

#[test]
fn a_passed_deadline_ends_a_capture_on_a_busy_or_an_idle_tenant() {
    let (mut a, _b, tap) = tapped_link(LinkConfig::default());
    let run_out = |capture: &super::Capture| {
        let deadline = capture.deadline().expect("a deadline");
        while std::time::Instant::now() < deadline {
            std::hint::spin_loop();
        }
    };
    let busy =
        tap.arm(CaptureLimits { duration: Some(Duration::from_micros(50)), ..limits(None) }).expect("arm");
    run_out(&busy);
    assert_eq!(send(&mut a, &[frame_bytes(1, 64)]), 1);
    assert!(!tap.is_armed(), "the worker ends it at its next frame");
    let report = busy.finish(&mut pcap_in_memory()).expect("finish");
    assert_eq!((report.frames_written, report.end), (0, Some(CaptureEnd::Deadline)));

    let idle =
        tap.arm(CaptureLimits { duration: Some(Duration::from_micros(50)), ..limits(None) }).expect("arm");
    run_out(&idle);
    assert!(tap.is_armed(), "no frame crossed");
    assert_eq!(idle.end(), Some(CaptureEnd::Deadline), "the control thread ends it");
    assert!(!tap.is_armed());
}

#[test]
fn stopping_ends_the_capture_and_keeps_what_was_queued() {
    let (mut a, _b, tap) = tapped_link(LinkConfig::default());
    let capture = tap.arm(limits(None)).expect("arm");
    assert_eq!(send(&mut a, &[frame_bytes(1, 64)]), 1);
    capture.stop();
    assert!(!tap.is_armed());
    assert_eq!(send(&mut a, &[frame_bytes(2, 64)]), 1);
    let mut out = pcap_in_memory();
    let report = capture.finish(&mut out).expect("finish");
    assert_eq!(frames_of(&out), vec![frame_bytes(1, 64)]);
    assert_eq!(report.end, Some(CaptureEnd::Stopped));
}

#[test]
fn limits_that_capture_nothing_are_refused() {
    let tap = Arc::new(CaptureTap::new());
    for bad in [
        limits(Some(0)),
        CaptureLimits { duration: Some(Duration::ZERO), ..limits(None) },
        CaptureLimits { max_bytes: 0, ..limits(None) },
        CaptureLimits { queue_frames: 0, ..limits(None) },
        CaptureLimits { queue_frames: super::MAX_QUEUE_FRAMES + 1, ..limits(None) },
    ] {
        assert!(matches!(tap.arm(bad), Err(CaptureError::InvalidLimits(_))), "{bad:?}");
    }
    assert!(!tap.is_armed());
    tap.arm(limits(None)).expect("refused limits leave the tap free");
}

/// Polls both interfaces on a virtual clock, jumping to the next event when idle, until `done`.
fn run_until<NA: Nic, NB: Nic>(
    a: &mut Interface<NA>,
    b: &mut Interface<NB>,
    clock: &VirtualClock,
    link_b: impl Fn(&Interface<NB>) -> Option<Instant>,
    mut done: impl FnMut(&mut Interface<NA>, &mut Interface<NB>) -> bool,
) {
    for _ in 0..1_000_000 {
        if done(a, b) {
            return;
        }
        let now = clock.now();
        let busy_a = a.poll(now).expect("poll A");
        let busy_b = b.poll(now).expect("poll B");
        if !busy_a && !busy_b {
            let tick = now + Duration::from_micros(100);
            let next = [a.poll_at(), b.poll_at(), link_b(b)]
                .into_iter()
                .flatten()
                .map(|t| if t <= now { tick } else { t })
                .min()
                .unwrap_or(tick);
            clock.advance_to(next);
        }
    }
    panic!("the transfer did not finish");
}

#[test]
fn tshark_finds_a_captured_tcp_transfer_well_formed() {
    tshark_checks_a_captured_transfer(LinkConfig::default());
}

/// The link offers checksum offload and, uncaptured and faultless, never fills a checksum: the
/// frames cross it with their pseudo-header sums, and the capture fills them in its copies.
#[test]
fn a_capture_shows_real_checksums_where_the_nic_fills_them() {
    let mut config = LinkConfig::default();
    config.caps.checksum = slimtcp::wire::ChecksumCapabilities::all();
    tshark_checks_a_captured_transfer(config);
}

/// A 256 KiB transfer from A to B, captured on A and checked by tshark.
fn tshark_checks_a_captured_transfer(config: LinkConfig) {
    const BYTES: usize = 256 * 1024;
    const PORT: u16 = 5001;
    let offload = config.caps.checksum.tcp.tx;
    let (a_nic, b_nic, tap) = tapped_link(config);
    let (a_cfg, b_cfg) = default_configs();
    let b_ip = b_cfg.ip;
    let mut a = Interface::new(a_nic, a_cfg);
    let mut b = Interface::new(b_nic, b_cfg);
    let clock = VirtualClock::new();
    let path =
        std::env::temp_dir().join(format!("slimtcp-vhost-capture-{}-{offload}.pcap", std::process::id()));
    let mut out = PcapWriter::create(&path).expect("create the capture file");
    let capture = tap.arm(limits(None)).expect("arm");

    let listener = b.tcp_listen(PORT, 4).expect("listen");
    let client = a.tcp_connect(clock.now(), SocketAddrV4::new(b_ip, PORT)).expect("connect");
    let data = frame_bytes(7, BYTES);
    let (mut sent, mut received, mut server) = (0, Vec::with_capacity(BYTES), None);
    let mut buf = vec![0u8; 16 * 1024];
    run_until(
        &mut a,
        &mut b,
        &clock,
        |b| b.nic().next_delivery(),
        |a, b| {
            if sent < BYTES {
                match a.tcp_send(client, &data[sent..]) {
                    Ok(n) => sent += n,
                    Err(SocketError::WouldBlock | SocketError::NotConnected) => {}
                    Err(e) => panic!("send: {e}"),
                }
                if sent == BYTES {
                    a.tcp_shutdown(client).expect("shutdown");
                }
            }
            if server.is_none() && b.tcp_can_accept(listener) {
                server = Some(b.tcp_accept(listener).expect("accept"));
            }
            let Some(s) = server else { return false };
            loop {
                match b.tcp_recv(s, &mut buf) {
                    Ok(0) => return true,
                    Ok(n) => received.extend_from_slice(&buf[..n]),
                    Err(SocketError::WouldBlock) => return false,
                    Err(e) => panic!("recv: {e}"),
                }
            }
        },
    );
    assert!(received == data, "B received the stream intact");
    let report = capture.finish(&mut out).expect("finish");
    drop(out);
    assert!(report.frames_written > 100, "{report}");
    assert_eq!(report.frames_dropped, 0, "{report}");

    let frames = read_pcap(&path).expect("read the capture back");
    assert_eq!(frames.len() as u64, report.frames_written);
    let check = slimtcp_testkit::check::check_wellformed(&path).expect("run tshark");
    eprintln!("tshark: {check}");
    assert_eq!(check.packets, report.frames_written, "{check}");
    assert!(check.is_clean(), "{check}");
    std::fs::remove_file(&path).ok();
}
