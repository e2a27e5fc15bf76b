//! The end-of-run summary: one human line, or one JSON object.

use crate::workload::Measurement;

/// Everything a run reports at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// `slimtcp` or `linux`.
    pub stack: &'static str,
    /// NIC label (`memwire`, `tap:X`, `dpdk:0`, `kernel`).
    pub nic: String,
    /// Runtime label (`two-core`, `single`, `kernel`).
    pub runtime: &'static str,
    /// What this process did.
    pub role: &'static str,
    /// Zero-copy data path used.
    pub zero_copy: bool,
    /// MSS in effect.
    pub mss: u16,
    /// Send and receive buffer each socket asked for (`None`: the stack's own).
    pub socket_buffer: Option<usize>,
    /// What was measured.
    pub measurement: Measurement,
}

impl Summary {
    /// Payload bits per second over the measured window.
    pub fn goodput_bps(&self) -> f64 {
        let secs = self.measurement.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.measurement.bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    }

    /// Full-size segments per second the goodput corresponds to.
    pub fn segments_per_s(&self) -> f64 {
        self.goodput_bps() / 8.0 / f64::from(self.mss.max(1))
    }

    /// One JSON object on one line (the fields `bench-*.sh`, the demos and the tests read).
    pub fn to_json(&self) -> String {
        let m = &self.measurement;
        let udp = m.udp;
        let line = JsonSummary {
            stack: self.stack,
            nic: &self.nic,
            runtime: self.runtime,
            role: self.role,
            zero_copy: self.zero_copy,
            mss: self.mss,
            socket_buffer_bytes: self.socket_buffer,
            connections: m.connections,
            duration_s: m.elapsed.as_secs_f64(),
            bytes: m.bytes,
            total_bytes: m.total_bytes,
            goodput_bps: self.goodput_bps().round() as u64,
            segments_per_s: self.segments_per_s().round() as u64,
            drained: m.drained,
            run_queue_wait_ms: m.run_queue_wait.map(|w| (w.as_secs_f64() * 1e6).round() / 1e3),
            datagrams: udp.map(|u| u.datagrams),
            total_datagrams: udp.map(|u| u.total_datagrams),
            datagrams_sent: udp.and_then(|u| u.datagrams_sent),
        };
        serde_json::to_string(&line).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// One human-readable line.
    pub fn human(&self) -> String {
        let datagrams = match self.measurement.udp {
            Some(u) => match u.datagrams_sent {
                Some(sent) => format!(", {} datagrams counted of {sent} sent", u.total_datagrams),
                None => format!(", {} datagrams counted", u.total_datagrams),
            },
            None => String::new(),
        };
        format!(
            "{} {} ({} runtime, {}{}): {} bytes in {:.2} s over {} connections, MSS {}: {:.3} Gb/s, {:.0} segments/s{}{}",
            self.stack,
            self.role,
            self.runtime,
            self.nic,
            if self.zero_copy { ", zero-copy" } else { "" },
            self.measurement.bytes,
            self.measurement.elapsed.as_secs_f64(),
            self.measurement.connections,
            self.mss,
            self.goodput_bps() / 1e9,
            self.segments_per_s(),
            if self.measurement.drained { "" } else { " (drain incomplete)" },
            datagrams,
        )
    }
}

/// The JSON form of a [`Summary`], fields in this order.
#[derive(Debug, serde::Serialize)]
struct JsonSummary<'a> {
    stack: &'a str,
    nic: &'a str,
    runtime: &'a str,
    role: &'a str,
    zero_copy: bool,
    mss: u16,
    /// `null`: no buffer asked for (the stack's own).
    socket_buffer_bytes: Option<usize>,
    connections: usize,
    duration_s: f64,
    bytes: u64,
    total_bytes: u64,
    goodput_bps: u64,
    segments_per_s: u64,
    drained: bool,
    /// Milliseconds the measuring thread waited for a CPU in the measured window.
    #[serde(skip_serializing_if = "Option::is_none")]
    run_queue_wait_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    datagrams: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total_datagrams: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    datagrams_sent: Option<u64>,
}

/// The median of several runs' figures (the mean of the middle two for an even count; 0 for
/// none), as every benchmark table here reports them.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn summary() -> Summary {
        Summary {
            stack: "slimtcp",
            nic: "tap:\"x\"".to_owned(),
            runtime: "single",
            role: "sender",
            zero_copy: false,
            mss: 1000,
            socket_buffer: Some(16 << 10),
            measurement: Measurement {
                bytes: 2_000_000,
                total_bytes: 2_500_000,
                elapsed: Duration::from_secs(2),
                connections: 4,
                drained: true,
                udp: None,
                run_queue_wait: Some(Duration::from_micros(1_500)),
            },
        }
    }

    #[test]
    fn goodput_is_bytes_times_eight_over_time() {
        let s = summary();
        assert_eq!(s.goodput_bps(), 8_000_000.0);
        assert_eq!(s.segments_per_s(), 1000.0);
    }

    #[test]
    fn json_has_the_required_fields_and_escapes_strings() {
        let j = summary().to_json();
        for key in ["goodput_bps", "segments_per_s", "mss", "connections", "duration_s", "bytes"] {
            assert!(j.contains(&format!("\"{key}\":")), "{key} missing in {j}");
        }
        assert!(j.contains(r#""nic":"tap:\"x\"""#), "{j}");
        assert!(j.starts_with('{') && j.ends_with('}') && !j.contains('\n'));
        assert!(!j.contains("datagrams"), "TCP runs have no datagram counts: {j}");
        assert!(j.contains(r#""run_queue_wait_ms":1.5"#), "{j}");
        assert!(j.contains(r#""socket_buffer_bytes":16384"#), "{j}");
        let stack_own = Summary { socket_buffer: None, ..summary() }.to_json();
        assert!(stack_own.contains(r#""socket_buffer_bytes":null"#), "the stack's own buffers: {stack_own}");
    }

    #[test]
    fn udp_runs_report_their_datagram_counts() {
        let mut s = summary();
        s.measurement.udp =
            Some(crate::workload::UdpCounts { datagrams: 10, total_datagrams: 12, datagrams_sent: Some(20) });
        let j = s.to_json();
        assert!(j.ends_with(r#","datagrams":10,"total_datagrams":12,"datagrams_sent":20}"#), "{j}");
        assert!(s.human().ends_with("12 datagrams counted of 20 sent"), "{}", s.human());
    }

    #[test]
    fn the_median_of_odd_even_and_no_runs() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
