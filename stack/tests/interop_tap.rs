//! Tier 3: SlimTCP talking to the Linux kernel's TCP/IP over a TAP interface.
//!
//! Each test makes its own namespace (`slimt-*`) with a TAP interface `slimtap*` on its own subnet
//! `10.91.N.0/24` (kernel `.1`, stack `.2`), so the tests run in parallel. The stack runs
//! in-process on a thread inside the namespace; the Linux peer uses std::net sockets (testkit's
//! `linux_peer`) or command-line tools run with `ip netns exec`.

#[macro_use]
extern crate slimtcp_testkit;

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant as StdInstant};

use slimtcp::api::SocketError;
use slimtcp::iface::{Interface, PingReply, SocketHandle};
use slimtcp::nic::tap::TapNic;
use slimtcp::tcp::State;
use slimtcp::time::Instant as StackInstant;
use slimtcp::wire::EthernetAddress;

use common::{
    check_capture, serve_one, AppResult, BulkOutcome, BulkRole, PcapFile, StackRunner, Step, Testbed, BULK,
    BULK_TIMEOUT,
};
use slimtcp_testkit::capture::Capture;
use slimtcp_testkit::data::{hex, pattern, sha256};
use slimtcp_testkit::linux_peer::{
    spawn_tcp_client_recv, spawn_tcp_client_send, spawn_tcp_server_recv, spawn_tcp_server_send, Transfer,
};
use slimtcp_testkit::netns::{ChildGuard, Netns};
use slimtcp_testkit::wait::wait_for;

/// Port of the stack's bulk-transfer listeners.
const BULK_PORT: u16 = 5001;

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Checks a bulk transfer's both ends and prints its rate.
fn assert_bulk(what: &str, stack: &BulkOutcome, linux: &Transfer, seed: u64, expect_state: State) {
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
fn assert_capture_clean(what: &str, path: &std::path::Path, stack_mac: EthernetAddress) {
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

/// The kernel computes full checksums on a TAP device (no `TUNSETOFFLOAD`): nothing to turn off
/// before capturing, unlike on a veth pair.
fn assert_no_checksum_offload(bed: &Testbed) {
    let features = bed.ns.exec_ok(&["ethtool", "-k", &bed.tap]).expect("ethtool -k");
    assert!(features.lines().any(|l| l.trim() == "tx-checksumming: off"), "TAP offloads: {features}");
}

#[test]
fn linux_client_sends_100mb_to_stack_server() {
    require_netns!("linux_client_sends_100mb_to_stack_server");
    let seed = 101;
    let bed = Testbed::new("lc2ss", 1);
    let tap = bed.open_tap();
    assert_no_checksum_offload(&bed);
    let pcap = PcapFile::new("lc2ss");
    let capture = Capture::start(&bed.ns, &bed.tap, pcap.path()).expect("start the capture");
    let stack = StackRunner::spawn(&bed.ns, tap, bed.iface_config(), BULK_TIMEOUT, |iface, _| {
        let listener = iface.tcp_listen(BULK_PORT, 4).map_err(|e| e.to_string())?;
        Ok(serve_one(listener, BulkRole::receiver))
    });
    let linux = spawn_tcp_client_send(&bed.ns, bed.stack_addr(BULK_PORT).into(), BULK, seed, BULK_TIMEOUT)
        .expect("start the Linux client");
    let sent = linux.join().expect("the Linux client sends 100 MiB and sees the stack close");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack receives 100 MiB and closes cleanly");
    // The Linux client half-closed first: the stack went CLOSE-WAIT -> LAST-ACK -> CLOSED.
    assert_bulk("linux client -> stack server", &outcome, &sent, seed, State::Closed);
    assert_eq!(*outcome.remote.ip(), bed.host_ip);
    let counters = stack.stop();
    eprintln!("linux client -> stack server: {counters:?}");
    capture.stop().expect("stop the capture");
    assert_capture_clean("linux client -> stack server", pcap.path(), bed.stack_mac);
}

#[test]
fn stack_server_sends_100mb_to_linux_client() {
    require_netns!("stack_server_sends_100mb_to_linux_client");
    let seed = 102;
    let bed = Testbed::new("ss2lc", 2);
    let tap = bed.open_tap();
    assert_no_checksum_offload(&bed);
    let pcap = PcapFile::new("ss2lc");
    let capture = Capture::start(&bed.ns, &bed.tap, pcap.path()).expect("start the capture");
    let stack = StackRunner::spawn(&bed.ns, tap, bed.iface_config(), BULK_TIMEOUT, move |iface, _| {
        let listener = iface.tcp_listen(BULK_PORT, 4).map_err(|e| e.to_string())?;
        Ok(serve_one(listener, move |h| BulkRole::sender(h, seed, BULK)))
    });
    let linux = spawn_tcp_client_recv(&bed.ns, bed.stack_addr(BULK_PORT).into(), BULK_TIMEOUT)
        .expect("start the Linux client");
    let received = linux.join().expect("the Linux client receives until end of stream");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack sends 100 MiB and closes cleanly");
    // The stack half-closed first: FIN-WAIT-1 -> FIN-WAIT-2 -> TIME-WAIT.
    assert_bulk("stack server -> linux client", &outcome, &received, seed, State::TimeWait);
    let counters = stack.stop();
    eprintln!("stack server -> linux client: {counters:?}");
    capture.stop().expect("stop the capture");
    assert_capture_clean("stack server -> linux client", pcap.path(), bed.stack_mac);
}

/// The stack's side of a bulk transfer, run after every poll.
type BulkApp = Box<dyn FnMut(&mut Interface<TapNic>, StackInstant) -> AppResult<Step<BulkOutcome>>>;

/// Stack setup: connect to `remote`, then run `role` on the connection.
fn connect_and(
    remote: SocketAddrV4,
    role: impl FnOnce(SocketHandle) -> BulkRole + Send + 'static,
) -> impl FnOnce(&mut Interface<TapNic>, StackInstant) -> AppResult<BulkApp> + Send + 'static {
    move |iface, now| {
        let h = iface.tcp_connect(now, remote).map_err(|e| format!("tcp_connect: {e}"))?;
        let mut conn = role(h);
        Ok(Box::new(move |iface: &mut Interface<TapNic>, _now| conn.step(iface)) as BulkApp)
    }
}

#[test]
fn stack_client_sends_100mb_to_linux_server() {
    require_netns!("stack_client_sends_100mb_to_linux_server");
    let seed = 103;
    let bed = Testbed::new("sc2ls", 3);
    let tap = bed.open_tap();
    let (addr, linux) = spawn_tcp_server_recv(&bed.ns, bed.host_addr(0).into(), BULK_TIMEOUT)
        .expect("the Linux server listens");
    let SocketAddr::V4(addr) = addr else { panic!("IPv4 listener expected, got {addr}") };
    let stack = StackRunner::spawn(
        &bed.ns,
        tap,
        bed.iface_config(),
        BULK_TIMEOUT,
        connect_and(addr, move |h| BulkRole::sender(h, seed, BULK)),
    );
    let received = linux.join().expect("the Linux server receives until end of stream");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack sends 100 MiB and closes cleanly");
    assert_bulk("stack client -> linux server", &outcome, &received, seed, State::TimeWait);
    assert_eq!(outcome.remote, addr);
    stack.stop();
}

#[test]
fn stack_client_receives_100mb_from_linux_server() {
    require_netns!("stack_client_receives_100mb_from_linux_server");
    let seed = 104;
    let bed = Testbed::new("ls2sc", 4);
    let tap = bed.open_tap();
    let (addr, linux) = spawn_tcp_server_send(&bed.ns, bed.host_addr(0).into(), BULK, seed, BULK_TIMEOUT)
        .expect("the Linux server listens");
    let SocketAddr::V4(addr) = addr else { panic!("IPv4 listener expected, got {addr}") };
    let stack = StackRunner::spawn(
        &bed.ns,
        tap,
        bed.iface_config(),
        BULK_TIMEOUT,
        connect_and(addr, BulkRole::receiver),
    );
    let sent = linux.join().expect("the Linux server sends 100 MiB and sees the stack close");
    let outcome = stack.result(BULK_TIMEOUT).expect("the stack receives 100 MiB and closes cleanly");
    assert_bulk("linux server -> stack client", &outcome, &sent, seed, State::Closed);
    stack.stop();
}

/// What the stack's pinger saw.
#[derive(Debug)]
struct PingResult {
    replies: Vec<PingReply>,
    arp_entry: Option<EthernetAddress>,
}

#[test]
fn ping_and_arp_both_ways() {
    require_netns!("ping_and_arp_both_ways");
    const IDENT: u16 = 0x5147;
    const WANTED: usize = 3;
    let bed = Testbed::new("ping", 5);
    let tap = bed.open_tap();
    let host_mac = bed.host_mac();
    let host_ip = bed.host_ip;
    let stack = StackRunner::spawn(&bed.ns, tap, bed.iface_config(), Duration::from_secs(20), move |_, _| {
        let mut replies = Vec::new();
        let mut seq: u16 = 0;
        let mut next_ping = StackInstant::ZERO;
        Ok(move |iface: &mut Interface<TapNic>, now: StackInstant| {
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
        "the kernel's ping of the stack failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let neigh = bed.ns.exec_ok(&["ip", "neigh", "show", "dev", &bed.tap]).expect("ip neigh");
    let entry = neigh.lines().find(|l| l.starts_with(&format!("{} ", bed.stack_ip)));
    let entry = entry.unwrap_or_else(|| panic!("no neighbour entry for {} in:\n{neigh}", bed.stack_ip));
    assert!(
        entry.contains(&format!("lladdr {}", bed.stack_mac)),
        "the kernel's neighbour entry lacks the stack's MAC {}: {entry}",
        bed.stack_mac
    );

    // Stack -> kernel: ICMP echo replies, and the kernel's MAC in the stack's ARP cache.
    let result = stack.result(Duration::from_secs(20)).expect("the stack gets its ping replies");
    for r in &result.replies {
        assert_eq!((r.from, r.ident, r.len), (host_ip, IDENT, 56), "unexpected reply {r:?}");
    }
    assert_eq!(result.arp_entry, Some(host_mac), "the stack's ARP cache entry for {host_ip}");
    let counters = stack.stop();
    eprintln!("ping_and_arp_both_ways: kernel neighbour entry `{entry}`, stack {counters:?}");
}

#[test]
fn udp_echo_with_linux() {
    require_netns!("udp_echo_with_linux");
    const STACK_PORT: u16 = 6001;
    const LINUX_PORT: u16 = 6000;
    const ECHOES: usize = 5;
    let bed = Testbed::new("udp", 6);
    let tap = bed.open_tap();
    let linux_addr = bed.host_addr(LINUX_PORT);
    let stack_addr = bed.stack_addr(STACK_PORT);
    let linux = bed.ns.run(move || UdpSocket::bind(linux_addr)).expect("bind the Linux UDP socket");
    linux.set_read_timeout(Some(Duration::from_secs(5))).expect("read timeout");
    let greeting = b"hello from slimtcp".to_vec();

    let hello = greeting.clone();
    let stack =
        StackRunner::spawn(&bed.ns, tap, bed.iface_config(), Duration::from_secs(30), move |iface, now| {
            let h = iface.udp_bind(STACK_PORT).map_err(|e| format!("udp_bind: {e}"))?;
            // Stack -> Linux first (held by the stack until ARP resolves the kernel's MAC).
            iface.udp_send_to(now, h, &hello, Some(linux_addr)).map_err(|e| format!("udp_send_to: {e}"))?;
            let mut seen: Vec<(SocketAddrV4, Vec<u8>)> = Vec::new();
            let mut buf = vec![0u8; 2048];
            Ok(move |iface: &mut Interface<TapNic>, now| {
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

// ---------------------------------------------------------------------------------------------
// The tap_echo example, run as a process.

/// The release build of the `tap_echo` example (built by `make test`/`make build`, not here).
fn tap_echo_binary() -> PathBuf {
    let mut candidates = Vec::new();
    // The test binary is <target>/<profile>/deps/interop_tap-*: look next to it first.
    if let Ok(exe) = std::env::current_exe() {
        if let Some(profile_dir) = exe.parent().and_then(|deps| deps.parent()) {
            candidates.push(profile_dir.join("examples/tap_echo"));
        }
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        candidates.push(PathBuf::from(dir).join("release/examples/tap_echo"));
    }
    candidates.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/examples/tap_echo"));
    candidates.iter().find(|p| p.is_file()).cloned().unwrap_or_else(|| {
        panic!(
            "the tap_echo example is not built (looked at {candidates:?}); build it first with \
             `cargo build --release -p slimtcp --example tap_echo` (make test builds --all-targets)"
        )
    })
}

/// Runs `cmd` (stdin as configured) to completion within `timeout`, killed otherwise; returns
/// whether it succeeded, and its stdout followed by its stderr.
fn run_with_deadline(mut cmd: Command, timeout: Duration) -> (bool, String) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut guard = ChildGuard::new(cmd.spawn().expect("start the command"));
    let mut status = None;
    let done = wait_for(timeout, || {
        status = guard.child().try_wait().expect("wait for the command");
        status.is_some()
    });
    assert!(done, "{cmd:?} did not finish within {timeout:?}");
    let mut output = String::new();
    if let Some(mut p) = guard.child().stdout.take() {
        let _ = p.read_to_string(&mut output);
    }
    if let Some(mut p) = guard.child().stderr.take() {
        let _ = p.read_to_string(&mut output);
    }
    (status.is_some_and(|s| s.success()), output)
}

/// `args` inside the namespace with stdin closed.
fn ns_command(ns: &Netns, args: &[&str]) -> Command {
    let mut cmd = ns.command(args);
    cmd.stdin(Stdio::null());
    cmd
}

/// Forwards each line of `pipe` into a channel, from a thread.
fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Python 3 client: sends the file at argv[3] to argv[1]:argv[2] while reading the echo, then
/// half-closes and prints the SHA-256 and length of what came back.
const PY_ECHO_CLIENT: &str = r#"
import hashlib, socket, sys, threading
data = open(sys.argv[3], "rb").read()
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
def writer():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=writer)
t.start()
h, n = hashlib.sha256(), 0
while True:
    b = s.recv(65536)
    if not b:
        break
    h.update(b)
    n += len(b)
t.join()
s.close()
print(h.hexdigest(), n)
"#;

#[test]
fn tap_echo_example_serves_nc_and_python() {
    require_netns!("tap_echo_example_serves_nc_and_python");
    const PAYLOAD: usize = 1 << 20;
    const CONCURRENT: usize = 8;
    const CONCURRENT_BYTES: usize = 200_000;
    let binary = tap_echo_binary();
    let bed = Testbed::new("tapecho", 7);
    let stack_ip = bed.stack_ip.to_string();
    let (ip_arg, host_arg) = (format!("{stack_ip}/24"), format!("{}/24", bed.host_ip));
    let mut cmd = bed.ns.command(&[
        binary.to_str().expect("UTF-8 path"),
        "--tap",
        &bed.tap,
        "--ip",
        &ip_arg,
        "--host-ip",
        &host_arg,
        "--mac",
        &bed.stack_mac.to_string(),
    ]);
    cmd.env("RUST_LOG", "info").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut server = ChildGuard::new(cmd.spawn().expect("start tap_echo"));
    let stdout = lines_of(server.child().stdout.take().expect("stdout"));
    let stderr = lines_of(server.child().stderr.take().expect("stderr"));
    let ready = stdout.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| {
        let log: Vec<String> = stderr.try_iter().collect();
        panic!("tap_echo did not print its ready line ({e}); stderr: {log:?}")
    });
    assert!(ready.starts_with(&format!("tap_echo: ready on {}", bed.tap)), "ready line: {ready}");

    // 1 MiB through TCP echo, from Python; the echo must be byte-identical.
    let mut payload = vec![0u8; PAYLOAD];
    pattern(7, 0, &mut payload);
    let file = PcapFile::new("tapecho-payload"); // a unique temp file, removed on drop
    std::fs::write(file.path(), &payload).expect("write the payload file");
    let file_arg = file.path().to_str().expect("UTF-8 path").to_owned();
    let (ok, out) = run_with_deadline(
        ns_command(&bed.ns, &["python3", "-c", PY_ECHO_CLIENT, &stack_ip, "7", &file_arg]),
        Duration::from_secs(60),
    );
    assert!(ok, "the Python echo client failed: {out}");
    assert_eq!(out.trim(), format!("{} {PAYLOAD}", hex(&sha256(&payload))), "echoed bytes differ");

    // 1 MiB to discard, from nc (half-closes at end of input, then waits for the server's close).
    let mut nc = bed.ns.command(&["nc", "-N", "-w", "30", &stack_ip, "9"]);
    nc.stdin(std::fs::File::open(file.path()).expect("open the payload file"));
    let (ok, out) = run_with_deadline(nc, Duration::from_secs(60));
    assert!(ok, "nc to discard failed: {out}");
    assert!(out.is_empty(), "discard sent something back: {out:?}");

    // UDP echo and ping, from std::net and ping(8) in the namespace.
    let target = SocketAddrV4::new(bed.stack_ip, 7);
    let echoed = bed.ns.run(move || -> std::io::Result<(Vec<u8>, SocketAddr)> {
        let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        sock.set_read_timeout(Some(Duration::from_secs(5)))?;
        sock.send_to(b"udp echo via tap_echo", target)?;
        let mut buf = [0u8; 1500];
        let (n, from) = sock.recv_from(&mut buf)?;
        Ok((buf[..n].to_vec(), from))
    });
    let (data, from) = echoed.expect("a UDP echo");
    assert_eq!((&data[..], from), (&b"udp echo via tap_echo"[..], SocketAddr::V4(target)));
    let (ok, out) = run_with_deadline(
        ns_command(&bed.ns, &["ping", "-c", "3", "-i", "0.2", "-W", "2", &stack_ip]),
        Duration::from_secs(20),
    );
    assert!(ok, "ping of tap_echo failed: {out}");

    // Several echo connections at once, from std::net threads.
    let clients: Vec<std::thread::JoinHandle<std::io::Result<bool>>> = (0..CONCURRENT)
        .map(|i| {
            let stream = bed
                .ns
                .run(move || TcpStream::connect_timeout(&SocketAddr::V4(target), Duration::from_secs(5)))
                .expect("connect to echo");
            std::thread::spawn(move || echo_once(stream, i as u64, CONCURRENT_BYTES))
        })
        .collect();
    for (i, c) in clients.into_iter().enumerate() {
        let same = c.join().expect("echo client thread").expect("concurrent echo client I/O");
        assert!(same, "concurrent echo {i}: the echo differs from what was sent");
    }

    // SIGTERM: a clean exit (code 0), and the log has each connection's byte counts.
    stop_with_sigterm(server.child());
    let log: Vec<String> = stderr_lines_until_closed(&stderr);
    let closed = |service: &str, received: usize, sent: usize| {
        log.iter().any(|l| {
            l.contains(&format!("{service} connection from {}:", bed.host_ip))
                && l.contains(&format!("received {received} bytes, sent {sent} bytes"))
        })
    };
    assert!(closed("echo", PAYLOAD, PAYLOAD), "no echo byte counts in the log: {log:#?}");
    assert!(closed("discard", PAYLOAD, 0), "no discard byte counts in the log: {log:#?}");
    let concurrent = log
        .iter()
        .filter(|l| l.contains(&format!("received {CONCURRENT_BYTES} bytes, sent {CONCURRENT_BYTES} bytes")))
        .count();
    assert_eq!(concurrent, CONCURRENT, "byte counts of the concurrent echoes in the log: {log:#?}");
}

/// Writes `len` bytes of stream `seed` on `stream` (from a second thread) while reading the echo;
/// half-closes after the last byte. True when exactly the sent bytes came back.
fn echo_once(stream: TcpStream, seed: u64, len: usize) -> std::io::Result<bool> {
    let mut data = vec![0u8; len];
    pattern(seed, 0, &mut data);
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut writer = stream.try_clone()?;
    let expected = data.clone();
    let write = std::thread::spawn(move || -> std::io::Result<()> {
        writer.write_all(&data)?;
        writer.shutdown(Shutdown::Write)
    });
    let mut back = Vec::with_capacity(len);
    (&stream).read_to_end(&mut back)?;
    write.join().expect("writer thread")?;
    Ok(back == expected)
}

/// Sends SIGTERM to `child` and asserts it exits with code 0 within 10 s.
fn stop_with_sigterm(child: &mut Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: `child` is our own, not yet reaped child (reaping needs `&mut Child`, which we
    // hold), so `pid` cannot have been reused; kill only sends a signal.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill(SIGTERM): {}", std::io::Error::last_os_error());
    let mut status = None;
    let exited = wait_for(Duration::from_secs(10), || {
        status = child.try_wait().expect("wait for tap_echo");
        status.is_some()
    });
    assert!(exited, "tap_echo did not exit within 10 s of SIGTERM");
    let status = status.expect("exited");
    assert_eq!(status.code(), Some(0), "tap_echo's exit status after SIGTERM: {status}");
}

/// Every stderr line of the (exited) process: reads until the pipe closes, bounded by a deadline.
fn stderr_lines_until_closed(lines: &mpsc::Receiver<String>) -> Vec<String> {
    let deadline = StdInstant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(StdInstant::now());
        match lines.recv_timeout(left) {
            Ok(line) => out.push(line),
            Err(_) => return out,
        }
    }
}
