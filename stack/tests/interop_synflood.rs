//! Issue 14, hostile peers, against the Linux kernel over TAP: a SYN flood of spoofed sources
//! sent from the Linux side through an AF_PACKET socket (`interop_synflood/syn_flood.py`) while
//! 20 Linux clients connect to the same SlimTCP listener and echo data; then SYNs from martian
//! sources. Everything stays inside the test's namespace (`slimt-synflood-*`).

#[macro_use]
extern crate slimtcp_testkit;

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use slimtcp::api::SocketError;
use slimtcp::iface::{DropReason, Interface, Martian, SocketHandle};
use slimtcp::nic::Nic;
use slimtcp::time::Instant;

use slimtcp_testkit::data::pattern;
use slimtcp_testkit::netns::ChildGuard;

use common::{AppResult, StackRunner, Step, Testbed};

const FLOOD_SCRIPT: &str = include_str!("interop_synflood/syn_flood.py");
const PORT: u16 = 7;
/// The listener's backlog, as in the report.
const BACKLOG: usize = 128;
const CLIENTS: usize = 20;
const FLOOD_SYNS: usize = 150_000;
/// Bytes each client sends and expects back.
const ECHO_BYTES: usize = 64 * 1024;
const TEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the stack's echo server saw.
#[derive(Debug)]
struct EchoOutcome {
    closed: usize,
    echoed: u64,
    max_sockets: usize,
}

/// An echo server for any number of connections: accepts all, echoes everything, closes on end
/// of stream; done after `CLIENTS` connections closed.
fn echo_server<N: Nic>(
    listener: SocketHandle,
) -> impl FnMut(&mut Interface<N>, Instant) -> AppResult<Step<EchoOutcome>> {
    let mut conns: Vec<(SocketHandle, Vec<u8>, bool)> = Vec::new();
    let mut outcome = EchoOutcome { closed: 0, echoed: 0, max_sockets: 0 };
    let mut buf = vec![0u8; 16 * 1024];
    move |iface, _now| {
        outcome.max_sockets = outcome.max_sockets.max(iface.socket_count());
        let mut progress = false;
        loop {
            match iface.tcp_accept(listener) {
                Ok(h) => conns.push((h, Vec::new(), false)),
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(format!("tcp_accept: {e}")),
            }
            progress = true;
        }
        for (h, pending, eof) in conns.iter_mut() {
            while !*eof && pending.len() < 64 * 1024 {
                match iface.tcp_recv(*h, &mut buf) {
                    Ok(0) => *eof = true,
                    Ok(n) => pending.extend_from_slice(&buf[..n]),
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => return Err(format!("tcp_recv: {e}")),
                }
                progress = true;
            }
            if !pending.is_empty() {
                match iface.tcp_send(*h, pending) {
                    Ok(n) => {
                        pending.drain(..n);
                        outcome.echoed += n as u64;
                        progress = true;
                    }
                    Err(SocketError::WouldBlock) => {}
                    Err(e) => return Err(format!("tcp_send: {e}")),
                }
            }
        }
        let before = conns.len();
        for (h, _, _) in conns.iter().filter(|(_, p, eof)| *eof && p.is_empty()) {
            iface.tcp_close(*h).map_err(|e| format!("tcp_close: {e}"))?;
        }
        conns.retain(|(_, p, eof)| !(*eof && p.is_empty()));
        outcome.closed += before - conns.len();
        if outcome.closed >= CLIENTS {
            let EchoOutcome { closed, echoed, max_sockets } = outcome;
            return Ok(Step::Done(EchoOutcome { closed, echoed, max_sockets }));
        }
        Ok(if progress { Step::Progress } else { Step::Idle })
    }
}

/// One Linux client: connect, send `ECHO_BYTES` of stream `seed`, read them back exactly.
fn echo_client(to: SocketAddr, seed: u64) -> Result<Duration, String> {
    let start = std::time::Instant::now();
    let mut s =
        TcpStream::connect_timeout(&to, Duration::from_secs(10)).map_err(|e| format!("connect: {e}"))?;
    let connected = start.elapsed();
    s.set_read_timeout(Some(Duration::from_secs(15))).map_err(|e| e.to_string())?;
    let mut data = vec![0u8; ECHO_BYTES];
    pattern(seed, 0, &mut data);
    s.write_all(&data).map_err(|e| format!("write: {e}"))?;
    s.shutdown(std::net::Shutdown::Write).map_err(|e| format!("shutdown: {e}"))?;
    let mut back = Vec::new();
    s.read_to_end(&mut back).map_err(|e| format!("read: {e}"))?;
    if back != data {
        return Err(format!("echo of {} bytes came back as {} different bytes", data.len(), back.len()));
    }
    Ok(connected)
}

fn script(bed: &Testbed, args: &[&str]) -> ChildGuard {
    let mut cmd = bed.ns.command(&["python3", "-c", FLOOD_SCRIPT]);
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped());
    ChildGuard::new(cmd.spawn().expect("start syn_flood.py"))
}

fn read_line(child: &mut ChildGuard, lines: &mut Option<BufReader<std::process::ChildStdout>>) -> String {
    let reader = lines.get_or_insert_with(|| BufReader::new(child.child().stdout.take().expect("stdout")));
    let mut line = String::new();
    reader.read_line(&mut line).expect("read the script's output");
    line.trim().to_owned()
}

fn field(line: &str, name: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in {line:?}"))
}

#[test]
fn syn_flood_with_20_clients_and_martian_sources() {
    require_netns!("syn_flood_with_20_clients_and_martian_sources");
    let bed = Testbed::new("synflood", 21);
    let tap = bed.open_tap();
    let host_mac = bed.host_mac();
    let stack = StackRunner::spawn(
        &bed.ns,
        tap,
        bed.iface_config(),
        TEST_TIMEOUT,
        move |iface: &mut Interface<_>, _| {
            let listener = iface.tcp_listen(PORT, BACKLOG).map_err(|e| format!("listen: {e}"))?;
            Ok(echo_server(listener))
        },
    );

    let (tap, stack_mac, stack_ip) = (bed.tap.clone(), bed.stack_mac.to_string(), bed.stack_ip.to_string());
    let prefix = "10.91.21";
    let (port, count) = (PORT.to_string(), FLOOD_SYNS.to_string());
    let mut flood =
        script(&bed, &["flood", &tap, &host_mac.to_string(), &stack_mac, &stack_ip, &port, &count, prefix]);
    let mut out = None;
    assert_eq!(read_line(&mut flood, &mut out), "flooding");

    // The clients connect while the flood runs.
    let to = SocketAddr::from(bed.stack_addr(PORT));
    let clients: Vec<_> = (0..CLIENTS as u64)
        .map(|seed| bed.ns.spawn(&format!("client{seed}"), move || echo_client(to, seed)).expect("spawn"))
        .collect();
    let flood_result = read_line(&mut flood, &mut out);
    let status = flood.child().wait().expect("wait for the flood");
    assert!(status.success(), "syn_flood.py failed: {status}");
    let (sent, seconds) = (field(&flood_result, "sent"), field(&flood_result, "seconds"));
    eprintln!("flood: {sent} spoofed SYNs in {seconds:.2} s = {:.0} SYN/s", sent / seconds);

    let mut connect_times = Vec::new();
    for (i, c) in clients.into_iter().enumerate() {
        match c.join().expect("client thread") {
            Ok(t) => connect_times.push(t),
            Err(e) => panic!("client {i}: {e}"),
        }
    }
    connect_times.sort();
    eprintln!(
        "clients: {} of {CLIENTS} connected and echoed {ECHO_BYTES} bytes exactly; connect time median {:?}, max {:?}",
        connect_times.len(),
        connect_times[connect_times.len() / 2],
        connect_times[connect_times.len() - 1]
    );
    let echo = stack.result(TEST_TIMEOUT).expect("the stack's echo server");
    assert_eq!(echo.closed, CLIENTS);
    assert_eq!(echo.echoed, (CLIENTS * ECHO_BYTES) as u64);

    // Martian sources: never answered; an ordinary spoofed source right after them is.
    let mut martians =
        script(&bed, &["martians", &tap, &host_mac.to_string(), &stack_mac, &stack_ip, &port, prefix]);
    let mut out = None;
    let line = read_line(&mut martians, &mut out);
    assert!(martians.child().wait().expect("wait").success());
    eprintln!("martians: {line}");
    assert_eq!(field(&line, "martian_answers"), 0.0, "a martian source was answered: {line}");
    // (A SYN-RECEIVED control retransmits its SYN-ACK after 1 s: one or two answers.)
    assert!(field(&line, "control_answers") >= 1.0, "the control SYN went unanswered: {line}");

    let c = stack.stop();
    eprintln!(
        "stack: {} frames in, {} SYN cookies sent, {} accepted, {} bad cookies, sockets at most {}, drops {:?}",
        c.rx_frames,
        c.tcp_syn_cookies_sent,
        c.tcp_syn_cookies_accepted,
        c.dropped(DropReason::BadCookie),
        echo.max_sockets,
        c.drops().collect::<Vec<_>>()
    );
    // Memory stays bounded: the listener, at most a backlog of half-open connections from
    // spoofed sources, and the clients; cookies keep no state.
    assert!(echo.max_sockets <= 1 + BACKLOG + CLIENTS, "{} sockets", echo.max_sockets);
    // The TAP queue drops what the stack cannot take (on a loaded 2-core host it reads half to
    // three quarters of the flood); whatever it read beyond the backlog got a cookie.
    assert!(c.tcp_syn_cookies_sent >= 20_000, "too few cookies for the flood: {}", c.tcp_syn_cookies_sent);
    assert_eq!(c.tcp_syn_cookies_accepted, CLIENTS as u64, "every client came in through a cookie");
    for kind in [
        Martian::Unspecified,
        Martian::Broadcast,
        Martian::SubnetBroadcast,
        Martian::Multicast,
        Martian::Loopback,
        Martian::OwnAddress,
    ] {
        assert_eq!(c.martians(kind), 1, "{}", kind.name());
    }
}
