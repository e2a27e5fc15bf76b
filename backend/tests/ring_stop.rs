//! A VMM stopping a transmit queue (GET_VRING_BASE) while the device holds a send that the peer
//! has not acknowledged: the chain comes back before the answer, the guest may overwrite its
//! buffer at once, and after the restart the stream still delivers the original bytes (the host
//! copied them) and the send completes.
//!
//! Once at the engine (stepped by the test, first transmission dropped so the bytes can only
//! come from the host's copy), once through the daemon with the vhost crate's frontend sending
//! GET_VRING_BASE and restarting the rings as QEMU does on `stop` / `cont`.

mod common;

use std::net::SocketAddrV4;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine_bench::{bench, connected, run_until, socket_of, Connected, GUEST_IP, PEER_IP};
use common::vmm::{connect, memfd_memory, negotiate, regions, setup_ring};
use common::{PairDriver, F_NEXT};
use slimtcp::iface::{Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::nic::Nic;
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{Done, Request, RequestBody, RxMessage, SocketId, SocketKind, Version};
use slimtcp_vhost::device::DEVICE_FEATURES;
use slimtcp_vhost::engine::SessionReport;
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant_reporting, StopHandle, TenantConfig};
use vhost::vhost_user::message::VhostUserVirtioFeatures;
use vhost::vhost_user::VhostUserFrontend;
use vhost::VhostBackend;
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress};
use vmm_sys_util::eventfd::EventFd;

const PAYLOAD: usize = 3000;

fn payload() -> Vec<u8> {
    (0..PAYLOAD as u32).map(|i| (i * 7 % 253) as u8).collect()
}

/// A send request whose payload sits at a known guest address: (head, payload address).
fn send_at_known_address(p: &mut PairDriver<'_>, cookie: u64, sock: SocketId, data: &[u8]) -> (u16, u64) {
    let (fa, fl) = p.fixed(&Request::new(cookie, sock, RequestBody::Send { len: data.len() as u32 }));
    let (pa, pl) = p.data(data);
    (p.tx.add_raw(&[(fa, fl, F_NEXT, None), (pa, pl, 0, None)]), pa)
}

fn completed_ok(msgs: &[(RxMessage, Vec<u8>)], cookie: u64) -> Option<Done> {
    msgs.iter().find_map(|(m, _)| match m {
        RxMessage::Complete { cookie: c, result: Ok(d), .. } if *c == cookie => Some(*d),
        _ => None,
    })
}

/// Everything the peer connection `conn` received so far.
fn drain(peer: &mut Interface<MemwireNic>, conn: SocketHandle, into: &mut Vec<u8>) {
    let mut buf = vec![0u8; 8192];
    while let Ok(n) = peer.tcp_recv(conn, &mut buf) {
        if n == 0 {
            break;
        }
        into.extend_from_slice(&buf[..n]);
    }
}

/// Found by the descriptor_chain fuzz target: with a virtual clock the drain waited forever
/// for a datagram the stack holds until ARP answers (time that only the clock's owner can
/// make pass). The stop must return, and give the chain back.
#[test]
fn a_stop_under_a_virtual_clock_returns_while_a_datagram_waits_for_arp() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mem = Arc::new(common::guest_memory());
        let (a, _b) = link(LinkConfig::default()).expect("link");
        let iface =
            Interface::new(a, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), GUEST_IP, 24));
        let cfg = slimtcp_vhost::engine::EngineConfig::new(&iface, 1, common::engine_bench::QSIZE);
        let clock = slimtcp::time::VirtualClock::new();
        let mut engine = slimtcp_vhost::engine::Engine::new(iface, Clock::Virtual(clock), cfg);
        let mut p0 = PairDriver::new(&mem, 0, common::engine_bench::QSIZE, 0);
        let rings = slimtcp_vhost::queues::LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
        p0.post(8, 4096);
        p0.request(&common::engine_bench::hello(1), &[]);
        p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Udp }), &[]);
        let mut seen = Vec::new();
        for _ in 0..4 {
            engine.step(&rings, &mem).expect("step");
            seen.extend(p0.messages());
        }
        let sock = socket_of(&seen, 2).expect("the socket");
        // 10.0.0.9 is on the link and never answers ARP: the datagram waits in the stack.
        let to = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 9), 9);
        let head =
            p0.request(&Request::new(3, sock, RequestBody::SendTo { remote: to, len: 300 }), &[&[7u8; 300]]);
        for _ in 0..4 {
            engine.step(&rings, &mem).expect("step");
            seen.extend(p0.messages());
        }
        assert!(!p0.tx_returned.contains(&head), "the datagram's chain is held");
        let returned = engine.stop_transmit_queue(0, &rings, &mem);
        seen.extend(p0.messages());
        tx.send((returned, p0.tx_returned.contains(&head))).expect("report");
    });
    let (returned, back) = rx.recv_timeout(Duration::from_secs(60)).expect("the stop returned");
    assert_eq!(returned, 1);
    assert!(back, "the held chain is on the used ring");
}

/// A datagram waiting for ARP at a stop: its chain comes back at once (the stack copies the
/// payload into the frame it holds), and when the neighbour answers later the datagram carries
/// the bytes the guest sent, not what the guest wrote into its buffer after the stop.
#[test]
fn a_datagram_waiting_for_arp_at_a_stop_leaves_later_with_the_bytes_the_guest_sent() {
    let mem = Arc::new(common::guest_memory());
    let mut b = bench(1, None);
    let mut p0 = PairDriver::new(&mem, 0, common::engine_bench::QSIZE, 0);
    let rings = slimtcp_vhost::queues::LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    let peer_sock = b.peer.udp_bind(9).expect("peer socket");
    p0.post(8, 4096);
    p0.request(&common::engine_bench::hello(1), &[]);
    p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Udp }), &[]);
    let mut seen = Vec::new();
    for _ in 0..4 {
        b.engine.step(&rings, &mem).expect("step");
        seen.extend(p0.messages());
    }
    let sock = socket_of(&seen, 2).expect("the socket");
    // The peer is not polled yet: the ARP request waits on the link and the datagram in the
    // guest's stack.
    // Long enough to go by reference (a shorter one is copied and its chain returned at once).
    let sent = [7u8; 300];
    let to = SocketAddrV4::new(PEER_IP, 9);
    let (fa, fl) = p0.fixed(&Request::new(3, sock, RequestBody::SendTo { remote: to, len: 300 }));
    let (at, pl) = p0.data(&sent);
    let head = p0.tx.add_raw(&[(fa, fl, F_NEXT, None), (at, pl, 0, None)]);
    for _ in 0..4 {
        b.engine.step(&rings, &mem).expect("step");
        seen.extend(p0.messages());
    }
    assert!(!p0.tx.take_used().iter().any(|(h, _)| *h == head), "the datagram's chain is held");

    let returned = b.engine.stop_transmit_queue(0, &rings, &mem);
    assert_eq!(returned, 1);
    assert!(p0.tx.take_used().iter().any(|(h, _)| *h == head), "the chain is back before the answer");
    let c = b.engine.counters();
    assert_eq!((c.tx_payload_copied_at_stop, c.sends_held), (300, 0), "copied, not waited for");
    // The guest owns its buffer again and reuses it.
    mem.write_slice(&[0xee; 300], GuestAddress(at)).expect("guest overwrites");

    // The peer answers ARP now; the datagram leaves.
    let mut buf = [0u8; 400];
    let deadline = Instant::now() + Duration::from_secs(10);
    let got = loop {
        assert!(Instant::now() < deadline, "the datagram never arrived");
        b.step(&rings, &mem);
        seen.extend(p0.messages());
        if let Ok((n, from)) = b.peer.udp_recv_from(peer_sock, &mut buf) {
            assert_eq!(*from.ip(), GUEST_IP);
            break buf[..n].to_vec();
        }
    };
    assert_eq!(got, sent, "the bytes as sent, from the stack's copy");
}

#[test]
fn the_engine_gives_back_an_unacknowledged_send_and_retransmits_from_its_copy() {
    let mem = Arc::new(common::guest_memory());
    let mut b = bench(1, None);
    let Connected { mut p0, rings, sock, conn, mut seen } = connected(&mut b, &mem, 5000);

    let original = payload();
    let (head, at) = send_at_known_address(&mut p0, 4, sock, &original);
    for _ in 0..8 {
        b.engine.step(&rings, &mem).expect("step");
    }
    // The first transmission is lost: the peer's NIC drops what arrived without the stack
    // seeing it, so nothing is acknowledged and the bytes must be sent again later.
    let mut lost = Vec::new();
    b.peer.nic_mut().receive(b.clock.now(), &mut lost, 64).expect("peer nic");
    assert!(!lost.is_empty(), "the send went out once");
    drop(lost);
    assert!(!p0.tx.take_used().iter().any(|(h, _)| *h == head), "held until the ACK");

    // The VMM stops both rings (receive first, as QEMU does), then asks for the transmit base.
    rings.queue_mut(0, |q| q.set_ready(false));
    rings.queue_mut(1, |q| q.set_ready(false));
    let returned = b.engine.stop_transmit_queue(0, &rings, &mem);
    assert_eq!(returned, 1, "the held send is the only chain the device still had");
    assert!(p0.tx.take_used().iter().any(|(h, _)| *h == head), "the chain is back before the answer");
    let c = b.engine.counters();
    assert_eq!(
        (c.tx_payload_copied_at_stop, c.chains_returned_at_stop, c.sends_held),
        (PAYLOAD as u64, 1, 0)
    );

    // The guest owns its buffer again and reuses it.
    mem.write_slice(&[0xee; PAYLOAD], GuestAddress(at)).expect("guest overwrites");

    // Restart: the send's completion (queued at the stop: the host holds the bytes) reaches
    // the receive queue, and the retransmission (after the RTO) carries the original bytes.
    rings.queue_mut(0, |q| q.set_ready(true));
    rings.queue_mut(1, |q| q.set_ready(true));
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| completed_ok(&s[0], 4).is_some());
    assert_eq!(completed_ok(&seen[0], 4), Some(Done::value(PAYLOAD as u64)));
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < PAYLOAD {
        assert!(Instant::now() < deadline, "the peer has {} of {PAYLOAD} bytes", got.len());
        b.step(&rings, &mem);
        drain(&mut b.peer, conn, &mut got);
    }
    assert!(got == original, "the peer got the bytes as sent, not the guest's new ones");
    assert!(b.engine.iface().counters().tcp_retransmits >= 1, "they came from the host's copy");
}

/// Kicks both rings, polls the peer, and collects pair 0's messages until `done` (10 s at most).
fn drive(
    p0: &mut PairDriver<'_>,
    kicks: (&EventFd, &EventFd),
    peer: Option<(&mut Interface<MemwireNic>, &Clock)>,
    seen: &mut Vec<(RxMessage, Vec<u8>)>,
    done: impl Fn(&[(RxMessage, Vec<u8>)]) -> bool,
) {
    let mut peer = peer;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(seen) {
        assert!(Instant::now() < deadline, "scenario did not complete: {seen:?}");
        let _ = kicks.0.write(1);
        let _ = kicks.1.write(1);
        if let Some((p, clock)) = peer.as_mut() {
            p.poll(clock.now()).expect("peer poll");
        }
        seen.extend(p0.messages());
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn get_vring_base_gives_back_held_sends_and_the_connection_survives_stop_and_cont() {
    let path: PathBuf =
        std::env::temp_dir().join(format!("slimtcp-vhost-{}-ring-stop.sock", std::process::id()));
    let (nic, peer_nic) = link(LinkConfig::default()).expect("link");
    let mut nic = Some(nic);
    let guest_ip = "10.0.0.1".parse().expect("ip");
    let cfg = TenantConfig {
        socket: path.clone(),
        iface: InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), guest_ip, 24),
        pairs: 1,
        core: None,
        name: "ring-stop".into(),
        sandbox: Sandbox::default(),
        limits: Default::default(),
    };
    let stop = StopHandle::default();
    let daemon = std::thread::spawn(move || {
        let mut reports: Vec<SessionReport> = Vec::new();
        let make = move || nic.take().ok_or_else(|| "one NIC only".to_owned());
        serve_tenant_reporting(&cfg, make, &stop, Some(1), |r| reports.push(r.clone())).expect("serve");
        reports
    });
    let clock = Clock::real();
    let mut peer =
        Interface::new(peer_nic, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 2]), PEER_IP, 24));
    let listener = peer.tcp_listen(5000, 4).expect("peer listen");

    let mem = memfd_memory();
    let mut f = connect(&path, 1);
    let features = negotiate(&mut f, 1);
    f.set_features(features & (DEVICE_FEATURES | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()))
        .expect("set_features");
    f.set_mem_table(&regions(&mem)).expect("set_mem_table");
    let mut p0 = PairDriver::new(&mem, 0, common::vmm::QSIZE, 0);
    let fds: Vec<(EventFd, EventFd)> =
        (0..2).map(|_| (EventFd::new(0).expect("call"), EventFd::new(0).expect("kick"))).collect();
    setup_ring(&mut f, &mem, 0, &p0.rx, (&fds[0].0, &fds[0].1), 0);
    setup_ring(&mut f, &mem, 1, &p0.tx, (&fds[1].0, &fds[1].1), 0);
    for i in 0..2 {
        f.set_vring_enable(i, true).expect("enable");
    }
    let kicks = (&fds[0].1, &fds[1].1);
    p0.post(64, 4096);
    let mut seen = Vec::new();
    p0.request(&Request::new(1, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT }), &[]);
    p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp }), &[]);
    drive(&mut p0, kicks, Some((&mut peer, &clock)), &mut seen, |s| socket_of(s, 2).is_some());
    let sock = socket_of(&seen, 2).expect("socket");
    p0.request(
        &Request::new(3, sock, RequestBody::Connect { remote: SocketAddrV4::new(PEER_IP, 5000) }),
        &[],
    );
    drive(&mut p0, kicks, Some((&mut peer, &clock)), &mut seen, |s| socket_of(s, 3).is_some());
    let conn = peer.tcp_accept(listener).expect("peer accepted");

    // A send the peer never acknowledges (it is not polled), then a request behind it whose
    // completion proves the device took the send.
    let original = payload();
    let (head, at) = send_at_known_address(&mut p0, 4, sock, &original);
    let probe = RequestBody::GetSockOpt { option: slimtcp_abi::SockOpt::MaxSeg };
    p0.request(&Request::new(5, sock, probe), &[]);
    drive(&mut p0, kicks, None, &mut seen, |s| completed_ok(s, 5).is_some());
    assert!(!p0.tx_returned.contains(&head), "held until the ACK");

    // `stop`: QEMU stops every ring; GET_VRING_BASE answers only once the chains are back.
    let rx_base = f.get_vring_base(0).expect("get_vring_base rx");
    let tx_base = f.get_vring_base(1).expect("get_vring_base tx");
    assert_eq!(tx_base, 5, "five requests taken");
    seen.extend(p0.messages());
    assert!(p0.tx_returned.contains(&head), "the send's chain came back before GET_VRING_BASE's answer");
    mem.write_slice(&[0xee; PAYLOAD], GuestAddress(at)).expect("guest overwrites");
    // The first transmission is lost on the way (the peer's NIC drops it), so what the peer
    // gets can only come from the host's copy.
    let mut lost = Vec::new();
    peer.nic_mut().receive(clock.now(), &mut lost, 64).expect("peer nic");
    drop(lost);

    // `cont`: the rings are set up again from the bases, and enabled.
    let fds2: Vec<(EventFd, EventFd)> =
        (0..2).map(|_| (EventFd::new(0).expect("call"), EventFd::new(0).expect("kick"))).collect();
    setup_ring(&mut f, &mem, 0, &p0.rx, (&fds2[0].0, &fds2[0].1), rx_base as u16);
    setup_ring(&mut f, &mem, 1, &p0.tx, (&fds2[1].0, &fds2[1].1), tx_base as u16);
    for i in 0..2 {
        f.set_vring_enable(i, true).expect("enable");
    }
    let kicks = (&fds2[0].1, &fds2[1].1);
    drive(&mut p0, kicks, Some((&mut peer, &clock)), &mut seen, |s| completed_ok(s, 4).is_some());
    assert_eq!(completed_ok(&seen, 4), Some(Done::value(PAYLOAD as u64)));
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < PAYLOAD && Instant::now() < deadline {
        peer.poll(clock.now()).expect("peer poll");
        drain(&mut peer, conn, &mut got);
    }
    assert!(got == original, "the stream carries the bytes as sent ({} bytes)", got.len());

    drop(f);
    let reports = daemon.join().expect("daemon");
    let r = &reports[0];
    assert_eq!(r.device.tx_payload_copied_at_stop, PAYLOAD as u64, "{r}");
    assert_eq!(r.device.chains_returned_at_stop, 1, "{r}");
    let _ = std::fs::remove_file(&path);
}
