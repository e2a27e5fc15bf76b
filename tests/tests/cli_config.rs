//! The daemon as operators run it: `slimtcp-vhost --config FILE` with a `[daemon]` table (control
//! socket, Prometheus endpoint) and `[[tenant]]` tables, against the Linux kernel on each
//! tenant's TAP. Guest-library apps attach to the tenants' sockets; the operator's tools (curl
//! on the metrics, `slimtcp-vhost stats`, `slimtcp-vhost capture`, tshark, signals) watch and
//! steer the running process.

mod e2e;

use e2e::namespace_and_dir;

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use slimtcp::api::{Proto, Shutdown, SocketApi, SocketError};
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_system_tests::slimtcp_vhost_bin;
use slimtcp_testkit::data::pattern;
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::netns::{ChildGuard, Netns};
use slimtcp_testkit::wait::wait_for;
use slimtcp_vhost::stats::TenantStats;

/// How long anything in these tests may take.
const LIMIT: Duration = Duration::from_secs(60);
/// The metrics endpoint, on the namespace's loopback.
const METRICS: &str = "127.0.0.1:9464";

/// A `[[tenant]]` table: tenant `name` on TAP `tap`, subnet 10.`net`.0/24.
fn tenant_table(dir: &Path, name: &str, tap: &str, net: (u8, u8)) -> String {
    let (a, b) = net;
    format!(
        "[[tenant]]\nname = \"{name}\"\nsocket = \"{}\"\ntap = \"{tap}\"\nip = \"10.{a}.{b}.2/24\"\n\
         host-ip = \"10.{a}.{b}.1/24\"\n\n",
        dir.join(format!("{name}.sock")).display()
    )
}

/// The daemon table with a control socket in `dir` and the metrics endpoint.
fn daemon_table(dir: &Path) -> String {
    format!("[daemon]\ncontrol = \"{}\"\nmetrics = \"{METRICS}\"\n\n", dir.join("control.sock").display())
}

/// The daemon, running in `ns` on `config`, its log in `dir/daemon.log`.
struct Daemon {
    child: ChildGuard,
    log: PathBuf,
}

impl Daemon {
    fn start(ns: &Netns, dir: &Path, config: &Path) -> Daemon {
        let log = dir.join("daemon.log");
        let err = std::fs::File::create(&log).expect("log file");
        let bin = slimtcp_vhost_bin();
        let child = ns
            .command(&[bin.to_str().expect("utf-8 path"), "--config", config.to_str().expect("utf-8 path")])
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("daemon process");
        Daemon { child: ChildGuard::new(child), log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid with a valid signal number.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
        assert_eq!(rc, 0, "kill");
    }

    /// Waits for the process to exit; its exit code and how long it took.
    fn wait_exit(&mut self) -> (Option<i32>, Duration) {
        let t0 = Instant::now();
        let child: &mut Child = self.child.child();
        let mut code = None;
        let exited = wait_for(LIMIT, || match child.try_wait() {
            Ok(Some(status)) => {
                code = status.code();
                true
            }
            _ => false,
        });
        assert!(exited, "the daemon did not exit; its log:\n{}", self.log());
        (code, t0.elapsed())
    }
}

/// Waits for `tap` to have the host address `host` (ADDR/PREFIX).
fn has_address(ns: &Netns, tap: &str, host: &str) -> bool {
    wait_for(LIMIT, || {
        ns.exec_ok(&["ip", "-4", "-o", "addr", "show", "dev", tap]).is_ok_and(|o| o.contains(host))
    })
}

/// Waits for `socket` and attaches a guest-library instance to it.
fn attach(socket: &Path) -> GuestSockets {
    assert!(wait_for(LIMIT, || socket.exists()), "no socket {}", socket.display());
    GuestSockets::connect_vhost_user(socket, GuestConfig::default()).expect("guest attaches")
}

/// The guest sends the first `len` bytes of stream `seed` to `to` and closes; fails with the
/// first error (a reset during a stop).
fn send_stream(api: &mut GuestSockets, to: SocketAddrV4, seed: u64, len: u64) -> Result<(), SocketError> {
    let fd = api.socket(Proto::Tcp)?;
    api.connect(fd, to)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut off = 0u64;
    while off < len {
        let n = buf.len().min((len - off) as usize);
        pattern(seed, off, &mut buf[..n]);
        let mut sent = 0;
        while sent < n {
            sent += api.send(fd, &buf[sent..n])?;
        }
        off += n as u64;
    }
    api.shutdown(fd, Shutdown::Write)?;
    let mut b = [0u8; 1];
    let _ = api.recv(fd, &mut b)?;
    api.close(fd)
}

/// GET `path` from the metrics endpoint with curl, inside `ns`.
fn scrape(ns: &Netns) -> String {
    ns.exec_ok(&["curl", "-sf", &format!("http://{METRICS}/metrics")]).expect("curl scrapes the metrics")
}

/// The value of metric line `name{tenant="t"}` in a scrape.
fn metric(text: &str, name: &str, tenant: &str) -> Option<u64> {
    let key = format!("{name}{{tenant=\"{tenant}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&key)).and_then(|v| v.trim().parse().ok())
}

/// `slimtcp-vhost stats --json` on `control`.
fn stats_json(control: &Path) -> Vec<TenantStats> {
    let out = Command::new(slimtcp_vhost_bin())
        .args(["stats", "--control", control.to_str().expect("utf-8 path"), "--json"])
        .output()
        .expect("stats runs");
    assert!(out.status.success(), "stats: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stats --json is JSON")
}

#[test]
fn a_two_tenant_config_file_serves_two_guests_with_metrics_stats_and_capture() {
    slimtcp_testkit::require_netns!();
    let (ns, dir) = namespace_and_dir("cfgtwo");
    let (tap_a, tap_b) = (Netns::unique_ifname("cfa"), Netns::unique_ifname("cfb"));
    let config = dir.0.join("slimtcp.toml");
    let text = daemon_table(&dir.0)
        + &tenant_table(&dir.0, "alpha", &tap_a, (82, 1))
        + &tenant_table(&dir.0, "beta", &tap_b, (82, 2));
    std::fs::write(&config, text).expect("config file");
    let check = Command::new(slimtcp_vhost_bin())
        .args(["check", "--config", config.to_str().expect("utf-8 path")])
        .output()
        .expect("check runs");
    assert!(check.status.success(), "check: {}", String::from_utf8_lossy(&check.stderr));
    let daemon = Daemon::start(&ns, &dir.0, &config);
    let control = dir.0.join("control.sock");
    assert!(wait_for(LIMIT, || control.exists()), "no control socket; log:\n{}", daemon.log());

    // Both TAPs and host addresses are there before any VMM connects.
    for (tap, host) in [(&tap_a, "10.82.1.1/24"), (&tap_b, "10.82.2.1/24")] {
        assert!(has_address(&ns, tap, host), "{tap} has {host} before any VMM; log:\n{}", daemon.log());
    }

    // Alpha sends 32 MiB while a capture of 200 frames runs and beta reconnects twice.
    const LEN: u64 = 32 << 20;
    let host_a = SocketAddrV4::new(Ipv4Addr::new(10, 82, 1, 1), 5001);
    let (_, receiver) =
        linux_peer::spawn_tcp_server_recv(&ns, SocketAddr::V4(host_a), LIMIT).expect("receiver");
    let sock_a = dir.0.join("alpha.sock");
    let sender = std::thread::spawn(move || {
        let mut a = attach(&sock_a);
        send_stream(&mut a, host_a, 41, LEN).expect("alpha's transfer");
        a
    });
    let pcap = dir.0.join("alpha.pcap");
    let capture = Command::new(slimtcp_vhost_bin())
        .args(["capture", "--control", control.to_str().expect("utf-8 path"), "alpha"])
        .args(["--file", pcap.to_str().expect("utf-8 path"), "--count", "200", "--seconds", "30"])
        .output()
        .expect("capture runs");
    assert!(capture.status.success(), "capture: {}", String::from_utf8_lossy(&capture.stderr));
    let (_, echo) = linux_peer::spawn_tcp_echo_server(
        &ns,
        SocketAddr::from((Ipv4Addr::new(10, 82, 2, 1), 7000)),
        2,
        LIMIT,
    )
    .expect("echo server");
    for seed in [1, 2] {
        let mut b = attach(&dir.0.join("beta.sock"));
        e2e::echo_messages(&mut b, SocketAddrV4::new(Ipv4Addr::new(10, 82, 2, 1), 7000), seed, 16, 4096);
    }
    assert_eq!(echo.join().expect("echo server").len(), 2, "beta's two connections");
    let mid = scrape(&ns);
    let a = sender.join().expect("alpha's guest");
    let received = receiver.join().expect("receiver");
    assert!(received.matches_pattern(41, LEN), "the kernel received exactly alpha's stream: {received:?}");

    // The metrics match what the kernel received (the worker publishes when it goes idle).
    let sent = |text: &str| {
        metric(text, "slimtcp_tx_bytes_by_reference_total", "alpha").unwrap_or(0)
            + metric(text, "slimtcp_tx_bytes_copied_total", "alpha").unwrap_or(0)
    };
    assert!(sent(&mid) <= LEN, "mid-transfer: {} of {LEN}", sent(&mid));
    let mut last = String::new();
    let settled = wait_for(LIMIT, || {
        last = scrape(&ns);
        sent(&last) == received.bytes
    });
    assert!(
        settled,
        "alpha's payload in the metrics {} != {} received:\n{last}",
        sent(&last),
        received.bytes
    );
    assert!(metric(&last, "slimtcp_tcp_segments_out_total", "alpha").unwrap_or(0) >= LEN / 1460);
    assert_eq!(metric(&last, "slimtcp_vmm_connected", "alpha"), Some(1));
    assert!(metric(&last, "slimtcp_sessions_ended_total", "beta") >= Some(1), "beta reconnected");
    let stats = stats_json(&control);
    let alpha = stats.iter().find(|t| t.tenant == "alpha").expect("alpha in stats");
    assert_eq!(alpha.tx_bytes_by_reference + alpha.tx_bytes_copied, received.bytes, "stats --json agrees");
    assert_eq!(stats.len(), 2);
    drop(a);

    // `stats --watch` refreshes its table until stopped.
    let watch_out = dir.0.join("watch.txt");
    let watch = Command::new(slimtcp_vhost_bin())
        .args(["stats", "--control", control.to_str().expect("utf-8 path"), "--watch", "--interval", "0.1"])
        .stdout(std::fs::File::create(&watch_out).expect("watch output"))
        .spawn()
        .expect("stats --watch");
    let watch = ChildGuard::new(watch);
    let refreshed = wait_for(LIMIT, || {
        std::fs::read_to_string(&watch_out).is_ok_and(|t| t.matches("TENANT").count() >= 3)
    });
    drop(watch);
    let table = std::fs::read_to_string(&watch_out).unwrap_or_default();
    assert!(refreshed, "three refreshes: {table:?}");
    assert!(
        table.contains("\x1b[2J") && table.contains("\nalpha ") && table.contains("\nbeta "),
        "{table:?}"
    );

    // The capture: 200 frames, every one well formed for tshark.
    let report = slimtcp_testkit::check::check_wellformed(&pcap).expect("tshark reads the capture");
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(report.packets, 200, "{report:?}");
    let out = String::from_utf8_lossy(&capture.stdout);
    assert!(out.contains("200 frames of alpha captured"), "{out}");
}

#[test]
fn sighup_adds_a_tenant_without_disturbing_a_transfer_and_sigterm_drains_and_exits_0() {
    slimtcp_testkit::require_netns!();
    let (ns, dir) = namespace_and_dir("cfgsig");
    let (tap_a, tap_b) = (Netns::unique_ifname("csa"), Netns::unique_ifname("csb"));
    let config = dir.0.join("slimtcp.toml");
    let one = daemon_table(&dir.0) + &tenant_table(&dir.0, "alpha", &tap_a, (83, 1));
    std::fs::write(&config, &one).expect("config file");
    let mut daemon = Daemon::start(&ns, &dir.0, &config);
    assert!(has_address(&ns, &tap_a, "10.83.1.1/24"), "log:\n{}", daemon.log());

    // Alpha's exact transfer goes on through a reload that adds beta.
    const LEN: u64 = 24 << 20;
    let host_a = SocketAddrV4::new(Ipv4Addr::new(10, 83, 1, 1), 5001);
    let (_, receiver) =
        linux_peer::spawn_tcp_server_recv(&ns, SocketAddr::V4(host_a), LIMIT).expect("receiver");
    let sock_a = dir.0.join("alpha.sock");
    let mut a = attach(&sock_a);
    let sender = std::thread::spawn(move || {
        send_stream(&mut a, host_a, 43, LEN).expect("alpha's transfer");
        a
    });
    let mut f = std::fs::OpenOptions::new().append(true).open(&config).expect("config file");
    f.write_all(tenant_table(&dir.0, "beta", &tap_b, (83, 2)).as_bytes()).expect("add beta");
    drop(f);
    daemon.signal(libc::SIGHUP);
    assert!(has_address(&ns, &tap_b, "10.83.2.1/24"), "beta's TAP; log:\n{}", daemon.log());
    let mut b = attach(&dir.0.join("beta.sock"));
    let (_, echo) = linux_peer::spawn_tcp_echo_server(
        &ns,
        SocketAddr::from((Ipv4Addr::new(10, 83, 2, 1), 7000)),
        1,
        LIMIT,
    )
    .expect("echo server");
    e2e::echo_messages(&mut b, SocketAddrV4::new(Ipv4Addr::new(10, 83, 2, 1), 7000), 3, 16, 4096);
    echo.join().expect("echo server");
    let mut a = sender.join().expect("alpha's guest");
    assert!(
        receiver.join().expect("receiver").matches_pattern(43, LEN),
        "alpha's transfer exact through SIGHUP"
    );
    assert!(daemon.log().contains("SIGHUP: tenant beta added"), "{}", daemon.log());

    // SIGTERM while both send without end: every chain back, resets sent, exit 0.
    let endless = u64::MAX / 2;
    let (_, sink_a) = linux_peer::spawn_tcp_server_recv(&ns, SocketAddr::V4(host_a), LIMIT).expect("sink");
    let host_b = SocketAddrV4::new(Ipv4Addr::new(10, 83, 2, 1), 5002);
    let (_, sink_b) = linux_peer::spawn_tcp_server_recv(&ns, SocketAddr::V4(host_b), LIMIT).expect("sink");
    let ta = std::thread::spawn(move || send_stream(&mut a, host_a, 5, endless));
    let tb = std::thread::spawn(move || send_stream(&mut b, host_b, 6, endless));
    let flowing = wait_for(LIMIT, || {
        let s = stats_json(&dir.0.join("control.sock"));
        s.iter().all(|t| t.tx_bytes_by_reference > (1 << 20))
    });
    assert!(flowing, "both tenants send");
    daemon.signal(libc::SIGTERM);
    let (code, took) = daemon.wait_exit();
    let log = daemon.log();
    assert_eq!(code, Some(0), "exit 0 after SIGTERM; log:\n{log}");
    assert!(took < Duration::from_secs(10), "the drain is bounded: {took:?}");
    eprintln!("SIGTERM to exit: {took:?}");
    for r in [ta.join().expect("alpha's sender"), tb.join().expect("beta's sender")] {
        assert!(r.is_err(), "the endless sends end with the daemon: {r:?}");
    }
    let drained: Vec<&str> = log.lines().filter(|l| l.contains("tenant stopping:")).collect();
    assert_eq!(drained.len(), 2, "both tenants drained:\n{log}");
    for line in drained {
        eprintln!("{line}");
        assert!(line.contains(", 0 still held"), "every transmit chain back: {line}");
        assert!(!line.contains(" 0 sockets reset"), "the connections were reset: {line}");
    }
    // The kernel's side saw the connections end (reset) rather than hang.
    for sink in [sink_a, sink_b] {
        let _ = sink.join();
    }
}

/// The CPU the thread named `name` of process `pid` may run on and last ran on, from /proc.
fn thread_cpus(pid: u32, name: &str) -> Option<(String, usize)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    for task in tasks.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let allowed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim().to_owned();
        // Field 39 of stat, counted after the parenthesised command name.
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        let processor = after.split_whitespace().nth(36)?.parse().ok()?;
        return Some((allowed, processor));
    }
    None
}

#[test]
fn under_taskset_a_tenants_worker_runs_on_its_core_and_a_core_outside_is_refused() {
    slimtcp_testkit::require_netns!();
    let allowed = slimtcp::cpu::current_affinity().expect("the test's CPU set");
    let last = (0..libc::CPU_SETSIZE as usize).filter(|&c| allowed.contains(c)).max().expect("a CPU");
    let (ns, dir) = namespace_and_dir("cfgcore");
    let tap = Netns::unique_ifname("cfc");
    let table = tenant_table(&dir.0, "alpha", &tap, (84, 1)) + &format!("core = {last}\n");
    let config = dir.0.join("slimtcp.toml");
    std::fs::write(&config, &table).expect("config file");
    let bin = slimtcp_vhost_bin();
    let (bin, config_s, cpu) =
        (bin.to_str().expect("utf-8"), config.to_str().expect("utf-8"), last.to_string());
    let log = std::fs::File::create(dir.0.join("daemon.log")).expect("log file");
    let child = ns
        .command(&["taskset", "-c", &cpu, bin, "--config", config_s])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("daemon under taskset");
    let daemon = ChildGuard::new(child);
    let mut guest = attach(&dir.0.join("alpha.sock"));
    let mut seen = None;
    let found = wait_for(LIMIT, || {
        seen = thread_cpus(daemon.id(), "alpha-worker");
        seen.is_some()
    });
    assert!(found, "no alpha-worker thread in /proc/{}", daemon.id());
    assert_eq!(seen, Some((cpu.clone(), last)), "the worker may run on, and runs on, CPU {last} only");
    let host = SocketAddrV4::new(Ipv4Addr::new(10, 84, 1, 1), 7000);
    let (_, echo) =
        linux_peer::spawn_tcp_echo_server(&ns, SocketAddr::V4(host), 1, LIMIT).expect("echo server");
    e2e::echo_messages(&mut guest, host, 9, 8, 4096);
    echo.join().expect("echo server");

    // A core outside the process's CPU set is refused before anything starts.
    if last > 0 {
        std::fs::write(&config, table.replace(&format!("core = {last}"), "core = 0")).expect("config file");
        let out =
            Command::new("taskset").args(["-c", &cpu, bin, "--config", config_s]).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(&format!("core: --core 0: this process may run on CPUs {last} only")), "{err}");
    }
}
