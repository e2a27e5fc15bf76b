//! End to end: an application on slimtcp-guest (vhost-user transport) -> slimtcp-vhost -> a NIC
//! (TAP, or DPDK net_tap) in a namespace made by the test -> the Linux kernel's TCP there.
//!
//! [`Tenant`] runs the backend for one VMM connection on a thread inside the namespace (so its
//! TAP interface is created there); the scenarios are ordinary `SocketApi` code.

#![allow(dead_code)]

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use slimtcp::api::{EpollEvent, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SocketApi, SocketError};
use slimtcp::iface::InterfaceConfig;
use slimtcp::nic::Nic;
use slimtcp::wire::EthernetAddress;
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_testkit::data::{pattern, pattern_mismatch, StreamHasher};
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::{Netns, NsThread};
use slimtcp_vhost::engine::SessionReport;
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant_reporting, ServerError, StopHandle, TenantConfig};

/// The stack's (the guest's) address.
pub const GUEST_IP: Ipv4Addr = Ipv4Addr::new(10, 61, 0, 2);
/// The Linux side's address.
pub const LINUX_IP: Ipv4Addr = Ipv4Addr::new(10, 61, 0, 1);
const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x61, 0x02]);
/// Every wait in these tests ends by then.
pub const LIMIT: Duration = Duration::from_secs(120);

/// One backend tenant serving one VMM connection, and the namespace it lives in.
pub struct Tenant {
    pub ns: Netns,
    pub socket: PathBuf,
    stop: StopHandle,
    backend: Option<NsThread<Result<Vec<SessionReport>, ServerError>>>,
    _dir: TempDir,
}

impl Tenant {
    /// Starts a backend with one queue pair whose NIC `make_nic` builds inside a new namespace.
    pub fn start<N, F>(tag: &str, make_nic: F) -> Tenant
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        Self::start_with_pairs(tag, 1, make_nic)
    }

    /// [`Tenant::start`] with `pairs` queue pairs (`--queues pairs`).
    pub fn start_with_pairs<N, F>(tag: &str, pairs: usize, make_nic: F) -> Tenant
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        Self::start_serving(tag, pairs, 1, make_nic)
    }

    /// [`Tenant::start_with_pairs`] serving `connections` VMM connections one after the other.
    pub fn start_serving<N, F>(tag: &str, pairs: usize, connections: usize, make_nic: F) -> Tenant
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        Self::start_filtered(tag, pairs, connections, Sandbox::default(), |_| {}, make_nic)
    }

    /// [`Tenant::start`] with its configuration changed by `tune` first (limits, budgets).
    pub fn start_tuned<N, F>(tag: &str, tune: impl FnOnce(&mut TenantConfig), make_nic: F) -> Tenant
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        Self::start_filtered(tag, 1, 1, Sandbox::default(), tune, make_nic)
    }

    /// [`Tenant::start`] on a DPDK NIC: filtered as `slimtcp-vhost` filters a DPDK tenant (its
    /// worker with the DPDK worker's allow-list, its control threads as every tenant's).
    pub fn start_dpdk<N, F>(tag: &str, make_nic: F) -> Tenant
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        Self::start_filtered(tag, 1, 1, Sandbox::default().for_dpdk(), |_| {}, make_nic)
    }

    fn start_filtered<N, F>(
        tag: &str,
        pairs: usize,
        connections: usize,
        sandbox: Sandbox,
        tune: impl FnOnce(&mut TenantConfig),
        make_nic: F,
    ) -> Tenant
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        let _ = env_logger::builder().is_test(true).try_init();
        let ns = Netns::create(tag).expect("namespace");
        let dir = std::env::temp_dir().join(format!("slimtcp-e2e-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let socket = dir.join("vhost.sock");
        let mut iface = InterfaceConfig::new(MAC, GUEST_IP, 24);
        iface.max_sockets = 4096;
        let mut cfg = TenantConfig {
            socket: socket.clone(),
            iface,
            pairs,
            core: None,
            name: format!("e2e-{tag}"),
            sandbox,
            limits: Default::default(),
        };
        tune(&mut cfg);
        let stop = StopHandle::default();
        let tenant_stop = stop.clone();
        let backend = ns
            .spawn("backend", move || {
                let mut reports = Vec::new();
                serve_tenant_reporting(&cfg, make_nic, &stop, Some(connections), |r| {
                    reports.push(r.clone())
                })?;
                Ok(reports)
            })
            .expect("backend thread");
        let up = slimtcp_testkit::wait::wait_for(Duration::from_secs(20), || {
            socket.exists() || backend.is_finished()
        });
        assert!(up && socket.exists(), "the backend did not create {}", socket.display());
        Tenant { ns, socket, stop: tenant_stop, backend: Some(backend), _dir: TempDir(dir) }
    }

    /// Attaches a guest library instance, as a VMM plus guest driver would.
    pub fn guest(&self) -> GuestSockets {
        GuestSockets::connect_vhost_user(&self.socket, GuestConfig::default()).expect("guest attaches")
    }

    /// Waits for the backend to finish its connection (after the guest detached).
    /// Waits for the backend to end its one connection; returns that session's report.
    pub fn finish(self) -> SessionReport {
        let mut reports = self.finish_all();
        assert_eq!(reports.len(), 1, "one connection served");
        reports.remove(0)
    }

    /// Stops the backend (waking its accept with one last connection) and waits for it.
    pub fn stop(self) -> Vec<SessionReport> {
        self.stop.stop();
        let _ = std::os::unix::net::UnixStream::connect(&self.socket);
        self.finish_all()
    }

    /// Waits for the backend to end all its connections; returns their reports.
    pub fn finish_all(mut self) -> Vec<SessionReport> {
        let b = self.backend.take().expect("the backend runs until finish");
        b.join().expect("backend thread").expect("backend served cleanly")
    }
}

/// A TAP NIC named `ifname` with the Linux side at [`LINUX_IP`].
pub fn tap_nic(ifname: String) -> impl FnMut() -> Result<slimtcp::nic::tap::TapNic, String> + Send + 'static {
    move || {
        let tap = slimtcp::nic::tap::TapNic::open(&ifname).map_err(|e| e.to_string())?;
        tap.set_up().map_err(|e| e.to_string())?;
        tap.set_host_address(LINUX_IP, 24).map_err(|e| e.to_string())?;
        Ok(tap)
    }
}

fn send_all<A: SocketApi>(api: &mut A, fd: Fd, mut data: &[u8]) {
    while !data.is_empty() {
        let n = api.send(fd, data).expect("send");
        data = &data[n..];
    }
}

/// Echo: a Linux echo server; the guest sends 1 MiB in 1000-byte messages and reads each back.
pub fn echo<A: SocketApi>(api: &mut A, ns: &Netns) {
    let (bound, server) = linux_peer::spawn_tcp_echo_server(ns, SocketAddr::from((LINUX_IP, 7000)), 1, LIMIT)
        .expect("echo server");
    let SocketAddr::V4(bound) = bound else { unreachable!("IPv4") };
    echo_messages(api, bound, 7, 1000, 1000);
    server.join().expect("echo server");
}

/// Connects to the echo server at `server`, sends `count` messages of `size` bytes of stream
/// `seed`, checks each echo, then half-closes and expects the server's end of stream.
pub fn echo_messages<A: SocketApi>(api: &mut A, server: SocketAddrV4, seed: u64, count: u64, size: usize) {
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, server).expect("connect");
    let mut msg = vec![0u8; size];
    let mut back = vec![0u8; size];
    for i in 0..count {
        pattern(seed, i * size as u64, &mut msg);
        send_all(api, fd, &msg);
        let mut got = 0;
        while got < back.len() {
            got += api.recv(fd, &mut back[got..]).expect("recv");
        }
        assert!(back == msg, "message {i} came back changed");
    }
    api.shutdown(fd, Shutdown::Write).expect("shutdown");
    assert_eq!(api.recv(fd, &mut back), Ok(0));
    api.close(fd).expect("close");
}

/// The guest sends `len` bytes of a seeded stream to a Linux receiver, which hashes them.
pub fn guest_to_linux<A: SocketApi>(api: &mut A, ns: &Netns, len: u64) {
    let (bound, peer) = linux_peer::spawn_tcp_server_recv(ns, SocketAddr::from((LINUX_IP, 5001)), LIMIT)
        .expect("linux receiver");
    let fd = api.socket(Proto::Tcp).expect("socket");
    let SocketAddr::V4(bound) = bound else { unreachable!("IPv4") };
    api.connect(fd, bound).expect("connect");
    let mut buf = vec![0u8; 256 * 1024];
    let mut off = 0u64;
    while off < len {
        let n = buf.len().min((len - off) as usize);
        pattern(31, off, &mut buf[..n]);
        send_all(api, fd, &buf[..n]);
        off += n as u64;
    }
    api.shutdown(fd, Shutdown::Write).expect("shutdown");
    let mut b = [0u8; 1];
    assert_eq!(api.recv(fd, &mut b), Ok(0), "the receiver closes after reading everything");
    api.close(fd).expect("close");
    let t = peer.join().expect("linux receiver");
    assert!(t.matches_pattern(31, len), "Linux received {t:?}");
}

/// A Linux sender sends `len` bytes of a seeded stream; the guest checks every byte, and the
/// SHA-256 of what it received against the sender's.
pub fn linux_to_guest<A: SocketApi>(api: &mut A, ns: &Netns, len: u64) {
    let (bound, peer) =
        linux_peer::spawn_tcp_server_send(ns, SocketAddr::from((LINUX_IP, 5002)), len, 32, LIMIT)
            .expect("linux sender");
    let SocketAddr::V4(bound) = bound else { unreachable!("IPv4") };
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, bound).expect("connect");
    let mut received = StreamHasher::new();
    while let Some(b) = api.recv_zc(fd).expect("recv_zc") {
        let off = received.bytes();
        assert_eq!(pattern_mismatch(32, off, b.as_ref()), None, "corrupt near byte {off}");
        received.update(b.as_ref());
    }
    assert_eq!(received.bytes(), len);
    api.close(fd).expect("close");
    let sent = peer.join().expect("linux sender");
    assert_eq!(received.finish(), sent.digest, "the guest's SHA-256 of the stream is the sender's");
}

/// A Linux client connects to a guest listener and sends `len` bytes; the guest checks them.
pub fn linux_client_to_guest_listener<A: SocketApi>(api: &mut A, ns: &Netns, len: u64) {
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080)).expect("bind");
    api.listen(l, 16).expect("listen");
    let peer = linux_peer::spawn_tcp_client_send(ns, SocketAddr::from((GUEST_IP, 8080)), len, 33, LIMIT)
        .expect("linux client");
    let (c, from) = api.accept(l).expect("accept");
    assert_eq!(*from.ip(), LINUX_IP);
    let mut buf = vec![0u8; 64 * 1024];
    let mut off = 0u64;
    loop {
        let n = api.recv(c, &mut buf).expect("recv");
        if n == 0 {
            break;
        }
        assert_eq!(pattern_mismatch(33, off, &buf[..n]), None, "corrupt near byte {off}");
        off += n as u64;
    }
    assert_eq!(off, len);
    api.close(c).expect("close");
    api.close(l).expect("close listener");
    peer.join().expect("linux client");
}

/// `conns` concurrent connections from the guest, each sending `per_conn` bytes of its own
/// stream (identified by an 8-byte header) to one Linux server, which checks each.
pub fn many_connections<A: SocketApi>(api: &mut A, ns: &Netns, conns: usize, per_conn: usize) {
    let listener = ns.run(|| TcpListener::bind((LINUX_IP, 6000))).expect("listen");
    listener.set_nonblocking(true).expect("nonblocking");
    // std listens with a backlog of 128: the guest's 1,000 connects at once overflow it, Linux
    // drops the SYNs it cannot queue, and those connections wait for SYN retransmissions (1, 2,
    // 4 s ...: 8 s more in half the runs, and once past the test's limit). Room for all of
    // them (listen again on a listening socket only changes its backlog).
    let backlog = libc::c_int::try_from(conns).unwrap_or(libc::c_int::MAX);
    // SAFETY: the descriptor is the listener's own, open for the whole call; listen reads no
    // memory of ours.
    let rc = unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), backlog) };
    assert_eq!(rc, 0, "listen backlog: {}", std::io::Error::last_os_error());
    let server = ns
        .spawn("many", move || {
            let deadline = Instant::now() + LIMIT;
            let mut open: Vec<(std::net::TcpStream, Vec<u8>)> = Vec::new();
            let mut done = 0usize;
            let mut buf = vec![0u8; 65536];
            while done < conns {
                assert!(Instant::now() < deadline, "{done} of {conns} streams done");
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(true).expect("nonblocking");
                        open.push((s, Vec::new()));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => panic!("accept: {e}"),
                }
                let mut idle = true;
                open.retain_mut(|(s, data)| match s.read(&mut buf) {
                    Ok(0) => {
                        let id = u64::from_le_bytes(data[..8].try_into().expect("header"));
                        assert_eq!(data.len(), 8 + per_conn, "stream {id}");
                        assert_eq!(pattern_mismatch(id, 0, &data[8..]), None, "stream {id}");
                        done += 1;
                        idle = false;
                        false
                    }
                    Ok(n) => {
                        data.extend_from_slice(&buf[..n]);
                        idle = false;
                        true
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
                    Err(e) => panic!("read: {e}"),
                });
                if idle {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        })
        .expect("server thread");
    let ep = api.epoll_create().expect("epoll");
    let mut socks = Vec::new();
    for i in 0..conns {
        let fd = api.socket(Proto::Tcp).expect("socket");
        api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
        match api.connect(fd, SocketAddrV4::new(LINUX_IP, 6000)) {
            Err(SocketError::InProgress) | Ok(()) => {}
            Err(e) => panic!("connect {i}: {e}"),
        }
        api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::OUT, data: i as u64 }).expect("add");
        let id = 5000 + i as u64;
        let mut data = id.to_le_bytes().to_vec();
        let mut body = vec![0u8; per_conn];
        pattern(id, 0, &mut body);
        data.extend_from_slice(&body);
        socks.push((fd, data, 0usize));
    }
    let mut finished = 0;
    let mut events = vec![EpollEvent::default(); 256];
    let deadline = Instant::now() + LIMIT;
    while finished < conns {
        assert!(Instant::now() < deadline, "{finished} of {conns} guest streams sent");
        let n = api.epoll_wait(ep, &mut events, 100).expect("epoll_wait");
        for ev in &events[..n] {
            let (fd, data, sent) = &mut socks[ev.data as usize];
            assert!(!ev.events.contains(Ready::ERR), "connection {} failed", ev.data);
            while *sent < data.len() {
                match api.send(*fd, &data[*sent..]) {
                    Ok(k) => *sent += k,
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => panic!("send: {e}"),
                }
            }
            if *sent == data.len() {
                api.epoll_ctl(ep, EpollOp::Delete, *fd, EpollEvent::default()).expect("delete");
                api.shutdown(*fd, Shutdown::Write).expect("shutdown");
                finished += 1;
            }
        }
    }
    server.join().expect("linux server");
    for (fd, _, _) in socks {
        api.close(fd).expect("close");
    }
}

/// UDP: the guest sends `count` datagrams of sizes from 1 byte to the largest that fits the MTU
/// to a Linux echo server and checks each one that comes back, byte for byte and by source.
/// Returns the payload bytes sent.
pub fn udp_echo<A: SocketApi>(api: &mut A, ns: &Netns, count: usize) -> u64 {
    const SIZES: [usize; 7] = [1, 2, 17, 512, 1000, 1471, 1472];
    let (bound, server) =
        linux_peer::spawn_udp_echo_server(ns, SocketAddr::from((LINUX_IP, 7004)), count, LIMIT)
            .expect("udp echo");
    let SocketAddr::V4(server_addr) = bound else { unreachable!("IPv4") };
    let fd = api.socket(Proto::Udp).expect("socket");
    let mut back = vec![0u8; 2048];
    let mut sent = 0u64;
    for i in 0..count {
        let size = SIZES[i % SIZES.len()];
        let mut msg = vec![0u8; size];
        pattern(41, sent, &mut msg);
        assert_eq!(api.send_to(fd, &msg, server_addr), Ok(size), "datagram {i}");
        sent += size as u64;
        let (n, from) = api.recv_from(fd, &mut back).expect("recv_from");
        assert_eq!(from, server_addr, "datagram {i}'s echo came from elsewhere");
        assert!(back[..n] == msg[..], "datagram {i} ({size} bytes) came back changed ({n} bytes)");
    }
    api.close(fd).expect("close");
    assert_eq!(server.join().expect("udp echo"), count);
    sent
}

/// Zero copy, proven by counters: every sent byte went out of guest memory by reference (not
/// copied by the backend, the stack or the NIC), except the segments and datagrams shorter than
/// `EXTERNAL_MIN_PAYLOAD` that the stack copies behind their headers because that costs less, and
/// every received byte was copied exactly once, into the guest's buffers.
pub fn assert_zero_copy(r: &SessionReport, sent: u64, received: u64) {
    let d = &r.device;
    assert!(d.tx_payload_by_reference >= sent, "sent by reference: {r}");
    assert_eq!(d.tx_payload_copied, 0, "backend copies: {r}");
    assert_eq!(
        r.stack_tx_payload_copied, r.stack_tx_short_payload_copied,
        "stack copies, but of short segments: {r}"
    );
    assert_eq!(r.nic_external_copied, 0, "NIC copies of guest payload: {r}");
    assert_eq!(d.rx_payload_copied, received, "receive copies: {r}");
}

/// The end-to-end scenarios as tests, over the tenants `$tenant(tag)` builds.
#[macro_export]
macro_rules! e2e_tests {
    ($tenant:path) => {
        #[test]
        fn echo_round_trips() {
            slimtcp_testkit::require_netns!();
            let t = $tenant("echo");
            let mut api = t.guest();
            e2e::echo(&mut api, &t.ns);
            drop(api);
            t.finish();
        }

        #[test]
        fn hundred_megabytes_each_way() {
            slimtcp_testkit::require_netns!();
            let t = $tenant("bulk");
            let mut api = t.guest();
            e2e::guest_to_linux(&mut api, &t.ns, 100_000_000);
            e2e::linux_to_guest(&mut api, &t.ns, 100_000_000);
            drop(api);
            e2e::assert_zero_copy(&t.finish(), 100_000_000, 100_000_000);
        }

        #[test]
        fn linux_client_reaches_a_guest_listener() {
            slimtcp_testkit::require_netns!();
            let t = $tenant("listen");
            let mut api = t.guest();
            e2e::linux_client_to_guest_listener(&mut api, &t.ns, 10_000_000);
            drop(api);
            t.finish();
        }

        #[test]
        fn udp_datagrams_sent_by_reference() {
            slimtcp_testkit::require_netns!();
            let t = $tenant("udp");
            let mut api = t.guest();
            let sent = e2e::udp_echo(&mut api, &t.ns, 700);
            drop(api);
            e2e::assert_zero_copy(&t.finish(), sent, sent);
        }

        #[test]
        fn thousand_concurrent_connections() {
            slimtcp_testkit::require_netns!();
            let t = $tenant("many");
            let mut api = t.guest();
            e2e::many_connections(&mut api, &t.ns, 1000, 16 * 1024);
            drop(api);
            t.finish();
        }
    };
}

/// A directory removed with everything in it when dropped.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh network namespace (loopback up) and a temporary directory for the backend's
/// sockets, both named after `tag`.
pub fn namespace_and_dir(tag: &str) -> (Netns, TempDir) {
    let ns = Netns::create(tag).expect("namespace");
    ns.exec_ok(&["ip", "link", "set", "lo", "up"]).expect("loopback up");
    let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-{tag}-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("temp dir");
    (ns, dir)
}
