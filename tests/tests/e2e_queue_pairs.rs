//! Several queue pairs over one vhost-user connection, one application thread each
//! (`GuestDevice`), end to end over TAP to the Linux kernel in a namespace made by each test;
//! and re-attaching after a backend restart.

mod e2e;

use std::net::{SocketAddr, SocketAddrV4, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e::{Tenant, GUEST_IP, LIMIT, LINUX_IP};
use slimtcp::api::{EpollEvent, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SocketApi, SocketError};
use slimtcp::iface::InterfaceConfig;
use slimtcp::wire::EthernetAddress;
use slimtcp_guest::{GuestConfig, GuestDevice, GuestSockets};
use slimtcp_testkit::data::{pattern, pattern_mismatch};
use slimtcp_testkit::linux_peer::{self, PeerThread};
use slimtcp_testkit::netns::{Netns, NsThread};
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant, ServerError, StopHandle, TenantConfig};

/// Memory for four pairs: each needs `queue_size` receive buffers (8 MiB) plus transmit room.
fn four_pair_config() -> GuestConfig {
    GuestConfig { queue_pairs: 0, memory_size: 128 << 20, ..GuestConfig::default() }
}

/// One guest connection of a pair's workload.
enum Stream {
    /// The guest sends `len` bytes of stream `seed`; the Linux receiver checks them.
    Out { fd: Fd, seed: u64, sent: u64, buf: Vec<u8>, peer: Option<PeerThread> },
    /// The Linux sender sends `len` bytes of stream `seed`; the guest checks each.
    In { fd: Fd, seed: u64, got: u64, peer: Option<PeerThread> },
}

/// Pair `k`'s workload on its own thread: `conns` concurrent connections (even: guest ->
/// Linux, odd: Linux -> guest) of `len` bytes each, driven non-blocking through epoll.
fn pair_workload(api: &mut GuestSockets, ns: &Netns, k: usize, conns: usize, len: u64) {
    let ep = api.epoll_create().expect("epoll");
    let mut streams = Vec::with_capacity(conns);
    for i in 0..conns {
        let seed = 1000 + (k * 100 + i) as u64;
        let any = SocketAddr::from((LINUX_IP, 0));
        let (bound, peer, out) = if i % 2 == 0 {
            let (b, p) = linux_peer::spawn_tcp_server_recv(ns, any, LIMIT).expect("linux receiver");
            (b, p, true)
        } else {
            let (b, p) = linux_peer::spawn_tcp_server_send(ns, any, len, seed, LIMIT).expect("linux sender");
            (b, p, false)
        };
        let SocketAddr::V4(bound) = bound else { unreachable!("IPv4") };
        let fd = api.socket(Proto::Tcp).expect("socket");
        api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
        match api.connect(fd, bound) {
            Ok(()) | Err(SocketError::InProgress) => {}
            Err(e) => panic!("pair {k} connect {i}: {e}"),
        }
        let events = if out { Ready::OUT } else { Ready::IN };
        api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events, data: i as u64 }).expect("epoll add");
        streams.push(if out {
            Stream::Out { fd, seed, sent: 0, buf: vec![0u8; 64 * 1024], peer: Some(peer) }
        } else {
            Stream::In { fd, seed, got: 0, peer: Some(peer) }
        });
    }
    let mut left = conns;
    let mut events = vec![EpollEvent::default(); conns];
    let deadline = Instant::now() + LIMIT;
    while left > 0 {
        if Instant::now() >= deadline {
            let state: Vec<String> = streams
                .iter()
                .map(|s| match s {
                    Stream::Out { fd, sent, .. } => format!("{fd:?} out: sent {sent} of {len}"),
                    Stream::In { fd, got, .. } => format!("{fd:?} in: got {got} of {len}"),
                })
                .collect();
            panic!("pair {k}: {left} of {conns} streams unfinished: {state:?}");
        }
        let n = api.epoll_wait(ep, &mut events, 100).expect("epoll_wait");
        for ev in &events[..n] {
            assert!(!ev.events.contains(Ready::ERR), "pair {k}: connection {} failed", ev.data);
            let finished = match &mut streams[ev.data as usize] {
                Stream::Out { fd, seed, sent, buf, .. } => {
                    while *sent < len {
                        let chunk = buf.len().min((len - *sent) as usize);
                        pattern(*seed, *sent, &mut buf[..chunk]);
                        match api.send(*fd, &buf[..chunk]) {
                            Ok(m) => *sent += m as u64,
                            Err(SocketError::WouldBlock) => break,
                            Err(e) => panic!("pair {k}: send: {e}"),
                        }
                    }
                    if *sent == len {
                        api.shutdown(*fd, Shutdown::Write).expect("shutdown");
                    }
                    *sent == len
                }
                Stream::In { fd, seed, got, .. } => loop {
                    match api.recv_zc(*fd) {
                        Ok(Some(b)) => {
                            let at = pattern_mismatch(*seed, *got, b.as_ref());
                            assert_eq!(at, None, "pair {k}: corrupt near byte {got}");
                            *got += b.as_ref().len() as u64;
                        }
                        Ok(None) => {
                            assert_eq!(*got, len, "pair {k}: stream {seed} length");
                            break true;
                        }
                        Err(SocketError::WouldBlock) => break false,
                        Err(e) => panic!("pair {k}: recv: {e}"),
                    }
                },
            };
            if finished {
                let fd = match &streams[ev.data as usize] {
                    Stream::Out { fd, .. } | Stream::In { fd, .. } => *fd,
                };
                api.epoll_ctl(ep, EpollOp::Delete, fd, EpollEvent::default()).expect("epoll delete");
                left -= 1;
            }
        }
    }
    api.epoll_close(ep).expect("epoll close");
    for s in &mut streams {
        match s {
            Stream::Out { fd, seed, peer, .. } => {
                let t = peer.take().expect("peer").join().expect("linux receiver");
                assert!(t.matches_pattern(*seed, len), "pair {k}: Linux received {t:?}");
                api.close(*fd).expect("close");
            }
            Stream::In { fd, peer, .. } => {
                // The sender waits for our close.
                api.close(*fd).expect("close");
                peer.take().expect("peer").join().expect("linux sender");
            }
        }
    }
}

/// Runs `pair_workload` on every pair at once, one thread each; returns when all are done.
fn all_pairs_at_once(apis: Vec<GuestSockets>, ns: &Netns, conns: usize, len: u64) -> Vec<GuestSockets> {
    std::thread::scope(|s| {
        let threads: Vec<_> = apis
            .into_iter()
            .enumerate()
            .map(|(k, mut api)| {
                std::thread::Builder::new()
                    .name(format!("pair-{k}"))
                    .spawn_scoped(s, move || {
                        assert_eq!(api.queue_pair(), k, "take_all hands out pairs in order");
                        pair_workload(&mut api, ns, k, conns, len);
                        api
                    })
                    .expect("pair thread")
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("pair thread")).collect()
    })
}

#[test]
fn four_threads_one_queue_pair_each_move_exact_data_at_once() {
    slimtcp_testkit::require_netns!();
    let t = Tenant::start_with_pairs("qp4", 4, e2e::tap_nic(Netns::unique_ifname("qp")));
    let mut dev = GuestDevice::connect_vhost_user(&t.socket, four_pair_config()).expect("attach");
    assert_eq!(dev.queue_pairs(), 4, "queue_pairs 0 takes every pair the device has");
    let apis = dev.take_all().expect("hello on every pair");
    assert!(matches!(dev.take(0), Err(slimtcp_guest::GuestError::NoSuchQueuePair(0))), "each pair once");
    // The pairs hold the connection and the memory: the device handle is not needed any more.
    drop(dev);
    for api in &apis {
        assert_eq!(api.hello_info().addr, GUEST_IP, "pair {} said hello", api.queue_pair());
    }
    let started = Instant::now();
    let apis = all_pairs_at_once(apis, &t.ns, 4, 4_000_000);
    log::info!("4 pairs x 4 connections x 4 MB in {:?}", started.elapsed());
    drop(apis);
    t.finish();
}

/// A backend tenant that runs until stopped (any number of VMM connections).
struct Backend {
    stop: StopHandle,
    thread: NsThread<Result<(), ServerError>>,
}

const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x62, 0x02]);

impl Backend {
    fn start(ns: &Netns, socket: &std::path::Path, ifname: &str, pairs: usize) -> Backend {
        let mut iface = InterfaceConfig::new(MAC, GUEST_IP, 24);
        iface.max_sockets = 256;
        let cfg = TenantConfig {
            socket: socket.to_path_buf(),
            iface,
            pairs,
            core: None,
            name: "e2e-restart".into(),
            sandbox: Sandbox::default(),
            limits: Default::default(),
        };
        let stop = StopHandle::default();
        let make_nic = e2e::tap_nic(ifname.to_string());
        let thread = {
            let stop = stop.clone();
            ns.spawn("backend", move || serve_tenant(&cfg, make_nic, &stop, None)).expect("backend thread")
        };
        Backend { stop, thread }
    }

    /// Ends the tenant (its connection is closed) and waits for it.
    fn stop(self) {
        self.stop.stop();
        self.thread.join().expect("backend thread").expect("backend ended cleanly");
    }
}

/// Removes the test's directory however the test ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn after_a_backend_restart_every_pair_fails_with_enetdown_and_a_new_device_attaches() {
    slimtcp_testkit::require_netns!();
    let _ = env_logger::builder().is_test(true).try_init();
    let ns = Netns::create("qprestart").expect("namespace");
    let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-e2e-qprestart-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    let socket = dir.0.join("vhost.sock");
    let ifname = Netns::unique_ifname("qr");
    let cfg = GuestConfig { queue_pairs: 0, ..GuestConfig::default() };

    let first = Backend::start(&ns, &socket, &ifname, 2);
    let mut dev = GuestDevice::connect_vhost_user_within(&socket, cfg.clone(), Duration::from_secs(20))
        .expect("attach");
    let mut apis = dev.take_all().expect("hello on both pairs");
    drop(dev);
    assert_eq!(apis.len(), 2);
    // A connection on each pair, held open across the restart.
    let listener = ns.run(|| TcpListener::bind((LINUX_IP, 7100))).expect("linux listener");
    let held: Vec<Fd> = apis
        .iter_mut()
        .map(|api| {
            let fd = api.socket(Proto::Tcp).expect("socket");
            api.connect(fd, SocketAddrV4::new(LINUX_IP, 7100)).expect("connect");
            fd
        })
        .collect();

    first.stop();
    for (api, fd) in apis.iter_mut().zip(&held) {
        let k = api.queue_pair();
        let mut b = [0u8; 16];
        assert_eq!(api.recv(*fd, &mut b), Err(SocketError::StackDown), "pair {k}: a blocked recv ends");
        assert_eq!(api.socket(Proto::Tcp).map(|_| ()), Err(SocketError::StackDown), "pair {k}: new sockets");
        assert_eq!(api.send(*fd, b"x"), Err(SocketError::StackDown), "pair {k}: send");
    }
    // The documented way back: drop every pair of the old device, connect again.
    drop(apis);
    drop(listener);

    let second = Backend::start(&ns, &socket, &ifname, 2);
    let mut dev =
        GuestDevice::connect_vhost_user_within(&socket, cfg, Duration::from_secs(20)).expect("re-attach");
    let apis = dev.take_all().expect("hello again on both pairs");
    assert_eq!(apis.len(), 2);
    let apis = all_pairs_at_once(apis, &ns, 2, 1_000_000);
    drop(apis);
    drop(dev);
    second.stop();
}
