//! The TAP offload suite's workload: one stack session that moves a TCP stream each way at once
//! and echoes UDP datagrams, against a Linux peer that is either the kernel on the TAP itself or
//! a host behind a router namespace; and the beds for both.

// Shared by two test binaries (the TAP offload suite and the DPDK `net_tap` one), each using a part.
#![allow(dead_code)]

pub mod frames;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use slimtcp::api::SocketError;
use slimtcp::iface::{Counters, Interface, InterfaceConfig};
use slimtcp::nic::tap::{TapConfig, TapNic, TapStats};
use slimtcp::tcp::State;
use slimtcp::wire::EthernetAddress;
use slimtcp_testkit::data::{hex, pattern};
use slimtcp_testkit::linux_peer::{spawn_tcp_client_send, spawn_tcp_server_recv, Transfer};
use slimtcp_testkit::lossnet::{LossyRouter, Peer};
use slimtcp_testkit::netns::Netns;

use crate::common::{AppResult, BulkOutcome, BulkRole, IdleWait, StackRunner, Step};
use slimtcp::nic::Nic;

/// Bytes of each TCP stream.
pub const BYTES: u64 = 16 * 1024 * 1024;
/// Only bounds a hang; no timing is asserted.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// The stack listens here; the Linux client sends to it.
pub const STACK_TCP_PORT: u16 = 5001;
/// The Linux server listens here; the stack's client sends to it.
pub const LINUX_TCP_PORT: u16 = 5002;
/// UDP echo: the stack's port and the Linux socket's.
const STACK_UDP_PORT: u16 = 6001;
const LINUX_UDP_PORT: u16 = 6000;
/// Datagram sizes echoed, from tiny to a full 1500-byte IP packet.
const DATAGRAMS: [usize; 5] = [1, 100, 512, 1000, 1472];
/// Stream seeds: Linux -> stack, stack -> Linux.
const SEED_IN: u64 = 301;
const SEED_OUT: u64 = 302;

/// Where the Linux peer is.
#[derive(Debug)]
enum Topology {
    /// The kernel of the TAP's namespace.
    Local(Netns),
    /// A host behind the router namespace that holds the TAP.
    Routed(LossyRouter, Peer),
}

/// Where the stack sits and who its Linux peer is.
#[derive(Debug)]
pub struct Bed {
    topology: Topology,
    /// The TAP interface.
    pub tap: String,
    /// The stack's address.
    pub stack_ip: Ipv4Addr,
    /// The stack's MAC address.
    pub stack_mac: EthernetAddress,
    /// The kernel's address on the TAP.
    pub host_ip: Ipv4Addr,
}

impl Bed {
    /// The kernel of the TAP's namespace is the peer (`10.91.<subnet>.0/24`).
    pub fn local(name: &str, subnet: u8) -> Bed {
        let ns = Netns::create(&format!("slimt-{name}")).expect("create the namespace");
        Self::new(Topology::Local(ns), subnet)
    }

    /// A Linux peer (`10.92.<subnet>.2`) behind a router namespace that holds the TAP; the veth
    /// between them has no checksum offload, so the router's kernel completes the checksums the
    /// stack left to it when it forwards the frames.
    pub fn routed(name: &str, subnet: u8) -> Bed {
        let router = LossyRouter::new(name).expect("router namespace");
        let peer = router.attach_peer(&format!("{name}-p"), 92, subnet).expect("peer namespace");
        let features = router.ns.exec_ok(&["ethtool", "-k", &peer.router_if]).expect("ethtool -k");
        assert!(
            features.lines().any(|l| l.trim() == "tx-checksumming: off"),
            "the router's veth must fill checksums in software: {features}"
        );
        Self::new(Topology::Routed(router, peer), subnet)
    }

    fn new(topology: Topology, subnet: u8) -> Bed {
        Bed {
            topology,
            tap: Netns::unique_ifname("slimtap"),
            stack_ip: Ipv4Addr::new(10, 91, subnet, 2),
            stack_mac: EthernetAddress([0x02, 0x00, 0x00, 0x91, subnet, 0x02]),
            host_ip: Ipv4Addr::new(10, 91, subnet, 1),
        }
    }

    /// The namespace holding the TAP (the stack runs there).
    pub fn tap_ns(&self) -> &Netns {
        match &self.topology {
            Topology::Local(ns) => ns,
            Topology::Routed(router, _) => &router.ns,
        }
    }

    /// The peer's namespace and address.
    pub fn peer(&self) -> (&Netns, Ipv4Addr) {
        match &self.topology {
            Topology::Local(ns) => (ns, self.host_ip),
            Topology::Routed(_, peer) => (&peer.ns, peer.ip),
        }
    }

    /// The router's veth toward the peer (where the completed frames leave), when routed.
    pub fn peer_link(&self) -> Option<&str> {
        match &self.topology {
            Topology::Local(_) => None,
            Topology::Routed(_, peer) => Some(&peer.router_if),
        }
    }

    /// Creates the TAP in its namespace with `config`, up, the kernel side addressed.
    pub fn open_tap(&self, config: TapConfig) -> TapNic {
        let (name, host) = (self.tap.clone(), self.host_ip);
        self.tap_ns().run(move || {
            let tap = TapNic::open_with(&name, config).expect("create the TAP interface");
            tap.set_up().expect("bring the TAP interface up");
            tap.set_host_address(host, 24).expect("address the kernel side");
            tap
        })
    }

    /// The stack's configuration (the kernel on the TAP is its gateway).
    pub fn iface_config(&self) -> InterfaceConfig {
        let mut cfg = InterfaceConfig::new(self.stack_mac, self.stack_ip, 24);
        cfg.gateway = Some(self.host_ip);
        cfg
    }
}

/// What the stack saw of one session, and the device's (`S`: a TAP's, or a DPDK port's) and the
/// stack's counters at its end.
#[derive(Debug)]
pub struct Session<S = TapStats> {
    /// The stream the Linux client sent to the stack.
    pub inbound: BulkOutcome,
    /// The stream the stack sent to the Linux server.
    pub outbound: BulkOutcome,
    /// Datagrams the stack echoed.
    pub echoed: usize,
    /// The device's counters once everything was written.
    pub nic: S,
    /// The stack's counters at the same moment.
    pub counters: Counters,
}

/// Runs the session on `tap` against the bed's Linux peer and checks every byte of it: a stream
/// of [`BYTES`] each way at once (SHA-256 on both ends), then UDP datagrams echoed by the stack.
pub fn run_session(what: &str, bed: &Bed, tap: TapNic) -> Session {
    run_session_on(what, bed, tap, TapNic::stats)
}

/// [`run_session`] on any device the bed's kernel sees as its TAP (e.g. a DPDK `net_tap` port);
/// `stats` reads the device's counters at the end.
pub fn run_session_on<N, S>(what: &str, bed: &Bed, nic: N, stats: fn(&N) -> S) -> Session<S>
where
    N: Nic + IdleWait + Send + 'static,
    S: std::fmt::Debug + Send + 'static,
{
    let (peer_ns, peer_ip) = bed.peer();
    let linux_server = SocketAddrV4::new(peer_ip, LINUX_TCP_PORT);
    let (_, server) = spawn_tcp_server_recv(peer_ns, linux_server.into(), TIMEOUT).expect("Linux server");
    let stack = StackRunner::spawn(bed.tap_ns(), nic, bed.iface_config(), TIMEOUT, move |iface, now| {
        let listener = iface.tcp_listen(STACK_TCP_PORT, 4).map_err(|e| format!("tcp_listen: {e}"))?;
        let client = iface.tcp_connect(now, linux_server).map_err(|e| format!("tcp_connect: {e}"))?;
        let udp = iface.udp_bind(STACK_UDP_PORT).map_err(|e| format!("udp_bind: {e}"))?;
        let mut inbound: Option<BulkRole> = None;
        let mut outbound = BulkRole::sender(client, SEED_OUT, BYTES);
        let (mut in_done, mut out_done) = (None, None);
        let mut echoed = 0;
        let mut buf = vec![0u8; 2048];
        Ok(move |iface: &mut Interface<N>, now| -> AppResult<Step<Session<S>>> {
            let mut progress = false;
            if inbound.is_none() {
                match iface.tcp_accept(listener) {
                    Ok(h) => {
                        iface.tcp_close(listener).map_err(|e| format!("closing the listener: {e}"))?;
                        inbound = Some(BulkRole::receiver(h));
                        progress = true;
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => return Err(format!("tcp_accept: {e}")),
                }
            }
            if in_done.is_none() {
                if let Some(role) = inbound.as_mut() {
                    progress |= step(role, iface, &mut in_done)?;
                }
            }
            if out_done.is_none() {
                progress |= step(&mut outbound, iface, &mut out_done)?;
            }
            while let Ok((n, from)) = iface.udp_recv_from(udp, &mut buf) {
                iface.udp_send_to(now, udp, &buf[..n], Some(from)).map_err(|e| format!("echo: {e}"))?;
                echoed += 1;
                progress = true;
            }
            if echoed < DATAGRAMS.len() || in_done.is_none() || out_done.is_none() {
                return Ok(if progress { Step::Progress } else { Step::Idle });
            }
            let (Some(inbound), Some(outbound)) = (in_done.take(), out_done.take()) else {
                return Err("unreachable: both streams are done".to_owned());
            };
            // Hand everything queued to the TAP before reading its counters.
            iface.poll(now).map_err(|e| format!("poll: {e:?}"))?;
            let (nic, counters) = (stats(iface.nic()), iface.counters());
            Ok(Step::Done(Session { inbound, outbound, echoed, nic, counters }))
        })
    });
    let client = spawn_tcp_client_send(peer_ns, bed_addr(bed, STACK_TCP_PORT), BYTES, SEED_IN, TIMEOUT)
        .expect("Linux client");
    let sent = client.join().expect("the Linux client sends its stream and sees the stack close");
    let received = server.join().expect("the Linux server receives the stack's stream");
    udp_exchange(
        peer_ns,
        SocketAddrV4::new(peer_ip, LINUX_UDP_PORT),
        SocketAddrV4::new(bed.stack_ip, STACK_UDP_PORT),
    );
    let session = stack.result(TIMEOUT).expect("the stack moves both streams and echoes every datagram");
    check_streams(what, &session, &sent, &received);
    eprintln!("{what}: {:?}", session.nic);
    eprintln!("{what}: {:?}", session.counters);
    stack.stop();
    session
}

fn bed_addr(bed: &Bed, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(bed.stack_ip, port))
}

/// One step of a bulk role; stores its outcome once done. Returns whether it made progress.
fn step<N: Nic>(
    role: &mut BulkRole,
    iface: &mut Interface<N>,
    done: &mut Option<BulkOutcome>,
) -> AppResult<bool> {
    Ok(match role.step(iface)? {
        Step::Done(outcome) => {
            *done = Some(outcome);
            true
        }
        Step::Progress => true,
        Step::Idle => false,
    })
}

/// Both streams went through whole: each end saw the same bytes, and they are the pattern's.
fn check_streams<S>(what: &str, session: &Session<S>, sent: &Transfer, received: &Transfer) {
    for (dir, stack, linux, seed, state) in [
        ("Linux -> stack", &session.inbound, sent, SEED_IN, State::Closed),
        ("stack -> Linux", &session.outbound, received, SEED_OUT, State::TimeWait),
    ] {
        assert_eq!(stack.transfer, *linux, "{what}, {dir}: the two ends disagree on what went through");
        assert!(
            linux.matches_pattern(seed, BYTES),
            "{what}, {dir}: {} bytes with SHA-256 {} instead of the {BYTES} pattern bytes",
            linux.bytes,
            hex(&linux.digest),
        );
        assert_eq!(
            stack.final_state, state,
            "{what}, {dir}: the stack's connection ended in the wrong state"
        );
        eprintln!(
            "{what}, {dir}: {} bytes at {:.1} MB/s, {} retransmissions",
            linux.bytes,
            stack.mb_per_s(),
            stack.retransmits
        );
    }
    assert_eq!(session.echoed, DATAGRAMS.len(), "{what}: datagrams echoed");
}

/// From `linux` (inside `ns`), sends each of [`DATAGRAMS`] to the stack and checks its echo.
fn udp_exchange(ns: &Netns, linux: SocketAddrV4, stack: SocketAddrV4) {
    let socket = ns.run(move || UdpSocket::bind(linux)).expect("bind the Linux UDP socket");
    socket.set_read_timeout(Some(Duration::from_secs(5))).expect("read timeout");
    let mut buf = vec![0u8; 2048];
    for (i, size) in DATAGRAMS.into_iter().enumerate() {
        let mut msg = vec![0u8; size];
        pattern(i as u64, 0, &mut msg);
        socket.send_to(&msg, stack).expect("send to the stack");
        let (n, from) = socket.recv_from(&mut buf).expect("the stack echoes the datagram");
        assert_eq!(from, SocketAddr::V4(stack), "echo {i} from the wrong address");
        assert_eq!(&buf[..n], &msg[..], "echo {i} differs");
    }
}
