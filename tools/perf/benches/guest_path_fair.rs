//! The guest path beside the host runtime with **two busy threads on each side** (issue 12, "A
//! fair guest-path benchmark"); `cargo bench -p slimtcp-perf --bench guest_path_fair`.
//!
//! The three-thread bench (`guest_path`) runs the guest application, the backend worker and a
//! SlimTCP peer each on a busy thread: on a 2-core machine its guest/host ratio says more about
//! the scheduler than about the guest path. Here both paths get the same two threads, over one
//! memwire link, with the host runtime's application side as the peer on both:
//!
//! | thread | guest path | host path |
//! | --- | --- | --- |
//! | A | guest library (`GuestSockets` over vhost-user) + the peer's application | host runtime application under test + the peer's application |
//! | B | slimtcp-vhost's `Engine` over the guest's rings + the peer's host-runtime worker | the host runtime's workers of both interfaces (as `two_core_group`'s thread steps them) |
//!
//! Design (a) of the issue: the real guest library attaches over vhost-user to slimtcp-vhost's
//! own device (`NetDevice` in a `VhostUserDaemon`, whose threads sleep after set-up). The
//! bench builds the tenant's `Engine` itself instead of calling `serve_tenant`, because its
//! worker loop must also step the peer: it steps the engine, serves ring stops as slimtcp-vhost's
//! worker does, and steps the peer's worker, which the host runtime hands out for that purpose
//! (`runtime::external_group`); the host path's thread B steps its two workers through the same
//! call. Every loop (thread A alternates between the two applications with non-blocking calls)
//! idles by one rule, `guest_path_fair/idle.rs`: spin, then yield after each empty pass, never
//! sleep. See `guest_path_fair/guest.rs` for what of
//! slimtcp-vhost's serving path is left out (the relay, the sandbox, gauges).
//!
//! Measured, guest and host alternating, `FAIR_RUNS` times (default 3): bulk goodput over one
//! connection, the stack under test sending and receiving, at MSS `FAIR_MSS` (default
//! 64,256,512,1460), `FAIR_SECONDS` per run (default 2); 64-byte round trips (the stack under
//! test sends, the peer echoes), `FAIR_ROUND_TRIPS` (default 20,000, after 1,000 warm-up), p50
//! and p99. Every byte is checked (bulk: the pattern at each offset, and the count to the end
//! of the stream equals the bytes sent; round trips: each echo equals its message); a mismatch
//! fails the bench. Writes `target/bench/guest_path_fair.md` and `.json`.

#[path = "guest_path_fair/apps.rs"]
mod apps;
#[path = "guest_path_fair/guest.rs"]
mod guest;
#[path = "guest_path_fair/host.rs"]
mod host;
#[path = "guest_path_fair/idle.rs"]
mod idle;
#[path = "guest_path_fair/link.rs"]
mod link;
#[path = "guest_path_fair/report.rs"]
mod report;

use std::time::Duration;

use apps::{AppError, Direction};
use report::{BulkRow, RttRow};
use slimtcp::report::error_chain;

const WARM_UP: usize = 1_000;

/// What a measurement on either path failed with.
#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("guest path")]
    Guest(#[from] guest::GuestPathError),
    #[error("host path")]
    Host(#[from] host::HostPathError),
    #[error("{path} path: application")]
    App {
        path: &'static str,
        #[source]
        source: AppError,
    },
    #[error("{name}={value:?}: {want}")]
    Env { name: &'static str, value: String, want: &'static str },
}

/// What the bench's environment asks for.
struct Plan {
    runs: usize,
    seconds: f64,
    mss: Vec<u16>,
    round_trips: usize,
}

fn env_number<T: std::str::FromStr>(name: &'static str, default: T) -> Result<T, BenchError> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().map_err(|_| BenchError::Env { name, value: v, want: "a number" }),
        Err(_) => Ok(default),
    }
}

impl Plan {
    fn from_env() -> Result<Plan, BenchError> {
        let runs = env_number("FAIR_RUNS", 3usize)?;
        let seconds = env_number("FAIR_SECONDS", 2.0f64)?;
        let round_trips = env_number("FAIR_ROUND_TRIPS", 20_000usize)?;
        let mss_list = std::env::var("FAIR_MSS").unwrap_or_else(|_| "64,256,512,1460".into());
        let mss = mss_list
            .split(',')
            .map(|m| m.trim().parse::<u16>().ok().filter(|&m| (1..=1460).contains(&m)))
            .collect::<Option<Vec<u16>>>()
            .ok_or_else(|| BenchError::Env {
                name: "FAIR_MSS",
                value: mss_list.clone(),
                want: "MSS values 1..=1460, comma-separated",
            })?;
        if runs == 0 || !seconds.is_finite() || seconds <= 0.0 || round_trips == 0 {
            return Err(BenchError::Env {
                name: "FAIR_RUNS/FAIR_SECONDS/FAIR_ROUND_TRIPS",
                value: String::new(),
                want: "each > 0",
            });
        }
        Ok(Plan { runs, seconds, mss, round_trips })
    }
}

fn app_err(path: &'static str) -> impl FnOnce(AppError) -> BenchError {
    move |source| BenchError::App { path, source }
}

/// One bulk run on the guest path: bit/s.
fn guest_bulk(dir: Direction, mss: u16, window: Duration) -> Result<f64, BenchError> {
    let (r, report) = guest::run(|g, p| apps::bulk(g, p, link::peer_ip(), dir, mss, window))?;
    let b = r.map_err(app_err("guest"))?;
    eprintln!("  guest {} MSS {mss}: {} B checked; backend session: {report}", dir.name(), b.checked);
    Ok(b.bytes as f64 * 8.0 / b.secs)
}

/// One bulk run on the host path: bit/s.
fn host_bulk(dir: Direction, mss: u16, window: Duration) -> Result<f64, BenchError> {
    let b =
        host::run(|u, p| apps::bulk(u, p, link::peer_ip(), dir, mss, window))?.map_err(app_err("host"))?;
    eprintln!("  host {} MSS {mss}: {} B checked", dir.name(), b.checked);
    Ok(b.bytes as f64 * 8.0 / b.secs)
}

/// p50 and p99 (us) of `samples`.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

fn guest_rtt(n: usize) -> Result<(f64, f64), BenchError> {
    let (r, _) = guest::run(|g, p| apps::round_trips(g, p, link::peer_ip(), n, WARM_UP))?;
    Ok(percentiles(r.map_err(app_err("guest"))?))
}

fn host_rtt(n: usize) -> Result<(f64, f64), BenchError> {
    let r = host::run(|u, p| apps::round_trips(u, p, link::peer_ip(), n, WARM_UP))?;
    Ok(percentiles(r.map_err(app_err("host"))?))
}

fn bench(plan: &Plan) -> Result<(Vec<BulkRow>, Vec<RttRow>), BenchError> {
    let window = Duration::from_secs_f64(plan.seconds);
    let mut bulk = Vec::new();
    for dir in [Direction::Sends, Direction::Receives] {
        for &mss in &plan.mss {
            let mut row =
                BulkRow { direction: dir.label(), mss, guest_bps: Vec::new(), host_bps: Vec::new() };
            // Guest and host alternate, so a change in the machine's load hits both.
            for _ in 0..plan.runs {
                row.guest_bps.push(guest_bulk(dir, mss, window)?);
                row.host_bps.push(host_bulk(dir, mss, window)?);
            }
            bulk.push(row);
        }
    }
    let mut p50 = RttRow { percentile: "p50", guest_us: Vec::new(), host_us: Vec::new() };
    let mut p99 = RttRow { percentile: "p99", guest_us: Vec::new(), host_us: Vec::new() };
    for _ in 0..plan.runs {
        let (g, h) = (guest_rtt(plan.round_trips)?, host_rtt(plan.round_trips)?);
        eprintln!(
            "  round trips: guest p50 {:.1} us p99 {:.1} us, host p50 {:.1} us p99 {:.1} us",
            g.0, g.1, h.0, h.1
        );
        p50.guest_us.push(g.0);
        p99.guest_us.push(g.1);
        p50.host_us.push(h.0);
        p99.host_us.push(h.1);
    }
    Ok((bulk, vec![p50, p99]))
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let _ = env_logger::builder().try_init();
    let result = Plan::from_env().and_then(|plan| bench(&plan).map(|r| (plan, r)));
    let (plan, (bulk, rtt)) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("guest_path_fair: {}", error_chain(&e));
            std::process::exit(1);
        }
    };
    let table = report::markdown(plan.runs, plan.seconds, &bulk, &rtt);
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let json = report::json(plan.runs, plan.seconds, &bulk, &rtt);
    for (file, text) in [("guest_path_fair.md", table), ("guest_path_fair.json", format!("{json:#}\n"))] {
        if let Err(e) = std::fs::write(dir.join(file), text) {
            eprintln!("guest_path_fair: writing {file}: {e}");
            std::process::exit(1);
        }
    }
}
