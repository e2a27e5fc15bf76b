//! Keepalive and the user timeout end to end: a guest-library application (vhost-user
//! transport) -> slimtcp-vhost -> TAP -> the Linux kernel in a namespace. A dead peer (the
//! Linux side's interface goes down) is found by keepalive; a peer that never opens its window
//! (a Linux server that never reads) is bounded by the user timeout; both end with ETIMEDOUT
//! in a few seconds, their resources go, and another connection of the same guest keeps working.

mod e2e;

use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::time::{Duration, Instant};

use e2e::{Tenant, LINUX_IP};
use slimtcp::api::{Proto, SockOpt, SockOptName, SocketApi, SocketError};
use slimtcp::tcp::ConnError;
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::Netns;

const ENDS_WITHIN: Duration = Duration::from_secs(20);

#[test]
fn keepalive_finds_a_dead_peer_and_the_user_timeout_a_closed_window() {
    slimtcp_testkit::require_netns!("liveness");
    let ifname = Netns::unique_ifname("live");
    let tenant = Tenant::start("liveness", e2e::tap_nic(ifname.clone()));
    let ns = &tenant.ns;
    let mut api = tenant.guest();

    // A peer that never reads: its window closes and stays closed, while Linux keeps answering
    // our zero-window probes.
    let listener = ns.run(|| TcpListener::bind(SocketAddr::from((LINUX_IP, 7100)))).expect("listener");
    let silent = ns.spawn("never-reads", move || {
        let (conn, _) = listener.accept().expect("accept");
        std::thread::sleep(Duration::from_secs(30));
        drop(conn);
    });
    let (bound, echo) =
        linux_peer::spawn_tcp_echo_server(ns, SocketAddr::from((LINUX_IP, 7200)), 2, Duration::from_secs(60))
            .expect("echo server");
    let SocketAddr::V4(server) = bound else { unreachable!("IPv4") };
    let stuck = api.socket(Proto::Tcp).expect("socket");
    api.setsockopt(stuck, SockOpt::UserTimeout(2000)).expect("TCP_USER_TIMEOUT");
    api.connect(stuck, SocketAddrV4::new(LINUX_IP, 7100)).expect("connect");
    assert_eq!(api.getsockopt(stuck, SockOptName::UserTimeout), Ok(SockOpt::UserTimeout(2000)));
    api.setsockopt(stuck, SockOpt::NonBlocking(true)).expect("nonblocking");
    let chunk = vec![0x5au8; 64 * 1024];
    let mut queued = 0usize;
    loop {
        match api.send(stuck, &chunk) {
            Ok(n) => queued += n,
            Err(SocketError::WouldBlock) => break,
            Err(e) => panic!("send before the window closed: {e}"),
        }
        assert!(queued < 64 << 20, "the window never closed");
    }
    api.setsockopt(stuck, SockOpt::NonBlocking(false)).expect("blocking");
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let ended = api.recv(stuck, &mut buf);
    let took = started.elapsed();
    assert_eq!(ended, Err(SocketError::Connection(ConnError::TimedOut)), "after {queued} B queued");
    assert!(took < ENDS_WITHIN, "the user timeout took {took:?}");
    api.close(stuck).expect("close");

    eprintln!("liveness: user timeout after {took:?}");
    // The guest's other connections were never affected: a new one echoes.
    e2e::echo_messages(&mut api, server, 4, 4, 100);
    // A peer that dies: keepalive (1 s idle, 1 s apart, 2 probes) finds out.
    let idle = api.socket(Proto::Tcp).expect("socket");
    for opt in
        [SockOpt::KeepAlive(true), SockOpt::KeepIdle(1), SockOpt::KeepInterval(1), SockOpt::KeepCount(2)]
    {
        api.setsockopt(idle, opt).expect("keepalive option");
    }
    api.connect(idle, server).expect("connect");
    // Alive: probes are answered, the connection outlives several idle periods.
    std::thread::sleep(Duration::from_millis(3500));
    // (Unanswered, two probes 1 s apart after 1 s idle would have ended it by now.)
    assert_eq!(api.send(idle, b"ping"), Ok(4));
    let mut back = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        got += api.recv(idle, &mut back[got..]).expect("the idle connection still echoes");
    }
    assert_eq!(&back, b"ping");
    assert_eq!(api.getsockopt(idle, SockOptName::KeepAlive), Ok(SockOpt::KeepAlive(true)));
    eprintln!("liveness: alive through idle periods");
    // Now the Linux side goes silent: its interface is down, nothing comes back.
    ns.exec_ok(&["ip", "link", "set", "dev", &ifname, "down"]).expect("link down");
    let started = Instant::now();
    let ended = api.recv(idle, &mut buf);
    let took = started.elapsed();
    assert_eq!(ended, Err(SocketError::Connection(ConnError::TimedOut)));
    assert!(took >= Duration::from_secs(1) && took < ENDS_WITHIN, "keepalive took {took:?}");
    api.close(idle).expect("close");
    eprintln!("liveness: keepalive ended the dead connection after {took:?}");
    // (The Linux echo thread of the dead connection never hears of it: not joined.)
    drop(echo);
    drop(api);
    let report = tenant.finish();
    drop(silent);
    eprintln!("liveness: user timeout after {queued} B queued; session: {report:?}");
}
