//! Figures of several runs: medians, ranges, the guest/host ratio per row; the markdown table
//! and the JSON record.

use serde_json::{json, Value};

pub use slimtcp_perf::report::median;

fn range(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// "median (min-max)" of `v` scaled by `scale`, with `d` decimals.
fn cell(v: &[f64], scale: f64, d: usize) -> String {
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
    let (r, per_run) = ratio(guest, host);
    if per_run.len() < 2 {
        return format!("{r:.2}");
    }
    let (lo, hi) = range(&per_run);
    format!("{r:.2} ({lo:.2}-{hi:.2})")
}

/// One bulk row: goodput per run (bit/s) of both paths.
pub struct BulkRow {
    pub direction: &'static str,
    pub mss: u16,
    pub guest_bps: Vec<f64>,
    pub host_bps: Vec<f64>,
}

/// One latency row: a percentile's per-run figures (us).
pub struct RttRow {
    pub percentile: &'static str,
    pub guest_us: Vec<f64>,
    pub host_us: Vec<f64>,
}

/// The markdown table.
pub fn markdown(runs: usize, seconds: f64, bulk: &[BulkRow], rtt: &[RttRow]) -> String {
    let mut out = format!(
        "Two busy threads on each path (A: both applications; B: the backend worker with the \
         tenant engine and the peer's stack / the host runtime's worker with both stacks). \
         Medians of {runs} run(s) ({seconds} s per bulk run), (min-max) over the runs; guest/host: \
         ratio of the medians (range of the runs' own ratios).\n\n\
         | measurement | MSS | guest Gb/s | guest Mseg/s | host Gb/s | host Mseg/s | guest/host |\n\
         | --- | ---: | --- | --- | --- | --- | --- |\n"
    );
    for r in bulk {
        let seg = 1.0 / (8.0 * f64::from(r.mss) * 1e6);
        out += &format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.direction,
            r.mss,
            cell(&r.guest_bps, 1e-9, 2),
            cell(&r.guest_bps, seg, 2),
            cell(&r.host_bps, 1e-9, 2),
            cell(&r.host_bps, seg, 2),
            ratio_cell(&r.guest_bps, &r.host_bps)
        );
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

/// Every run's figures.
pub fn json(runs: usize, seconds: f64, bulk: &[BulkRow], rtt: &[RttRow]) -> Value {
    let bulk: Vec<Value> = bulk
        .iter()
        .map(|r| {
            let seg = |v: &[f64]| v.iter().map(|b| b / 8.0 / f64::from(r.mss)).collect::<Vec<f64>>();
            json!({
                "test": "bulk",
                "direction": r.direction,
                "mss": r.mss,
                "guest_bps": median(&r.guest_bps),
                "host_bps": median(&r.host_bps),
                "guest_segments_per_s": median(&seg(&r.guest_bps)),
                "host_segments_per_s": median(&seg(&r.host_bps)),
                "guest_over_host": ratio(&r.guest_bps, &r.host_bps).0,
                "guest_bps_runs": r.guest_bps,
                "host_bps_runs": r.host_bps,
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
        "bulk": bulk,
        "round_trips": rtt,
    })
}
