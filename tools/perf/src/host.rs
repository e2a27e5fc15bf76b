//! The workload over SlimTCP's host runtime: builds the interface(s) on the chosen NIC, starts
//! the runtime (two-core or single) and hands the resulting `HostSockets` to the workload.

use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::memwire::{self, LinkConfig, MemwireError};
use slimtcp::nic::tap::{TapConfig, TapError, TapNic};
use slimtcp::nic::Nic;
use slimtcp::runtime::{self, HostSockets, IdlePolicy, RuntimeConfig, RuntimeError};
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::config::{Config, LocalAddr, NicChoice, Role, RuntimeMode};
use crate::meter::Interval;
use crate::workload::{self, Measurement, Settings, WorkloadError};

/// Frames in flight per direction of the memwire link: as deep as the DPDK port's transmit ring
/// (1,024 descriptors), so the benches' link pushes back where a NIC does (memwire never drops).
/// Until 2026-12-04 it held 2^17 frames, so that the link was never what made a sender wait; but
/// then one poll put whole windows of thousands of connections on it, each frame waited behind
/// up to 180 MiB of others and came back from memory (4096 connections at MSS 1400: 0.40 of one
/// connection's goodput, two-core). The ring's depth was measured then to help (thirteenth
/// round) but a full ring cost the stack 167 instructions per segment (two passes over the
/// transmit backlog per burst, and the move of the frames behind those the NIC took); the
/// backlog now keeps its byte count and hands the NIC a burst at a time (`iface/tx_backlog.rs`),
/// and a full ring costs about 36.
pub const MEMWIRE_CAPACITY: usize = 1 << 10;
/// After its last close, a lone role keeps its stack running until the link was quiet this long
/// (its last FIN or ACK must leave, and be retransmitted if lost, before the process ends) ...
const LINGER_QUIET: Duration = Duration::from_millis(300);
/// ... but no longer than this.
const LINGER_MAX: Duration = Duration::from_secs(2);

/// Why a SlimTCP run failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The in-memory link could not be built.
    #[error("building the memwire link")]
    Link(#[source] MemwireError),
    /// The TAP interface could not be opened or brought up.
    #[error("opening TAP interface {ifname}")]
    Tap {
        /// The interface.
        ifname: String,
        /// Why.
        #[source]
        source: TapError,
    },
    /// The worker thread could not start.
    #[error("starting the two-core runtime")]
    Runtime(#[source] RuntimeError),
    /// The worker thread panicked.
    #[error("the worker thread failed")]
    WorkerPanicked,
    /// The workload failed.
    #[error("workload")]
    Workload(#[from] WorkloadError),
    /// The guest library could not attach to the device.
    #[error("attaching to the slimtcp-vhost device {device}")]
    Guest {
        /// The device string.
        device: String,
        /// Why.
        #[source]
        source: slimtcp_guest::GuestError,
    },
    /// The DPDK NIC failed to start.
    #[cfg(feature = "dpdk")]
    #[error("DPDK")]
    Dpdk(#[from] crate::dpdk::DpdkSetupError),
}

/// Runs `cfg` (not `--kernel`) and returns what it measured.
pub fn run(cfg: &Config, progress: workload::Progress<'_>) -> Result<Measurement, HostError> {
    match &cfg.nic {
        NicChoice::Memwire => run_memwire(cfg, progress),
        NicChoice::Guest { device } => {
            let mut api = slimtcp_guest::GuestDevice::open(device, slimtcp_guest::GuestConfig::default())
                .and_then(|mut d| d.take(0))
                .map_err(|source| HostError::Guest { device: device.to_string(), source })?;
            Ok(one_role(&mut api, cfg, progress)?)
        }
        NicChoice::Tap { ifname } => {
            let tap = open_tap(ifname, TapConfig { checksum_offload: !cfg.no_checksum_offload })?;
            run_one(iface(tap, local(cfg), cfg.burst, &cfg.arp), IdlePolicy::Backoff, cfg, progress)
        }
        #[cfg(feature = "dpdk")]
        NicChoice::Dpdk { port } => {
            // The EAL pinned this thread to its lcore: the core is ours, so waits busy-poll (a
            // nap would leave the port unpolled while the peer's frames pile up).
            let nic = crate::dpdk::open(&cfg.eal_args, port, cfg.burst)?;
            run_one(iface(nic, local(cfg), cfg.burst, &cfg.arp), IdlePolicy::BusyPoll, cfg, progress)
        }
        #[cfg(not(feature = "dpdk"))]
        NicChoice::Dpdk { .. } => unreachable!("rejected by Config::try_from without the dpdk feature"),
    }
}

/// The socket settings of `cfg`.
pub fn settings(cfg: &Config) -> Settings {
    Settings {
        mss: cfg.mss,
        win_scale: cfg.win_scale,
        buffer: cfg.socket_buffer.per_connection(cfg.connections),
        zero_copy: cfg.zero_copy,
    }
}

fn local(cfg: &Config) -> LocalAddr {
    cfg.local.unwrap_or(LocalAddr {
        ip: slimtcp::sim::A_IP,
        prefix_len: crate::config::DEFAULT_PREFIX,
        mac: crate::config::DEFAULT_MAC,
    })
}

fn iface<N: Nic>(
    nic: N,
    local: LocalAddr,
    burst: usize,
    arp: &[(Ipv4Addr, EthernetAddress)],
) -> Interface<N> {
    let mut c = InterfaceConfig::new(local.mac, local.ip, local.prefix_len);
    c.burst = burst;
    c.static_neighbors = arp.to_vec();
    Interface::new(nic, c)
}

fn open_tap(ifname: &str, config: TapConfig) -> Result<TapNic, HostError> {
    let err = |source| HostError::Tap { ifname: ifname.to_owned(), source };
    let tap = TapNic::open_with(ifname, config).map_err(err)?;
    tap.set_up().map_err(err)?;
    Ok(tap)
}

fn runtime_config() -> RuntimeConfig {
    RuntimeConfig { name: "slimtcp-perf-worker".into(), ..RuntimeConfig::default() }
}

/// One role over one interface; in single-thread mode its waits follow `idle`.
fn run_one<N: Nic + Send + 'static>(
    iface: Interface<N>,
    idle: IdlePolicy,
    cfg: &Config,
    progress: workload::Progress<'_>,
) -> Result<Measurement, HostError> {
    match cfg.runtime {
        RuntimeMode::Single => {
            let mut api = runtime::single_with(iface, Clock::real(), idle);
            let result = one_role(&mut api, cfg, progress);
            linger(&mut api);
            Ok(result?)
        }
        RuntimeMode::TwoCore => {
            let (mut api, worker) =
                runtime::two_core(iface, Clock::real(), &runtime_config()).map_err(HostError::Runtime)?;
            let result = one_role(&mut api, cfg, progress);
            linger(&mut api);
            drop(api);
            worker.join().map_err(|_| HostError::WorkerPanicked)?;
            Ok(result?)
        }
    }
}

/// Keeps the stack of a lone role running after its workload closed everything, until it was
/// quiet for [`LINGER_QUIET`] (at most [`LINGER_MAX`]): otherwise the process can end with its
/// last FIN unsent or unacknowledged, and the peer waits for it in vain (seen over memif, whose
/// link goes down with the process). A two-core worker runs by itself: the wait is then fixed.
fn linger(api: &mut HostSockets) {
    let start = Instant::now();
    let mut last_work = start;
    while last_work.elapsed() < LINGER_QUIET && start.elapsed() < LINGER_MAX {
        match api.progress() {
            Ok(true) => last_work = Instant::now(),
            Ok(false) => std::thread::sleep(Duration::from_micros(50)),
            Err(_) => return,
        }
    }
}

fn one_role<A: slimtcp::api::SocketApi>(
    api: &mut A,
    cfg: &Config,
    progress: workload::Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let s = settings(cfg);
    let duration = cfg.duration.unwrap_or(crate::config::DEFAULT_DURATION);
    if cfg.udp {
        return match cfg.role {
            Role::Receiver => workload::udp::run_receiver(api, cfg.listen_port, s, cfg.duration, progress),
            Role::Sender | Role::Both => {
                workload::udp::run_sender(api, cfg.connect, cfg.connections, s, duration, progress)
            }
        };
    }
    match cfg.role {
        Role::Receiver => {
            let expect = cfg.connections_given.then_some(cfg.connections);
            workload::run_receiver(api, cfg.listen_port, s, cfg.duration, expect, progress)
        }
        Role::Sender | Role::Both => {
            workload::run_sender(api, cfg.connect, cfg.connections, s, duration, progress)
        }
    }
}

/// Sender (side A) and receiver (side B) on the two ends of one memwire link.
fn run_memwire(cfg: &Config, progress: workload::Progress<'_>) -> Result<Measurement, HostError> {
    let mut link = LinkConfig { capacity: MEMWIRE_CAPACITY, ..LinkConfig::default() };
    if cfg.checksum_offload {
        link.caps.checksum = slimtcp::wire::ChecksumCapabilities::all();
    }
    let (na, nb) = memwire::link(link).map_err(HostError::Link)?;
    let (mut ca, mut cb) = slimtcp::sim::default_configs();
    ca.burst = cfg.burst;
    cb.burst = cfg.burst;
    let ifaces = vec![Interface::new(na, ca), Interface::new(nb, cb)];
    let duration = cfg.duration.unwrap_or(crate::config::DEFAULT_DURATION);
    let s = settings(cfg);
    let run = |apps: &mut Vec<HostSockets>,
               progress: workload::Progress<'_>|
     -> Result<Measurement, WorkloadError> {
        let [tx, rx] = apps.as_mut_slice() else { unreachable!("two interfaces give two sides") };
        if cfg.udp {
            workload::udp::run_both(tx, rx, cfg.connect, cfg.connections, s, duration, progress)
        } else {
            workload::run_both(tx, rx, cfg.connect, cfg.connections, s, duration, progress)
        }
    };
    match cfg.runtime {
        RuntimeMode::Single => {
            let mut apps = runtime::single_group(ifaces, Clock::real());
            Ok(run(&mut apps, progress)?)
        }
        RuntimeMode::TwoCore => {
            let (mut apps, worker) = runtime::two_core_group(ifaces, Clock::real(), &runtime_config())
                .map_err(HostError::Runtime)?;
            let result = run(&mut apps, progress);
            drop(apps);
            worker.join().map_err(|_| HostError::WorkerPanicked)?;
            Ok(result?)
        }
    }
}

/// Prints nothing: for callers that want no progress.
pub fn no_progress(_: &Interval) {}
