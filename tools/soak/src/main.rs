//! `slimtcp-soak`: the soak of issue 14 (docs/operating.md, "Soak").
//!
//! ```text
//! slimtcp-soak [--seconds N] [--conns-per-tenant N] [--active N] [--out PATH] [--log PATH]
//! SOAK_SECONDS=N slimtcp-soak        (the default duration when --seconds is absent; 1200)
//! ```
//!
//! Three tenants of the real backend in this process, each served by `serve_tenant_observed` on
//! its own thread and vhost-user socket: **a** and **b** carry data to SlimTCP echo peers at the
//! far end of memwire links (a's link loses, reorders, duplicates and corrupts frames; b's is
//! clean but its device's second queue pair gets only hostile chains), **c** is attacked by a
//! hostile VMM connection after connection. Each data tenant's guest keeps
//! `--conns-per-tenant` connections with churn and checks every echoed byte. Resources are
//! sampled after a warm-up and judged for growth; at the end every socket must be released and
//! the process must be back at its descriptors and threads. Exit 0: no finding; 1: findings
//! (listed); 2: bad arguments; 3: the soak could not be set up.

mod clock_nic;
mod error;
mod hostile_chains;
mod hostile_vmm;
mod peer;
mod run;
mod sample;
mod summary;
mod tenant;
mod workload;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Default duration: 20 minutes.
const DEFAULT_SECONDS: u64 = 1200;

/// The soak (see the crate documentation).
#[derive(Debug, Parser)]
#[command(name = "slimtcp-soak")]
pub struct Args {
    /// Seconds of load (default: $SOAK_SECONDS, else 1200).
    #[arg(long)]
    seconds: Option<u64>,
    /// Connections each data tenant keeps open.
    #[arg(long, default_value_t = 2048)]
    conns_per_tenant: usize,
    /// Transfers running at once per data tenant.
    #[arg(long, default_value_t = 32)]
    active: usize,
    /// Part of the run, in percent, before growth is judged.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=80))]
    warmup_percent: u64,
    /// Seed of the workloads and the faults.
    #[arg(long, default_value_t = 14)]
    seed: u64,
    /// Where the JSON summary goes.
    #[arg(long, default_value = "target/soak/summary.json")]
    out: PathBuf,
    /// Where the log goes (RUST_LOG, default info).
    #[arg(long, default_value = "target/soak/soak.log")]
    log: PathBuf,
    /// Capture tenant a's faulty link, both directions as delivered, to this pcap file (for
    /// diagnosis: about 80 MB per second of load).
    #[arg(long)]
    capture: Option<PathBuf>,
}

impl Args {
    /// The duration: `--seconds`, else `$SOAK_SECONDS`, else 20 minutes.
    fn seconds(&self) -> Result<u64, String> {
        if let Some(s) = self.seconds {
            return Ok(s);
        }
        match std::env::var("SOAK_SECONDS") {
            Ok(v) => v.trim().parse().map_err(|_| format!("SOAK_SECONDS={v:?} is not a number of seconds")),
            Err(_) => Ok(DEFAULT_SECONDS),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seconds = match args.seconds() {
        Ok(s) if s >= 10 => s,
        Ok(s) => {
            eprintln!("slimtcp-soak: error: {s} s is too short to judge growth (at least 10)");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("slimtcp-soak: error: {e}");
            return ExitCode::from(2);
        }
    };
    match run::run(&args, seconds) {
        Ok(findings) if findings.is_empty() => {
            println!("slimtcp-soak: PASS");
            ExitCode::SUCCESS
        }
        Ok(findings) => {
            println!("slimtcp-soak: FAIL ({} findings)", findings.len());
            for f in &findings {
                println!("  - {f}");
            }
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("slimtcp-soak: error: {}", slimtcp_vhost::error_chain(&e));
            ExitCode::from(3)
        }
    }
}
