//! `core-link-probe`: how fast two cores pass data to each other right now (round trip of a cache
//! line, a ring of frames), measured without the stack; see `slimtcp_perf::core_link`. The
//! benchmarks whose two ends run on two cores print it beside their runs. Exit codes: 0 done,
//! 1 the probe failed, 2 bad arguments.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use slimtcp_perf::cli::parse_or_exit;
use slimtcp_perf::core_link::{probe, ProbeSettings};

/// Measures the link between two cores: a cache line's round trip and a ring of frames.
#[derive(Debug, Parser)]
#[command(name = "core-link-probe", version)]
struct Args {
    /// The first core (the ring's producer).
    #[arg(long, default_value_t = 0)]
    from: usize,
    /// The second core (the ring's consumer).
    #[arg(long, default_value_t = 1)]
    to: usize,
    /// Milliseconds the ring is driven.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    ring_ms: u64,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args: Args = match parse_or_exit("core-link-probe", std::env::args().skip(1)) {
        Ok(args) => args,
        Err(code) => return code,
    };
    let settings =
        ProbeSettings { ring_time: Duration::from_millis(args.ring_ms), ..ProbeSettings::default() };
    match probe(args.from, args.to, &settings) {
        Ok(link) if args.json => {
            let value = serde_json::json!({
                "cores": [link.cores.0, link.cores.1],
                "round_trip_ns": link.round_trip_ns,
                "ring_gbps": link.ring_gbps,
                "ring_frames": link.ring_frames,
                "frame_bytes": settings.frame,
            });
            println!("{value}");
            ExitCode::SUCCESS
        }
        Ok(link) => {
            println!(
                "cores {} -> {}: round trip {:.0} ns, ring {:.1} Gb/s ({}-byte frames, {} slots)",
                link.cores.0,
                link.cores.1,
                link.round_trip_ns,
                link.ring_gbps,
                settings.frame,
                settings.slots
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("core-link-probe: error: {}", slimtcp::report::error_chain(&e));
            ExitCode::from(1)
        }
    }
}
