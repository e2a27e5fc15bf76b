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
    for opt in
        ["--socket", "--tap", "--dpdk", "--ip", "--host-ip", "--gateway", "--mac", "--core", "--queues"]
    {
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
    ];
    for (args, want) in cases {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line expected: {err}");
        assert!(err.contains(want), "{args:?}: {err:?} lacks {want:?}");
    }
}
