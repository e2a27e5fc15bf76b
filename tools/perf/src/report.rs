//! The end-of-run summary: one human line, or one JSON object (hand-written: flat, no strings
//! that need more than the escaping below).

use std::fmt::Write as _;

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

    /// One JSON object on one line.
    pub fn to_json(&self) -> String {
        let m = &self.measurement;
        let mut s = String::from("{");
        let _ = write!(
            s,
            "\"stack\":{},\"nic\":{},\"runtime\":{},\"role\":{},\"zero_copy\":{},\"mss\":{},\
             \"connections\":{},\"duration_s\":{:.6},\"bytes\":{},\"total_bytes\":{},\"goodput_bps\":{:.0},\
             \"segments_per_s\":{:.0},\"drained\":{}",
            json_str(self.stack),
            json_str(&self.nic),
            json_str(self.runtime),
            json_str(self.role),
            self.zero_copy,
            self.mss,
            m.connections,
            m.elapsed.as_secs_f64(),
            m.bytes,
            m.total_bytes,
            self.goodput_bps(),
            self.segments_per_s(),
            m.drained,
        );
        if let Some(u) = m.udp {
            let _ = write!(s, ",\"datagrams\":{},\"total_datagrams\":{}", u.datagrams, u.total_datagrams);
            if let Some(sent) = u.datagrams_sent {
                let _ = write!(s, ",\"datagrams_sent\":{sent}");
            }
        }
        s.push('}');
        s
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

/// A JSON string literal.
fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
            measurement: Measurement {
                bytes: 2_000_000,
                total_bytes: 2_500_000,
                elapsed: Duration::from_secs(2),
                connections: 4,
                drained: true,
                udp: None,
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
}
