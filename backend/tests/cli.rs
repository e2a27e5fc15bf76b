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
        (&["--socket", "/tmp/s", "--tap", "t0", "--ip", "10.0.0.1/24", "--core", "100000"], "has cores"),
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
