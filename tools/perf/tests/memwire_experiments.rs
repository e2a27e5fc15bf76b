//! Spec: over `--nic memwire`, slimtcp-perf runs the paper's experiment 1 and 2 argument sets
//! (shortened to 1 s) and reports nonzero goodput as one valid JSON object.

mod common;

use common::{boolean, number, perf, summary};

/// Runs one point and checks the summary; returns it.
fn point(args: &str, mss: u16, connections: usize) -> String {
    let json = summary(&perf(args));
    assert!(number(&json, "goodput_bps") > 0.0, "no goodput: {json}");
    assert!(number(&json, "segments_per_s") > 0.0, "no segments: {json}");
    assert!(number(&json, "bytes") > 0.0, "no bytes: {json}");
    assert!(number(&json, "duration_s") > 0.0, "no time: {json}");
    assert_eq!(number(&json, "mss"), f64::from(mss), "{json}");
    assert_eq!(number(&json, "connections"), connections as f64, "{json}");
    assert!(
        boolean(&json, "drained"),
        "every byte sent must be delivered and every connection closed: {json}"
    );
    json
}

#[test]
fn experiment_1_segment_sizes_over_one_connection_with_the_papers_arguments() {
    for mss in [64u16, 256, 512, 1460] {
        // The paper's receiver/sender arguments, as typed (EAL args, `--`, options), plus memwire.
        let args = format!(
            "-l 0,1 -- --iface 0 --burst 32 --tcp --mss {mss} --win-scale 3 --connections 1 --timeout 1 \
             --nic memwire --runtime two-core --json"
        );
        point(&args, mss, 1);
    }
}

#[test]
fn experiment_2_many_connections_at_mss_1400() {
    for connections in [1usize, 64] {
        let args = format!("--tcp --mss 1400 --connections {connections} --duration 1 --nic memwire --json");
        point(&args, 1400, connections);
    }
}

#[test]
fn socket_buffers_split_the_stacks_own_or_one_size_are_reported() {
    let with = |buffer: &str| {
        let args = format!(
            "--tcp --mss 1400 --connections 64 --duration 1 --nic memwire --json --socket-buffer {buffer}"
        );
        point(&args, 1400, 64)
    };
    // The default: 64 MiB over the connections, at most 256 KiB each.
    let split = with("split");
    assert_eq!(number(&split, "socket_buffer_bytes"), f64::from(256u32 << 10), "{split}");
    let own = with("stack");
    assert!(own.contains(r#""socket_buffer_bytes":null"#), "none asked for: {own}");
    let fixed = with("32768");
    assert_eq!(number(&fixed, "socket_buffer_bytes"), 32768.0, "{fixed}");
}

#[test]
fn both_runtimes_and_both_data_paths_move_data() {
    for extra in ["--runtime single", "--runtime single --zero-copy", "--runtime two-core --zero-copy"] {
        let args = format!("--nic memwire --tcp --mss 1460 --connections 4 --duration 1 --json {extra}");
        point(&args, 1460, 4);
    }
}

#[test]
fn without_json_a_paper_line_per_second_and_a_summary_are_printed() {
    let out = perf("--nic memwire --tcp --mss 512 --connections 2 --duration 2.2 --runtime single");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let paper: Vec<&str> = stdout.lines().filter(|l| l.starts_with("pps=")).collect();
    assert!(paper.len() >= 2, "one line per second expected: {stdout}");
    for line in paper {
        let fields: Vec<&str> = line.split("; ").collect();
        assert_eq!(fields.len(), 3, "{line}");
        assert!(
            fields[0].starts_with("pps=")
                && fields[1].starts_with("bps=")
                && fields[2].starts_with("connections=")
        );
        assert!(line.ends_with(';'), "{line}");
    }
    assert!(stdout.lines().last().is_some_and(|l| l.contains("Gb/s")), "{stdout}");
}
