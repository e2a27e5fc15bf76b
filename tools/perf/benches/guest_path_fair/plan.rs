//! What the bench's environment asks for (`FAIR_*` variables), checked before anything runs.

use slimtcp_perf::workload::SocketBuffer;

/// A `FAIR_*` variable that does not say what it must.
#[derive(Debug, thiserror::Error)]
#[error("{name}={value:?}: {want}")]
pub struct PlanError {
    name: &'static str,
    value: String,
    want: &'static str,
}

/// The plan of a run.
pub struct Plan {
    /// Runs per row, each path (`FAIR_RUNS`, default 3).
    pub runs: usize,
    /// Seconds per bulk run (`FAIR_SECONDS`, default 2).
    pub seconds: f64,
    /// MSS of the one-connection copy rows (`FAIR_MSS`, default 64,256,512,1460).
    pub mss: Vec<u16>,
    /// Round trips per run (`FAIR_ROUND_TRIPS`, default 20,000).
    pub round_trips: usize,
    /// Connection counts of the connection-count rows (`FAIR_CONNECTIONS`, default
    /// 1,1024,4096; empty: none).
    pub connections: Vec<usize>,
    /// MSS of the connection-count rows (`FAIR_CONN_MSS`, default 1400: the issue's).
    pub conn_mss: u16,
    /// The socket buffers of the connection-count rows, each a set of rows (`FAIR_CONN_BUFFER`,
    /// comma-separated slimtcp-perf `--socket-buffer` values; default `split,stack`): `split`
    /// (also `auto`), experiment 2's 64 MiB over the connections, 16..=256 KiB each (4096 x 256
    /// KiB x 2 would be 2 GiB per stack without the application's send budget); `stack`, the
    /// stacks' own; or bytes.
    pub conn_buffers: Vec<SocketBuffer>,
    /// Seconds of sending before the measured window in the connection-count rows
    /// (`FAIR_CONN_WARMUP`, default 2; 0: none).
    pub conn_warm_up: f64,
    /// Whether to measure the zero-copy rows (`FAIR_ZERO_COPY`, default 1).
    pub zero_copy: bool,
    /// MSS of the zero-copy rows (`FAIR_ZC_MSS`, default 64,1460).
    pub zc_mss: Vec<u16>,
}

/// Most connections a row may ask for (the backend's default socket limit per tenant).
const MAX_CONNECTIONS: usize = 4096;

fn err(name: &'static str, value: String, want: &'static str) -> PlanError {
    PlanError { name, value, want }
}

fn number<T: std::str::FromStr>(
    name: &'static str,
    default: T,
    ok: impl Fn(&T) -> bool,
    want: &'static str,
) -> Result<T, PlanError> {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().ok().filter(|n| ok(n)).ok_or_else(|| err(name, v, want)),
        Err(_) => Ok(default),
    }
}

/// An on/off variable (`default` when unset).
pub fn flag(name: &'static str, default: bool) -> Result<bool, PlanError> {
    match std::env::var(name).as_deref().map(str::trim) {
        Err(_) => Ok(default),
        Ok("1" | "on" | "yes" | "true") => Ok(true),
        Ok("0" | "off" | "no" | "false") => Ok(false),
        Ok(v) => Err(err(name, v.into(), "1/on/yes/true or 0/off/no/false")),
    }
}

/// A comma-separated list of numbers in `range` (empty allowed when `empty_ok`).
fn list<T: std::str::FromStr + PartialOrd>(
    name: &'static str,
    default: &str,
    range: std::ops::RangeInclusive<T>,
    empty_ok: bool,
    want: &'static str,
) -> Result<Vec<T>, PlanError> {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    if text.trim().is_empty() {
        return if empty_ok { Ok(Vec::new()) } else { Err(err(name, text, want)) };
    }
    text.split(',')
        .map(|m| m.trim().parse::<T>().ok().filter(|m| range.contains(m)))
        .collect::<Option<Vec<T>>>()
        .ok_or_else(|| err(name, text.clone(), want))
}

impl Plan {
    pub fn from_env() -> Result<Plan, PlanError> {
        let runs = number("FAIR_RUNS", 3usize, |&n| n > 0, "a number > 0")?;
        let seconds = number("FAIR_SECONDS", 2.0f64, |s| s.is_finite() && *s > 0.0, "seconds > 0")?;
        let round_trips = number("FAIR_ROUND_TRIPS", 20_000usize, |&n| n > 0, "a number > 0")?;
        let mss =
            list("FAIR_MSS", "64,256,512,1460", 1..=1460, false, "MSS values 1..=1460, comma-separated")?;
        let connections = list(
            "FAIR_CONNECTIONS",
            "1,1024,4096",
            1..=MAX_CONNECTIONS,
            true,
            "connection counts 1..=4096, comma-separated (empty: no connection-count rows)",
        )?;
        let conn_mss = number("FAIR_CONN_MSS", 1400u16, |m| (1..=1460).contains(m), "an MSS in 1..=1460")?;
        let conn_buffers = std::env::var("FAIR_CONN_BUFFER")
            .unwrap_or_else(|_| "split,stack".into())
            .split(',')
            .map(|v| match v.trim() {
                "auto" => Ok(SocketBuffer::Split),
                v => v.parse().map_err(|_| {
                    err(
                        "FAIR_CONN_BUFFER",
                        v.into(),
                        "split (or auto), stack, or bytes per socket buffer in 4096..=16777216, comma-separated",
                    )
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let conn_warm_up =
            number("FAIR_CONN_WARMUP", 2.0f64, |s| s.is_finite() && *s >= 0.0, "seconds >= 0")?;
        let zero_copy = flag("FAIR_ZERO_COPY", true)?;
        // Read where the loops are (`idle.rs`); checked here with the others.
        flag("FAIR_IDLE_TIME", false)?;
        let zc_mss = list("FAIR_ZC_MSS", "64,1460", 1..=1460, false, "MSS values 1..=1460, comma-separated")?;
        Ok(Plan {
            runs,
            seconds,
            mss,
            round_trips,
            connections,
            conn_mss,
            conn_buffers,
            conn_warm_up,
            zero_copy,
            zc_mss,
        })
    }
}
