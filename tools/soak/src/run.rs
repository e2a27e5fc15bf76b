//! The soak's run: set-up, the sampled load, the teardown checks, the summary.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slimtcp::nic::fault::FaultConfig;
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic, MemwireStats};
use slimtcp_guest::{GuestConfig, GuestDevice, GuestSockets};

use crate::clock_nic::ClockNic;
use crate::error::SoakError;
use crate::hostile_chains::{self, ChainStats};
use crate::hostile_vmm::{self, VmmStats, ATTACKS};
use crate::peer::{Peer, ECHO_PORT};
use crate::sample::{self, ProcessReading, Samples, TenantProbe};
use crate::summary::{count, num, obj, render, text, Json};
use crate::tenant::{Addresses, BackendTenant};
use crate::workload::{self, WorkloadConfig, WorkloadStats};
use crate::Args;

/// How long everything may take to be released once the workloads closed their sockets (the
/// stack's TIME-WAIT is 1 s).
const DRAIN_WAIT: Duration = Duration::from_secs(20);
/// Runs at least this long (seconds) fail on growth after the warm-up; shorter ones report it.
const GROWTH_JUDGED_FROM: u64 = 300;
/// Samples over a run, about.
const SAMPLES: u64 = 600;
/// Faults of tenant a's link, each direction: per-frame probabilities.
fn faults() -> FaultConfig {
    FaultConfig { loss: 0.005, reorder: 0.005, duplicate: 0.005, corrupt: 0.005, ..FaultConfig::default() }
}

/// A data tenant: backend, peer, guest workload.
struct DataTenant {
    tag: &'static str,
    backend: BackendTenant,
    peer: Peer,
    stats: Arc<WorkloadStats>,
    thread: Option<std::thread::JoinHandle<GuestSockets>>,
}

/// A link's two ends on the soak's time base: (the backend's, the peer's).
fn memwire(
    tag: &'static str,
    cfg: LinkConfig,
    base: Instant,
) -> Result<(ClockNic<MemwireNic>, ClockNic<MemwireNic>), SoakError> {
    let (a, b) = link(cfg).map_err(|source| SoakError::Link { tenant: tag, source })?;
    Ok((ClockNic::new(a, base), ClockNic::new(b, base)))
}

/// The backend's NIC closure: hands out `nic` once (a tenant that lost its interface to a worker
/// panic cannot get the link back; that ends its serve loop's connection attempts with an error).
fn once(nic: ClockNic<MemwireNic>) -> impl FnMut() -> Result<ClockNic<MemwireNic>, String> + Send + 'static {
    let mut nic = Some(nic);
    move || nic.take().ok_or_else(|| "the tenant's memwire end was used already".to_string())
}

fn guest_config() -> GuestConfig {
    GuestConfig { memory_size: 128 << 20, ..GuestConfig::default() }
}

fn start_workload(
    tag: &'static str,
    api: GuestSockets,
    cfg: WorkloadConfig,
    stop: &Arc<AtomicBool>,
) -> Result<(Arc<WorkloadStats>, std::thread::JoinHandle<GuestSockets>), SoakError> {
    let stats = Arc::new(WorkloadStats::default());
    let name = format!("soak-{tag}-workload");
    let t = {
        let (stats, stop) = (Arc::clone(&stats), Arc::clone(stop));
        std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || workload::run(tag, api, cfg, &stop, &stats))
            .map_err(|source| SoakError::Spawn { name, source })?
    };
    Ok((stats, t))
}

fn init_log(path: &Path) -> Result<(), SoakError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|source| SoakError::Write { path: dir.to_path_buf(), source })?;
    }
    let file = std::fs::File::create(path)
        .map_err(|source| SoakError::Write { path: path.to_path_buf(), source })?;
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .target(env_logger::Target::Pipe(Box::new(file)))
        .try_init();
    Ok(())
}

/// Runs the soak; returns its findings (empty: pass).
pub fn run(args: &Args, seconds: u64) -> Result<Vec<String>, SoakError> {
    init_log(&args.log)?;
    let at_start = sample::process();
    let base = Instant::now();
    let dir = std::env::temp_dir().join(format!("slimtcp-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| SoakError::Write { path: dir.clone(), source })?;
    let result = run_in(args, seconds, base, &dir, at_start);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(
    args: &Args,
    seconds: u64,
    base: Instant,
    dir: &Path,
    at_start: ProcessReading,
) -> Result<Vec<String>, SoakError> {
    let mut findings = Vec::new();
    let (aa, ab, ac) = (Addresses { net: 81 }, Addresses { net: 82 }, Addresses { net: 83 });
    let fa = faults();
    let link_a = LinkConfig {
        a_to_b: fa,
        b_to_a: fa,
        seed: args.seed,
        pcap: args.capture.clone(),
        ..LinkConfig::default()
    };
    let (make_a, peer_end_a) = memwire("a", link_a, base)?;
    let (make_b, peer_end_b) = memwire("b", LinkConfig::default(), base)?;
    let (make_c, idle_end_c) = memwire("c", LinkConfig::default(), base)?;

    let backend_a = BackendTenant::start("a", dir, aa, 1, once(make_a))?;
    let backend_b = BackendTenant::start("b", dir, ab, 2, once(make_b))?;
    let backend_c = BackendTenant::start("c", dir, ac, 1, once(make_c))?;
    let peer_a = Peer::start("a", peer_end_a, aa)?;
    let peer_b = Peer::start("b", peer_end_b, ab)?;

    let api_a = GuestSockets::connect_vhost_user(&backend_a.socket, guest_config())
        .map_err(|source| SoakError::Attach { tenant: "a", source })?;
    let mut dev_b =
        GuestDevice::connect_vhost_user(&backend_b.socket, GuestConfig { queue_pairs: 2, ..guest_config() })
            .map_err(|source| SoakError::Attach { tenant: "b", source })?;
    let api_b = dev_b.take(0).map_err(|source| SoakError::Attach { tenant: "b", source })?;
    let hostile_pair =
        dev_b.take_queue_pair(1).map_err(|source| SoakError::Attach { tenant: "b", source })?;
    drop(dev_b);

    let stop = Arc::new(AtomicBool::new(false));
    let wl = |tenant: usize, addrs: Addresses| WorkloadConfig {
        conns: args.conns_per_tenant,
        active: args.active,
        seed: args.seed.wrapping_mul(1000).wrapping_add(tenant as u64),
        server: SocketAddrV4::new(addrs.peer_ip(), ECHO_PORT),
    };
    let (stats_a, thread_a) = start_workload("a", api_a, wl(1, aa), &stop)?;
    let (stats_b, thread_b) = start_workload("b", api_b, wl(2, ab), &stop)?;
    let mut tenants = [
        DataTenant { tag: "a", backend: backend_a, peer: peer_a, stats: stats_a, thread: Some(thread_a) },
        DataTenant { tag: "b", backend: backend_b, peer: peer_b, stats: stats_b, thread: Some(thread_b) },
    ];
    let chain_stats = Arc::new(ChainStats::default());
    let chains = hostile_chains::spawn(hostile_pair, Arc::clone(&stop), Arc::clone(&chain_stats))?;
    let vmm_stats = Arc::new(VmmStats::default());
    let vmm = hostile_vmm::spawn(backend_c.socket.clone(), Arc::clone(&stop), Arc::clone(&vmm_stats))?;

    // The load, sampled.
    let started = Instant::now();
    let duration = Duration::from_secs(seconds);
    let every = Duration::from_millis((seconds * 1000 / SAMPLES).max(1000));
    let warmup = seconds as f64 * args.warmup_percent as f64 / 100.0;
    let mut samples = Samples::default();
    let mut next_sample = started;
    let mut next_report = started;
    let mut last_transfers = [0u64; 2];
    let mut last_progress = [started; 2];
    println!(
        "slimtcp-soak: {seconds} s, {} connections per data tenant ({} in all), {} transfers at once each; \
         growth judged after {warmup:.0} s; log {}",
        args.conns_per_tenant,
        2 * args.conns_per_tenant,
        args.active,
        args.log.display()
    );
    while started.elapsed() < duration {
        let now = Instant::now();
        if now >= next_sample {
            next_sample += every;
            let probes: Vec<TenantProbe<'_>> = tenants
                .iter()
                .map(|t| TenantProbe {
                    tag: t.tag,
                    backend: &t.backend.gauges,
                    peer: &t.peer.gauges,
                    workload: &t.stats,
                })
                .collect();
            sample::sample(&mut samples, started.elapsed().as_secs_f64(), &probes);
        }
        if let Some(dead) = dead(&tenants, &backend_c) {
            findings.push(dead);
            break;
        }
        for (i, t) in tenants.iter().enumerate() {
            let n = t.stats.transfers.load(Ordering::Relaxed);
            if n != last_transfers[i] {
                last_transfers[i] = n;
                last_progress[i] = now;
            } else if now.duration_since(last_progress[i]) > workload::STALL {
                findings.push(format!("tenant {}: no transfer completed for {:?}", t.tag, workload::STALL));
            }
        }
        if !findings.is_empty() {
            break;
        }
        if now >= next_report {
            next_report += Duration::from_secs((seconds / 10).max(10));
            progress(started, &tenants, &chain_stats, &vmm_stats);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let loaded_for = started.elapsed();
    progress(started, &tenants, &chain_stats, &vmm_stats);

    // Teardown: the workloads close every connection; then everything must be released.
    stop.store(true, Ordering::Release);
    let mut guests = Vec::new();
    for t in &mut tenants {
        if let Some(th) = t.thread.take() {
            match th.join() {
                Ok(api) => guests.push(api),
                Err(_) => findings.push(format!("tenant {}: the workload thread panicked", t.tag)),
            }
        }
        if let Some(f) = t.stats.fatal() {
            findings.push(f);
        }
    }
    match chains.join() {
        Ok(Some(f)) => findings.push(f),
        Ok(None) => {}
        Err(_) => findings.push("tenant b: the hostile-chains thread panicked".into()),
    }
    if vmm.join().is_err() {
        findings.push("tenant c: the hostile VMM thread panicked".into());
    }
    findings.extend(vmm_stats.findings());
    let drained = drain(&tenants);
    if let Err(f) = &drained {
        findings.push(f.clone());
    }
    // The guests detach: each tenant's session ends; then the tenants and peers stop.
    drop(guests);
    let mut reports = Vec::new();
    let mut links = Vec::new();
    for t in tenants {
        let end = t.backend.stop();
        if let Some(f) = end.failure {
            findings.push(format!("tenant {}: {f}", t.tag));
        }
        links.push((
            t.tag,
            t.peer.gauges.link_stats(),
            t.peer.gauges.accepted.load(Ordering::Relaxed),
            t.peer.gauges.failed.load(Ordering::Relaxed),
            t.peer.gauges.timed_out.load(Ordering::Relaxed),
        ));
        if let Some(f) = t.peer.stop() {
            findings.push(format!("tenant {}'s peer: {f}", t.tag));
        }
        reports.push((t.tag, end.reports, t.stats));
    }
    let end_c = backend_c.stop();
    if let Some(f) = end_c.failure {
        findings.push(format!("tenant c: {f}"));
    }
    drop(idle_end_c);
    let at_end = sample::process();
    check_process_released(&at_start, &at_end, &mut findings);

    // Verdicts and the summary. Growth fails only runs long enough to tell a leak from the
    // load still settling (a short run reports it).
    let judge_growth = seconds >= GROWTH_JUDGED_FROM;
    let mut growth = Vec::new();
    for m in &samples.metrics {
        match m.growth(warmup) {
            Some(g) => {
                if g.grew && !judge_growth {
                    println!(
                        "slimtcp-soak: note (not judged under {GROWTH_JUDGED_FROM} s): {} rose from a peak of {:.0} to {:.0} (tolerance +{:.0})",
                        g.name, g.early_peak, g.late_peak, g.allowed
                    );
                } else if g.grew {
                    findings.push(format!(
                        "{} grew: peak {:.0} in the last quarter against {:.0} in the first after warm-up (allowed +{:.0}; slope {:+.1}/min)",
                        g.name, g.late_peak, g.early_peak, g.allowed, g.slope_per_min
                    ));
                }
                growth.push(g);
            }
            None => findings.push(format!("{}: too few samples after the warm-up to judge growth", m.name)),
        }
    }
    for (tag, _, stats) in &reports {
        let errors =
            stats.connect_errors.load(Ordering::Relaxed) + stats.socket_errors.load(Ordering::Relaxed);
        if errors > 0 {
            findings.push(format!("tenant {tag}: {errors} socket errors, e.g. {:?}", stats.errors()));
        }
        if stats.transfers.load(Ordering::Relaxed) == 0 {
            findings.push(format!("tenant {tag}: no transfer completed"));
        }
    }
    let summary = Summary {
        seconds,
        loaded_for,
        warmup,
        at_start,
        at_end,
        reports: &reports,
        links: &links,
        chain_stats: &chain_stats,
        vmm_stats: &vmm_stats,
        growth: &growth,
        drained: drained.is_ok(),
        findings: &findings,
    };
    summary.print();
    write_json(&args.out, &summary.json())?;
    println!("slimtcp-soak: summary written to {}", args.out.display());
    Ok(findings)
}

/// A data tenant's backend or peer, or tenant c's backend, that is no longer running.
fn dead(tenants: &[DataTenant], c: &BackendTenant) -> Option<String> {
    for t in tenants {
        if !t.backend.alive() {
            return Some(format!("tenant {}: the backend's serve loop ended", t.tag));
        }
        if !t.peer.alive() {
            return Some(format!("tenant {}: its peer stopped", t.tag));
        }
        if t.thread.as_ref().is_some_and(|th| th.is_finished()) {
            return Some(format!(
                "tenant {}: the workload ended early: {}",
                t.tag,
                t.stats.fatal().unwrap_or_else(|| "no reason given".into())
            ));
        }
    }
    (!c.alive()).then(|| "tenant c: the backend's serve loop ended".to_string())
}

/// Waits until the backends hold no guest socket, send or NIC-held payload, and the peers no
/// session.
fn drain(tenants: &[DataTenant]) -> Result<(), String> {
    let quiet = || {
        tenants.iter().all(|t| {
            let g = t.backend.gauges.read();
            g.guest_sockets == 0
                && g.sends_held == 0
                && g.external_in_flight == 0
                && g.stack_sockets == 0
                && t.peer.gauges.sessions.load(Ordering::Relaxed) == 0
                && t.peer.gauges.stack_sockets.load(Ordering::Relaxed) <= 1
        })
    };
    if slimtcp_testkit::wait::wait_for(DRAIN_WAIT, quiet) {
        return Ok(());
    }
    for t in tenants {
        let lines = t.peer.gauges.describe(Duration::from_secs(2)).unwrap_or_default();
        for line in lines.iter().filter(|l| !l.starts_with("released: TimeWait")) {
            log::warn!("soak: tenant {}'s peer still has {line}", t.tag);
        }
    }
    let left: Vec<String> = tenants
        .iter()
        .map(|t| {
            format!(
                "{}: backend {:?}, peer sockets {} sessions {}",
                t.tag,
                t.backend.gauges.read(),
                t.peer.gauges.stack_sockets.load(Ordering::Relaxed),
                t.peer.gauges.sessions.load(Ordering::Relaxed)
            )
        })
        .collect();
    Err(format!("not everything was released {DRAIN_WAIT:?} after the last close: {}", left.join("; ")))
}

/// Descriptors and threads must be back where they were before the soak started.
fn check_process_released(start: &ProcessReading, end: &ProcessReading, findings: &mut Vec<String>) {
    if end.fds > start.fds {
        findings.push(format!(
            "{} descriptors open at the end against {} at the start; open now: {}",
            end.fds,
            start.fds,
            sample::fd_kinds()
        ));
    }
    if end.threads > start.threads {
        findings.push(format!("{} threads at the end against {} at the start", end.threads, start.threads));
    }
}

fn progress(started: Instant, tenants: &[DataTenant], chains: &ChainStats, vmm: &VmmStats) {
    let p = sample::process();
    let mut line = format!(
        "[{:>6.0} s] rss {} MiB fds {} threads {}",
        started.elapsed().as_secs_f64(),
        p.rss_kib / 1024,
        p.fds,
        p.threads
    );
    for t in tenants {
        let s = &t.stats;
        line.push_str(&format!(
            " | {}: open {} transfers {} verified {} MiB",
            t.tag,
            s.open_now.load(Ordering::Relaxed),
            s.transfers.load(Ordering::Relaxed),
            s.bytes_verified.load(Ordering::Relaxed) >> 20
        ));
    }
    line.push_str(&format!(
        " | hostile chains {}/{} | c rounds {}",
        chains.returned.load(Ordering::Relaxed),
        chains.sent.load(Ordering::Relaxed),
        vmm.rounds.load(Ordering::Relaxed)
    ));
    println!("{line}");
}

fn write_json(path: &PathBuf, j: &Json) -> Result<(), SoakError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|source| SoakError::Write { path: dir.to_path_buf(), source })?;
    }
    std::fs::write(path, render(j)).map_err(|source| SoakError::Write { path: path.clone(), source })
}

/// Everything the summary shows.
struct Summary<'a> {
    seconds: u64,
    loaded_for: Duration,
    warmup: f64,
    at_start: ProcessReading,
    at_end: ProcessReading,
    reports: &'a [(&'static str, Vec<slimtcp_vhost::engine::SessionReport>, Arc<WorkloadStats>)],
    links: &'a [(&'static str, MemwireStats, u64, u64, u64)],
    chain_stats: &'a ChainStats,
    vmm_stats: &'a VmmStats,
    growth: &'a [sample::Growth],
    drained: bool,
    findings: &'a [String],
}

impl Summary<'_> {
    fn print(&self) {
        println!("== slimtcp-soak summary ==");
        println!(
            "duration {} s requested, {:.0} s under load; growth judged after {:.0} s",
            self.seconds,
            self.loaded_for.as_secs_f64(),
            self.warmup
        );
        for (tag, reports, s) in self.reports {
            let l = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
            println!(
                "tenant {tag}: connections opened {}, closed gracefully {}, closed at once {}, abandoned mid-transfer {}; \
                 transfers {}; bytes sent {}, echoed bytes verified {}; connect errors {}, socket errors {}; sessions {}",
                l(&s.opened), l(&s.closed), l(&s.closed_at_once), l(&s.aborted), l(&s.transfers),
                l(&s.bytes_sent), l(&s.bytes_verified), l(&s.connect_errors), l(&s.socket_errors), reports.len()
            );
            for r in reports {
                println!("  backend session: {r}");
            }
        }
        for (tag, ls, accepted, failed, timed_out) in self.links {
            let f = |d: &slimtcp::nic::memwire::DirectionStats| {
                format!(
                    "sent {} dropped {} corrupted {} duplicated {} reordered {}",
                    d.sent, d.faults.dropped, d.faults.corrupted, d.faults.duplicated, d.faults.reordered
                )
            };
            println!("link {tag}: to peer: {}; from peer: {}; peer accepted {accepted}, peer sessions failed {failed} (timed out {timed_out})", f(&ls.rx), f(&ls.tx));
        }
        let c = self.chain_stats;
        println!(
            "tenant b hostile pair: chains sent {}, returned {}",
            c.sent.load(Ordering::Relaxed),
            c.returned.load(Ordering::Relaxed)
        );
        let v = self.vmm_stats;
        let per: Vec<String> = ATTACKS
            .iter()
            .enumerate()
            .map(|(i, a)| {
                format!(
                    "{a} {}/{}",
                    v.refused[i].load(Ordering::Relaxed),
                    v.attacks[i].load(Ordering::Relaxed)
                )
            })
            .collect();
        println!(
            "tenant c hostile VMM: rounds {}, attacks ended as expected/run: {}; bad chains returned {}/{}; good guests after a round {}",
            v.rounds.load(Ordering::Relaxed),
            per.join(", "),
            v.chains_returned.load(Ordering::Relaxed),
            v.chains_sent.load(Ordering::Relaxed),
            v.good_guests.load(Ordering::Relaxed)
        );
        println!(
            "process: start rss {} KiB fds {} threads {}; end (all stopped) rss {} KiB fds {} threads {}",
            self.at_start.rss_kib,
            self.at_start.fds,
            self.at_start.threads,
            self.at_end.rss_kib,
            self.at_end.fds,
            self.at_end.threads
        );
        println!(
            "{:<36} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}",
            "metric", "warm-up", "min", "last", "early peak", "late peak", "slope/min", "verdict"
        );
        for g in self.growth {
            println!(
                "{:<36} {:>12.0} {:>12.0} {:>12.0} {:>12.0} {:>12.0} {:>+10.1} {:>10}",
                g.name,
                g.warm,
                g.min,
                g.last,
                g.early_peak,
                g.late_peak,
                g.slope_per_min,
                if g.grew { "GREW" } else { "ok" }
            );
        }
        println!("released at the end: {}", if self.drained { "yes" } else { "NO" });
    }

    fn json(&self) -> Json {
        let l = |c: &std::sync::atomic::AtomicU64| count(c.load(Ordering::Relaxed));
        let tenants = self
            .reports
            .iter()
            .map(|(tag, reports, s)| {
                obj([
                    ("tenant", text(*tag)),
                    ("connections_opened", l(&s.opened)),
                    ("closed_gracefully", l(&s.closed)),
                    ("closed_at_once", l(&s.closed_at_once)),
                    ("abandoned_mid_transfer", l(&s.aborted)),
                    ("transfers", l(&s.transfers)),
                    ("bytes_sent", l(&s.bytes_sent)),
                    ("bytes_verified", l(&s.bytes_verified)),
                    ("connect_errors", l(&s.connect_errors)),
                    ("socket_errors", l(&s.socket_errors)),
                    ("backend_sessions", Json::Array(reports.iter().map(|r| text(r.to_string())).collect())),
                ])
            })
            .collect();
        let dir = |d: &slimtcp::nic::memwire::DirectionStats| {
            obj([
                ("sent", count(d.sent)),
                ("dropped", count(d.faults.dropped)),
                ("corrupted", count(d.faults.corrupted)),
                ("duplicated", count(d.faults.duplicated)),
                ("reordered", count(d.faults.reordered)),
                ("dropped_full", count(d.dropped_full)),
            ])
        };
        let links = self
            .links
            .iter()
            .map(|(tag, ls, accepted, failed, timed_out)| {
                obj([
                    ("tenant", text(*tag)),
                    ("to_peer", dir(&ls.rx)),
                    ("from_peer", dir(&ls.tx)),
                    ("peer_accepted", count(*accepted)),
                    ("peer_sessions_failed", count(*failed)),
                    ("peer_sessions_timed_out", count(*timed_out)),
                ])
            })
            .collect();
        let v = self.vmm_stats;
        let attacks = ATTACKS
            .iter()
            .enumerate()
            .map(|(i, a)| {
                obj([
                    ("attack", text(*a)),
                    ("run", l(&v.attacks[i])),
                    ("ended_as_expected", l(&v.refused[i])),
                ])
            })
            .collect();
        let proc_json = |p: &ProcessReading| {
            obj([
                ("rss_kib", count(p.rss_kib)),
                ("rss_anon_kib", count(p.rss_anon_kib)),
                ("rss_shmem_kib", count(p.rss_shmem_kib)),
                ("fds", count(p.fds)),
                ("threads", count(p.threads)),
            ])
        };
        let growth = self
            .growth
            .iter()
            .map(|g| {
                obj([
                    ("metric", text(g.name.clone())),
                    ("at_warmup", num(g.warm)),
                    ("min", num(g.min)),
                    ("last", num(g.last)),
                    ("early_peak", num(g.early_peak)),
                    ("late_peak", num(g.late_peak)),
                    ("allowed_growth", num(g.allowed)),
                    ("slope_per_min", num(g.slope_per_min)),
                    ("grew", Json::Bool(g.grew)),
                ])
            })
            .collect();
        obj([
            ("pass", Json::Bool(self.findings.is_empty())),
            ("seconds_requested", count(self.seconds)),
            ("seconds_loaded", num(self.loaded_for.as_secs_f64())),
            ("warmup_seconds", num(self.warmup)),
            ("tenants", Json::Array(tenants)),
            ("links", Json::Array(links)),
            (
                "hostile_pair_b",
                obj([
                    ("chains_sent", l(&self.chain_stats.sent)),
                    ("chains_returned", l(&self.chain_stats.returned)),
                ]),
            ),
            (
                "hostile_vmm_c",
                obj([
                    ("rounds", l(&v.rounds)),
                    ("attacks", Json::Array(attacks)),
                    ("bad_chains_sent", l(&v.chains_sent)),
                    ("bad_chains_returned", l(&v.chains_returned)),
                    ("good_guests_attached", l(&v.good_guests)),
                ]),
            ),
            ("process_at_start", proc_json(&self.at_start)),
            ("process_at_end", proc_json(&self.at_end)),
            ("growth", Json::Array(growth)),
            ("released_at_end", Json::Bool(self.drained)),
            ("findings", Json::Array(self.findings.iter().map(|f| text(f.clone())).collect())),
        ])
    }
}
