//! The application's send budget over the host runtime: many sockets that all want to send share
//! it in turns (the bytes in flight never exceed it, and no socket gets far ahead of another),
//! and peers that stop reading, or read slowly, do not hold the application's other sockets
//! back.

mod runtime_pair;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use runtime_pair::{pair, Mode, PairConfig, B_IP};
use slimtcp::api::{EpollEvent, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SocketApi, SocketError};
use slimtcp::runtime::HostSockets;
use slimtcp_testkit::data::{named_stream, pattern, pattern_mismatch, NamedStreamCheck};

/// The budget of these tests: two quanta.
const BUDGET: usize = 128 * 1024;
/// What a pass lets a socket send while others wait: the host runtime's largest transmit
/// buffer (a zero-copy send hands one over whole).
const QUANTUM: usize = slimtcp::api::tx_classes::LARGE_TX;

fn listener(api: &mut HostSockets, port: u16) -> Fd {
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).expect("bind");
    api.listen(l, 128).expect("listen");
    l
}

/// Accepts `conns` connections and reads each to its end, checking its [`named_stream`];
/// returns the pattern bytes read per connection.
/// Gives up after 30 s (so that a sender that stopped fails its test instead of hanging it).
fn read_all(server: &mut HostSockets, l: Fd, conns: usize) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut open: Vec<(Fd, NamedStreamCheck)> = Vec::new();
    server.setsockopt(l, SockOpt::NonBlocking(true)).expect("nonblocking");
    while open.len() < conns {
        assert!(Instant::now() < deadline, "{} of {conns} connections accepted", open.len());
        match server.accept(l) {
            Ok((c, _)) => {
                server.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
                open.push((c, NamedStreamCheck::new()));
            }
            Err(SocketError::WouldBlock) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("accept: {e}"),
        }
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = vec![None; conns];
    while done.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "streams still open: {done:?}");
        for (i, (c, check)) in open.iter_mut().enumerate() {
            if done[i].is_some() {
                continue;
            }
            match server.recv(*c, &mut buf) {
                Ok(0) => done[i] = Some(check.bytes()),
                Ok(n) => check.feed(&buf[..n]),
                Err(SocketError::WouldBlock) => {}
                Err(e) => panic!("recv: {e}"),
            }
        }
        server.progress().expect("progress");
    }
    done.into_iter().map(|d| d.unwrap_or(0)).collect()
}

fn sockets_share_the_budget_in_turns(mode: Mode) {
    share_in_turns(mode, usize::MAX);
}

/// Sends of 8 KiB take turns as long as whole ones: a pass is a quantum of bytes, however the
/// application slices its writes.
fn small_sends_take_whole_turns(mode: Mode) {
    share_in_turns(mode, 8 * 1024);
}

/// 16 sockets send 512 KiB each in sends of at most `piece` bytes, each whenever epoll
/// (level-triggered) reports it writable; checks the bytes in flight, the turns' fairness and
/// their length.
fn share_in_turns(mode: Mode, piece: usize) {
    const CONNS: usize = 16;
    const PER_CONN: usize = 512 * 1024;
    let mut p = pair(mode, PairConfig::for_data());
    let (mut client, mut server) = (p.client, p.server);
    client.set_send_budget(BUDGET);
    assert_eq!(client.send_budget(), (0, BUDGET));
    let l = listener(&mut server, 6100);
    std::thread::scope(|s| {
        let reader = s.spawn(move || read_all(&mut server, l, CONNS));
        let ep = client.epoll_create().expect("epoll");
        let mut state = Vec::new();
        for i in 0..CONNS {
            let c = client.socket(Proto::Tcp).expect("socket");
            client.connect(c, SocketAddrV4::new(B_IP, 6100)).expect("connect");
            client.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
            // Level-triggered: reported while writable, which the budget decides.
            client
                .epoll_ctl(ep, EpollOp::Add, c, EpollEvent { events: Ready::OUT, data: i as u64 })
                .expect("add");
            state.push((c, named_stream(500 + i as u64, PER_CONN), 0usize));
        }
        let mut finished = 0;
        let mut events = [EpollEvent::default(); 64];
        let mut widest = 0;
        // A socket's run: what it sent in consecutive rounds of reports (a turn, once sockets
        // wait: its pass keeps it writable until its quantum is sent).
        let (mut round, mut last_round, mut run, mut longest) = (0u64, [0u64; CONNS], [0usize; CONNS], 0);
        let deadline = Instant::now() + Duration::from_secs(30);
        while finished < CONNS {
            assert!(Instant::now() < deadline, "{finished} of {CONNS} sockets finished sending");
            let n = client.epoll_wait(ep, &mut events, 100).expect("epoll_wait");
            round += 1;
            for ev in &events[..n] {
                let i = ev.data as usize;
                let (c, data, sent) = &mut state[i];
                let end = data.len().min(sent.saturating_add(piece));
                match client.send(*c, &data[*sent..end]) {
                    Ok(n) => {
                        *sent += n;
                        run[i] = if last_round[i] + 1 == round { run[i] + n } else { n };
                        last_round[i] = round;
                        longest = longest.max(run[i]);
                    }
                    Err(SocketError::WouldBlock) => continue,
                    Err(e) => panic!("send: {e}"),
                }
                let (used, limit) = client.send_budget();
                assert!(used <= limit, "{used} bytes in flight against a budget of {limit}");
                if *sent == data.len() {
                    client.epoll_ctl(ep, EpollOp::Delete, *c, EpollEvent::default()).expect("delete");
                    client.shutdown(*c, Shutdown::Write).expect("shutdown");
                    finished += 1;
                }
            }
            // Turns: among the sockets still sending, none is more than what the first one
            // took before anybody waited (the budget) and one turn (a quantum) ahead.
            let going = state.iter().filter(|(_, d, sent)| *sent < d.len());
            let (lo, hi) =
                going.fold((usize::MAX, 0), |(lo, hi), (_, _, sent)| (lo.min(*sent), hi.max(*sent)));
            if hi >= lo {
                widest = widest.max(hi - lo);
            }
        }
        assert!(widest <= BUDGET + 2 * QUANTUM, "a socket got {widest} bytes ahead of another still sending");
        assert!(longest >= QUANTUM, "the longest turn was {longest} bytes, less than a quantum");
        let read = reader.join().expect("reader");
        assert!(read.iter().all(|&n| n == PER_CONN as u64), "every stream arrives whole: {read:?}");
    });
    // The last acknowledgements reach the application side with its next pumps.
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.send_budget().0 > 0 && Instant::now() < deadline {
        client.progress().expect("progress");
    }
    assert_eq!(client.send_budget().0, 0, "everything acknowledged gave its budget back");
    drop(p.worker.take());
}

fn a_peer_that_stops_reading_does_not_stop_the_others(mode: Mode) {
    let mut p = pair(mode, PairConfig::for_data());
    p.client.set_send_budget(BUDGET);
    // The stalled connection's peer takes 16 KiB and then reads nothing.
    let (stalled, _unread) = p.connected(6200, &[SockOpt::RecvBuffer(16 * 1024)]);
    let (mut client, mut server) = (p.client, p.server);
    client.setsockopt(stalled, SockOpt::NonBlocking(true)).expect("nonblocking");
    let big = vec![7u8; 256 * 1024];
    let mut stuck = 0;
    let start = Instant::now();
    // Fill until its bytes no longer leave: the peer's window is shut and the budget is spent.
    while client.send_budget().0 < BUDGET {
        assert!(start.elapsed() < Duration::from_secs(20), "the stalled socket fills the budget");
        match client.send(stalled, &big) {
            Ok(n) => stuck += n,
            Err(SocketError::WouldBlock) => client.progress().map(|_| ()).expect("progress"),
            Err(e) => panic!("send: {e}"),
        }
    }
    assert!(stuck >= BUDGET, "{stuck} bytes written");
    let l = listener(&mut server, 6201);
    const LEN: usize = 512 * 1024;
    std::thread::scope(|s| {
        let reader = s.spawn(move || read_all(&mut server, l, 1));
        let c = client.socket(Proto::Tcp).expect("socket");
        client.connect(c, SocketAddrV4::new(B_IP, 6201)).expect("connect");
        client.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
        // It waits for budget, which the stalled socket's bytes give up after a stall.
        let data = named_stream(77, LEN);
        let mut sent = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while sent < data.len() {
            assert!(
                Instant::now() < deadline,
                "{sent} of {LEN} bytes sent: the stalled socket holds the budget"
            );
            match client.send(c, &data[sent..]) {
                Ok(n) => sent += n,
                Err(SocketError::WouldBlock) => client.progress().map(|_| ()).expect("progress"),
                Err(e) => panic!("send: {e}"),
            }
        }
        client.shutdown(c, Shutdown::Write).expect("shutdown");
        assert_eq!(reader.join().expect("reader"), vec![LEN as u64]);
        client.close(c).expect("close");
    });
    assert!(client.send_budget().0 <= BUDGET, "the stalled socket's bytes stay out of the count");
    client.close(stalled).expect("close");
    drop(p.worker.take());
}

fn peers_that_read_slowly_do_not_hold_the_others_back(mode: Mode) {
    const SLOW: u16 = 4;
    /// What each slow peer reads per millisecond.
    const SIP: usize = 256;
    const LEN: usize = 8 * 1024 * 1024;
    let mut p = pair(mode, PairConfig::for_data());
    p.client.set_send_budget(BUDGET);
    // The slow peers take 16 KiB, then read a little at a time.
    let slow: Vec<(Fd, Fd)> =
        (0..SLOW).map(|i| p.connected(6300 + i, &[SockOpt::RecvBuffer(16 * 1024)])).collect();
    let (mut client, mut server) = (p.client, p.server);
    let slow_read = AtomicU64::new(0);
    let (slow_read, l) = (&slow_read, listener(&mut server, 6310));
    let slow_conns: Vec<Fd> = slow.iter().map(|&(_, conn)| conn).collect();
    std::thread::scope(|s| {
        let reader = s.spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            server.setsockopt(l, SockOpt::NonBlocking(true)).expect("nonblocking");
            let fast = loop {
                assert!(Instant::now() < deadline, "the fast connection is accepted");
                match server.accept(l) {
                    Ok((c, _)) => break c,
                    Err(SocketError::WouldBlock) => server.progress().map(|_| ()).expect("progress"),
                    Err(e) => panic!("accept: {e}"),
                }
            };
            for &conn in &slow_conns {
                server.setsockopt(conn, SockOpt::NonBlocking(true)).expect("nonblocking");
            }
            server.setsockopt(fast, SockOpt::NonBlocking(true)).expect("nonblocking");
            let (mut buf, mut sip) = (vec![0u8; 64 * 1024], [0u8; SIP]);
            let mut seen = 0u64;
            loop {
                assert!(Instant::now() < deadline, "{seen} of {LEN} fast bytes read");
                match server.recv(fast, &mut buf) {
                    Ok(0) => return seen,
                    Ok(n) => {
                        assert_eq!(pattern_mismatch(88, seen, &buf[..n]), None, "fast stream near {seen}");
                        seen += n as u64;
                        continue;
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => panic!("recv: {e}"),
                }
                for &conn in &slow_conns {
                    if let Ok(n) = server.recv(conn, &mut sip) {
                        slow_read.fetch_add(n as u64, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        for &(c, _) in &slow {
            client.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
        }
        let fast = client.socket(Proto::Tcp).expect("socket");
        client.connect(fast, SocketAddrV4::new(B_IP, 6310)).expect("connect");
        client.setsockopt(fast, SockOpt::NonBlocking(true)).expect("nonblocking");
        let mut data = vec![0u8; LEN];
        pattern(88, 0, &mut data);
        let big = vec![7u8; 64 * 1024];
        let (mut sent, deadline) = (0, Instant::now() + Duration::from_secs(30));
        while sent < LEN {
            assert!(Instant::now() < deadline, "{sent} of {LEN} fast bytes sent");
            // The slow sockets want to send all the time.
            for &(c, _) in &slow {
                let _ = client.send(c, &big);
            }
            match client.send(fast, &data[sent..]) {
                Ok(n) => sent += n,
                Err(SocketError::WouldBlock) => client.progress().map(|_| ()).expect("progress"),
                Err(e) => panic!("send: {e}"),
            }
        }
        // Not bound to their pace: a stream that had to wait for the slow peers' reads would
        // have seen them read about as much as it sent.
        let read = slow_read.load(Ordering::Relaxed);
        assert!(
            read < (LEN / 8) as u64,
            "the fast stream waited for the slow peers: they read {read} bytes meanwhile"
        );
        client.shutdown(fast, Shutdown::Write).expect("shutdown");
        assert_eq!(reader.join().expect("reader"), LEN as u64);
    });
}

both_modes! {
    sockets_share_the_budget_in_turns => sockets_share_the_budget_in_turns;
    small_sends_take_whole_turns => small_sends_take_whole_turns;
    a_peer_that_stops_reading_does_not_stop_the_others => a_peer_that_stops_reading_does_not_stop_the_others;
    peers_that_read_slowly_do_not_hold_the_others_back => peers_that_read_slowly_do_not_hold_the_others_back;
}
