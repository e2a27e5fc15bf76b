//! Reading iperf3's `-J` reports (the unmodified-application tests, `preload_apps` and
//! `vm_preload`).

use serde_json::Value;

/// The report in `text`, which may start with other output (a preloaded process's banner on
/// the same stream): the JSON begins at the first `{`. Panics naming `what` when there is none.
pub fn report(text: &str, what: &str) -> Value {
    let start = text.find('{').unwrap_or_else(|| panic!("{what}: no JSON in: {text}"));
    serde_json::from_str(&text[start..]).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"))
}

/// The number at `path` (`["end", "sum_sent", "bytes"]`), as a whole number.
pub fn number(v: &Value, path: &[&str]) -> u64 {
    let at = path.iter().fold(v, |at, p| &at[*p]);
    at.as_f64().unwrap_or_else(|| panic!("no {path:?} in {v}")) as u64
}

/// A TCP test's bytes: what the client sent and what the server received.
pub fn tcp_bytes(client: &Value, server: &Value) -> (u64, u64) {
    (number(client, &["end", "sum_sent", "bytes"]), number(server, &["end", "sum_received", "bytes"]))
}
