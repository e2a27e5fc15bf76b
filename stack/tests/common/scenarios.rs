//! The interop workloads, shared by the TAP suite and the DPDK `net_tap` suite: each takes a
//! [`Testbed`] and the stack's NIC already opened on its link, so the very same scenario runs
//! over both devices.
#![allow(dead_code)]

use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use slimtcp::api::SocketError;
use slimtcp::iface::{Interface, PingReply, SocketHandle};
use slimtcp::nic::Nic;
use slimtcp::tcp::State;
use slimtcp::time::Instant as StackInstant;
use slimtcp::wire::EthernetAddress;

use slimtcp_testkit::capture::Capture;
use slimtcp_testkit::data::{hex, pattern};
use slimtcp_testkit::linux_peer::{
    spawn_tcp_client_recv, spawn_tcp_client_send, spawn_tcp_server_recv, spawn_tcp_server_send, Transfer,
};

use super::{
    check_capture, serve_one, AppResult, BulkOutcome, BulkRole, IdleWait, PcapFile, StackRunner, Step,
    Testbed, BULK, BULK_TIMEOUT,
};

/// Port of the stack's bulk-transfer listeners.
pub const BULK_PORT: u16 = 5001;

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Checks a bulk transfer's both ends and prints its rate.
pub fn assert_bulk(what: &str, stack: &BulkOutcome, linux: &Transfer, seed: u64, expect_state: State) {
    assert_eq!(stack.transfer, *linux, "{what}: the two ends disagree on what went through");
    assert!(
        linux.matches_pattern(seed, BULK),
        "{what}: {} bytes with SHA-256 {} instead of the {} pattern bytes",
        linux.bytes,
        hex(&linux.digest),
        BULK
    );
    assert_eq!(stack.final_state, expect_state, "{what}: the stack's connection ended in the wrong state");
    eprintln!(
        "{what}: {:.1} MB in {:.2} s = {:.1} MB/s, {} retransmissions, stack ended in {}",
        mb(stack.transfer.bytes),
        stack.data_time.as_secs_f64(),
        stack.mb_per_s(),
        stack.retransmits,
        stack.final_state
    );
}

/// The tshark checks: every frame the stack emitted is well-formed with good checksums; the whole
/// capture has no malformed frame; the kernel's frames have good checksums too, except that a TCP
/// checksum of 0xffff is tolerated: Linux computes software checksums with `skb_checksum_help`,
/// which writes 0xffff (CSUM_MANGLED_0) for a checksum that folds to 0, the equivalent value in
/// one's complement (RFC 1624) that tshark flags as bad (about one frame in 65536).
pub fn assert_capture_clean(what: &str, path: &std::path::Path, stack_mac: EthernetAddress) {
    let ports = [BULK_PORT];
    let ours = check_capture(path, Some(&format!("eth.src == {stack_mac}")), &ports);
    eprintln!("{what}: tshark on the stack's frames: {ours}");
    assert!(ours.packets > 1000, "{what}: too few stack frames in the capture: {ours}");
    assert!(ours.is_clean(), "{what}: the stack emitted bad frames: {ours}");
    let all = check_capture(path, None, &ports);
    eprintln!("{what}: tshark on the whole capture: {all}");
    assert!(all.packets > ours.packets, "{what}: no kernel frames in the capture: {all}");
    assert_eq!(all.malformed, 0, "{what}: malformed frames in the capture: {all}");
    assert!(all.read_error.is_none(), "{what}: the capture could not be read completely: {all}");
    if !all.is_clean() {
        let filter = format!("!(eth.src == {stack_mac}) && !(tcp.checksum == 0xffff)");
        let kernel = check_capture(path, Some(&filter), &ports);
        eprintln!("{what}: tshark on the kernel's frames without a 0xffff TCP checksum: {kernel}");
        assert!(kernel.is_clean(), "{what}: the kernel's frames are bad: {kernel}");
    }
}

/// A Linux client sends 100 MiB of stream `seed` to a stack server; captured and checked.
pub fn linux_client_sends_to_stack_server<N>(suite: &str, bed: &Testbed, nic: N, seed: u64)
where
    N: Nic + IdleWait + Send + 'static,
{
    let what = format!("{suite}: linux client -> stack server");
    let pcap = PcapFile::new(&format!("{suite}-lc2ss"));
    let capture = Capture::start(&bed.ns, &bed.tap, pcap.path()).expect("start the capture");
    let stack = StackRunner::spawn(&bed.ns, nic, bed.iface_config(), BULK_TIMEOUT, |iface, _| {
        let listener = iface.tcp_listen(BULK_PORT, 4).map_err(|e| e.to_string())?;
        Ok(serve_one(listener, BulkRole::receiver))
    });
    let linux = spawn_tcp_client_send(&bed.ns, bed.stack_addr(BULK_PORT).into(), BULK, seed, BULK_TIMEOUT)
        .expect("start the Linux client");
    let sent = linux.join().expect("the Linux client sends 100 MiB and sees the stack close");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack receives 100 MiB and closes cleanly");
    // The Linux client half-closed first: the stack went CLOSE-WAIT -> LAST-ACK -> CLOSED.
    assert_bulk(&what, &outcome, &sent, seed, State::Closed);
    assert_eq!(*outcome.remote.ip(), bed.host_ip);
    let counters = stack.stop();
    eprintln!("{what}: {counters:?}");
    capture.stop().expect("stop the capture");
    assert_capture_clean(&what, pcap.path(), bed.stack_mac);
}

/// A stack server sends 100 MiB of stream `seed` to a Linux client; captured and checked.
pub fn stack_server_sends_to_linux_client<N>(suite: &str, bed: &Testbed, nic: N, seed: u64)
where
    N: Nic + IdleWait + Send + 'static,
{
    let what = format!("{suite}: stack server -> linux client");
    let pcap = PcapFile::new(&format!("{suite}-ss2lc"));
    let capture = Capture::start(&bed.ns, &bed.tap, pcap.path()).expect("start the capture");
    let stack = StackRunner::spawn(&bed.ns, nic, bed.iface_config(), BULK_TIMEOUT, move |iface, _| {
        let listener = iface.tcp_listen(BULK_PORT, 4).map_err(|e| e.to_string())?;
        Ok(serve_one(listener, move |h| BulkRole::sender(h, seed, BULK)))
    });
    let linux = spawn_tcp_client_recv(&bed.ns, bed.stack_addr(BULK_PORT).into(), BULK_TIMEOUT)
        .expect("start the Linux client");
    let received = linux.join().expect("the Linux client receives until end of stream");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack sends 100 MiB and closes cleanly");
    // The stack half-closed first: FIN-WAIT-1 -> FIN-WAIT-2 -> TIME-WAIT.
    assert_bulk(&what, &outcome, &received, seed, State::TimeWait);
    let counters = stack.stop();
    eprintln!("{what}: {counters:?}");
    capture.stop().expect("stop the capture");
    assert_capture_clean(&what, pcap.path(), bed.stack_mac);
}

/// The stack's side of a bulk transfer, run after every poll.
pub type BulkApp<N> = Box<dyn FnMut(&mut Interface<N>, StackInstant) -> AppResult<Step<BulkOutcome>>>;

/// Stack setup: connect to `remote`, then run `role` on the connection.
pub fn connect_and<N: Nic>(
    remote: SocketAddrV4,
    role: impl FnOnce(SocketHandle) -> BulkRole + Send + 'static,
) -> impl FnOnce(&mut Interface<N>, StackInstant) -> AppResult<BulkApp<N>> + Send + 'static {
    move |iface, now| {
        let h = iface.tcp_connect(now, remote).map_err(|e| format!("tcp_connect: {e}"))?;
        let mut conn = role(h);
        Ok(Box::new(move |iface: &mut Interface<N>, _now| conn.step(iface)) as BulkApp<N>)
    }
}

/// A stack client sends 100 MiB of stream `seed` to a Linux server.
pub fn stack_client_sends_to_linux_server<N>(suite: &str, bed: &Testbed, nic: N, seed: u64)
where
    N: Nic + IdleWait + Send + 'static,
{
    let (addr, linux) = spawn_tcp_server_recv(&bed.ns, bed.host_addr(0).into(), BULK_TIMEOUT)
        .expect("the Linux server listens");
    let SocketAddr::V4(addr) = addr else { panic!("IPv4 listener expected, got {addr}") };
    let stack = StackRunner::spawn(
        &bed.ns,
        nic,
        bed.iface_config(),
        BULK_TIMEOUT,
        connect_and(addr, move |h| BulkRole::sender(h, seed, BULK)),
    );
    let received = linux.join().expect("the Linux server receives until end of stream");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack sends 100 MiB and closes cleanly");
    let what = format!("{suite}: stack client -> linux server");
    assert_bulk(&what, &outcome, &received, seed, State::TimeWait);
    assert_eq!(outcome.remote, addr);
    stack.stop();
}

/// A stack client receives 100 MiB of stream `seed` from a Linux server.
pub fn stack_client_receives_from_linux_server<N>(suite: &str, bed: &Testbed, nic: N, seed: u64)
where
    N: Nic + IdleWait + Send + 'static,
{
    let (addr, linux) = spawn_tcp_server_send(&bed.ns, bed.host_addr(0).into(), BULK, seed, BULK_TIMEOUT)
        .expect("the Linux server listens");
    let SocketAddr::V4(addr) = addr else { panic!("IPv4 listener expected, got {addr}") };
    let stack = StackRunner::spawn(
        &bed.ns,
        nic,
        bed.iface_config(),
        BULK_TIMEOUT,
        connect_and(addr, BulkRole::receiver),
    );
    let sent = linux.join().expect("the Linux server sends 100 MiB and sees the stack close");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack receives 100 MiB and closes cleanly");
    let what = format!("{suite}: linux server -> stack client");
    assert_bulk(&what, &outcome, &sent, seed, State::Closed);
    stack.stop();
}

/// What the stack's pinger saw.
#[derive(Debug)]
struct PingResult {
    replies: Vec<PingReply>,
    arp_entry: Option<EthernetAddress>,
}

/// The kernel pings the stack (ARP for the stack's address first) and the stack pings the kernel
/// (ARP for the kernel's); both neighbour tables end up with the right MACs.
pub fn ping_and_arp_both_ways<N>(suite: &str, bed: &Testbed, nic: N)
where
    N: Nic + IdleWait + Send + 'static,
{
    const IDENT: u16 = 0x5147;
    const WANTED: usize = 3;
    let host_mac = bed.host_mac();
    let host_ip = bed.host_ip;
    let stack = StackRunner::spawn(&bed.ns, nic, bed.iface_config(), Duration::from_secs(20), move |_, _| {
        let mut replies = Vec::new();
        let mut seq: u16 = 0;
        let mut next_ping = StackInstant::ZERO;
        Ok(move |iface: &mut Interface<N>, now: StackInstant| {
            while let Some(r) = iface.take_ping_reply() {
                replies.push(r);
            }
            if replies.len() >= WANTED {
                let arp_entry = iface.arp_lookup(host_ip, now);
                return Ok(Step::Done(PingResult { replies: std::mem::take(&mut replies), arp_entry }));
            }
            if now >= next_ping {
                match iface.ping(now, host_ip, IDENT, seq, 56) {
                    Ok(()) | Err(SocketError::WouldBlock) => {}
                    Err(e) => return Err(format!("ping: {e}")),
                }
                seq += 1;
                next_ping = now + Duration::from_millis(100);
                return Ok(Step::Progress);
            }
            Ok(Step::Idle)
        })
    });

    // Kernel -> stack: ARP for the stack's address, then ICMP echo.
    let out = bed
        .ns
        .exec(&["ping", "-c", "3", "-i", "0.2", "-W", "2", &bed.stack_ip.to_string()])
        .expect("run ping");
    assert!(
        out.status.success(),
        "{suite}: the kernel's ping of the stack failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let neigh = bed.ns.exec_ok(&["ip", "neigh", "show", "dev", &bed.tap]).expect("ip neigh");
    let entry = neigh.lines().find(|l| l.starts_with(&format!("{} ", bed.stack_ip)));
    let entry = entry.unwrap_or_else(|| panic!("no neighbour entry for {} in:\n{neigh}", bed.stack_ip));
    assert!(
        entry.contains(&format!("lladdr {}", bed.stack_mac)),
        "{suite}: the kernel's neighbour entry lacks the stack's MAC {}: {entry}",
        bed.stack_mac
    );

    // Stack -> kernel: ICMP echo replies, and the kernel's MAC in the stack's ARP cache.
    let result = stack.result(Duration::from_secs(20)).expect("the stack gets its ping replies");
    for r in &result.replies {
        assert_eq!((r.from, r.ident, r.len), (host_ip, IDENT, 56), "unexpected reply {r:?}");
    }
    assert_eq!(result.arp_entry, Some(host_mac), "{suite}: the stack's ARP cache entry for {host_ip}");
    let counters = stack.stop();
    eprintln!("{suite}: ping_and_arp_both_ways: kernel neighbour entry `{entry}`, stack {counters:?}");
}

/// The stack sends a datagram to a Linux UDP socket, then echoes datagrams of 1..1472 bytes.
pub fn udp_echo_with_linux<N>(bed: &Testbed, nic: N)
where
    N: Nic + IdleWait + Send + 'static,
{
    const STACK_PORT: u16 = 6001;
    const LINUX_PORT: u16 = 6000;
    const ECHOES: usize = 5;
    let linux_addr = bed.host_addr(LINUX_PORT);
    let stack_addr = bed.stack_addr(STACK_PORT);
    let linux = bed.ns.run(move || UdpSocket::bind(linux_addr)).expect("bind the Linux UDP socket");
    linux.set_read_timeout(Some(Duration::from_secs(5))).expect("read timeout");
    let greeting = b"hello from slimtcp".to_vec();

    let hello = greeting.clone();
    let stack =
        StackRunner::spawn(&bed.ns, nic, bed.iface_config(), Duration::from_secs(30), move |iface, now| {
            let h = iface.udp_bind(STACK_PORT).map_err(|e| format!("udp_bind: {e}"))?;
            // Stack -> Linux first (held by the stack until ARP resolves the kernel's MAC).
            iface.udp_send_to(now, h, &hello, Some(linux_addr)).map_err(|e| format!("udp_send_to: {e}"))?;
            let mut seen: Vec<(SocketAddrV4, Vec<u8>)> = Vec::new();
            let mut buf = vec![0u8; 2048];
            Ok(move |iface: &mut Interface<N>, now| {
                let mut progress = false;
                while let Ok((n, from)) = iface.udp_recv_from(h, &mut buf) {
                    iface.udp_send_to(now, h, &buf[..n], Some(from)).map_err(|e| format!("echo: {e}"))?;
                    seen.push((from, buf[..n].to_vec()));
                    progress = true;
                }
                if seen.len() >= ECHOES {
                    return Ok(Step::Done(std::mem::take(&mut seen)));
                }
                Ok(if progress { Step::Progress } else { Step::Idle })
            })
        });

    let mut buf = vec![0u8; 2048];
    let (n, from) = linux.recv_from(&mut buf).expect("the stack's datagram reaches Linux");
    assert_eq!((&buf[..n], from), (&greeting[..], SocketAddr::V4(stack_addr)));

    let mut sent = Vec::new();
    for i in 0..ECHOES {
        // Sizes from tiny to a full 1500-byte IP packet.
        let mut msg = vec![0u8; [1, 100, 512, 1000, 1472][i]];
        pattern(i as u64, 0, &mut msg);
        linux.send_to(&msg, stack_addr).expect("send to the stack");
        let (n, from) = linux.recv_from(&mut buf).expect("the stack echoes the datagram");
        assert_eq!(from, SocketAddr::V4(stack_addr), "echo {i} from the wrong address");
        assert_eq!(&buf[..n], &msg[..], "echo {i} differs");
        sent.push(msg);
    }
    let seen = stack.result(Duration::from_secs(10)).expect("the stack saw every datagram");
    for ((from, payload), msg) in seen.iter().zip(&sent) {
        assert_eq!(*from, linux_addr, "the stack saw the datagram from the wrong address");
        assert_eq!(payload, msg);
    }
    stack.stop();
}
