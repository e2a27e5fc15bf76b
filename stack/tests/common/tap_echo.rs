//! The tap_echo example run as a process in a test namespace and driven by Linux clients; shared
//! by the TAP suite (`--tap`) and the DPDK suite (`--dpdk`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant as StdInstant};

use slimtcp_testkit::data::{hex, pattern, sha256};
use slimtcp_testkit::netns::{ChildGuard, Netns};
use slimtcp_testkit::wait::wait_for;

use super::{PcapFile, Testbed};

/// The release build of the `tap_echo` example (built by `make test`/`make build`, not here).
pub fn tap_echo_binary() -> PathBuf {
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
pub fn run_with_deadline(mut cmd: Command, timeout: Duration) -> (bool, String) {
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

/// The tap_echo example running in a test namespace, its output read line by line.
pub struct TapEcho {
    /// The process (killed on drop).
    pub server: ChildGuard,
    /// Its stdout after the ready line.
    pub stdout: mpsc::Receiver<String>,
    /// Its stderr (the log).
    pub stderr: mpsc::Receiver<String>,
}

impl TapEcho {
    /// Starts tap_echo for `bed` on the device `device_args` select (`--tap NAME` or
    /// `--dpdk 'EAL ARGS'`), with `extra` arguments, and waits for its ready line, which must
    /// start with `ready`.
    pub fn start(bed: &Testbed, device_args: &[&str], extra: &[&str], ready: &str) -> TapEcho {
        let binary = tap_echo_binary();
        let stack_ip = bed.stack_ip.to_string();
        let (ip_arg, host_arg) = (format!("{stack_ip}/24"), format!("{}/24", bed.host_ip));
        let mac_arg = bed.stack_mac.to_string();
        let mut args = vec![binary.to_str().expect("UTF-8 path")];
        args.extend_from_slice(device_args);
        args.extend_from_slice(&["--ip", &ip_arg, "--host-ip", &host_arg, "--mac", &mac_arg]);
        args.extend_from_slice(extra);
        let mut cmd = bed.ns.command(&args);
        cmd.env("RUST_LOG", "info").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut server = ChildGuard::new(cmd.spawn().expect("start tap_echo"));
        let stdout = lines_of(server.child().stdout.take().expect("stdout"));
        let stderr = lines_of(server.child().stderr.take().expect("stderr"));
        let line = stdout.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|e| {
            let log: Vec<String> = stderr.try_iter().collect();
            panic!("tap_echo did not print its ready line ({e}); stderr: {log:?}")
        });
        assert!(line.starts_with(&format!("tap_echo: ready on {ready}")), "ready line: {line}");
        TapEcho { server, stdout, stderr }
    }
}

/// The tap_echo example serves a Linux client in `bed`'s namespace: 1 MiB TCP echo from Python
/// (hash compared), 1 MiB to discard from nc, UDP echo, ping, 8 concurrent echo connections, and
/// a clean exit on SIGTERM with each connection's byte counts in the log. `device_args` select the
/// device (`--tap NAME` or `--dpdk 'EAL ARGS'`); the ready line must start with `ready`.
pub fn tap_echo_serves_nc_and_python(bed: &Testbed, device_args: &[&str], ready: &str) {
    const PAYLOAD: usize = 1 << 20;
    const CONCURRENT: usize = 8;
    const CONCURRENT_BYTES: usize = 200_000;
    let stack_ip = bed.stack_ip.to_string();
    let TapEcho { mut server, stderr, .. } = TapEcho::start(bed, device_args, &[], ready);

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
pub fn echo_once(stream: TcpStream, seed: u64, len: usize) -> std::io::Result<bool> {
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
