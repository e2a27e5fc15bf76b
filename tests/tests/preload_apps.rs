//! Unmodified applications on SlimTCP: Debian's own `iperf3`, `redis-server`,
//! `redis-benchmark`, `nginx` and `curl` binaries, started with
//! `LD_PRELOAD=target/release/libslimtcp_preload.so SLIMTCP_DEVICE=vhost-user:SOCKET`, talk to
//! the Linux kernel on the tenant's TAP through a real `slimtcp-vhost`, in both roles.
//!
//! Each test has its own namespace, TAP and backend; they run one at a time (the backend's
//! worker busy-polls a core of the two).

mod e2e;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use e2e::{namespace_and_dir, TempDir};
use serde_json::Value;
use slimtcp_system_tests::{iperf3, profile_dir, slimtcp_vhost_bin};
use slimtcp_testkit::netns::{ChildGuard, Netns};

/// The tenant's address and the kernel's end of its TAP link.
const GUEST: &str = "10.0.0.2";
const HOST: &str = "10.0.0.1";
/// How far iperf3's server count may trail its client's: the server stops counting when told
/// the test ended, with data still in flight (between two Linux kernels too).
const IPERF_IN_FLIGHT: u64 = 16 << 20;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A backend serving one tenant on a TAP in its own namespace.
struct Bench {
    ns: Netns,
    dir: TempDir,
    socket: PathBuf,
    _backend: ChildGuard,
}

impl Bench {
    fn start(tag: &str) -> Bench {
        Bench::start_with(&[], tag)
    }

    /// With extra backend arguments.
    fn start_with(extra: &[&str], tag: &str) -> Bench {
        let (ns, dir) = namespace_and_dir(tag);
        let socket = dir.0.join("tenant.sock");
        let tap = Netns::unique_ifname("pre");
        let log = std::fs::File::create(dir.0.join("backend.log")).expect("log file");
        let bin = slimtcp_vhost_bin();
        let child = ns
            .command(&[
                bin.to_str().expect("utf-8 path"),
                "--socket",
                socket.to_str().expect("utf-8 path"),
                "--tap",
                &tap,
                "--ip",
                &format!("{GUEST}/24"),
                "--host-ip",
                &format!("{HOST}/24"),
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start slimtcp-vhost");
        let backend = ChildGuard::new(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(Instant::now() < deadline, "the backend never made {}", socket.display());
            std::thread::sleep(Duration::from_millis(20));
        }
        Bench { ns, dir, socket, _backend: backend }
    }

    /// `args` run in the namespace by the kernel alone.
    fn kernel(&self, args: &[&str]) -> Command {
        self.ns.command(args)
    }

    /// `args` run in the namespace with the preload library.
    fn preloaded(&self, args: &[&str]) -> Command {
        let mut cmd = self.ns.command(args);
        cmd.env("LD_PRELOAD", preload_lib())
            .env("SLIMTCP_DEVICE", format!("vhost-user:{}", self.socket.display()))
            .env("SLIMTCP_LOG", "info");
        cmd
    }

    fn backend_log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("backend.log")).unwrap_or_default()
    }
}

/// The library under test, as `cargo build --release -p slimtcp-preload` writes it.
fn preload_lib() -> PathBuf {
    let lib = profile_dir().join("libslimtcp_preload.so");
    assert!(
        lib.exists(),
        "{} is missing: cargo build --release -p slimtcp-preload (make test does)",
        lib.display()
    );
    lib
}

/// Runs `cmd` to the end within `limit`, returning its output (killed and failed after it).
fn run(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // SAFETY: signals a child we started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {limit:?}");
        }
    }
}

/// A server started in the background, stopped (SIGTERM, then waited for) when dropped.
struct Server(Option<std::process::Child>);

impl Server {
    fn start(mut cmd: Command, log: &Path) -> Server {
        let out = std::fs::File::create(log).expect("log file");
        let err = out.try_clone().expect("log file");
        Server(Some(cmd.stdout(out).stderr(err).spawn().expect("start server")))
    }

    /// Waits for the server to exit by itself (iperf3 -1), returning its exit status.
    fn wait(mut self, limit: Duration) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("child");
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the server did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            // SAFETY: signals a child we started.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until something in `ns` listens on TCP `port`.
fn wait_listening(ns: &Netns, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = ns.exec_ok(&["ss", "-Htln", &format!("sport = :{port}")]).unwrap_or_default();
        if !out.trim().is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for a preloaded server: its banner line, then a short settle for its listen call.
fn wait_banner(log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains("slimtcp-preload") && text.contains("attached to vhost-user:") {
            std::thread::sleep(Duration::from_millis(300));
            return;
        }
        assert!(Instant::now() < deadline, "no banner in {}: {text}", log.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The client's sent bytes and the server's received bytes of one iperf3 TCP run agree.
fn assert_counts_agree(client: &Value, server: &Value, streams: usize) {
    let (sent, received) = iperf3::tcp_bytes(client, server);
    assert!(sent > 10 << 20, "only {sent} bytes sent");
    assert!(received <= sent, "the server received {received} of {sent} bytes sent");
    assert!(sent - received <= IPERF_IN_FLIGHT, "the server counted {received} of {sent} bytes");
    let n = client["end"]["streams"].as_array().map_or(0, Vec::len);
    assert_eq!(n, streams, "client streams");
    for s in client["end"]["streams"].as_array().into_iter().flatten() {
        assert!(iperf3::number(s, &["sender", "bytes"]) > 0, "a stream sent nothing: {s}");
    }
    eprintln!("iperf3: {streams} streams, client sent {sent} B, server received {received} B");
}

#[test]
fn iperf3_sends_and_receives_tcp_through_the_preload_library() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let b = Bench::start("preip");
    let limit = Duration::from_secs(60);

    // Preloaded client, kernel server.
    let srv_log = b.dir.0.join("iperf3-kernel-server.json");
    let server = Server::start(b.kernel(&["iperf3", "-s", "-4", "-1", "-J", "-B", HOST]), &srv_log);
    wait_listening(&b.ns, 5201);
    let out = run(b.preloaded(&["iperf3", "-c", HOST, "-t", "5", "-J"]), limit);
    assert!(out.status.success(), "preloaded iperf3 -c: {}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("attached to vhost-user:"), "no banner: {stderr}");
    assert!(server.wait(limit).success());
    let client = iperf3::report(&String::from_utf8_lossy(&out.stdout), "client");
    let server = iperf3::report(&std::fs::read_to_string(&srv_log).expect("server output"), "server");
    assert_counts_agree(&client, &server, 1);
    assert_eq!(client["start"]["connected"][0]["local_host"], GUEST, "the client's address is the tenant's");

    // Preloaded server, kernel client.
    let srv_log = b.dir.0.join("iperf3-preloaded-server.json");
    let server = Server::start(b.preloaded(&["iperf3", "-s", "-4", "-1", "-J"]), &srv_log);
    wait_banner(&srv_log);
    let out = run(b.kernel(&["iperf3", "-c", GUEST, "-t", "5", "-J"]), limit);
    assert!(out.status.success(), "kernel iperf3 -c: {}", String::from_utf8_lossy(&out.stdout));
    assert!(server.wait(limit).success());
    let client = iperf3::report(&String::from_utf8_lossy(&out.stdout), "client");
    // The banner is on stderr, in the same file: iperf3::report skips it.
    let server = iperf3::report(&std::fs::read_to_string(&srv_log).expect("server output"), "server");
    assert_counts_agree(&client, &server, 1);

    // Eight streams.
    let srv_log = b.dir.0.join("iperf3-kernel-server-p8.json");
    let server = Server::start(b.kernel(&["iperf3", "-s", "-4", "-1", "-J", "-B", HOST]), &srv_log);
    wait_listening(&b.ns, 5201);
    let out = run(b.preloaded(&["iperf3", "-c", HOST, "-t", "3", "-P", "8", "-J"]), limit);
    assert!(out.status.success(), "preloaded iperf3 -P 8: {}", String::from_utf8_lossy(&out.stderr));
    assert!(server.wait(limit).success());
    let client = iperf3::report(&String::from_utf8_lossy(&out.stdout), "client");
    let server = iperf3::report(&std::fs::read_to_string(&srv_log).expect("server output"), "server");
    assert_counts_agree(&client, &server, 8);
    drop(b);
}

/// One iperf3 UDP run of 3 s at 50 Mbit/s: the server accounts for the client's datagrams (by
/// sequence number; loss is allowed, UDP has no retransmission).
fn iperf3_udp(b: &Bench, preloaded_server: bool) {
    let limit = Duration::from_secs(60);
    let (srv_log, target) = if preloaded_server {
        (b.dir.0.join("iperf3-udp-preloaded-server.json"), GUEST)
    } else {
        (b.dir.0.join("iperf3-udp-kernel-server.json"), HOST)
    };
    let server = if preloaded_server {
        let s = Server::start(b.preloaded(&["iperf3", "-s", "-4", "-1", "-J"]), &srv_log);
        wait_banner(&srv_log);
        s
    } else {
        let s = Server::start(b.kernel(&["iperf3", "-s", "-4", "-1", "-J", "-B", HOST]), &srv_log);
        wait_listening(&b.ns, 5201);
        s
    };
    let args = ["iperf3", "-c", target, "-u", "-b", "50M", "-t", "3", "-J"];
    let out = run(if preloaded_server { b.kernel(&args) } else { b.preloaded(&args) }, limit);
    assert!(
        out.status.success(),
        "iperf3 -u: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(server.wait(limit).success());
    let client = iperf3::report(&String::from_utf8_lossy(&out.stdout), "client");
    let server = iperf3::report(&std::fs::read_to_string(&srv_log).expect("server output"), "server");
    let sent = iperf3::number(&client, &["end", "sum", "packets"]);
    let total = iperf3::number(&server, &["end", "sum", "packets"]);
    let lost = iperf3::number(&server, &["end", "sum", "lost_packets"]);
    eprintln!(
        "iperf3 UDP (preloaded {}): client sent {sent} datagrams, server saw {total} ({lost} lost)",
        if preloaded_server { "server" } else { "client" }
    );
    assert!(sent > 1000, "only {sent} datagrams");
    // The server counts by sequence number until the test ends; the last datagrams may still
    // be on their way then (between two kernels too).
    assert!(total <= sent && sent - total <= sent / 50, "the server counted {total} of {sent} datagrams");
    assert!(lost < total, "every datagram lost");
}

#[test]
fn iperf3_udp_client_and_server_through_the_preload_library() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let b = Bench::start("preudp");
    iperf3_udp(&b, false);
    // The server connects its socket to the client and binds a fresh one to the same port.
    iperf3_udp(&b, true);
}

/// Runs redis-benchmark (`preload`: with the library) against `host`; checks both tests ran
/// with no error.
fn redis_benchmark(b: &Bench, preload: bool, host: &str) {
    let args =
        ["redis-benchmark", "-h", host, "-p", "6379", "-c", "50", "-n", "20000", "-t", "set,get", "--csv"];
    let cmd = if preload { b.preloaded(&args) } else { b.kernel(&args) };
    let out = run(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "redis-benchmark: {stdout}{stderr}");
    assert!(!stdout.contains("rror") && !stderr.contains("rror"), "errors: {stdout}{stderr}");
    for test in ["SET", "GET"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("\"{test}\"")))
            .unwrap_or_else(|| panic!("no {test}: {stdout}"));
        let rps: f64 = line.split(',').nth(1).and_then(|v| v.trim_matches('"').parse().ok()).expect("rps");
        assert!(rps > 0.0, "{line}");
        eprintln!(
            "redis-benchmark {test} ({}): {rps} requests/s",
            if preload { "preloaded client" } else { "preloaded server" }
        );
    }
}

#[test]
fn redis_serves_and_is_served_through_the_preload_library() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let b = Bench::start("preredis");
    let redis = |bind: &str| {
        vec![
            "redis-server",
            "--port",
            "6379",
            "--bind",
            bind,
            "--protected-mode",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };

    // Preloaded server, kernel benchmark.
    let args = redis("0.0.0.0");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let log = b.dir.0.join("redis-preloaded.log");
    let server = Server::start(b.preloaded(&args), &log);
    wait_banner(&log);
    redis_benchmark(&b, false, GUEST);
    // A value written by the benchmark's kernel side is read back by a kernel client.
    let out = run(b.kernel(&["redis-cli", "-h", GUEST, "DBSIZE"]), Duration::from_secs(20));
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).trim().parse::<u64>().is_ok_and(|n| n > 0)
    );
    drop(server);

    // Kernel server, preloaded benchmark.
    let args = redis(HOST);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = Server::start(b.kernel(&args), &b.dir.0.join("redis-kernel.log"));
    wait_listening(&b.ns, 6379);
    redis_benchmark(&b, true, HOST);
    drop(server);
}

/// nginx's configuration: one server on the tenant's address (SlimTCP) and one on loopback
/// (the kernel: the same epoll set holds both), or on `listen` alone.
fn nginx_conf(dir: &Path, listen: &[&str]) -> PathBuf {
    let root = dir.join("www");
    let listens: String = listen.iter().map(|l| format!("        listen {l};\n")).collect();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
         events {{ worker_connections 256; }}\nhttp {{\n    access_log off;\n    sendfile on;\n    tcp_nopush on;\n\
         \x20   client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi;\n\
         \x20   uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n    server {{\n{listens}        root {r};\n    }}\n}}\n",
        d = dir.display(),
        r = root.display()
    );
    let path = dir.join(format!("nginx-{}.conf", listen.len()));
    std::fs::write(&path, conf).expect("nginx.conf");
    path
}

/// Writes `len` bytes of a pattern to `path`, returning their SHA-256.
fn write_file(path: &Path, len: u64) -> String {
    use std::io::Write as _;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("file"));
    let mut gen = slimtcp_testkit::data::PatternStream::new(0x5eed);
    let mut sha = slimtcp_testkit::data::StreamHasher::new();
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = (chunk.len() as u64).min(left) as usize;
        gen.fill(&mut chunk[..n]);
        sha.update(&chunk[..n]);
        f.write_all(&chunk[..n]).expect("write");
        left -= n as u64;
    }
    f.flush().expect("flush");
    hex(&sha.finish())
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs a curl command line from [`curl_args`]: (HTTP code, bytes, SHA-256 of the body).
fn curl(cmd: Command) -> (String, u64, String) {
    let out = run(cmd, Duration::from_secs(300));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "curl: {stderr}");
    let sha =
        String::from_utf8_lossy(&out.stdout).split_whitespace().next().expect("sha256sum output").to_string();
    let meta = stderr
        .lines()
        .find_map(|l| l.strip_prefix("HTTP "))
        .unwrap_or_else(|| panic!("no write-out: {stderr}"));
    let (code, size) = meta.split_once(' ').expect("code and size");
    (code.to_string(), size.trim().parse().expect("size"), sha)
}

/// curl fetching `url` into sha256sum, its code and size on stderr (`HTTP 200 1234`).
fn curl_args(url: &str) -> Vec<String> {
    let script = format!("set -o pipefail; curl -sS --fail -w '%{{stderr}}HTTP %{{http_code}} %{{size_download}}\\n' {url} | sha256sum");
    vec!["bash".into(), "-c".into(), script]
}

#[test]
fn nginx_and_curl_move_exact_files_through_the_preload_library() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let b = Bench::start("prenginx");
    let www = b.dir.0.join("www");
    std::fs::create_dir_all(&www).expect("www");
    let big_len = 1u64 << 30;
    let big_sha = write_file(&www.join("big.bin"), big_len);
    let small_len = 64u64 << 20;
    let small_sha = write_file(&www.join("small.bin"), small_len);

    // Preloaded nginx (SlimTCP and loopback listeners in one epoll set), kernel curl.
    let conf = nginx_conf(&b.dir.0, &[&format!("{GUEST}:8080"), "127.0.0.1:8081"]);
    let log = b.dir.0.join("nginx-preloaded.log");
    let server = Server::start(
        b.preloaded(&["nginx", "-c", conf.to_str().expect("utf-8"), "-p", b.dir.0.to_str().expect("utf-8")]),
        &log,
    );
    wait_banner(&log);
    wait_listening(&b.ns, 8081);
    let fetch = |url: &str, preload: bool| {
        let args = curl_args(url);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(if preload { b.preloaded(&args) } else { b.kernel(&args) })
    };
    let (code, size, sha) = fetch(&format!("http://{GUEST}:8080/big.bin"), false);
    assert_eq!((code.as_str(), size, sha.as_str()), ("200", big_len, big_sha.as_str()), "1 GiB over SlimTCP");
    let (code, size, sha) = fetch("http://127.0.0.1:8081/small.bin", false);
    assert_eq!(
        (code.as_str(), size, sha.as_str()),
        ("200", small_len, small_sha.as_str()),
        "the loopback listener"
    );
    drop(server);
    let errors = std::fs::read_to_string(b.dir.0.join("error.log")).unwrap_or_default();
    assert!(!errors.contains("[alert]") && !errors.contains("[crit]"), "nginx: {errors}");

    // Kernel nginx, preloaded curl.
    let conf = nginx_conf(&b.dir.0, &[&format!("{HOST}:8080")]);
    let server = Server::start(
        b.kernel(&["nginx", "-c", conf.to_str().expect("utf-8"), "-p", b.dir.0.to_str().expect("utf-8")]),
        &b.dir.0.join("nginx-kernel.log"),
    );
    wait_listening(&b.ns, 8080);
    let (code, size, sha) = fetch(&format!("http://{HOST}:8080/small.bin"), true);
    assert_eq!((code.as_str(), size, sha.as_str()), ("200", small_len, small_sha.as_str()), "preloaded curl");
    drop(server);
    assert!(!b.backend_log().contains("panicked"), "{}", b.backend_log());
}

/// The peer and checker scripts of the semantics test.
fn script(name: &str) -> String {
    slimtcp_system_tests::workspace_root()
        .join("tests/preload")
        .join(name)
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

#[test]
fn python_sockets_keep_linux_semantics_through_the_preload_library() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let b = Bench::start_with(&["--queues", "4"], "presem");
    let sinks = b.dir.0.join("sinks");
    std::fs::create_dir_all(&sinks).expect("sink dir");
    let peer_log = b.dir.0.join("peer.log");
    let _peer = Server::start(
        b.kernel(&["python3", &script("peer.py"), HOST, sinks.to_str().expect("utf-8")]),
        &peer_log,
    );
    wait_listening(&b.ns, 7004);

    let out = run(
        b.preloaded(&["python3", &script("semantics.py"), GUEST, HOST, sinks.to_str().expect("utf-8")]),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "semantics.py failed:\n{stdout}\n{stderr}");
    for check in [
        "echo",
        "peek-fionread",
        "rcvtimeo",
        "dup",
        "refused",
        "poll-mixed",
        "epoll-mixed",
        "listen-accept",
        "loopback-kernel",
        "udp",
        "threads",
        "fork",
        "close-range",
    ] {
        assert!(stdout.lines().any(|l| l == format!("ok {check}")), "no ok {check}:\n{stdout}\n{stderr}");
    }
    assert!(stderr.contains("(4 queue pairs)"), "{stderr}");

    // A program that exits without closing: its data still arrives, then the end of stream.
    let len = 8 << 20;
    let sender = format!(
        "import socket, os\ns = socket.create_connection(('{HOST}', 7002))\ns.sendall(b'z' * {len})\nos._exit(0)\n"
    );
    let out = run(b.preloaded(&["python3", "-c", &sender]), Duration::from_secs(60));
    assert!(out.status.success(), "sender: {}", String::from_utf8_lossy(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(20);
    let record = loop {
        let done = std::fs::read_dir(&sinks)
            .expect("sinks")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "txt"));
        if let Some(p) = done {
            break std::fs::read_to_string(p).expect("sink record");
        }
        assert!(Instant::now() < deadline, "the sink never saw the connection end");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(record.trim(), format!("{len} 1"), "bytes received and end of stream");
}

#[test]
fn a_failed_attach_fails_the_first_socket_clearly_and_falls_back_only_when_asked() {
    let missing = std::env::temp_dir().join(format!("slimtcp-no-such-{}.sock", std::process::id()));
    let py = "import socket\ntry:\n    s = socket.socket()\n    print('made', s.getsockname())\nexcept OSError as e:\n    print('errno', e.errno)\n";
    let mut cmd = Command::new("python3");
    cmd.args(["-c", py])
        .env("LD_PRELOAD", preload_lib())
        .env("SLIMTCP_DEVICE", format!("vhost-user:{}", missing.display()));
    let out = run(cmd, Duration::from_secs(30));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.trim(), format!("errno {}", libc::ENETDOWN), "{stderr}");
    assert!(
        stderr.contains("cannot attach to vhost-user:") && stderr.contains("SLIMTCP_FALLBACK=1"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");

    let mut cmd = Command::new("python3");
    cmd.args(["-c", py])
        .env("LD_PRELOAD", preload_lib())
        .env("SLIMTCP_DEVICE", format!("vhost-user:{}", missing.display()))
        .env("SLIMTCP_FALLBACK", "1");
    let out = run(cmd, Duration::from_secs(30));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.trim(), "made ('0.0.0.0', 0)", "a kernel socket: {stderr}");
    assert!(stderr.contains("every socket goes to the kernel"), "{stderr}");

    let mut cmd = Command::new("python3");
    cmd.args(["-c", py]).env("LD_PRELOAD", preload_lib()).env("SLIMTCP_DEVICE", "tap:x");
    let out = run(cmd, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("SLIMTCP_DEVICE=\"tap:x\"") && stderr.contains("use pci"), "{stderr}");
    // Nothing but AF_INET sockets is touched: files, pipes and AF_UNIX work as before.
    let mut cmd = Command::new("python3");
    cmd.args(["-c", "import socket, os\na, b = socket.socketpair()\na.send(b'x')\nr, w = os.pipe()\nos.write(w, b.recv(1))\nprint(os.read(r, 1).decode())"])
        .env("LD_PRELOAD", preload_lib())
        .env("SLIMTCP_DEVICE", "tap:x");
    let out = run(cmd, Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "x");
    assert!(
        out.stderr.is_empty(),
        "no attach without an AF_INET socket: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
