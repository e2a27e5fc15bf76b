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
