//! `stack_peers`: SlimTCP and smoltcp side by side over the same in-memory link (memwire), each
//! stack's sender and receiver in one thread (see `peers` for the set-up).
//!
//! - `compare`: the paper's experiment 1 (one connection, MSS 64, 256, 512, 1460; goodput and
//!   segments/s, every byte checked) and 64-byte round trips (p50/p99), both stacks in one run,
//!   each point the median of `--runs` runs, stacks alternating; writes JSON and markdown.
//! - `segments`: moves exactly `--count` segments of `--mss` bytes and prints what moved: the
//!   program `scripts/bench-peers.sh` runs under callgrind for instructions per segment.
//!
//! Run: `cargo run --release -p slimtcp-perf --example stack_peers -- compare --out target/bench`.

mod peers;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use peers::slim::SlimPair;
use peers::smol::{SmolPair, SmolPairOnePoll};
use peers::workload::{self, Bulk, Until};
use peers::{Pair, PeerError};
use slimtcp::report::error_chain;
use slimtcp_perf::report::median;

/// The segment sizes of the paper's experiment 1.
const EXPERIMENT_1_MSS: [u16; 4] = [64, 256, 512, 1460];
/// Round trips before measuring.
const RTT_WARMUP: usize = 1_000;

#[derive(Debug, Parser)]
#[command(about = "SlimTCP and smoltcp over the same in-memory link")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stack {
    Slimtcp,
    Smoltcp,
    /// smoltcp with one `poll` per step (at most one segment sent per step and side).
    SmoltcpOnePoll,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Experiment 1 and 64-byte round trips for both stacks; writes peers.json and peers.md.
    Compare {
        /// Seconds per bulk run.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Runs per point (the median is reported).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Measured round trips per run.
        #[arg(long, default_value_t = 20_000)]
        round_trips: usize,
        /// Directory for peers.json and peers.md.
        #[arg(long, default_value = "target/bench")]
        out: PathBuf,
    },
    /// Moves exactly `count` full segments A -> B and prints a JSON line (for callgrind).
    Segments {
        #[arg(long, value_enum)]
        stack: Stack,
        #[arg(long)]
        mss: u16,
        #[arg(long)]
        count: u64,
        /// Compare every byte with the pattern sent (off under callgrind: it would count the
        /// comparison's instructions too; byte counts are always checked).
        #[arg(long)]
        verify: bool,
        /// The link offers checksum offload, and both stacks use it.
        #[arg(long)]
        offload: bool,
    },
}

/// Why the example failed.
#[derive(Debug, thiserror::Error)]
enum ExampleError {
    #[error("{stack} at MSS {mss}")]
    Run {
        stack: &'static str,
        mss: u16,
        #[source]
        source: PeerError,
    },
    #[error("{stack}: moved {got} bytes, expected {want}")]
    Short { stack: &'static str, got: u64, want: u64 },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("stack_peers: {}", error_chain(&e));
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), ExampleError> {
    match args.command {
        Command::Compare { seconds, runs, round_trips, out } => {
            compare(seconds, runs.max(1), round_trips, &out)
        }
        Command::Segments { stack, mss, count, verify, offload } => {
            peers::set_checksum_offload(offload);
            let want = count * u64::from(mss);
            let b = match stack {
                Stack::Slimtcp => bulk::<SlimPair>(mss, Until::Bytes(want), verify)?,
                Stack::Smoltcp => bulk::<SmolPair>(mss, Until::Bytes(want), verify)?,
                Stack::SmoltcpOnePoll => bulk::<SmolPairOnePoll>(mss, Until::Bytes(want), verify)?,
            };
            if b.bytes != want {
                return Err(ExampleError::Short { stack: b.stack, got: b.bytes, want });
            }
            println!(
                "{{\"stack\":\"{}\",\"mss\":{},\"segments\":{},\"bytes\":{},\"frames_a_to_b\":{},\"frames_b_to_a\":{},\"verified\":{},\"slimtcp_connection_state_bytes\":{}}}",
                b.stack, mss, count, b.bytes, b.frames_a_to_b, b.frames_b_to_a, b.verified, slimtcp::iface::TCP_STATE_BYTES
            );
            Ok(())
        }
    }
}

fn bulk<P: Pair>(mss: u16, until: Until, verify: bool) -> Result<Bulk, ExampleError> {
    workload::bulk::<P>(mss, until, verify).map_err(|source| ExampleError::Run {
        stack: P::NAME,
        mss,
        source,
    })
}

/// One run of round trips: p50, p99 and frames on the link per round trip.
type RttRun = (Duration, Duration, f64);

fn rtts<P: Pair>(count: usize) -> Result<RttRun, ExampleError> {
    let r = workload::round_trips::<P>(1460, RTT_WARMUP, count).map_err(|source| ExampleError::Run {
        stack: P::NAME,
        mss: 1460,
        source,
    })?;
    let mut v = r.rtts;
    v.sort();
    Ok((workload::percentile(&v, 50), workload::percentile(&v, 99), r.frames_per_round_trip))
}

/// The stacks of a bulk point, in report order: SlimTCP, smoltcp (polled until idle), smoltcp
/// (one poll per step).
const STACKS: [&str; 3] = ["slimtcp", "smoltcp", "smoltcp_one_poll"];

/// One bulk point: each stack's runs (interleaved in time).
struct Point {
    mss: u16,
    runs: [Vec<Bulk>; 3],
}

impl Point {
    fn goodput(&self, stack: usize) -> f64 {
        median(&self.runs[stack].iter().map(Bulk::goodput_bps).collect::<Vec<_>>())
    }
    fn segments(&self, stack: usize) -> f64 {
        median(&self.runs[stack].iter().map(Bulk::segments_per_s).collect::<Vec<_>>())
    }
    fn acks_per_segment(&self, stack: usize) -> f64 {
        median(
            &self.runs[stack]
                .iter()
                .map(|b| b.frames_b_to_a as f64 / b.frames_a_to_b.max(1) as f64)
                .collect::<Vec<_>>(),
        )
    }
    fn json(&self, stack: usize) -> String {
        let runs: Vec<String> = self.runs[stack]
            .iter()
            .map(|b| {
                format!(
                    "{{\"goodput_bps\": {:.0}, \"segments_per_s\": {:.0}, \"bytes\": {}, \"seconds\": {:.4}, \
                     \"frames_a_to_b\": {}, \"frames_b_to_a\": {}, \"verified\": {}}}",
                    b.goodput_bps(),
                    b.segments_per_s(),
                    b.bytes,
                    b.elapsed.as_secs_f64(),
                    b.frames_a_to_b,
                    b.frames_b_to_a,
                    b.verified
                )
            })
            .collect();
        format!(
            "\"{}\": {{\"goodput_bps\": {:.0}, \"segments_per_s\": {:.0}, \"acks_per_segment\": {:.3}, \"runs\": [{}]}}",
            STACKS[stack],
            self.goodput(stack),
            self.segments(stack),
            self.acks_per_segment(stack),
            runs.join(", ")
        )
    }
}

fn compare(seconds: f64, runs: usize, round_trips: usize, out: &std::path::Path) -> Result<(), ExampleError> {
    let d = Duration::from_secs_f64(seconds);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut points = Vec::new();
    for mss in EXPERIMENT_1_MSS {
        let mut p = Point { mss, runs: [Vec::new(), Vec::new(), Vec::new()] };
        for _ in 0..runs {
            p.runs[0].push(bulk::<SlimPair>(mss, Until::Elapsed(d), true)?);
            p.runs[1].push(bulk::<SmolPair>(mss, Until::Elapsed(d), true)?);
            p.runs[2].push(bulk::<SmolPairOnePoll>(mss, Until::Elapsed(d), true)?);
        }
        eprintln!(
            "MSS {mss}: slimtcp {:.2} Gb/s, smoltcp {:.2} Gb/s, smoltcp one poll per step {:.2} Gb/s",
            p.goodput(0) / 1e9,
            p.goodput(1) / 1e9,
            p.goodput(2) / 1e9
        );
        points.push(p);
    }
    let (mut slim_rtt, mut smol_rtt) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        slim_rtt.push(rtts::<SlimPair>(round_trips)?);
        smol_rtt.push(rtts::<SmolPair>(round_trips)?);
    }
    let us = |v: &[RttRun], pick: fn(&RttRun) -> Duration| {
        median(&v.iter().map(|r| pick(r).as_secs_f64() * 1e6).collect::<Vec<_>>())
    };
    let frames = |v: &[RttRun]| median(&v.iter().map(|r| r.2).collect::<Vec<_>>());
    let rtt = [
        ("p50", us(&slim_rtt, |r| r.0), us(&smol_rtt, |r| r.0)),
        ("p99", us(&slim_rtt, |r| r.1), us(&smol_rtt, |r| r.1)),
    ];

    let date = date_utc();
    let bulk_json: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "  {{\"mss\": {}, {}, {}, {}, \"ratio\": {:.3}, \"ratio_one_poll\": {:.3}}}",
                p.mss,
                p.json(0),
                p.json(1),
                p.json(2),
                p.goodput(0) / p.goodput(1),
                p.goodput(0) / p.goodput(2)
            )
        })
        .collect();
    let json = format!(
        "{{\n \"meta\": {{\"date\": \"{date}\", \"cores\": {cores}, \"seconds_per_run\": {seconds}, \"runs\": {runs}, \
         \"round_trips\": {round_trips}, \"setup\": \"sender and receiver stacks in one thread, memwire link, \
         256 KiB buffers, window scale 3, no Nagle, no congestion control, software checksums; smoltcp: poll then \
         poll_egress until idle; smoltcp_one_poll: one poll per step\"}},\n \"bulk\": [\n{}\n ],\n \
         \"rtt_64b_us\": {{\"slimtcp\": {{\"p50\": {:.2}, \"p99\": {:.2}, \"frames_per_round_trip\": {:.2}}}, \
         \"smoltcp\": {{\"p50\": {:.2}, \"p99\": {:.2}, \"frames_per_round_trip\": {:.2}}}}}\n}}\n",
        bulk_json.join(",\n"),
        rtt[0].1,
        rtt[1].1,
        frames(&slim_rtt),
        rtt[0].2,
        rtt[1].2,
        frames(&smol_rtt)
    );

    let mut md = format!(
        "SlimTCP vs smoltcp over memwire, {date}, {cores} cores, median of {runs} runs of {seconds} s per point \
         (every byte checked).\nBoth: sender and receiver stacks in one thread, 256 KiB buffers, window scale 3, \
         no Nagle, no congestion control. smoltcp is polled until it has nothing to send (as SlimTCP's poll \
         sends what the window allows); the last columns poll it once per step.\n\n\
         | MSS | SlimTCP Gb/s | SlimTCP Mseg/s | smoltcp Gb/s | smoltcp Mseg/s | SlimTCP/smoltcp | ACKs per segment \
         (SlimTCP / smoltcp) | smoltcp one poll Gb/s | SlimTCP/smoltcp one poll |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    );
    for p in &points {
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} / {:.3} | {:.2} | {:.2} |",
            p.mss,
            p.goodput(0) / 1e9,
            p.segments(0) / 1e6,
            p.goodput(1) / 1e9,
            p.segments(1) / 1e6,
            p.goodput(0) / p.goodput(1),
            p.acks_per_segment(0),
            p.acks_per_segment(1),
            p.goodput(2) / 1e9,
            p.goodput(0) / p.goodput(2)
        );
    }
    let _ = write!(
        md,
        "\n64-byte round trip ({round_trips} per run after {RTT_WARMUP} warm-up, median of {runs} runs):\n\n\
         | | SlimTCP | smoltcp | SlimTCP/smoltcp (lower is faster) |\n| --- | --- | --- | --- |\n"
    );
    for (name, s, m) in rtt {
        let _ = writeln!(md, "| {name} | {s:.2} us | {m:.2} us | {:.2} |", s / m);
    }
    let _ = writeln!(md, "| frames per round trip | {:.2} | {:.2} | |", frames(&slim_rtt), frames(&smol_rtt));
    print!("{md}");
    std::fs::create_dir_all(out).map_err(|source| ExampleError::Write { path: out.to_owned(), source })?;
    for (name, text) in [("peers.json", &json), ("peers.md", &md)] {
        let path = out.join(name);
        std::fs::write(&path, text).map_err(|source| ExampleError::Write { path, source })?;
    }
    Ok(())
}

/// Now as `YYYY-MM-DD HH:MM UTC` (civil-from-days, no date crate).
fn date_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}
