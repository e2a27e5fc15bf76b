//! Figures of several runs: medians, ranges, the guest/host ratio per row; the markdown table
//! and the JSON record.

use serde_json::{json, Value};
use slimtcp_perf::workload::SocketBuffer;

pub use slimtcp_perf::report::median;

fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// "median (min-max)" of `v` scaled by `scale`, with `d` decimals.
fn cell(v: &[f64], scale: f64, d: usize) -> String {
    if v.is_empty() {
        return "not run".into();
    }
    let (lo, hi) = range(v);
    if v.len() < 2 {
        return format!("{:.d$}", median(v) * scale);
    }
    format!("{:.d$} ({:.d$}-{:.d$})", median(v) * scale, lo * scale, hi * scale)
}

/// The ratio of the medians, and the range of the runs' own ratios (each guest run against the
/// host run right after it).
fn ratio(guest: &[f64], host: &[f64]) -> (f64, Vec<f64>) {
    (median(guest) / median(host), guest.iter().zip(host).map(|(g, h)| g / h).collect())
}

fn ratio_cell(guest: &[f64], host: &[f64]) -> String {
    if guest.is_empty() || host.is_empty() {
        return "n/a".into();
    }
    let (r, per_run) = ratio(guest, host);
    if per_run.len() < 2 {
        return format!("{r:.2}");
    }
    let (lo, hi) = range(&per_run);
    format!("{r:.2} ({lo:.2}-{hi:.2})")
}

/// One bulk row over one connection (256 KiB buffers): goodput per run (bit/s) of both paths.
pub struct BulkRow {
    /// "guest sends" / "guest receives" for the copy API, with ", zero-copy" for that API.
    pub direction: String,
    pub mss: u16,
    /// The API of the stack under test ("copy" or "zero-copy"; the peer always copies).
    pub api: &'static str,
    pub guest_bps: Vec<f64>,
    pub host_bps: Vec<f64>,
    /// Per run, the two cores' round trip (ns) just before it (NaN: not measured).
    pub core_rt_ns: Vec<f64>,
}

/// One row of the connection-count set: goodput per run (bit/s) of both paths over
/// `connections` connections at once.
pub struct ConnRow {
    pub direction: &'static str,
    pub connections: usize,
    pub mss: u16,
    /// How the socket buffers were chosen (rows are compared with the one-connection row of
    /// the same choice).
    pub socket_buffer: SocketBuffer,
    /// Send and receive buffer of every socket, both ends (`None`: the stacks' own).
    pub buffer: Option<usize>,
    pub guest_bps: Vec<f64>,
    pub host_bps: Vec<f64>,
    /// Per run, the two cores' round trip (ns) just before it (NaN: not measured).
    pub core_rt_ns: Vec<f64>,
}

/// How a row's buffers were chosen: `split, 16` (KiB each), `stack` (the stacks' own), or the KiB.
fn buffers_cell(r: &ConnRow) -> String {
    match (r.socket_buffer, r.buffer) {
        (SocketBuffer::Split, Some(b)) => format!("split, {}", b >> 10),
        (_, Some(b)) => (b >> 10).to_string(),
        (_, None) => "stack".to_owned(),
    }
}

/// Goodput at `r.connections` over goodput at one connection (same direction, same buffer
/// choice), per path:
/// (guest, host) ratios of the medians; `None` without a one-connection row or a run.
fn over_one(rows: &[ConnRow], r: &ConnRow) -> (Option<f64>, Option<f64>) {
    let Some(one) = rows
        .iter()
        .find(|o| o.connections == 1 && o.direction == r.direction && o.socket_buffer == r.socket_buffer)
    else {
        return (None, None);
    };
    let ratio = |n: &[f64], d: &[f64]| (!n.is_empty() && !d.is_empty()).then(|| median(n) / median(d));
    (ratio(&r.guest_bps, &one.guest_bps), ratio(&r.host_bps, &one.host_bps))
}

/// Every run's core round trip, "105/98/431" (ns), "-" where not measured.
fn probes_cell(v: &[f64]) -> String {
    let each: Vec<String> =
        v.iter().map(|ns| if ns.is_nan() { "-".into() } else { format!("{ns:.0}") }).collect();
    each.join("/")
}

fn opt_cell(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |x| format!("{x:.2}"))
}

/// One latency row: a percentile's per-run figures (us).
pub struct RttRow {
    pub percentile: &'static str,
    pub guest_us: Vec<f64>,
    pub host_us: Vec<f64>,
}

/// The markdown table.
pub fn markdown(
    runs: usize,
    seconds: f64,
    warm_up: f64,
    bulk: &[BulkRow],
    conns: &[ConnRow],
    rtt: &[RttRow],
) -> String {
    let mut out = format!(
        "Two busy threads on each path (A: both applications; B: the backend worker with the \
         tenant engine and the peer's stack / the host runtime's worker with both stacks). \
         Medians of {runs} run(s) ({seconds} s per bulk run), (min-max) over the runs; guest/host: \
         ratio of the medians (range of the runs' own ratios). One connection, 256 KiB socket \
         buffers; \"zero-copy\": the stack under test uses the zero-copy API, the peer copies. \
         cores' RT: per run, a cache line's round trip between the two vCPUs just before it \
         (core-link-probe; about 100 ns where the host ran them near each other, 400-550 ns far \
         apart).\n\n\
         | measurement | MSS | guest Gb/s | guest Mseg/s | host Gb/s | host Mseg/s | guest/host | cores' RT (ns) |\n\
         | --- | ---: | --- | --- | --- | --- | --- | --- |\n"
    );
    for r in bulk {
        let seg = 1.0 / (8.0 * f64::from(r.mss) * 1e6);
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.direction,
            r.mss,
            cell(&r.guest_bps, 1e-9, 2),
            cell(&r.guest_bps, seg, 2),
            cell(&r.host_bps, 1e-9, 2),
            cell(&r.host_bps, seg, 2),
            ratio_cell(&r.guest_bps, &r.host_bps),
            probes_cell(&r.core_rt_ns)
        );
    }
    if !conns.is_empty() {
        out += &format!(
            "\nConnection count (copy API, epoll-driven on both ends; send and receive buffer per \
                 socket as given, both ends, both paths; {warm_up} s of sending before each {seconds} s \
                 window); N/1: goodput at N connections over goodput at 1 connection (same \
                 direction, same path; ratio of the medians; the issue's target >= 0.90).\n\n\
                 | measurement | connections | MSS | buffers (KiB) | guest Gb/s | host Gb/s | guest/host | guest N/1 | host N/1 | cores' RT (ns) |\n\
                 | --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | --- |\n"
        );
        for r in conns {
            let (g1, h1) = over_one(conns, r);
            let (g1, h1) = (opt_cell(g1), opt_cell(h1));
            out += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {g1} | {h1} | {} |\n",
                r.direction,
                r.connections,
                r.mss,
                buffers_cell(r),
                cell(&r.guest_bps, 1e-9, 2),
                cell(&r.host_bps, 1e-9, 2),
                ratio_cell(&r.guest_bps, &r.host_bps),
                probes_cell(&r.core_rt_ns)
            );
        }
    }
    out += "\n| 64 B round trip | guest us | host us | guest/host |\n| --- | --- | --- | --- |\n";
    for r in rtt {
        out += &format!(
            "| {} | {} | {} | {} |\n",
            r.percentile,
            cell(&r.guest_us, 1.0, 1),
            cell(&r.host_us, 1.0, 1),
            ratio_cell(&r.guest_us, &r.host_us)
        );
    }
    out
}

/// `v` for JSON: a run not measured (NaN) as null.
fn finite(v: &[f64]) -> Vec<Option<f64>> {
    v.iter().map(|x| x.is_finite().then_some(*x)).collect()
}

/// Every run's figures.
pub fn json(
    runs: usize,
    seconds: f64,
    warm_up: f64,
    bulk: &[BulkRow],
    conns: &[ConnRow],
    rtt: &[RttRow],
) -> Value {
    let bulk: Vec<Value> = bulk
        .iter()
        .map(|r| {
            let seg = |v: &[f64]| v.iter().map(|b| b / 8.0 / f64::from(r.mss)).collect::<Vec<f64>>();
            json!({
                "test": "bulk",
                "direction": r.direction,
                "mss": r.mss,
                "api": r.api,
                "connections": 1,
                "buffer_bytes": 256 << 10,
                "guest_bps": median(&r.guest_bps),
                "host_bps": median(&r.host_bps),
                "guest_segments_per_s": median(&seg(&r.guest_bps)),
                "host_segments_per_s": median(&seg(&r.host_bps)),
                "guest_over_host": ratio(&r.guest_bps, &r.host_bps).0,
                "guest_bps_runs": r.guest_bps,
                "host_bps_runs": r.host_bps,
                "core_round_trip_ns_runs": finite(&r.core_rt_ns),
            })
        })
        .collect();
    let connections: Vec<Value> = conns
        .iter()
        .map(|r| {
            let one = over_one(conns, r);
            json!({
                "test": "bulk_connections",
                "direction": r.direction,
                "api": "copy",
                "connections": r.connections,
                "mss": r.mss,
                "socket_buffer": r.socket_buffer.to_string(),
                "buffer_bytes": r.buffer,
                "guest_bps": (!r.guest_bps.is_empty()).then(|| median(&r.guest_bps)),
                "host_bps": median(&r.host_bps),
                "guest_over_host": (!r.guest_bps.is_empty()).then(|| ratio(&r.guest_bps, &r.host_bps).0),
                "guest_over_one_connection": one.0,
                "host_over_one_connection": one.1,
                "guest_bps_runs": r.guest_bps,
                "host_bps_runs": r.host_bps,
                "core_round_trip_ns_runs": finite(&r.core_rt_ns),
            })
        })
        .collect();
    let rtt: Vec<Value> = rtt
        .iter()
        .map(|r| {
            json!({
                "test": "rtt64",
                "percentile": r.percentile,
                "guest_us": median(&r.guest_us),
                "host_us": median(&r.host_us),
                "guest_over_host": ratio(&r.guest_us, &r.host_us).0,
                "guest_us_runs": r.guest_us,
                "host_us_runs": r.host_us,
            })
        })
        .collect();
    json!({
        "bench": "guest_path_fair",
        "busy_threads_per_path": 2,
        "runs": runs,
        "bulk_seconds": seconds,
        "connections_warm_up_seconds": warm_up,
        "bulk": bulk,
        "connections": connections,
        "round_trips": rtt,
    })
}
