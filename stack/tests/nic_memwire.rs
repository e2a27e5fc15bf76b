//! The in-memory link: zero-copy FIFO delivery, faults, capacity, delay, capture, link down.

use std::time::Duration;

use slimtcp::nic::fault::{FaultConfig, Rng};
use slimtcp::nic::memwire::{link, LinkConfig, MemwireError, MemwireNic};
use slimtcp::nic::pcap::read_pcap;
use slimtcp::nic::{ExternalFrame, ExternalPayload, Nic, NicCapabilities, NicError, PacketBuf};
use slimtcp::time::{Instant, VirtualClock};

/// A 64-byte frame whose first four bytes are `tag`.
fn frame(nic: &mut MemwireNic, tag: u32) -> PacketBuf {
    let mut buf = nic.alloc_tx().expect("memwire always allocates");
    let data = buf.append(64).expect("room for 64 bytes");
    data[..4].copy_from_slice(&tag.to_be_bytes());
    data[4..].fill(tag as u8);
    buf
}

fn tag(frame: &PacketBuf) -> u32 {
    let mut t = [0u8; 4];
    t.copy_from_slice(&frame.as_slice()[..4]);
    u32::from_be_bytes(t)
}

/// Receives everything due at `now`.
fn drain(nic: &mut MemwireNic, now: Instant) -> Vec<PacketBuf> {
    let mut out = Vec::new();
    while nic.receive(now, &mut out, usize::MAX).expect("memwire receive") > 0 {}
    out
}

/// Sends `n` tagged frames from `tx` one per microsecond, then drains `rx` until the link is quiet,
/// advancing a virtual clock to each next delivery. Returns the received tags.
fn run(tx: &mut MemwireNic, rx: &mut MemwireNic, n: u32) -> Vec<u32> {
    let clock = VirtualClock::new();
    for i in 0..n {
        let mut burst = vec![frame(tx, i)];
        assert_eq!(tx.transmit(clock.now(), &mut burst).expect("transmit"), 1);
        assert!(burst.is_empty());
        clock.advance(Duration::from_micros(1));
    }
    let mut tags = Vec::new();
    while let Some(t) = rx.next_delivery() {
        clock.advance_to(t);
        tags.extend(drain(rx, clock.now()).iter().map(tag));
    }
    tags
}

#[test]
fn fifo_is_zero_copy_and_ordered() {
    let (mut a, mut b) = link(LinkConfig::default()).expect("link");
    let mut burst: Vec<PacketBuf> = (0..10).map(|i| frame(&mut a, i)).collect();
    let ptrs: Vec<*const u8> = burst.iter().map(|f| f.as_slice().as_ptr()).collect();
    assert_eq!(a.transmit(Instant::ZERO, &mut burst).expect("transmit"), 10);
    assert!(burst.is_empty());
    assert_eq!(a.in_flight(), 10);
    assert_eq!(b.next_delivery(), Some(Instant::ZERO));

    let got = drain(&mut b, Instant::ZERO);
    assert_eq!(got.iter().map(tag).collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
    let got_ptrs: Vec<*const u8> = got.iter().map(|f| f.as_slice().as_ptr()).collect();
    assert_eq!(got_ptrs, ptrs, "the receiver must get the sender's very buffers");
    assert_eq!(a.in_flight(), 0);
    assert_eq!(b.next_delivery(), None);

    let s = a.stats();
    assert_eq!((s.tx.sent, s.tx.received, s.tx.dropped_full), (10, 10, 0));
    assert_eq!(s.tx.faults.delivered, 10);
    assert_eq!(b.stats().rx, s.tx);
}

#[test]
fn receive_respects_max_and_burst_size() {
    let caps = NicCapabilities { max_burst: 4, ..NicCapabilities::default() };
    let (mut a, mut b) = link(LinkConfig { caps, ..LinkConfig::default() }).expect("link");
    assert_eq!(b.capabilities(), caps);
    let mut burst: Vec<PacketBuf> = (0..10).map(|i| frame(&mut a, i)).collect();
    a.transmit(Instant::ZERO, &mut burst).expect("transmit");
    let mut out = Vec::new();
    assert_eq!(b.receive(Instant::ZERO, &mut out, 3).expect("receive"), 3);
    assert_eq!(b.receive(Instant::ZERO, &mut out, 100).expect("receive"), 4);
    assert_eq!(b.rx_pending(), 3);
}

#[test]
fn both_directions_are_independent() {
    let (mut a, mut b) = link(LinkConfig::default()).expect("link");
    let mut to_b = vec![frame(&mut a, 1)];
    let mut to_a = vec![frame(&mut b, 2), frame(&mut b, 3)];
    a.transmit(Instant::ZERO, &mut to_b).expect("a transmits");
    b.transmit(Instant::ZERO, &mut to_a).expect("b transmits");
    assert_eq!(drain(&mut a, Instant::ZERO).iter().map(tag).collect::<Vec<_>>(), vec![2, 3]);
    assert_eq!(drain(&mut b, Instant::ZERO).iter().map(tag).collect::<Vec<_>>(), vec![1]);
    assert!(a.is_a() && !b.is_a());
}

#[test]
fn full_link_pushes_back_like_a_tx_ring() {
    let (mut a, mut b) = link(LinkConfig { capacity: 4, ..LinkConfig::default() }).expect("link");
    let mut burst: Vec<PacketBuf> = (0..10).map(|i| frame(&mut a, i)).collect();
    assert_eq!(a.transmit(Instant::ZERO, &mut burst).expect("transmit"), 4);
    assert_eq!(burst.len(), 6, "the rest stays with the caller");
    assert_eq!(a.transmit(Instant::ZERO, &mut burst).expect("transmit"), 0, "a full link takes nothing");
    assert_eq!(burst.len(), 6);
    assert_eq!(drain(&mut b, Instant::ZERO).iter().map(tag).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(a.transmit(Instant::ZERO, &mut burst).expect("transmit"), 4);
    assert_eq!(drain(&mut b, Instant::ZERO).iter().map(tag).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
    let s = a.stats().tx;
    assert_eq!((s.sent, s.received, s.dropped_full, s.faults.delivered), (8, 8, 0, 8));
}

#[test]
fn external_payloads_are_copied_behind_their_headers_as_far_as_the_link_has_room() {
    let (mut a, mut b) = link(LinkConfig { capacity: 3, ..LinkConfig::default() }).expect("link");
    let payloads: Vec<Vec<u8>> = (0..5u8).map(|i| vec![0xa0 + i; 100 + usize::from(i)]).collect();
    let mut frames: Vec<ExternalFrame> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut headers = a.alloc_tx().expect("memwire always allocates");
            headers.append(4).expect("room").copy_from_slice(&(i as u32).to_be_bytes());
            // SAFETY: `payloads` outlives every transmit and completion of this test.
            let payload =
                unsafe { ExternalPayload::new(p.as_ptr(), p.len(), 10 + i as u64) }.expect("non-null");
            ExternalFrame { headers, payload }
        })
        .collect();
    assert_eq!(a.transmit_external(Instant::ZERO, &mut frames).expect("transmit"), 3);
    assert_eq!(frames.len(), 2, "the rest stays with the caller");
    let mut done = Vec::new();
    assert_eq!(a.poll_tx_completions(&mut done), 3);
    assert_eq!(done, [10, 11, 12], "only what the link took is complete");
    assert_eq!(a.external_copied_bytes(), 100 + 101 + 102);
    let got = drain(&mut b, Instant::ZERO);
    assert_eq!(got.len(), 3);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(tag(f), i as u32, "in order, headers first");
        assert_eq!(&f.as_slice()[4..], payloads[i].as_slice(), "then the payload");
    }
    assert_eq!(a.transmit_external(Instant::ZERO, &mut frames).expect("transmit"), 2);
    assert!(frames.is_empty());
    assert_eq!(drain(&mut b, Instant::ZERO).iter().map(tag).collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(a.poll_tx_completions(&mut done), 2);
    assert_eq!(a.stats().tx.sent, 5);
}

/// An external frame over `payload` (token `token`) behind headers of 4 bytes in `headers`.
fn external(mut headers: PacketBuf, tag: u32, payload: &[u8], token: u64) -> ExternalFrame {
    headers.append(4).expect("room").copy_from_slice(&tag.to_be_bytes());
    // SAFETY: every caller's payload outlives the frame's transmits and completions.
    let payload = unsafe { ExternalPayload::new(payload.as_ptr(), payload.len(), token) }.expect("non-null");
    ExternalFrame { headers, payload }
}

#[test]
fn external_frames_whose_headers_lack_room_are_copied_whole_and_a_link_down_keeps_them_as_they_came() {
    let (mut a, mut b) = link(LinkConfig::default()).expect("link");
    let (long, short) = (vec![0x5a; 1400], vec![0xc3; 40]);
    // Headers in a buffer of their own size: the payload cannot follow them there.
    let tight = PacketBuf::with_headroom(4, 0);
    let roomy = a.alloc_tx().expect("memwire always allocates");
    let mut frames = vec![external(tight, 1, &long, 21), external(roomy, 2, &short, 22)];
    assert_eq!(a.transmit_external(Instant::ZERO, &mut frames).expect("transmit"), 2);
    let got = drain(&mut b, Instant::ZERO);
    assert_eq!(got.iter().map(tag).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(&got[0].as_slice()[4..], long.as_slice());
    assert_eq!(&got[1].as_slice()[4..], short.as_slice());

    let roomy = a.alloc_tx().expect("memwire always allocates");
    let mut frames =
        vec![external(roomy, 3, &short, 23), external(PacketBuf::with_headroom(4, 0), 4, &long, 24)];
    drop(b);
    assert!(matches!(a.transmit_external(Instant::ZERO, &mut frames), Err(NicError::LinkDown)));
    assert_eq!(frames.len(), 2, "frames stay with the caller on LinkDown");
    for (f, want) in frames.iter().zip([3u32, 4]) {
        assert_eq!(f.headers.as_slice(), want.to_be_bytes(), "the headers as they came, nothing behind");
    }
    let mut done = Vec::new();
    assert_eq!(a.poll_tx_completions(&mut done), 2, "only the two sent before");
    assert_eq!(done, [21, 22]);
}

#[test]
fn transmit_fails_with_link_down_after_peer_dropped() {
    let (mut a, b) = link(LinkConfig::default()).expect("link");
    drop(b);
    let mut burst = vec![frame(&mut a, 7)];
    assert!(matches!(a.transmit(Instant::ZERO, &mut burst), Err(NicError::LinkDown)));
    assert_eq!(burst.len(), 1, "frames stay with the caller on LinkDown");
}

#[test]
fn invalid_configs_are_rejected() {
    let bad =
        LinkConfig { b_to_a: FaultConfig { loss: -0.1, ..FaultConfig::default() }, ..LinkConfig::default() };
    assert!(matches!(link(bad), Err(MemwireError::InvalidFaults { direction: "b_to_a", .. })));
    assert!(matches!(
        link(LinkConfig { capacity: 0, ..LinkConfig::default() }),
        Err(MemwireError::ZeroCapacity)
    ));
}

#[test]
fn delay_holds_frames_until_due() {
    let faults = FaultConfig { delay: Duration::from_millis(5), ..FaultConfig::default() };
    let (mut a, mut b) = link(LinkConfig { a_to_b: faults, ..LinkConfig::default() }).expect("link");
    let mut burst = vec![frame(&mut a, 1)];
    a.transmit(Instant::from_millis(10), &mut burst).expect("transmit");
    assert!(drain(&mut b, Instant::from_millis(10)).is_empty());
    assert!(drain(&mut b, Instant::from_micros(14_999)).is_empty());
    assert_eq!(b.next_delivery(), Some(Instant::from_millis(15)));
    assert_eq!(drain(&mut b, Instant::from_millis(15)).len(), 1);
    // The other direction is undelayed.
    let mut back = vec![frame(&mut b, 2)];
    b.transmit(Instant::from_millis(15), &mut back).expect("transmit");
    assert_eq!(a.next_delivery(), Some(Instant::from_millis(15)));
}

#[test]
fn total_loss_delivers_nothing() {
    let faults = FaultConfig { loss: 1.0, ..FaultConfig::default() };
    let (mut a, mut b) = link(LinkConfig { a_to_b: faults, ..LinkConfig::default() }).expect("link");
    assert!(run(&mut a, &mut b, 100).is_empty());
    let s = a.stats().tx;
    assert_eq!((s.sent, s.received, s.faults.dropped), (100, 0, 100));
}

#[test]
fn full_duplication_doubles_every_frame() {
    let faults = FaultConfig { duplicate: 1.0, ..FaultConfig::default() };
    let (mut a, mut b) = link(LinkConfig { a_to_b: faults, ..LinkConfig::default() }).expect("link");
    let tags = run(&mut a, &mut b, 20);
    let expected: Vec<u32> = (0..20).flat_map(|i| [i, i]).collect();
    assert_eq!(tags, expected);
    assert_eq!(a.stats().tx.faults.duplicated, 20);
}

#[test]
fn reordering_link_delivers_out_of_order() {
    let faults = FaultConfig { reorder: 0.1, ..FaultConfig::default() };
    let (mut a, mut b) = link(LinkConfig { a_to_b: faults, seed: 5, ..LinkConfig::default() }).expect("link");
    let tags = run(&mut a, &mut b, 500);
    assert_eq!(tags.len(), 500);
    let mut sorted = tags.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..500).collect::<Vec<_>>(), "every frame arrives exactly once");
    assert_ne!(tags, sorted, "some frames must be overtaken");
    assert!(a.stats().tx.faults.reordered > 0);
}

#[test]
fn same_seed_same_outcome() {
    let faults = FaultConfig {
        loss: 0.05,
        reorder: 0.05,
        duplicate: 0.05,
        corrupt: 0.05,
        delay: Duration::from_micros(30),
        jitter: Duration::from_micros(30),
        ..FaultConfig::default()
    };
    let outcome = |seed| {
        let (mut a, mut b) =
            link(LinkConfig { a_to_b: faults, seed, ..LinkConfig::default() }).expect("link");
        let clock = VirtualClock::new();
        let mut payloads = Vec::new();
        for i in 0..300u32 {
            let mut burst = vec![frame(&mut a, i)];
            a.transmit(clock.now(), &mut burst).expect("transmit");
            clock.advance(Duration::from_micros(3));
            payloads.extend(drain(&mut b, clock.now()).iter().map(|f| f.as_slice().to_vec()));
        }
        while let Some(t) = b.next_delivery() {
            clock.advance_to(t);
            payloads.extend(drain(&mut b, clock.now()).iter().map(|f| f.as_slice().to_vec()));
        }
        (payloads, a.stats())
    };
    let (p1, s1) = outcome(77);
    let (p2, s2) = outcome(77);
    let (p3, _) = outcome(78);
    assert_eq!(p1, p2);
    assert_eq!(s1, s2);
    assert_ne!(p1, p3);
    let f = s1.tx.faults;
    assert!(f.dropped > 0 && f.corrupted > 0 && f.duplicated > 0 && f.reordered > 0, "{f:?}");
    assert_eq!(s1.tx.received, f.delivered);
}

#[test]
fn capture_records_both_directions_as_delivered() {
    let path = std::env::temp_dir().join(format!("slimtcp-memwire-{}.pcap", std::process::id()));
    let faults = FaultConfig { delay: Duration::from_micros(100), ..FaultConfig::default() };
    let config = LinkConfig { a_to_b: faults, pcap: Some(path.clone()), ..LinkConfig::default() };
    let (mut a, mut b) = link(config).expect("link");
    let mut rng = Rng::new(1);
    let mut expected = Vec::new();
    for i in 0..20u64 {
        let now = Instant::from_micros(1000 * i);
        let (tx, rx, delay) = if i % 2 == 0 { (&mut a, &mut b, 100) } else { (&mut b, &mut a, 0) };
        let mut buf = tx.alloc_tx().expect("alloc");
        let len = 14 + rng.gen_range(0..1000) as usize;
        rng.fill_bytes(buf.append(len).expect("room"));
        expected.push((now + Duration::from_micros(delay), buf.as_slice().to_vec()));
        tx.transmit(now, &mut vec![buf]).expect("transmit");
        assert_eq!(drain(rx, now + Duration::from_micros(delay)).len(), 1);
    }
    a.flush_capture().expect("flush capture");
    assert_eq!(read_pcap(&path).expect("read capture"), expected);
    assert!(!a.stats().capture_failed);
    std::fs::remove_file(&path).ok();
}

#[test]
fn ends_can_be_driven_from_two_threads() {
    const N: u32 = 2000;
    let (mut a, mut b) = link(LinkConfig::default()).expect("link");
    let sender = std::thread::spawn(move || {
        for i in 0..N {
            let mut burst = vec![frame(&mut a, i)];
            a.transmit(Instant::ZERO, &mut burst).expect("transmit");
        }
        a // keep the end alive until the receiver is done
    });
    let mut tags = Vec::new();
    while tags.len() < N as usize {
        let got = drain(&mut b, Instant::ZERO);
        if got.is_empty() {
            if sender.is_finished() && b.rx_pending() == 0 {
                break; // the sender stopped early (panicked): fail below instead of spinning
            }
            std::thread::yield_now();
        }
        tags.extend(got.iter().map(tag));
    }
    let a = sender.join().expect("sender thread");
    assert_eq!(tags, (0..N).collect::<Vec<_>>());
    assert_eq!(a.stats().tx.received, u64::from(N));
}

#[test]
fn without_delay_faults_a_frame_is_due_whatever_the_receivers_clock_says() {
    // The ends may run on real clocks started at different moments: the sender's "now" can be
    // far ahead of the receiver's. Without delay, jitter or reordering nothing waits for it.
    let (mut a, mut b) = link(LinkConfig::default()).expect("link");
    let mut burst = vec![frame(&mut a, 7)];
    a.transmit(Instant::from_millis(5_000), &mut burst).expect("transmit");
    let got = drain(&mut b, Instant::from_millis(1));
    assert_eq!(got.iter().map(tag).collect::<Vec<_>>(), vec![7]);
}

/// A frame whose checksums are left to the device: a TCP segment with the pseudo-header sum
/// in its checksum field and a zero IPv4 checksum, as the stack builds it for an offloading NIC.
fn offloaded_segment(nic: &mut MemwireNic) -> PacketBuf {
    use slimtcp::nic::{L4Proto, TxOffload};
    use slimtcp::wire::{checksum, ChecksumCapabilities, IpProtocol, Ipv4Addr};
    let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut f = nic.alloc_tx().expect("buffer");
    let bytes = f.append(14 + 20 + 20 + 8).expect("room");
    bytes[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut bytes[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&48u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let tcp = &mut bytes[34..54];
    tcp[0..2].copy_from_slice(&5001u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5002u16.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18;
    tcp[14..16].copy_from_slice(&1024u16.to_be_bytes());
    let pseudo = checksum::pseudo_header(src, dst, IpProtocol::Tcp, 28);
    tcp[16..18].copy_from_slice(&pseudo.to_be_bytes());
    bytes[54..].copy_from_slice(b"payload!");
    f.offload = TxOffload::ipv4(L4Proto::Tcp, &ChecksumCapabilities::all());
    f
}

#[test]
fn an_offloading_link_fills_checksums_only_where_needed_and_gives_a_verdict() {
    let offload = NicCapabilities {
        checksum: slimtcp::wire::ChecksumCapabilities::all(),
        ..NicCapabilities::default()
    };
    let clock = VirtualClock::new();
    // Clean link: the frame crosses as built (checksums undone), reported verified.
    let (mut a, mut b) = link(LinkConfig { caps: offload, ..LinkConfig::default() }).expect("link");
    let mut frames = vec![offloaded_segment(&mut a)];
    a.transmit(clock.now(), &mut frames).expect("transmit");
    let got = drain(&mut b, clock.now());
    assert_eq!(got[0].rx_checksum_ok, Some(true));
    assert!(!slimtcp::nic::offload::verify(got[0].as_slice()), "nothing filled what nobody needed");
    // With a capture, or towards an end without receive offload, the device fills them.
    let (mut a, mut b) = link(LinkConfig {
        caps: NicCapabilities {
            checksum: slimtcp::wire::ChecksumCapabilities { ..slimtcp::wire::ChecksumCapabilities::none() },
            ..offload
        },
        ..LinkConfig::default()
    })
    .expect("link");
    let mut frames = vec![offloaded_segment(&mut a)];
    a.transmit(clock.now(), &mut frames).expect("transmit");
    let got = drain(&mut b, clock.now());
    assert_eq!(got[0].rx_checksum_ok, None, "no receive offload: no verdict");
    assert!(slimtcp::nic::offload::verify(got[0].as_slice()), "filled by the device");
    // Corrupting link: real checksums, and a false verdict for a damaged frame.
    let corrupting = FaultConfig { corrupt: 1.0, ..FaultConfig::default() };
    let (mut a, mut b) =
        link(LinkConfig { caps: offload, a_to_b: corrupting, ..LinkConfig::default() }).expect("link");
    let mut frames = vec![offloaded_segment(&mut a)];
    a.transmit(clock.now(), &mut frames).expect("transmit");
    let got = drain(&mut b, clock.now());
    assert_eq!(got[0].rx_checksum_ok, Some(false), "one flipped bit past the Ethernet header");
}
