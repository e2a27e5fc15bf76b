//! The command line: every option in --help, one clear line per bad value, exit code 2.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out =
        Command::new(env!("CARGO_BIN_EXE_slimtcp-vhost")).args(args).output().expect("run slimtcp-vhost");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_explains_every_option() {
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for opt in [
        "--socket",
        "--tap",
        "--dpdk",
        "--ip",
        "--host-ip",
        "--gateway",
        "--mac",
        "--core",
        "--queues",
        "--tenant",
        "--no-seccomp",
    ] {
        assert!(out.contains(opt), "--help lacks {opt}:\n{out}");
    }
}

#[test]
fn bad_values_get_one_error_line_and_exit_code_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["--socket", "/tmp/s", "--ip", "10.0.0.1/24"], "exactly one of --tap"),
        (&["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0/24"], "not an IPv4 address"),
        (&["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/33"], "prefix length"),
        (
            &["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/24", "--host-ip", "10.0.0.1/24"],
            "own address",
        ),
        (
            &["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/24", "--gateway", "10.9.0.1"],
            "not on the subnet",
        ),
        (&["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/24", "--queues", "0"], "1 to 64"),
        (
            &["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/24", "--core", "100000"],
            "may run on CPUs",
        ),
        (
            &["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/24", "--mac", "01:00:00:00:00:01"],
            "unicast",
        ),
        (&["--socket", "/tmp/s", "--tap", "a/b", "--ip", "10.0.0.1/24"], "interface name"),
        (&["--tap", "t0", "--ip", "10.0.0.1/24"], "--socket is required"),
        (&["--socket", "/tmp/s", "--tap", "t0"], "--ip is required"),
        // Several tenants (--tenant specs).
        (&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24"], "exactly one of --tap"),
        (&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=t0,colour=red"], "unknown key \"colour\""),
        (&["--tenant", "socket=/tmp/a,tap=t0"], "--ip is required"),
        (&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=t0,ip=10.0.0.3/24"], "ip given twice"),
        (&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=t0,queues=65"], "1 to 64"),
        (&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=t0,mac=ff:ff:ff:ff:ff:ff"], "unicast"),
        (&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,port=0"], "needs --dpdk"),
        (
            &[
                "--tenant",
                "socket=/tmp/a,ip=10.0.0.2/24,tap=t0",
                "--tenant",
                "socket=/tmp/a,ip=10.0.1.2/24,tap=t1",
            ],
            "same socket /tmp/a",
        ),
        (
            &[
                "--tenant",
                "socket=/tmp/a,ip=10.0.0.2/24,tap=t0",
                "--tenant",
                "socket=/tmp/b,ip=10.0.1.2/24,tap=t0",
            ],
            "same TAP interface t0",
        ),
        (
            &[
                "--tenant",
                "socket=/tmp/a,ip=10.0.0.2/24,tap=t0,core=0",
                "--tenant",
                "socket=/tmp/b,ip=10.0.1.2/24,tap=t1,core=0",
            ],
            "same core 0",
        ),
        (&["--socket", "/tmp/s", "--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=t0"], "single-tenant form"),
    ];
    for (args, want) in cases {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line expected: {err}");
        assert!(err.contains(want), "{args:?}: {err:?} lacks {want:?}");
    }
}

/// Runs slimtcp-vhost under `taskset -c cpus` (the process's CPU affinity).
fn run_on_cpus(cpus: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new("taskset")
        .args(["-c", cpus, env!("CARGO_BIN_EXE_slimtcp-vhost")])
        .args(args)
        .output()
        .expect("run taskset");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_worker_core_is_checked_against_the_cpus_the_process_may_use_not_a_count() {
    // The highest core this test may use, alone: one CPU allowed, and yet a valid core however
    // high (as with isolcpus or a cpuset). The configuration is accepted; the start then fails
    // at the NIC, with exit code 1: `lo` is no TAP, so nothing is created.
    let allowed = slimtcp::cpu::current_affinity().expect("the test's CPU set");
    let last = (0..libc::CPU_SETSIZE as usize).filter(|&c| allowed.contains(c)).max().expect("a CPU");
    let (last_s, next_s) = (last.to_string(), (last + 1).to_string());
    let socket = std::env::temp_dir().join(format!("slimtcp-cli-{}.sock", std::process::id()));
    let socket = socket.to_str().expect("utf-8 path");
    let args = ["--socket", socket, "--tap", "lo", "--ip", "10.0.0.1/24", "--core"];
    let (code, err) = run_on_cpus(&last_s, &[&args[..], &[last_s.as_str()]].concat());
    assert_eq!(code, 1, "accepted, then the start failed: {err}");
    assert!(!err.contains("--core"), "{err}");
    // Alone on its CPU set, the worker core is shared with the control threads, with a warning.
    assert!(err.contains("control threads share them"), "{err}");
    // With the whole set, the control threads keep off the worker's core.
    let mut rest = allowed;
    rest.remove(last);
    let (code, err) = run_on_cpus(&allowed.to_string(), &[&args[..], &[last_s.as_str()]].concat());
    assert_eq!(code, 1, "{err}");
    if rest.count() > 0 {
        assert!(err.contains(&format!("control threads run on CPUs {rest}")), "{err}");
    }
    // The next core, outside the set: refused, naming the set.
    let (code, err) = run_on_cpus(&last_s, &[&args[..], &[next_s.as_str()]].concat());
    assert_eq!(code, 2, "{err}");
    let expected = format!("--core {next_s}: this process may run on CPUs {last_s} only");
    assert!(err.contains(&expected), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

/// A config file in a fresh temporary directory; the directory goes with it.
struct ConfigFile {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl ConfigFile {
    fn new(name: &str, body: impl Fn(&str) -> String) -> Self {
        let dir = std::env::temp_dir().join(format!("slimtcp-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("slimtcp.toml");
        std::fs::write(&path, body(dir.to_str().expect("utf-8 path"))).expect("config file");
        ConfigFile { dir, path }
    }

    fn path(&self) -> &str {
        self.path.to_str().expect("utf-8 path")
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Two valid tenants on cores 0 and `core_b`, with `extra` lines added to the second.
fn two_tenants(dir: &str, daemon: &str, core_b: &str, extra: &str) -> String {
    format!(
        "[daemon]\n{daemon}\n[[tenant]]\nname = \"a\"\nsocket = \"{dir}/a.sock\"\nip = \"10.9.1.2/24\"\n\
         tap = \"cfga\"\ncore = 0\n\n[[tenant]]\nname = \"b\"\nsocket = \"{dir}/b.sock\"\n\
         ip = \"10.9.2.2/24\"\ntap = \"cfgb\"\ncore = {core_b}\n{extra}"
    )
}

#[test]
fn bad_config_files_get_one_line_naming_file_line_and_key_from_check_and_from_a_start() {
    // (name, [daemon] lines, core of b, extra lines of b, the line, what the error says)
    let cases: &[(&str, &str, &str, &str, usize, &str)] = &[
        ("unknown-key", "", "1", "colour = \"red\"\n", 16, "colour: unknown key \"colour\""),
        ("duplicate-core", "", "0", "", 15, "core: two tenants use the same core 0"),
        ("core-not-allowed", "", "100000", "", 15, "core: --core 100000: this process may run on CPUs"),
        (
            "eal-lcore",
            "eal = \"--no-pci -l 1\"",
            "1",
            "",
            15,
            "core: --core 1: the EAL's lcores run on CPUs 1",
        ),
        ("no-socket-dir", "", "1", "", 12, "socket: --socket: directory"),
        ("bad-mac", "", "1", "mac = \"01:00:00:00:00:01\"\n", 16, "mac: mac=01:00:00:00:00:01"),
        ("duplicate-address", "", "1", "", 13, "ip: two tenants use the same address 10.9.1.2"),
    ];
    for &(name, daemon, core_b, extra, line, says) in cases {
        let file = ConfigFile::new(name, |dir| {
            let text = two_tenants(dir, daemon, core_b, extra);
            match name {
                "no-socket-dir" => text.replace(&format!("{dir}/b.sock"), "/nonexistent-slimtcp/b.sock"),
                "duplicate-address" => text.replace("10.9.2.2/24", "10.9.1.2/24"),
                _ => text,
            }
        });
        let want = format!("slimtcp-vhost: error: {}:{line}: {says}", file.path());
        let (code, _, err) = run(&["check", "--config", file.path()]);
        assert_eq!(code, 2, "{name}: check: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(err.starts_with(&want), "{name}: {err:?} does not start with {want:?}");
        let (code, _, start_err) = run(&["--config", file.path()]);
        assert_eq!(
            (code, start_err.as_str()),
            (2, err.as_str()),
            "{name}: a real start says what check says"
        );
    }
    let good = ConfigFile::new("good", |dir| two_tenants(dir, "", "1", ""));
    let (code, out, err) = run(&["check", "--config", good.path()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("valid, 2 tenants"), "{out}");
}
