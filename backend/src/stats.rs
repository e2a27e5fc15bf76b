//! What an operator sees of a tenant: one [`TenantStats`] per tenant, read from its gauges and
//! counters ([`crate::gauges`]), shown three ways from the same record: JSON (`stats --json`,
//! the control socket's answer), a table (`stats`), and Prometheus metrics named `slimtcp_*`
//! with a `tenant` label ([`encode_metrics`], through the `prometheus-client` crate).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use slimtcp::iface::DropReason;
use slimtcp::tcp::State;

use crate::gauges::{GaugeReading, LiveCounters};

/// One tenant's stats (see the module documentation). Counters count since the daemon started
/// the tenant (the stack's: since its NIC was last opened); gauges are now.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TenantStats {
    /// The tenant's name.
    pub tenant: String,
    /// Whether a VMM (or guest library) is connected now.
    pub vmm_connected: bool,
    /// VMM connections that ended.
    pub sessions_ended: u64,
    /// TCP sockets by state (RFC names; listeners are LISTEN).
    pub tcp_states: BTreeMap<String, u64>,
    /// Frames received by the NIC.
    pub rx_frames: u64,
    /// Bytes received by the NIC.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// TCP segments received.
    pub tcp_segments_in: u64,
    /// TCP segments sent.
    pub tcp_segments_out: u64,
    /// TCP retransmissions.
    pub tcp_retransmits: u64,
    /// TCP resets sent.
    pub tcp_resets_sent: u64,
    /// TCP connections opened.
    pub tcp_connections_opened: u64,
    /// UDP datagrams received.
    pub udp_datagrams_in: u64,
    /// UDP datagrams sent.
    pub udp_datagrams_out: u64,
    /// Frames dropped, by reason (only reasons that happened).
    pub drops: BTreeMap<String, u64>,
    /// Guest requests served.
    pub requests: u64,
    /// Requests answered with an error.
    pub error_completions: u64,
    /// Messages written into guest receive buffers.
    pub rx_messages: u64,
    /// Guest payload bytes sent by reference (zero copy).
    pub tx_bytes_by_reference: u64,
    /// Guest payload bytes copied on transmit (the backend's and the stack's copies).
    pub tx_bytes_copied: u64,
    /// Bytes of `COPY` sends the backend copied out of guest memory, their chains returned at
    /// once (sockets whose peers do not read must not hold the transmit queue); the stack's
    /// copy of them into frames is in `tx_bytes_copied`.
    pub tx_send_bytes_copied: u64,
    /// Payload bytes copied into guest receive buffers.
    pub rx_bytes_copied: u64,
    /// Guest sockets open.
    pub guest_sockets: u64,
    /// Sockets of the tenant's stack.
    pub stack_sockets: u64,
    /// Send chains held until their bytes are acknowledged.
    pub sends_held: u64,
    /// Completions and events waiting for guest receive buffers.
    pub pending_messages: u64,
    /// Bytes of receive storage the stack holds.
    pub rx_memory_bytes: u64,
    /// Worker polls.
    pub worker_polls: u64,
    /// Worker polls that did work.
    pub worker_busy_polls: u64,
}

impl TenantStats {
    /// The stats of tenant `name` from its gauges and counters.
    pub fn new(name: &str, g: &GaugeReading, c: &LiveCounters) -> Self {
        let s = &c.stack;
        let session = c.session.as_ref();
        let device = c.device();
        TenantStats {
            tenant: name.to_owned(),
            vmm_connected: session.is_some(),
            sessions_ended: c.sessions_ended,
            tcp_states: State::ALL
                .iter()
                .filter(|st| c.tcp_states[st.index()] > 0)
                .map(|st| (st.to_string(), c.tcp_states[st.index()]))
                .collect(),
            rx_frames: s.rx_frames,
            rx_bytes: s.rx_bytes,
            tx_frames: s.tx_frames,
            tx_bytes: s.tx_bytes,
            tcp_segments_in: s.tcp_segs_in,
            tcp_segments_out: s.tcp_segs_out,
            tcp_retransmits: s.tcp_retransmits,
            tcp_resets_sent: s.tcp_resets_sent,
            tcp_connections_opened: s.tcp_connections_opened,
            udp_datagrams_in: s.udp_in,
            udp_datagrams_out: s.udp_out,
            drops: s.drops().map(|(r, n)| (r.name().to_owned(), n)).collect(),
            requests: device.requests,
            error_completions: device.error_completions,
            rx_messages: device.rx_messages,
            tx_bytes_by_reference: device.tx_payload_by_reference,
            tx_bytes_copied: device.tx_payload_copied + s.tx_payload_copied_bytes,
            tx_send_bytes_copied: device.tx_sends_copied,
            rx_bytes_copied: device.rx_payload_copied,
            guest_sockets: g.guest_sockets,
            stack_sockets: g.stack_sockets,
            sends_held: g.sends_held,
            pending_messages: g.pending_messages,
            rx_memory_bytes: g.rx_memory,
            worker_polls: c.polls,
            worker_busy_polls: c.busy_polls,
        }
    }

    /// Polls that did work, of all polls (0 before the first).
    pub fn worker_busy_fraction(&self) -> f64 {
        if self.worker_polls == 0 {
            0.0
        } else {
            self.worker_busy_polls as f64 / self.worker_polls as f64
        }
    }
}

/// A metric of one number per tenant.
struct Metric {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    value: fn(&TenantStats) -> u64,
}

const fn counter(name: &'static str, help: &'static str, value: fn(&TenantStats) -> u64) -> Metric {
    Metric { name, help, kind: MetricType::Counter, value }
}

const fn gauge(name: &'static str, help: &'static str, value: fn(&TenantStats) -> u64) -> Metric {
    Metric { name, help, kind: MetricType::Gauge, value }
}

/// The per-tenant metrics (counters get `_total` in the exposition).
const METRICS: [Metric; 26] = [
    gauge("slimtcp_vmm_connected", "1 while a VMM is connected", |t| u64::from(t.vmm_connected)),
    counter("slimtcp_sessions_ended", "VMM connections that ended", |t| t.sessions_ended),
    counter("slimtcp_rx_frames", "Frames received by the tenant's NIC", |t| t.rx_frames),
    counter("slimtcp_rx_bytes", "Bytes received by the tenant's NIC", |t| t.rx_bytes),
    counter("slimtcp_tx_frames", "Frames sent by the tenant's NIC", |t| t.tx_frames),
    counter("slimtcp_tx_bytes", "Bytes sent by the tenant's NIC", |t| t.tx_bytes),
    counter("slimtcp_tcp_segments_in", "TCP segments received", |t| t.tcp_segments_in),
    counter("slimtcp_tcp_segments_out", "TCP segments sent", |t| t.tcp_segments_out),
    counter("slimtcp_tcp_retransmits", "TCP retransmissions", |t| t.tcp_retransmits),
    counter("slimtcp_tcp_resets_sent", "TCP resets sent", |t| t.tcp_resets_sent),
    counter("slimtcp_tcp_connections_opened", "TCP connections opened", |t| t.tcp_connections_opened),
    counter("slimtcp_udp_datagrams_in", "UDP datagrams received", |t| t.udp_datagrams_in),
    counter("slimtcp_udp_datagrams_out", "UDP datagrams sent", |t| t.udp_datagrams_out),
    counter("slimtcp_requests", "Guest requests served", |t| t.requests),
    counter("slimtcp_error_completions", "Guest requests answered with an error", |t| t.error_completions),
    counter("slimtcp_rx_messages", "Messages written into guest receive buffers", |t| t.rx_messages),
    counter("slimtcp_tx_bytes_by_reference", "Guest payload bytes sent in place (zero copy)", |t| {
        t.tx_bytes_by_reference
    }),
    counter("slimtcp_tx_bytes_copied", "Guest payload bytes copied on transmit", |t| t.tx_bytes_copied),
    counter(
        "slimtcp_tx_send_bytes_copied",
        "Bytes of COPY sends the backend copied, returning their chains at once",
        |t| t.tx_send_bytes_copied,
    ),
    counter("slimtcp_rx_bytes_copied", "Payload bytes copied into guest receive buffers", |t| {
        t.rx_bytes_copied
    }),
    gauge("slimtcp_guest_sockets", "Guest sockets open", |t| t.guest_sockets),
    gauge("slimtcp_stack_sockets", "Sockets of the tenant's stack", |t| t.stack_sockets),
    gauge("slimtcp_sends_held", "Send chains held until acknowledged", |t| t.sends_held),
    gauge("slimtcp_pending_messages", "Messages waiting for guest receive buffers", |t| t.pending_messages),
    gauge("slimtcp_rx_memory_bytes", "Receive storage the stack holds", |t| t.rx_memory_bytes),
    counter("slimtcp_worker_polls", "Worker polls", |t| t.worker_polls),
];

/// The tenants' stats as a Prometheus collector (read when scraped).
#[derive(Debug)]
struct Snapshot(Vec<TenantStats>);

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for m in &METRICS {
            let mut family = encoder.encode_descriptor(m.name, m.help, None, m.kind)?;
            for t in &self.0 {
                let labels = [("tenant", t.tenant.as_str())];
                let v = (m.value)(t);
                match m.kind {
                    MetricType::Counter => ConstCounter::new(v).encode(family.encode_family(&labels)?)?,
                    _ => ConstGauge::new(v as i64).encode(family.encode_family(&labels)?)?,
                }
            }
        }
        let mut family = encoder.encode_descriptor(
            "slimtcp_worker_busy_polls",
            "Worker polls that did work (busy fraction: this / slimtcp_worker_polls)",
            None,
            MetricType::Counter,
        )?;
        for t in &self.0 {
            ConstCounter::new(t.worker_busy_polls)
                .encode(family.encode_family(&[("tenant", t.tenant.as_str())])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "slimtcp_tcp_sockets",
            "TCP sockets by state",
            None,
            MetricType::Gauge,
        )?;
        for t in &self.0 {
            for st in State::ALL {
                let n = t.tcp_states.get(&st.to_string()).copied().unwrap_or(0);
                let labels = [("tenant", t.tenant.as_str()), ("state", &st.to_string())];
                ConstGauge::new(n as i64).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "slimtcp_drops",
            "Frames dropped, by reason",
            None,
            MetricType::Counter,
        )?;
        for t in &self.0 {
            for r in DropReason::ALL {
                let n = t.drops.get(r.name()).copied().unwrap_or(0);
                let labels = [("tenant", t.tenant.as_str()), ("reason", r.name())];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The Prometheus text exposition (version 0.0.4) of `tenants`.
pub fn encode_metrics(tenants: Vec<TenantStats>) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(tenants)));
    let mut out = String::new();
    // Writing into a String does not fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}

/// The `Content-Type` of [`encode_metrics`]'s text.
pub const METRICS_CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// `tenants` as the table `slimtcp-vhost stats` prints.
pub fn table(tenants: &[TenantStats]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>4} {:>6} {:>12} {:>12} {:>10} {:>10} {:>7} {:>6} {:>9} {:>6} {:>5}",
        "TENANT",
        "VMM",
        "CONNS",
        "RX BYTES",
        "TX BYTES",
        "SEGS IN",
        "SEGS OUT",
        "RETRANS",
        "DROPS",
        "REQUESTS",
        "SOCKS",
        "BUSY"
    );
    for t in tenants {
        let conns: u64 = t.tcp_states.iter().filter(|(s, _)| *s != "LISTEN").map(|(_, n)| n).sum();
        let _ = writeln!(
            out,
            "{:<12} {:>4} {:>6} {:>12} {:>12} {:>10} {:>10} {:>7} {:>6} {:>9} {:>6} {:>4.0}%",
            t.tenant,
            if t.vmm_connected { "yes" } else { "no" },
            conns,
            t.rx_bytes,
            t.tx_bytes,
            t.tcp_segments_in,
            t.tcp_segments_out,
            t.tcp_retransmits,
            t.drops.values().sum::<u64>(),
            t.requests,
            t.guest_sockets,
            t.worker_busy_fraction() * 100.0
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(name: &str, rx_bytes: u64) -> TenantStats {
        let mut t = TenantStats {
            tenant: name.into(),
            rx_bytes,
            worker_polls: 4,
            worker_busy_polls: 1,
            ..Default::default()
        };
        t.tcp_states.insert("ESTABLISHED".into(), 2);
        t.drops.insert("no-socket".into(), 3);
        t
    }

    #[test]
    fn metrics_are_named_slimtcp_with_a_tenant_label() {
        let text = encode_metrics(vec![stats("alpha", 1000), stats("beta", 7)]);
        assert!(text.contains("# TYPE slimtcp_rx_bytes_total counter"), "{text}");
        assert!(text.contains("slimtcp_rx_bytes_total{tenant=\"alpha\"} 1000"), "{text}");
        assert!(text.contains("slimtcp_rx_bytes_total{tenant=\"beta\"} 7"), "{text}");
        assert!(text.contains("slimtcp_tcp_sockets{tenant=\"alpha\",state=\"ESTABLISHED\"} 2"), "{text}");
        assert!(text.contains("slimtcp_tcp_sockets{tenant=\"alpha\",state=\"TIME-WAIT\"} 0"), "{text}");
        assert!(text.contains("slimtcp_drops_total{tenant=\"beta\",reason=\"no-socket\"} 3"), "{text}");
        assert!(text.contains("slimtcp_worker_busy_polls_total{tenant=\"alpha\"} 1"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("slimtcp_"), "{line}");
        }
    }

    #[test]
    fn json_round_trips_and_the_table_has_a_row_per_tenant() {
        let t = vec![stats("alpha", 1000), stats("beta", 7)];
        let json = serde_json::to_string(&t).expect("serialises");
        let back: Vec<TenantStats> = serde_json::from_str(&json).expect("parses");
        assert_eq!(back, t);
        let table = table(&t);
        assert_eq!(table.lines().count(), 3, "{table}");
        assert!(
            table.lines().nth(1).is_some_and(|l| l.starts_with("alpha") && l.contains(" 25%")),
            "{table}"
        );
    }
}
