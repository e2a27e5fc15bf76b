//! Hostile-guest scenarios at the device level: descriptor chains built by hand in real guest
//! memory, fed to the tenant engine. Each bad request gets its error (or is returned and
//! counted), nothing panics, and the other queue pair keeps working meanwhile.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use common::engine_bench::{bench, connected, error_of, hello, run_until, socket_of, Connected, QSIZE};
use common::{guest_memory, PairDriver, F_NEXT, F_WRITE, RAM};
use slimtcp_abi::{Errno, Request, RequestBody, RxMessage, SocketId, SocketKind};
use slimtcp_vhost::queues::LocalRings;

#[test]
fn bad_chains_get_their_errors_while_the_other_pair_keeps_working() {
    let mem = Arc::new(guest_memory());
    let mut b = bench(2, None);
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let mut p1 = PairDriver::new(&mem, 1, QSIZE, 1 << 20);
    let ctrl = common::Ring::new(&mem, 4, QSIZE);
    let rings =
        LocalRings::new(vec![p0.rx.queue(), p0.tx.queue(), p1.rx.queue(), p1.tx.queue(), ctrl.queue()]);
    p0.post(64, 2048);
    p1.post(64, 2048);

    // Before hello: EPERM. Then hello on both pairs.
    let socket_req = Request::new(1, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp });
    p0.request(&socket_req, &[]);
    p0.request(&hello(2), &[]);
    p1.request(&hello(3), &[]);
    let p1_socket = Request::new(4, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp });
    p1.request(&p1_socket, &[]);
    let mut seen = vec![Vec::new(), Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0, &mut p1], &mut seen, |s| {
        s[0].len() >= 2 && socket_of(&s[1], 4).is_some()
    });
    assert_eq!(error_of(&seen[0], 1), Some(Errno::EPERM));
    let foreign = socket_of(&seen[1], 4).expect("pair 1 socket");

    // The hostile batch, all on pair 0.
    let send = |cookie, socket| Request::new(cookie, socket, RequestBody::Send { len: 100 });
    // 10: payload descriptor outside guest memory.
    let (a, n) = p0.fixed(&send(10, foreign));
    p0.tx.add_raw(&[(a, n, F_NEXT, None), (RAM + 4096, 100, 0, None)]);
    // 11: payload address whose end overflows.
    let (a, n) = p0.fixed(&send(11, foreign));
    p0.tx.add_raw(&[(a, n, F_NEXT, None), (u64::MAX - 10, 100, 0, None)]);
    // 12: device-writable descriptor on a transmit queue.
    let (a, n) = p0.fixed(&send(12, foreign));
    let (pa, _) = p0.data(&[0u8; 100]);
    p0.tx.add_raw(&[(a, n, F_NEXT, None), (pa, 100, F_WRITE, None)]);
    // 13: a chain looping back to its head.
    let (a, n) = p0.fixed(&send(13, foreign));
    p0.tx.add_raw(&[(a, n, F_NEXT, None), (pa, 50, F_NEXT, Some(0))]);
    // 14: an unknown op.
    let (a, n) = p0.fixed(&hello(14));
    common_patch_op(&mem, a, 0x7f);
    p0.tx.add_raw(&[(a, n, 0, None)]);
    // 15: pair 1's socket used on pair 0.
    p0.request(&Request::new(15, foreign, RequestBody::Listen { backlog: 1 }), &[]);
    // 16: a closed / never-existing socket id.
    p0.request(&Request::new(16, SocketId(999_999), RequestBody::Listen { backlog: 1 }), &[]);
    // 17: chain length not matching the send's len.
    p0.request(&send(17, foreign), &[&[1u8; 10]]);
    // No magic: returned, unanswered, counted.
    let (junk, jn) = p0.data(&[0xab; 64]);
    let junk_head = p0.tx.add_raw(&[(junk, jn, 0, None)]);
    // Meanwhile pair 1 keeps working: bind and listen on its socket.
    let bind = Request::new(
        20,
        foreign,
        RequestBody::Bind { local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000) },
    );
    p1.request(&bind, &[]);
    p1.request(&Request::new(21, foreign, RequestBody::Listen { backlog: 8 }), &[]);

    run_until(&mut b, &rings, &mem, &mut [&mut p0, &mut p1], &mut seen, |s| {
        (10..=17).all(|c| error_of(&s[0], c).is_some()) && socket_of(&s[1], 21).is_some()
    });
    assert_eq!(error_of(&seen[0], 10), Some(Errno::EFAULT), "outside guest memory");
    assert_eq!(error_of(&seen[0], 11), Some(Errno::EFAULT), "overflowing address");
    assert_eq!(error_of(&seen[0], 12), Some(Errno::EFAULT), "writable descriptor");
    assert_eq!(error_of(&seen[0], 13), Some(Errno::EFAULT), "looping chain");
    assert_eq!(error_of(&seen[0], 14), Some(Errno::EOPNOTSUPP), "unknown op");
    assert_eq!(error_of(&seen[0], 15), Some(Errno::EBADF), "other pair's socket");
    assert_eq!(error_of(&seen[0], 16), Some(Errno::EBADF), "unknown socket");
    assert_eq!(error_of(&seen[0], 17), Some(Errno::EINVAL), "length mismatch");
    assert!(p0.tx_returned.contains(&junk_head), "the junk chain came back");
    assert_eq!(b.engine.counters().unanswerable_chains, 1);
    assert!(error_of(&seen[1], 20).is_none() && error_of(&seen[1], 21).is_none());
}

/// Overwrites the op byte of a request written at `a`.
fn common_patch_op(mem: &slimtcp_vhost::guest_mem::GuestMem, a: u64, op: u8) {
    use vm_memory::{Bytes, GuestAddress};
    mem.write_slice(&[op], GuestAddress(a + 16)).expect("patch");
}

#[test]
fn a_request_flood_without_receive_buffers_is_bounded_and_answered_later() {
    let mem = Arc::new(guest_memory());
    let mut b = bench(1, Some(8));
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let rings = LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    for c in 0..40 {
        p0.request(&hello(c), &[]);
    }
    for _ in 0..50 {
        b.step(&rings, &mem);
    }
    let taken = rings.queue_mut(1, |q| virtio_queue::QueueT::next_avail(q));
    assert_eq!(taken, 8, "the host stops taking requests at max_requests pending completions");
    assert!(p0.messages().is_empty());
    // Buffers arrive: everything is answered, in order.
    p0.post(64, 256);
    let mut seen = vec![Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| s[0].len() == 40);
    let cookies: Vec<u64> = seen[0].iter().filter_map(|(m, _)| m.cookie()).collect();
    assert_eq!(cookies, (0..40).collect::<Vec<u64>>());
    assert_eq!(p0.tx_returned.len(), 40);
}

#[test]
fn small_and_misdirected_receive_buffers_are_returned_unused() {
    let mem = Arc::new(guest_memory());
    let mut b = bench(1, None);
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let rings = LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    let (a, _) = p0.data(&[0u8; 64]);
    p0.rx.add_raw(&[(a, 64, F_WRITE, None)]); // too small
    p0.rx.add_raw(&[(a, 4096, 0, None)]); // device-readable
    p0.rx.add_raw(&[(RAM - 16, 4096, F_WRITE, None)]); // runs past guest memory
    p0.request(&hello(1), &[]);
    for _ in 0..20 {
        b.step(&rings, &mem);
    }
    assert_eq!(b.engine.counters().bad_rx_buffers, 3);
    let used = p0.rx.take_used();
    assert_eq!(used.len(), 3);
    assert!(used.iter().all(|(_, len)| *len == 0));
    p0.post(1, 2048);
    let mut seen = vec![Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| !s[0].is_empty());
    assert!(matches!(seen[0][0].0, RxMessage::HelloDone { result: Ok(_), .. }));
}

#[test]
fn zero_copy_send_returns_the_chain_only_after_the_ack_and_data_arrives_with_one_copy() {
    let mem = Arc::new(guest_memory());
    let mut b = bench(1, None);
    let Connected { mut p0, rings, sock, conn, mut seen } = connected(&mut b, &mem, 5000);

    // 3000 bytes in two payload descriptors.
    let part1: Vec<u8> = (0..1800u32).map(|i| (i % 251) as u8).collect();
    let part2: Vec<u8> = (0..1200u32).map(|i| (i % 239) as u8).collect();
    let head = p0.request(&Request::new(4, sock, RequestBody::Send { len: 3000 }), &[&part1, &part2]);
    b.engine.step(&rings, &mem).expect("step");
    assert!(!p0.tx.take_used().iter().any(|(h, _)| *h == head), "the send chain is held until ACKed");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 8192];
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| socket_of(&s[0], 4).is_some());
    assert!(p0.tx_returned.contains(&head), "returned after the ACK");
    while let Ok(n) = b.peer.tcp_recv(conn, &mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    let want: Vec<u8> = part1.iter().chain(part2.iter()).copied().collect();
    assert_eq!(got, want);
    assert_eq!(b.engine.counters().tx_payload_copied, 0);
    // This link leaves checksums to software: summing guest memory copies it, so the stack
    // copies the bytes into its frames instead of sending them by reference (the e2e tests over
    // an offloading TAP show zero copies).
    let stack = b.engine.iface().counters();
    assert_eq!(stack.tx_payload_copied_bytes, 3000, "copied into the frames and summed there");
    assert_eq!(stack.tx_short_payload_copied_bytes, 0, "no segment was short");
    assert_eq!(b.engine.counters().tx_payload_by_reference, 3000);

    // The peer answers: one data event, one copy, then credit.
    b.peer.tcp_send(conn, b"hello guest").expect("peer send");
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| {
        s[0].iter().any(|(m, _)| matches!(m, RxMessage::Data { .. }))
    });
    let data: Vec<u8> = seen[0]
        .iter()
        .filter(|(m, _)| matches!(m, RxMessage::Data { .. }))
        .flat_map(|(_, p)| p.clone())
        .collect();
    assert_eq!(data, b"hello guest");
    assert_eq!(b.engine.counters().rx_payload_copied, 11);
    p0.request(&Request::new(5, sock, RequestBody::Credit { bytes: 11 }), &[]);
    p0.request(&Request::new(6, sock, RequestBody::Credit { bytes: 1 }), &[]);
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| socket_of(&s[0], 5).is_some());
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| error_of(&s[0], 6).is_some());
    assert_eq!(error_of(&seen[0], 6), Some(Errno::EINVAL), "more credit than outstanding");
}

#[test]
fn a_control_queue_flood_and_unusable_receive_buffers_are_served_a_bounded_amount_per_step() {
    use slimtcp_vhost::engine::{BAD_RX_BUFFERS_PER_SEARCH, CONTROL_PER_STEP};
    let mem = Arc::new(guest_memory());
    let mut b = bench(1, None);
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let mut ctrl = common::Ring::new(&mem, 2, QSIZE);
    let rings = LocalRings::new(vec![p0.rx.queue(), p0.tx.queue(), ctrl.queue()]);
    // 100 control requests (a class and command without an ack: answered with length 0) and
    // 100 device-readable receive buffers ahead of a usable one (the test rings hold 129 used
    // entries before they run into the next ring).
    let (a, _) = p0.data(&[0u8; 8]);
    for _ in 0..100 {
        ctrl.add_raw(&[(a, 8, 0, None)]);
        p0.rx.add_raw(&[(a, 4096, 0, None)]);
    }
    p0.post(1, 2048);
    p0.request(&hello(1), &[]);

    b.step(&rings, &mem);
    assert_eq!(ctrl.take_used().len(), CONTROL_PER_STEP, "control requests answered in one step");
    let mut rx_used = p0.rx.take_used();
    assert_eq!(rx_used.len(), BAD_RX_BUFFERS_PER_SEARCH, "unusable buffers returned in one step");
    assert_eq!(b.engine.counters().bad_rx_buffers, BAD_RX_BUFFERS_PER_SEARCH as u64);

    // Later steps finish both, and the hello's answer lands in the usable buffer.
    for _ in 0..8 {
        b.step(&rings, &mem);
        rx_used.extend(p0.rx.take_used());
    }
    assert_eq!(ctrl.take_used().len(), 100 - CONTROL_PER_STEP);
    let empty = rx_used.iter().filter(|(_, len)| *len == 0).count();
    let written = rx_used.len() - empty;
    assert_eq!((empty, written), (100, 1), "100 returned unused, then the hello's answer");
    assert_eq!(b.engine.counters().bad_rx_buffers, 100);
}

#[test]
fn the_operators_socket_limit_gives_emfile_and_is_counted() {
    use slimtcp_vhost::engine::TenantLimits;
    let limits = TenantLimits { max_sockets: 3, ..TenantLimits::default() };
    let mem = Arc::new(guest_memory());
    let mut b = common::engine_bench::bench_with_limits(1, None, &limits);
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let rings = LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    p0.post(16, 2048);
    p0.request(&hello(1), &[]);
    for cookie in 10..15 {
        p0.request(&Request::new(cookie, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Udp }), &[]);
    }
    let mut seen = vec![Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| s[0].len() == 6);
    let announced = seen[0].iter().find_map(|(m, _)| match m {
        RxMessage::HelloDone { result: Ok(info), .. } => Some(info.max_sockets),
        _ => None,
    });
    assert_eq!(announced, Some(3), "hello announces the operator's limit");
    let opened = (10..15).filter(|c| socket_of(&seen[0], *c).is_some()).count();
    assert_eq!(opened, 3);
    assert_eq!(error_of(&seen[0], 13), Some(Errno::EMFILE));
    assert_eq!(error_of(&seen[0], 14), Some(Errno::EMFILE));
    assert_eq!(b.engine.counters().socket_limit_refusals, 2);
}

#[test]
fn closing_with_data_the_guest_never_got_resets_the_connection() {
    let mem = Arc::new(guest_memory());
    let mut b = bench(1, None);
    // A peer with a 4 KiB window that never reads: the guest's sends stay held, as when two
    // echoes wait for each other's windows.
    let mut small = b.peer.config().tcp.clone();
    small.rx_buffer = 4096;
    let listener = b.peer.tcp_listen_with(5001, 4, Some(small)).expect("peer listen");
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let rings = LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    // Room for hello's, socket's and connect's answers and one data message only.
    p0.post(4, 4096);
    p0.request(&hello(1), &[]);
    p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp }), &[]);
    let mut seen = vec![Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| socket_of(&s[0], 2).is_some());
    let sock = socket_of(&seen[0], 2).expect("socket");
    let remote = SocketAddrV4::new(common::engine_bench::PEER_IP, 5001);
    p0.request(&Request::new(3, sock, RequestBody::Connect { remote }), &[]);
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| socket_of(&s[0], 3).is_some());
    let conn = b.peer.tcp_accept(listener).expect("peer accepted");

    // 64 KiB arrive; one buffer's worth reaches the guest, the rest waits in the host stack.
    let data = vec![7u8; 64 * 1024];
    let mut sent = 0;
    while sent < data.len() {
        sent += b.peer.tcp_send(conn, &data[sent..]).unwrap_or(0);
        for _ in 0..10 {
            b.step(&rings, &mem);
        }
    }
    for _ in 0..50 {
        b.step(&rings, &mem);
    }
    let guest_conn = b.engine.iface().socket_count();
    assert!(guest_conn >= 1, "the guest's connection lives");
    let payload = vec![9u8; 16 * 1024];
    let held = p0.request(&Request::new(5, sock, RequestBody::Send { len: 16 * 1024 }), &[&payload]);
    for _ in 0..50 {
        b.step(&rings, &mem);
    }
    assert!(!p0.tx_returned.contains(&held), "the send is held: the peer's window is full");

    // A graceful close from the guest: the unread data makes it a reset, as on Linux.
    p0.request(&Request::new(4, sock, RequestBody::Close { abort: false }), &[]);
    let mut buf = [0u8; 1024];
    let mut reset = false;
    for _ in 0..2000 {
        b.step(&rings, &mem);
        match b.peer.tcp_recv(conn, &mut buf) {
            Err(slimtcp::api::SocketError::Connection(slimtcp::tcp::ConnError::Reset)) => {
                reset = true;
                break;
            }
            _ => continue,
        }
    }
    assert!(reset, "the peer's connection was reset");
    for _ in 0..10 {
        b.step(&rings, &mem);
    }
    assert_eq!(b.engine.iface().socket_count(), 0, "nothing left in the guest's stack");
}
