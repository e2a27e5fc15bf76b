//! Issue 14, scale of idle connections, against the `tap_echo` example over TAP: Linux opens
//! 60,000 connections to its discard port and leaves them idle. A 16 MiB echo transfer before
//! and during that must come back exact (their speed ratio is printed), tap_echo must sleep while
//! nothing happens (no per-loop work proportional to the connections), and once the stack's
//! socket table is full (65,536 sockets) further connects are refused with a RST at once
//! instead of timing out.

#[macro_use]
extern crate slimtcp_testkit;

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::tap_echo::{echo_once, TapEcho};
use common::Testbed;
use slimtcp_testkit::netns::ChildGuard;

/// Idle connections held open from Linux.
const IDLE: usize = 60_000;
/// The stack's socket table (`InterfaceConfig::max_sockets` default) less tap_echo's two
/// listeners and its UDP socket: connections past this many are refused.
const STACK_CONNECTIONS: usize = 65_536 - 3;
/// Bytes of each echo transfer.
const TRANSFER: usize = 16 << 20;
/// Wall time over which tap_echo's CPU use is sampled while everything is idle.
const IDLE_SAMPLE: Duration = Duration::from_secs(2);

/// Python 3 client: opens up to argv[3] connections to argv[1]:argv[2] one after the other from
/// local ports argv[4], argv[4] + 1, ... (letting the kernel pick makes each connect scan every
/// port in use: minutes for 60,000), stops at the first failure, prints `opened N in SECONDS
/// errno=E` (E empty when none failed) and holds them until its stdin closes. One process holds
/// at most [`PER_PROCESS`] of them (the file-descriptor limit here is 20,000 and cannot be
/// raised).
const PY_HOLDER: &str = r#"
import socket, sys, time
host, port, n, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
socks, err, start = [], "", time.monotonic()
for i in range(n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.settimeout(10)
    try:
        s.bind(("", first + i))
        s.connect((host, port))
    except OSError as e:
        err = str(e.errno)
        s.close()
        break
    socks.append(s)
print("opened %d in %.3f errno=%s" % (len(socks), time.monotonic() - start, err), flush=True)
sys.stdin.read()
"#;

/// First local port of the holders (each target port's connections use 1024, 1025, ...).
const FIRST_PORT: usize = 1024;

/// Connections one holder process opens at most.
const PER_PROCESS: usize = 15_000;
const _: () = assert!(FIRST_PORT + IDLE < 65_536, "a local port for every connection");

/// Linux processes holding connections open.
struct Holders {
    processes: Vec<ChildGuard>,
    opened: usize,
    seconds: f64,
    /// The errno of the connect that failed (`None` for a timeout), if one did.
    failed: Option<String>,
}

/// Opens up to `count` connections to `target` from inside the namespace, [`PER_PROCESS`] per
/// process, one process after the other; stops at the first failure.
fn hold_connections(bed: &Testbed, target: SocketAddrV4, count: usize) -> Holders {
    let mut h = Holders { processes: Vec::new(), opened: 0, seconds: 0.0, failed: None };
    let (ip, port) = (target.ip().to_string(), target.port().to_string());
    while h.opened < count && h.failed.is_none() {
        let n = (count - h.opened).min(PER_PROCESS).to_string();
        let first = (FIRST_PORT + h.opened).to_string();
        let mut cmd = bed.ns.command(&["python3", "-c", PY_HOLDER, &ip, &port, &n, &first]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let mut child = ChildGuard::new(cmd.spawn().expect("start a holder"));
        let mut out = BufReader::new(child.child().stdout.take().expect("stdout"));
        let mut line = String::new();
        out.read_line(&mut line).expect("the holder's report");
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields.len(), 5, "holder said {line:?}");
        h.opened += fields[1].parse::<usize>().expect("count");
        h.seconds += fields[3].parse::<f64>().expect("seconds");
        h.failed = fields[4].strip_prefix("errno=").filter(|e| !e.is_empty()).map(str::to_string);
        h.processes.push(child);
    }
    h
}

/// One echo transfer of [`TRANSFER`] bytes on a new connection; returns its duration.
fn echo_transfer(bed: &Testbed, seed: u64) -> Duration {
    let target = SocketAddr::V4(bed.stack_addr(7));
    let stream = bed
        .ns
        .run(move || TcpStream::connect_timeout(&target, Duration::from_secs(10)))
        .expect("connect to echo");
    let start = Instant::now();
    assert!(echo_once(stream, seed, TRANSFER).expect("echo I/O"), "the echo differs from what was sent");
    start.elapsed()
}

/// CPU seconds (user + system) process `pid` used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc/PID/stat");
    // Fields after the command (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').expect("stat format").1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ticks as f64 / hz.max(1) as f64
}

#[test]
fn sixty_thousand_idle_connections_cost_nothing_and_the_limit_refuses_out_loud() {
    require_netns!();
    let bed = Testbed::new("idle", 31);
    // Kernel-chosen ports (the echo transfers') above the holders' explicit ones.
    let range = format!("net.ipv4.ip_local_port_range={} 65535", FIRST_PORT + IDLE + 100);
    bed.ns.exec_ok(&["sysctl", "-q", "-w", &range]).expect("port range");
    let tap = bed.tap.clone();
    let echo = TapEcho::start(&bed, &["--tap", &tap], &[], &tap);

    let alone = echo_transfer(&bed, 1);

    let idle = hold_connections(&bed, bed.stack_addr(9), IDLE);
    assert_eq!((idle.opened, idle.failed.as_deref()), (IDLE, None), "idle connections");

    // Nothing happens now: tap_echo must sleep, not visit 60,000 sessions per loop.
    let pid = echo.server.id();
    let before = cpu_seconds(pid);
    std::thread::sleep(IDLE_SAMPLE);
    let idle_cpu = (cpu_seconds(pid) - before) / IDLE_SAMPLE.as_secs_f64();

    let crowded = echo_transfer(&bed, 2);

    // Fill the table on the echo port; the next connect is refused at once.
    let more = hold_connections(&bed, bed.stack_addr(7), STACK_CONNECTIONS + 10 - IDLE);
    let ratio = alone.as_secs_f64() / crowded.as_secs_f64();
    eprintln!(
        "idle connections: {IDLE} opened at {:.0}/s; tap_echo CPU while idle {:.1}%; 16 MiB echo \
         alone {:.0} ms, with them {:.0} ms (speed ratio {ratio:.2}); table full after {} more, \
         then errno {:?}",
        IDLE as f64 / idle.seconds,
        idle_cpu * 100.0,
        alone.as_secs_f64() * 1000.0,
        crowded.as_secs_f64() * 1000.0,
        more.opened,
        more.failed,
    );
    assert!(idle_cpu < 0.5, "tap_echo spins while idle: {:.0}% CPU", idle_cpu * 100.0);
    assert_eq!(more.failed, Some(libc::ECONNREFUSED.to_string()), "a connect past the table is refused");
    // The two echo transfers' connections may still be closing in the stack.
    let taken = IDLE + more.opened;
    assert!(
        (STACK_CONNECTIONS - 2..=STACK_CONNECTIONS).contains(&taken),
        "{taken} connections before the refusal"
    );
    drop((idle, more, echo));
}
