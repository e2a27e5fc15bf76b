//! A second hello on a queue pair is a new driver (an application started after the previous
//! one was killed): the previous driver's sockets are gone, and its id space starts over
//! for the new one, while the other pair keeps its sockets.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use common::engine_bench::{bench, error_of, hello, run_until, socket_of, QSIZE};
use common::{guest_memory, PairDriver};
use slimtcp_abi::{Errno, Request, RequestBody, SocketKind};
use slimtcp_vhost::queues::LocalRings;

#[test]
fn a_new_hello_resets_the_pairs_sockets_and_only_that_pairs() {
    let mem = Arc::new(guest_memory());
    let mut b = bench(2, None);
    let mut p0 = PairDriver::new(&mem, 0, QSIZE, 0);
    let mut p1 = PairDriver::new(&mem, 1, QSIZE, 1 << 20);
    let ctrl = common::Ring::new(&mem, 4, QSIZE);
    let rings =
        LocalRings::new(vec![p0.rx.queue(), p0.tx.queue(), p1.rx.queue(), p1.tx.queue(), ctrl.queue()]);
    p0.post(64, 2048);
    p1.post(64, 2048);
    let tcp = |cookie| {
        Request::new(cookie, slimtcp_abi::SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp })
    };
    p0.request(&hello(1), &[]);
    p0.request(&tcp(2), &[]);
    p1.request(&hello(3), &[]);
    p1.request(&tcp(4), &[]);
    let mut seen = vec![Vec::new(), Vec::new()];
    run_until(&mut b, &rings, &mem, &mut [&mut p0, &mut p1], &mut seen, |s| {
        socket_of(&s[0], 2).is_some() && socket_of(&s[1], 4).is_some()
    });
    let old = socket_of(&seen[0], 2).expect("pair 0 socket");
    let other = socket_of(&seen[1], 4).expect("pair 1 socket");
    assert_eq!(b.engine.socket_count(), 2);

    // A new driver on pair 0: hello again, then the old id is unknown; pair 1's still works.
    p0.request(&hello(10), &[]);
    p0.request(&Request::new(11, old, RequestBody::Listen { backlog: 1 }), &[]);
    let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7000);
    p1.request(&Request::new(12, other, RequestBody::Bind { local: any }), &[]);
    run_until(&mut b, &rings, &mem, &mut [&mut p0, &mut p1], &mut seen, |s| {
        error_of(&s[0], 11).is_some() && socket_of(&s[1], 12).is_some()
    });
    assert_eq!(error_of(&seen[0], 11), Some(Errno::EBADF), "the previous driver's socket is gone");
    assert_eq!(error_of(&seen[1], 12), None, "the other pair's socket is untouched");
    assert_eq!(b.engine.socket_count(), 1);
}
