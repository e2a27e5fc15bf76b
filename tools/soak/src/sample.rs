//! Resource sampling and growth detection.
//!
//! Every sample reads the process (`/proc/self/status`: anonymous and shared RSS, threads;
//! `/proc/self/fd`: open descriptors), the backend tenants' live gauges (sockets, held sends,
//! NIC-held guest payload, pending messages), the peers' gauges (stack sockets, sessions, frames
//! on the link) and the workloads' open connections.
//!
//! Growth is judged after the warm-up only, per metric: the highest value of the last quarter
//! of the samples against the highest of the first quarter, with the metric's tolerance
//! ([`Metric::tolerance`]). Max against max: the workload churns, so every metric swings; a
//! leak lifts the peaks. Also reported: last against the post-warm-up minimum, and the
//! least-squares slope per minute. No timing thresholds: only amounts.

use std::sync::atomic::Ordering;

/// One metric's values over the run.
#[derive(Debug, Clone)]
pub struct Metric {
    /// Its name in the summary.
    pub name: String,
    /// Allowed growth: absolute.
    pub abs: f64,
    /// Allowed growth: relative to the first quarter's peak.
    pub rel: f64,
    /// (seconds since start, value).
    pub points: Vec<(f64, f64)>,
}

/// The growth verdict of one metric.
#[derive(Debug, Clone)]
pub struct Growth {
    /// The metric.
    pub name: String,
    /// The first post-warm-up value.
    pub warm: f64,
    /// The post-warm-up minimum.
    pub min: f64,
    /// The last value.
    pub last: f64,
    /// Peak of the first quarter after warm-up.
    pub early_peak: f64,
    /// Peak of the last quarter.
    pub late_peak: f64,
    /// Least-squares slope, per minute.
    pub slope_per_min: f64,
    /// The growth allowed.
    pub allowed: f64,
    /// `late_peak - early_peak > allowed`.
    pub grew: bool,
}

impl Metric {
    /// A metric allowed to grow by `max(abs, rel * early peak)`.
    pub fn new(name: impl Into<String>, abs: f64, rel: f64) -> Metric {
        Metric { name: name.into(), abs, rel, points: Vec::new() }
    }

    /// The growth allowed over an early peak of `early`.
    pub fn tolerance(&self, early: f64) -> f64 {
        self.abs.max(self.rel * early)
    }

    /// The verdict over the samples taken at or after `warmup` seconds (None: too few).
    pub fn growth(&self, warmup: f64) -> Option<Growth> {
        let post: Vec<(f64, f64)> = self.points.iter().copied().filter(|(t, _)| *t >= warmup).collect();
        if post.len() < 4 {
            return None;
        }
        let q = post.len() / 4;
        let peak = |s: &[(f64, f64)]| s.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        let early_peak = peak(&post[..q]);
        let late_peak = peak(&post[post.len() - q..]);
        let allowed = self.tolerance(early_peak);
        Some(Growth {
            name: self.name.clone(),
            warm: post[0].1,
            min: post.iter().map(|p| p.1).fold(f64::MAX, f64::min),
            last: post[post.len() - 1].1,
            early_peak,
            late_peak,
            slope_per_min: slope(&post) * 60.0,
            allowed,
            grew: late_peak - early_peak > allowed,
        })
    }
}

/// Least-squares slope of `points` (value per second).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points.iter().fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (num, den) =
        points.iter().fold((0.0, 0.0), |(a, b), p| (a + (p.0 - mx) * (p.1 - my), b + (p.0 - mx).powi(2)));
    if den == 0.0 {
        0.0
    } else {
        num / den
    }
}

/// The process's own resources.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessReading {
    /// Anonymous resident memory (heap, stacks), KiB.
    pub rss_anon_kib: u64,
    /// Shared resident memory (the guests' memfd memory, mapped by guest and backend), KiB.
    pub rss_shmem_kib: u64,
    /// Resident memory, KiB.
    pub rss_kib: u64,
    /// Threads.
    pub threads: u64,
    /// Open file descriptors.
    pub fds: u64,
}

/// Reads [`ProcessReading`] from /proc/self.
pub fn process() -> ProcessReading {
    let mut r = ProcessReading::default();
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status.lines() {
            let mut it = line.split_whitespace();
            let (Some(key), Some(value)) = (it.next(), it.next()) else { continue };
            let v = value.parse().unwrap_or(0);
            match key {
                "RssAnon:" => r.rss_anon_kib = v,
                "RssShmem:" => r.rss_shmem_kib = v,
                "VmRSS:" => r.rss_kib = v,
                "Threads:" => r.threads = v,
                _ => {}
            }
        }
    }
    r.fds = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(0);
    r
}

/// What the open descriptors are, as `target x count` (memfd, socket, anon_inode:[eventfd]...).
pub fn fd_kinds() -> String {
    let mut kinds: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for e in dir.flatten() {
            let target = std::fs::read_link(e.path()).map(|t| t.display().to_string()).unwrap_or_default();
            // socket:[12345], /memfd:name (deleted): the kind without the instance;
            // anon_inode:[eventfd] keeps its kind.
            let kind = if target.starts_with("anon_inode:") {
                target
            } else {
                target.split(['[', '(']).next().unwrap_or("").trim().to_string()
            };
            *kinds.entry(kind).or_default() += 1;
        }
    }
    kinds.iter().map(|(k, n)| format!("{k} x{n}")).collect::<Vec<_>>().join(", ")
}

/// Everything sampled, metric by metric.
#[derive(Debug, Default)]
pub struct Samples {
    /// The metrics, in summary order.
    pub metrics: Vec<Metric>,
}

impl Samples {
    /// Records `value` of metric `name` (created with its tolerances on first use) at `t`.
    pub fn record(&mut self, t: f64, name: &str, value: u64, abs: f64, rel: f64) {
        let i = match self.metrics.iter().position(|m| m.name == name) {
            Some(i) => i,
            None => {
                self.metrics.push(Metric::new(name, abs, rel));
                self.metrics.len() - 1
            }
        };
        self.metrics[i].points.push((t, value as f64));
    }
}

/// What one data tenant exposes to the sampler.
#[derive(Debug)]
pub struct TenantProbe<'a> {
    /// The tenant's letter.
    pub tag: &'static str,
    /// The backend's gauges.
    pub backend: &'a slimtcp_vhost::gauges::TenantGauges,
    /// The peer's gauges.
    pub peer: &'a crate::peer::PeerGauges,
    /// The workload's counters.
    pub workload: &'a crate::workload::WorkloadStats,
}

/// Takes one sample of everything at `t` seconds.
pub fn sample(s: &mut Samples, t: f64, tenants: &[TenantProbe<'_>]) {
    const MIB: f64 = 1024.0;
    let p = process();
    s.record(t, "process.rss_anon_kib", p.rss_anon_kib, 32.0 * MIB, 0.10);
    s.record(t, "process.rss_shmem_kib", p.rss_shmem_kib, 64.0 * MIB, 0.25);
    s.record(t, "process.rss_kib", p.rss_kib, 96.0 * MIB, 0.15);
    s.record(t, "process.threads", p.threads, 16.0, 0.0);
    s.record(t, "process.fds", p.fds, 96.0, 0.0);
    for tp in tenants {
        let g = tp.backend.read();
        let tag = tp.tag;
        s.record(t, &format!("{tag}.backend.guest_sockets"), g.guest_sockets, 64.0, 0.05);
        s.record(t, &format!("{tag}.backend.stack_sockets"), g.stack_sockets, 256.0, 0.10);
        s.record(t, &format!("{tag}.backend.sends_held"), g.sends_held, 512.0, 0.5);
        s.record(t, &format!("{tag}.backend.external_in_flight"), g.external_in_flight, 512.0, 0.5);
        s.record(t, &format!("{tag}.backend.pending_messages"), g.pending_messages, 1024.0, 0.5);
        s.record(t, &format!("{tag}.backend.rx_memory_kib"), g.rx_memory / 1024, 16.0 * MIB, 0.5);
        s.record(
            t,
            &format!("{tag}.peer.stack_sockets"),
            tp.peer.stack_sockets.load(Ordering::Relaxed),
            256.0,
            0.10,
        );
        s.record(t, &format!("{tag}.peer.sessions"), tp.peer.sessions.load(Ordering::Relaxed), 64.0, 0.05);
        s.record(
            t,
            &format!("{tag}.link.frames_in_flight"),
            tp.peer.link_in_flight.load(Ordering::Relaxed),
            1024.0,
            0.5,
        );
        s.record(
            t,
            &format!("{tag}.workload.open"),
            tp.workload.open_now.load(Ordering::Relaxed),
            64.0,
            0.05,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(values: &[f64]) -> Metric {
        let mut m = Metric::new("m", 10.0, 0.0);
        m.points = values.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect();
        m
    }

    #[test]
    fn a_flat_swinging_metric_has_not_grown() {
        let g = metric(&[100.0, 150.0, 90.0, 140.0, 100.0, 150.0, 95.0, 145.0]).growth(0.0).expect("enough");
        assert!(!g.grew, "{g:?}");
    }

    #[test]
    fn a_steady_climb_has_grown() {
        let values: Vec<f64> = (0..40).map(|i| 100.0 + f64::from(i)).collect();
        let g = metric(&values).growth(0.0).expect("enough");
        assert!(g.grew, "{g:?}");
        assert!((g.slope_per_min - 60.0).abs() < 1e-6, "{g:?}");
    }

    #[test]
    fn samples_before_the_warm_up_are_ignored() {
        let g = metric(&[0.0, 0.0, 500.0, 500.0, 500.0, 500.0]).growth(2.0).expect("enough");
        assert!(!g.grew, "{g:?}");
        assert_eq!(g.min, 500.0);
    }
}
