//! `COPY` sends (protocol 1.2): the engine copies the payload, returns the chain at once (before
//! the peer has the bytes), and reports the bytes in `acked` messages once acknowledged; past its
//! copy budget it holds the chain as for any send, still reporting by `acked`; a pair that
//! negotiated 1.1 gets EINVAL for the flag. Stepped by the test against a SlimTCP peer.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::engine_bench::{bench, connected, error_of, run_until, Bench, Connected, QSIZE};
use common::PairDriver;
use slimtcp::iface::{Interface, SocketHandle};
use slimtcp::nic::memwire::MemwireNic;
use slimtcp_abi::{Request, RequestBody, RxMessage, SocketId, SocketKind, Version};
use vm_memory::{Bytes, GuestAddress};

/// Bytes acknowledged to the guest in `acked` messages for `sock`, and how many messages.
fn acked(msgs: &[(RxMessage, Vec<u8>)], sock: SocketId) -> (u64, usize) {
    msgs.iter().fold((0, 0), |(sum, n), (m, _)| match m {
        RxMessage::Acked { socket, bytes } if *socket == sock => (sum + u64::from(*bytes), n + 1),
        _ => (sum, n),
    })
}

fn copy_send(cookie: u64, sock: SocketId, len: usize) -> Request {
    Request::new(cookie, sock, RequestBody::Send { len: len as u32 }).quiet().copy_allowed()
}

/// Everything the peer connection received within 10 s, until `want` bytes.
fn peer_reads(
    b: &mut Bench,
    rings: &slimtcp_vhost::queues::LocalRings,
    mem: &Arc<slimtcp_vhost::guest_mem::GuestMem>,
    conn: SocketHandle,
    want: usize,
) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 8192];
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < want {
        assert!(Instant::now() < deadline, "the peer has {} of {want} bytes", got.len());
        b.step(rings, mem);
        let peer: &mut Interface<MemwireNic> = &mut b.peer;
        while let Ok(n) = peer.tcp_recv(conn, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }
    got
}

#[test]
fn copy_sends_come_back_at_once_and_acked_reports_their_bytes_after_the_peer_has_them() {
    let mem = Arc::new(common::guest_memory());
    let mut b = bench(1, None);
    let Connected { mut p0, rings, sock, conn, mut seen } = connected(&mut b, &mem, 5000);
    p0.tx_returned.clear();
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 13 % 251) as u8).collect();
    let mut at = Vec::new();
    for (i, piece) in data.chunks(1000).enumerate() {
        let (fa, fl) = p0.fixed(&copy_send(10 + i as u64, sock, piece.len()));
        let (pa, pl) = p0.data(piece);
        p0.tx.add_raw(&[(fa, fl, common::F_NEXT, None), (pa, pl, 0, None)]);
        at.push(pa);
    }
    // One engine step, the peer not polled: nothing can be acknowledged yet.
    b.engine.step(&rings, &mem).expect("step");
    seen[0].extend(p0.messages());
    assert_eq!(p0.tx_returned.len(), 3, "the three chains are back at once");
    assert_eq!(acked(&seen[0], sock), (0, 0), "not acknowledged yet");
    // The guest owns its buffers again and overwrites them: the peer still gets the sent bytes.
    for a in at {
        mem.write_slice(&[0xee; 1000], GuestAddress(a)).expect("guest overwrites");
    }
    assert!(peer_reads(&mut b, &rings, &mem, conn, 3000) == data, "the bytes as sent, from the copies");
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| acked(&s[0], sock).0 >= 3000);
    let (bytes, messages) = acked(&seen[0], sock);
    assert_eq!(bytes, 3000, "every byte acknowledged once");
    assert!((1..=3).contains(&messages), "summed per step: {messages} messages");
    assert!(
        !seen[0].iter().any(|(m, _)| matches!(m, RxMessage::Complete { cookie: 10..=12, .. })),
        "QUIET successes: no completion"
    );
    let c = b.engine.counters();
    assert_eq!((c.tx_sends_copied, c.tx_copies_over_budget, c.sends_held), (3000, 0, 0));
}

#[test]
fn past_the_copy_budget_a_copy_send_is_held_and_still_acknowledged_by_acked() {
    let mem = Arc::new(common::guest_memory());
    let mut b = bench(1, None);
    // The engine's configuration is fixed at creation: a bench with a 1500-byte budget.
    let cfg = {
        let mut c = slimtcp_vhost::engine::EngineConfig::new(b.engine.iface(), 1, QSIZE);
        c.copy_budget = 1500;
        c
    };
    let (iface, peer, clock) = {
        let Bench { engine, peer, clock } = b;
        (engine.into_interface(), peer, clock)
    };
    b = Bench { engine: slimtcp_vhost::engine::Engine::new(iface, clock.clone(), cfg), peer, clock };
    let Connected { mut p0, rings, sock, conn, mut seen } = connected(&mut b, &mem, 5001);
    p0.tx_returned.clear();
    let first = p0.request(&copy_send(10, sock, 1000), &[&[1u8; 1000]]);
    let second = p0.request(&copy_send(11, sock, 1000), &[&[2u8; 1000]]);
    b.engine.step(&rings, &mem).expect("step");
    seen[0].extend(p0.messages());
    assert_eq!(p0.tx_returned, [first], "within the budget: copied; past it: held");
    assert_eq!(b.engine.counters().tx_copies_over_budget, 1);
    let got = peer_reads(&mut b, &rings, &mem, conn, 2000);
    assert!(got[..1000].iter().all(|&x| x == 1) && got[1000..].iter().all(|&x| x == 2));
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| acked(&s[0], sock).0 >= 2000);
    assert_eq!(acked(&seen[0], sock).0, 2000, "both by acked, the held one too");
    assert!(p0.tx_returned.contains(&second), "the held chain came back after the ACK");
}

#[test]
fn copy_on_a_pair_that_negotiated_1_1_is_einval() {
    let mem = Arc::new(common::guest_memory());
    let mut b = bench(1, None);
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let rings = slimtcp_vhost::queues::LocalRings::new(vec![p0.rx.queue(), p0.tx.queue()]);
    p0.post(16, 4096);
    let old = Version { major: 1, minor: 1 };
    p0.request(&Request::new(1, SocketId::NONE, RequestBody::Hello { version: old }), &[]);
    p0.request(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp }), &[]);
    let mut seen = vec![Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| {
        common::engine_bench::socket_of(&s[0], 2).is_some()
    });
    assert!(seen[0]
        .iter()
        .any(|(m, _)| matches!(m, RxMessage::HelloDone { version, .. } if *version == old)));
    let sock = common::engine_bench::socket_of(&seen[0], 2).expect("socket");
    p0.request(&copy_send(3, sock, 10), &[&[0u8; 10]]);
    run_until(&mut b, &rings, &mem, &mut [&mut p0], &mut seen, |s| error_of(&s[0], 3).is_some());
    assert_eq!(error_of(&seen[0], 3), Some(slimtcp_abi::Errno::EINVAL), "a 1.2 flag on a 1.1 pair");
}
