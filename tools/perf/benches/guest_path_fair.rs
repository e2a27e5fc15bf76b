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
//! Measured, guest and host alternating, `FAIR_RUNS` times (default 3), every row under the
//! same plan (`guest_path_fair/plan.rs` lists the `FAIR_*` variables):
//! - bulk goodput over one connection (256 KiB buffers), the stack under test sending and
//!   receiving, at MSS `FAIR_MSS` (default 64,256,512,1460), copy API, `FAIR_SECONDS` per run
//!   (default 2);
//! - the same through the zero-copy API of the stack under test (`alloc_tx`/`send_zc`,
//!   `recv_zc`; the peer copies) at MSS `FAIR_ZC_MSS` (default 64,1460), unless
//!   `FAIR_ZERO_COPY=0`;
//! - bulk goodput over `FAIR_CONNECTIONS` connections at once (default 1,1024,4096; MSS
//!   `FAIR_CONN_MSS`, default 1400; buffers `FAIR_CONN_BUFFER`, default `split,stack`: a set of
//!   rows with slimtcp-perf's split of 64 MiB, 16..=256 KiB per socket, and one with the stacks'
//!   own buffers), epoll-driven, after `FAIR_CONN_WARMUP` s (default 2), with
//!   goodput at N over goodput at 1 connection per path (`guest_path_fair/many.rs`) (the guest
//!   library's one queue pair lets the backend hold send chains for up to half its
//!   descriptors; beyond that sends wait for chains to come back, and only if those chains
//!   are held 50 ms or more go with `COPY`, which the backend session line counts as
//!   `tx sends copied`);
//! - 64-byte round trips (the stack under test sends, the peer echoes), `FAIR_ROUND_TRIPS`
//!   (default 20,000, after 1,000 warm-up), p50 and p99.
//!
//! Every byte is checked (bulk: the pattern at each offset of each stream, and each stream's
//! count to its end equals the bytes its sender's stack accepted; round trips: each echo equals
//! its message); a mismatch fails the bench, and a socket call that never returns ends it after
//! 60 s (`guest_path_fair/watchdog.rs`). Writes `target/bench/guest_path_fair.md` and `.json`.

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
#[path = "guest_path_fair/many.rs"]
mod many;
#[path = "guest_path_fair/plan.rs"]
mod plan;
#[path = "guest_path_fair/report.rs"]
mod report;
#[path = "guest_path_fair/stream.rs"]
mod stream;
#[path = "guest_path_fair/watchdog.rs"]
mod watchdog;

use std::time::Duration;

use apps::{AppError, Direction};
use many::Shape;
use plan::Plan;
use report::{BulkRow, ConnRow, RttRow};
use slimtcp::report::error_chain;
use slimtcp_perf::core_link::{self, ProbeSettings};
use slimtcp_perf::workload::SocketBuffer;
use stream::Api;

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
    #[error("environment")]
    Env(#[from] plan::PlanError),
}

fn app_err(path: &'static str) -> impl FnOnce(AppError) -> BenchError {
    move |source| BenchError::App { path, source }
}

/// One bulk run over one connection on the guest path: bit/s.
fn guest_bulk(dir: Direction, api: Api, mss: u16, window: Duration) -> Result<f64, BenchError> {
    let ((r, copied), report) = guest::run(|g, p| {
        (apps::bulk(g, p, link::peer_ip(), dir, api, mss, window), g.rx_payloads_copied())
    })?;
    let b = r.map_err(app_err("guest"))?;
    eprintln!(
        "  guest {} ({}) MSS {mss}: {} B checked; payloads copied out of receive buffers {copied}; backend session: {report}",
        dir.name(),
        api.name(),
        b.checked
    );
    Ok(b.bytes as f64 * 8.0 / b.secs)
}

/// One bulk run over one connection on the host path: bit/s.
fn host_bulk(dir: Direction, api: Api, mss: u16, window: Duration) -> Result<f64, BenchError> {
    let b = host::run(|u, p| apps::bulk(u, p, link::peer_ip(), dir, api, mss, window))?
        .map_err(app_err("host"))?;
    eprintln!("  host {} ({}) MSS {mss}: {} B checked", dir.name(), api.name(), b.checked);
    Ok(b.bytes as f64 * 8.0 / b.secs)
}

/// One bulk run over `shape.connections` connections on the guest path: bit/s.
fn guest_many(dir: Direction, shape: Shape, window: Duration) -> Result<f64, BenchError> {
    let ((r, copied), report) = guest::run(|g, p| {
        (many::bulk_many(g, p, link::peer_ip(), dir, shape, window), g.rx_payloads_copied())
    })?;
    let b = r.map_err(app_err("guest"))?;
    eprintln!(
        "  guest {} x{} MSS {}: {} B checked; payloads copied out of receive buffers {copied}; backend session: {report}",
        dir.name(),
        shape.connections,
        shape.mss,
        b.checked
    );
    Ok(b.bytes as f64 * 8.0 / b.secs)
}

/// One bulk run over `shape.connections` connections on the host path: bit/s.
fn host_many(dir: Direction, shape: Shape, window: Duration) -> Result<f64, BenchError> {
    let b = host::run(|u, p| many::bulk_many(u, p, link::peer_ip(), dir, shape, window))?
        .map_err(app_err("host"))?;
    eprintln!("  host {} x{} MSS {}: {} B checked", dir.name(), shape.connections, shape.mss, b.checked);
    Ok(b.bytes as f64 * 8.0 / b.secs)
}

/// A cache line's round trip between cores 0 and 1 right now, in ns (`core-link-probe`'s
/// measure, shortened: where the host runs the two vCPUs sets how fast the two busy threads
/// pass data; docs/benchmarks.md, "The machine's placements"); NaN where it cannot be measured
/// (one core).
fn core_round_trip() -> f64 {
    let settings = ProbeSettings { round_trips: 50_000, batches: 3, ..ProbeSettings::default() };
    match core_link::round_trip_only(0, 1, &settings) {
        Ok(ns) => ns,
        Err(e) => {
            eprintln!("  core link probe: {}", error_chain(&e));
            f64::NAN
        }
    }
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

/// What the bench measured.
struct Results {
    bulk: Vec<BulkRow>,
    conns: Vec<ConnRow>,
    rtt: Vec<RttRow>,
}

fn bench(plan: &Plan) -> Result<Results, BenchError> {
    let window = Duration::from_secs_f64(plan.seconds);
    let mut bulk = Vec::new();
    let mut sets = vec![(Api::Copy, plan.mss.as_slice())];
    if plan.zero_copy {
        sets.push((Api::ZeroCopy, plan.zc_mss.as_slice()));
    }
    for (api, mss_list) in sets {
        for dir in [Direction::Sends, Direction::Receives] {
            for &mss in mss_list {
                let direction = match api {
                    Api::Copy => dir.label().to_string(),
                    Api::ZeroCopy => format!("{}, zero-copy", dir.label()),
                };
                let mut row = BulkRow {
                    direction,
                    mss,
                    api: api.name(),
                    guest_bps: Vec::new(),
                    host_bps: Vec::new(),
                    core_rt_ns: Vec::new(),
                };
                // Guest and host alternate, so a change in the machine's load hits both.
                for _ in 0..plan.runs {
                    row.core_rt_ns.push(core_round_trip());
                    row.guest_bps.push(guest_bulk(dir, api, mss, window)?);
                    row.host_bps.push(host_bulk(dir, api, mss, window)?);
                }
                bulk.push(row);
            }
        }
    }
    let mut conns = Vec::new();
    for &socket_buffer in &plan.conn_buffers {
        for dir in [Direction::Sends, Direction::Receives] {
            for &connections in &plan.connections {
                conns.push(conn_row(plan, socket_buffer, dir, connections, window)?);
            }
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
    Ok(Results { bulk, conns, rtt: vec![p50, p99] })
}

/// One connection-count row: `connections` connections with `socket_buffer`, both paths in turn.
fn conn_row(
    plan: &Plan,
    socket_buffer: SocketBuffer,
    dir: Direction,
    connections: usize,
    window: Duration,
) -> Result<ConnRow, BenchError> {
    let shape = Shape {
        connections,
        mss: plan.conn_mss,
        buffer: socket_buffer.per_connection(connections),
        warm_up: Duration::from_secs_f64(plan.conn_warm_up),
    };
    let mut row = ConnRow {
        direction: dir.label(),
        connections,
        mss: shape.mss,
        socket_buffer,
        buffer: shape.buffer,
        guest_bps: Vec::new(),
        host_bps: Vec::new(),
        core_rt_ns: Vec::new(),
    };
    for _ in 0..plan.runs {
        row.core_rt_ns.push(core_round_trip());
        row.guest_bps.push(guest_many(dir, shape, window)?);
        row.host_bps.push(host_many(dir, shape, window)?);
    }
    Ok(row)
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    // Warnings shown by default: a drain that fails names the streams that did not end.
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).try_init();
    if let Err(e) = watchdog::start() {
        eprintln!("guest_path_fair: starting the watchdog thread: {e}");
        std::process::exit(1);
    }
    let result = Plan::from_env().map_err(BenchError::from).and_then(|plan| bench(&plan).map(|r| (plan, r)));
    let (plan, Results { bulk, conns, rtt }) = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("guest_path_fair: {}", error_chain(&e));
            std::process::exit(1);
        }
    };
    let table = report::markdown(plan.runs, plan.seconds, plan.conn_warm_up, &bulk, &conns, &rtt);
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let json = report::json(plan.runs, plan.seconds, plan.conn_warm_up, &bulk, &conns, &rtt);
    for (file, text) in [("guest_path_fair.md", table), ("guest_path_fair.json", format!("{json:#}\n"))] {
        if let Err(e) = std::fs::write(dir.join(file), text) {
            eprintln!("guest_path_fair: writing {file}: {e}");
            std::process::exit(1);
        }
    }
}
