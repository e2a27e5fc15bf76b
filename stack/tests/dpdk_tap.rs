//! DPDK over `net_tap` inside a network namespace: the Linux kernel is the peer.
//!
//! Specification (in a namespace `slimt-dpdk-tap-<pid>`, deleted afterwards, also on failure):
//! - the kernel answers our hand-built ARP request, so frames go both ways;
//! - a UDP datagram built in an mbuf, with IPv4/UDP checksums left to the NIC when it offers
//!   that, reaches a kernel UDP socket intact (the kernel checks the checksums);
//! - a UDP datagram whose payload lies in registered external memory reaches the kernel socket
//!   intact, its completion is reported once the NIC is done (tap copies on transmit), and our
//!   code copied no byte;
//! - a datagram the kernel sends arrives with the NIC's checksum verdict.

mod dpdk_common;

use std::net::UdpSocket;
use std::process::Command;
use std::time::{Duration, Instant as StdInstant};

use dpdk_common::*;
use slimtcp::nic::dpdk::{DpdkNic, Eal, ExtMemRegion, PortConfig};
use slimtcp::nic::{ExternalFrame, ExternalPayload, L4Proto, Nic, PacketBuf, TxOffload};
use slimtcp::time::Instant;

const IFACE: &str = "slimt0";
const KERNEL_IP: [u8; 4] = [10, 77, 0, 1];
const OUR_IP: [u8; 4] = [10, 77, 0, 2];
const OUR_MAC: [u8; 6] = [0x02, 0x51, 0x11, 0, 0, 0x02];
const DEADLINE: Duration = Duration::from_secs(10);

/// A network namespace deleted on drop (also when the test fails).
struct Netns(String);

impl Netns {
    fn create(name: String) -> Self {
        let st = Command::new("ip").args(["netns", "add", &name]).status().expect("run ip");
        assert!(st.success(), "ip netns add {name}");
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn the_kernel_exchanges_frames_with_a_dpdk_tap_port() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (network namespace, TAP device)");
        return;
    }
    let ns = Netns::create(format!("slimt-dpdk-tap-{}", std::process::id()));
    let out = run_child("child_in_namespace", "tap", Some(&ns.0));
    drop(ns);
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let passed = tagged_lines(&out, "PASSED: ");
    assert_eq!(passed, ["arp", "udp-offload", "udp-external", "rx-checksum"], "every step passed");
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?}");
}

fn kernel_mac() -> [u8; 6] {
    let text = std::fs::read_to_string(format!("/sys/class/net/{IFACE}/address")).expect("interface MAC");
    text.trim().parse::<slimtcp::wire::EthernetAddress>().expect("a MAC address").0
}

/// Polls `nic` until `pred` accepts a received frame or the deadline passes.
fn receive_matching(nic: &mut DpdkNic, pred: impl Fn(&[u8]) -> bool) -> Option<PacketBuf> {
    let start = StdInstant::now();
    let mut got = Vec::new();
    while start.elapsed() < DEADLINE {
        got.clear();
        nic.receive(Instant::ZERO, &mut got, 32).expect("receive");
        if let Some(i) = got.iter().position(|f| pred(f.as_slice())) {
            return Some(got.swap_remove(i));
        }
        std::thread::yield_now();
    }
    None
}

fn send_all(nic: &mut DpdkNic, mut frames: Vec<PacketBuf>) {
    let start = StdInstant::now();
    while !frames.is_empty() && start.elapsed() < DEADLINE {
        nic.transmit(Instant::ZERO, &mut frames).expect("transmit");
    }
    assert!(frames.is_empty(), "all frames sent");
}

#[test]
#[ignore = "child process of the_kernel_exchanges_frames_with_a_dpdk_tap_port (runs in its namespace)"]
fn child_in_namespace() {
    if !is_child("tap") {
        return;
    }
    let eal = Eal::init(eal_args(&[&format!("--vdev=net_tap0,iface={IFACE}")])).expect("EAL with net_tap");
    let mut cfg = PortConfig::new("net_tap0");
    // The kernel side has the port's MAC; we use our own and receive everything.
    cfg.promiscuous = true;
    let mut nic = DpdkNic::open(eal, &cfg).expect("tap port").pop().expect("one queue");
    let info = nic.port_info().clone();
    eprintln!(
        "port {} driver {} reported {:?} enabled {:?}",
        info.name, info.driver, info.reported, info.enabled
    );
    ip(&["link", "set", "lo", "up"]);
    ip(&["addr", "add", "10.77.0.1/24", "dev", IFACE]);
    ip(&["link", "set", IFACE, "up"]);
    let kmac = kernel_mac();

    // 1. ARP: the kernel answers who-has 10.77.0.1.
    let mut req = nic.alloc_tx().expect("mbuf");
    let bytes = arp_request(OUR_MAC, OUR_IP, KERNEL_IP);
    req.append(bytes.len()).expect("room").copy_from_slice(&bytes);
    send_all(&mut nic, vec![req]);
    let reply =
        receive_matching(&mut nic, |f| f.len() >= 42 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2])
            .expect("ARP reply from the kernel");
    let f = reply.as_slice();
    assert_eq!(&f[0..6], &OUR_MAC, "addressed to us");
    assert_eq!(&f[22..28], &kmac, "sender MAC is the kernel interface's");
    assert_eq!(&f[28..32], &KERNEL_IP);
    assert_eq!(&f[38..42], &OUR_IP);
    eprintln!("PASSED: arp");

    // 2. UDP with checksum offload when offered.
    let sock = UdpSocket::bind("10.77.0.1:9999").expect("bind kernel socket");
    sock.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let en = info.enabled;
    let offload = en.tx_ipv4_checksum && en.tx_udp_checksum;
    let payload: Vec<u8> = (0..1000u32).map(|i| (i * 13) as u8).collect();
    let mut frame = nic.alloc_tx().expect("mbuf");
    write_udp_headers(
        frame.append(UDP_HEADERS).expect("room"),
        kmac,
        OUR_MAC,
        OUR_IP,
        KERNEL_IP,
        5555,
        9999,
        &payload,
        if offload { Checksums::Offloaded } else { Checksums::Software },
    );
    frame.append(payload.len()).expect("room").copy_from_slice(&payload);
    if offload {
        frame.offload =
            TxOffload { l2_len: 14, l3_len: 20, ipv4_checksum: true, l4_checksum: Some(L4Proto::Udp) };
    }
    send_all(&mut nic, vec![frame]);
    let mut buf = [0u8; 2048];
    let (n, from) = sock.recv_from(&mut buf).expect("datagram reaches the kernel socket");
    assert_eq!(&buf[..n], &payload[..]);
    assert_eq!(from.to_string(), "10.77.0.2:5555");
    eprintln!("offload used: {offload}");
    eprintln!("PASSED: udp-offload");

    // 3. UDP whose payload stays in registered external memory.
    let mut guest = MemfdRegion::new(1 << 20);
    let ext_payload: Vec<u8> = (0..1200u32).map(|i| (i * 7 + 3) as u8).collect();
    guest.bytes_mut()[4096..4096 + ext_payload.len()].copy_from_slice(&ext_payload);
    // SAFETY: `guest` outlives the region (dropped after `nic`, which holds a clone, below).
    let region =
        unsafe { ExtMemRegion::register(eal, guest.as_mut_ptr(), guest.len(), 4096) }.expect("register");
    nic.attach_region(&region).expect("attach region");
    let mut headers = nic.alloc_tx().expect("mbuf");
    // Software checksums: the headers and the payload are separate segments.
    write_udp_headers(
        headers.append(UDP_HEADERS).expect("room"),
        kmac,
        OUR_MAC,
        OUR_IP,
        KERNEL_IP,
        5556,
        9999,
        &ext_payload,
        Checksums::Software,
    );
    // SAFETY: the bytes at guest+4096 stay untouched until token 7 is reported below.
    let payload = unsafe { ExternalPayload::new(guest.as_mut_ptr().add(4096), ext_payload.len(), 7) }
        .expect("non-null");
    let mut frames = vec![ExternalFrame { headers, payload }];
    let start = StdInstant::now();
    while !frames.is_empty() && start.elapsed() < DEADLINE {
        nic.transmit_external(Instant::ZERO, &mut frames).expect("transmit_external");
    }
    let (n, from) = sock.recv_from(&mut buf).expect("datagram reaches the kernel socket");
    assert_eq!(&buf[..n], &ext_payload[..]);
    assert_eq!(from.to_string(), "10.77.0.2:5556");
    // net_tap copies the frame into the kernel and frees the mbuf within the transmit call.
    let mut done = Vec::new();
    nic.poll_tx_completions(&mut done);
    assert_eq!(done, [7], "completion reported once transmitted");
    assert_eq!(nic.stats().tx_copied_bytes, 0, "no byte copied by our code");
    eprintln!("PASSED: udp-external");

    // 4. The kernel sends to us (it learned our MAC from the ARP request): the frame arrives with
    //    the NIC's checksum verdict.
    sock.send_to(b"hello from the kernel", "10.77.0.2:5555").expect("kernel sends");
    let got =
        receive_matching(&mut nic, |f| f.len() > UDP_HEADERS && f[12..14] == [0x08, 0x00] && f[23] == 17)
            .expect("UDP frame from the kernel");
    assert_eq!(&got.as_slice()[UDP_HEADERS..], b"hello from the kernel");
    let expected = if en.rx_ipv4_checksum && en.rx_udp_checksum { Some(true) } else { None };
    assert_eq!(got.rx_checksum_ok, expected, "rx checksum verdict");
    eprintln!("rx checksum verdict: {:?}", got.rx_checksum_ok);
    eprintln!("PASSED: rx-checksum");
    drop(got);
    drop(nic);
    drop(region);
    drop(guest);
}
