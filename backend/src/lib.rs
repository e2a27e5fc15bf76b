//! `slimtcp-vhost`: SlimTCP as a vhost-user-net backend. Each tenant (one vhost-user socket, one
//! VM) gets a worker thread, pinned to the operator's core, that owns the tenant's SlimTCP
//! [`Interface`](slimtcp::iface::Interface) and NIC and busy-polls its virtqueues, which carry
//! the SlimTCP guest protocol (`docs/protocol.md`, crate `slimtcp-abi`) instead of Ethernet.
//!
//! - [`config`]: command line (clap), config file (TOML) and their validated form.
//! - [`daemon`]: the process: tenants started and stopped, signals, the control socket and the
//!   metrics endpoint on one `event-manager` loop; [`stats`]: what they show.
//! - [`device`]: the vhost-user control plane (features, rings, memory), on its own thread.
//! - [`engine`]: the data path: requests, completions, events, zero-copy sends, receive copies.
//! - [`guest_mem`]: range-checked translation of guest addresses; guest-memory payloads.
//! - [`guest_dma`]: guest memory announced to the NIC (DPDK registration) for zero copy.
//! - [`queues`]: ring access for the engine (live vrings or plain queues in tests).
//! - [`relay`]: the VMM's vhost-user connection, relayed to the daemon (QEMU's early enable).
//! - [`ring_stop`]: GET_VRING_BASE handed from the control thread to the worker.
//! - [`server`]: a tenant's connection loop (reconnects, resets); [`worker`]: thread spawning.
//! - [`gauges`]: live gauges of a tenant (sockets, held sends), for leak detection.
//! - [`capture`]: per-tenant packet capture: a NIC wrapper feeding a bounded tap, drained to pcap.
//! - [`sigbus`]: recovery from guest memory truncated under the backend's mapping.
//! - [`sandbox`]: seccomp filters on the worker and control threads (`--no-seccomp`: off).

pub mod capture;
pub mod config;
pub mod daemon;
pub mod device;
pub mod engine;
pub mod gauges;
pub mod guest_dma;
pub mod guest_mem;
pub mod log_limit;
pub mod queues;
pub mod relay;
pub mod ring_stop;
pub mod sandbox;
pub mod server;
pub mod sigbus;
pub mod stats;
pub mod worker;

/// An error and its sources on one line (the stack's helper, for the daemon and its tools).
pub use slimtcp::report::error_chain;

use std::sync::Arc;

use capture::{CaptureTap, Tapped};
use config::{Config, TenantNic, TenantSpec};
use gauges::TenantGauges;
use sandbox::Sandbox;
use server::{serve_tenant_observed, ServerError, StopHandle, TenantConfig};

/// Serves the configured tenants until `stop`, SIGTERM or SIGINT, with the control loop of
/// [`daemon`] on the calling thread (call it before spawning threads: it blocks the signals it
/// handles). A tenant that fails is logged and the others go on; fails when every tenant
/// ended on its own or some failed.
pub fn start_backend(config: &Config, stop: &StopHandle) -> Result<(), daemon::DaemonError> {
    daemon::run(config, stop)
}

/// Serves one tenant on its NIC (wrapped in its capture tap), publishing into `gauges`.
pub(crate) fn serve_spec(
    spec: &TenantSpec,
    eal_args: Option<&[String]>,
    sandbox: Sandbox,
    stop: &StopHandle,
    gauges: &Arc<TenantGauges>,
    capture: &Arc<CaptureTap>,
) -> Result<(), ServerError> {
    let tenant = TenantConfig::from_spec(spec, sandbox);
    let host_ip = spec.host_ip;
    match &spec.nic {
        TenantNic::Tap { name } => {
            let (name, capture) = (name.clone(), Arc::clone(capture));
            let tap_config = slimtcp::nic::tap::TapConfig { checksum_offload: spec.checksum_offload };
            serve_tenant_observed(
                &tenant,
                move || {
                    let tap = slimtcp::nic::tap::TapNic::open_with(&name, tap_config)
                        .map_err(|e| error_chain(&e))?;
                    tap.set_up().map_err(|e| error_chain(&e))?;
                    if let Some(h) = host_ip {
                        tap.set_host_address(h.addr, h.prefix_len).map_err(|e| error_chain(&e))?;
                    }
                    Ok(Tapped::new(tap, Arc::clone(&capture)))
                },
                stop,
                None,
                |_| {},
                gauges,
            )
        }
        #[cfg(feature = "dpdk")]
        TenantNic::Dpdk { port } => {
            // The worker gets the DPDK worker's allow-list (docs/operating.md, "Sandboxing").
            let tenant = TenantConfig { sandbox: sandbox.for_dpdk(), ..tenant };
            if tenant.sandbox != sandbox {
                log::info!("{}: DPDK tenant: {}", spec.name, tenant.sandbox.describe());
            }
            let eal_args = eal_args.ok_or_else(|| ServerError::Nic("a DPDK tenant needs --dpdk".into()))?;
            let eal_args = sandboxed_eal_args(eal_args, sandbox);
            let port = DpdkPort {
                port: *port,
                mac: spec.mac,
                promiscuous: spec.promiscuous,
                checksum_offload: spec.checksum_offload,
                host_ip,
            };
            let capture = Arc::clone(capture);
            serve_tenant_observed(
                &tenant,
                move || Ok(Tapped::new(dpdk_nic(&eal_args, &port, sandbox)?, Arc::clone(&capture))),
                stop,
                None,
                |_| {},
                gauges,
            )
        }
        #[cfg(not(feature = "dpdk"))]
        TenantNic::Dpdk { .. } => {
            let _ = (eal_args, gauges, capture);
            Err(ServerError::Nic("built without the dpdk feature".into()))
        }
    }
}

/// The EAL arguments for `sandbox`: the operator's, plus `--no-shconf` when the sandbox is on and
/// neither it nor `--in-memory` (which implies it) is there. With shared configuration files,
/// DPDK's registration of guest memory (`rte_extmem_register`, made by the filtered worker when
/// the VMM sets its memory table) creates, locks and later unlinks a file under
/// `/var/run/dpdk/` for the region's page table, which no filtered thread may do; without them
/// it maps anonymous memory. The price: no DPDK secondary process (`dpdk-proc-info`,
/// `dpdk-pdump`) can attach; `--no-seccomp` keeps the arguments as given
/// (docs/operating.md, "Sandboxing").
pub fn sandboxed_eal_args(eal_args: &[String], sandbox: Sandbox) -> Vec<String> {
    let mut args = eal_args.to_vec();
    let private = args.iter().any(|a| a == "--no-shconf" || a == "--in-memory");
    if sandbox != Sandbox::Off && !private {
        args.push("--no-shconf".to_owned());
    }
    args
}

/// DPDK writes its log to stdout and, by default, to syslog(3) too, which from a filtered
/// worker (a PMD's error message) would create a socket or `sendto` the syslog daemon: with
/// the sandbox on, its log goes to stderr only, as the backend's own (written with `write`).
#[cfg(feature = "dpdk")]
fn dpdk_log_to_stderr() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" {
        /// DPDK's `rte_openlog_stream` (librte_eal, linked through the `slimtcp` crate).
        fn rte_openlog_stream(f: *mut libc::FILE) -> libc::c_int;
    }
    ONCE.call_once(|| {
        // SAFETY: fdopen on the process's stderr descriptor with a constant mode; the stream
        // stays open for the life of the process (DPDK keeps it).
        let f = unsafe { libc::fdopen(libc::STDERR_FILENO, c"w".as_ptr()) };
        if f.is_null() {
            log::warn!("DPDK's log stays on stdout and syslog: fdopen(stderr) failed");
            return;
        }
        // SAFETY: the EAL is running (called after Eal::init); `f` is a valid, never-closed
        // stream. DPDK flushes it after each message.
        unsafe { rte_openlog_stream(f) };
    });
}

/// What a DPDK tenant asks of its port.
#[cfg(feature = "dpdk")]
#[derive(Debug, Clone, Copy)]
struct DpdkPort {
    /// The port number.
    port: u16,
    /// The stack's MAC when the tenant gave one (`None`: the port's own).
    mac: Option<slimtcp::wire::EthernetAddress>,
    /// Receive every frame (`promiscuous = true`).
    promiscuous: bool,
    /// Use the port's checksum offloads (`checksum-offload`, on by default).
    checksum_offload: bool,
    /// The kernel side's address, for a `net_tap` vdev.
    host_ip: Option<config::Cidr>,
}

/// DPDK port `want.port` of the process's EAL (started on first use), promiscuous only when
/// asked: without, the port receives its own MAC's unicast frames and broadcasts (ARP), which
/// is all the stack needs when it uses the port's MAC; a MAC of the tenant's own is added as a
/// filter (with a warning when the driver refuses). With `host_ip`, the kernel side of the
/// port's `net_tap` vdev gets that address.
#[cfg(feature = "dpdk")]
fn dpdk_nic(
    eal_args: &[String],
    want: &DpdkPort,
    sandbox: Sandbox,
) -> Result<slimtcp::nic::dpdk::DpdkNic, String> {
    use slimtcp::nic::dpdk::{DpdkNic, Eal, PortConfig};
    let port = want.port;
    let eal = Eal::init(eal_args).map_err(|e| error_chain(&e))?;
    if sandbox != Sandbox::Off {
        dpdk_log_to_stderr();
    }
    let mut cfg = PortConfig::new(port.to_string());
    cfg.promiscuous = want.promiscuous;
    cfg.checksum_offload = want.checksum_offload;
    let nic =
        DpdkNic::open(eal, &cfg).map_err(|e| error_chain(&e))?.pop().ok_or("the DPDK port has no queue")?;
    let own = nic.port_info().mac;
    if let Some(mac) = want.mac.filter(|&m| m != own && !want.promiscuous) {
        if let Err(e) = nic.add_mac_address(mac) {
            log::warn!(
                "DPDK port {port}: frames to mac={mac} (not the port's {own}) may not arrive without \
                 promiscuous=true: {}",
                error_chain(&e)
            );
        }
    }
    if let Some(h) = want.host_ip {
        let name = nic.port_info().name.clone();
        let iface = tap_vdev_iface(eal_args, &name).ok_or_else(|| {
            format!("host-ip needs DPDK port {port} ({name}) to be a net_tap vdev with iface=NAME in --dpdk")
        })?;
        slimtcp::nic::tap::configure_host_side(&iface, h.addr, h.prefix_len).map_err(|e| error_chain(&e))?;
    }
    Ok(nic)
}

/// The `iface=` of the `net_tap` vdev named `port_name` in the EAL arguments (`--vdev=NAME,...`
/// or `--vdev NAME,...`).
pub fn tap_vdev_iface(eal_args: &[String], port_name: &str) -> Option<String> {
    let specs = eal_args.iter().enumerate().filter_map(|(i, a)| match a.strip_prefix("--vdev") {
        Some(rest) if rest.starts_with('=') => Some(rest[1..].to_owned()),
        Some("") => eal_args.get(i + 1).cloned(),
        _ => None,
    });
    specs
        .filter(|spec| spec.split(',').next() == Some(port_name) && port_name.starts_with("net_tap"))
        .find_map(|spec| spec.split(',').find_map(|kv| kv.strip_prefix("iface=")).map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::{sandboxed_eal_args, tap_vdev_iface, Sandbox};

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_sandboxed_eal_keeps_no_shared_configuration_files() {
        let given = strings(&["-l", "1", "-a", "0000:3b:02.0"]);
        let mut private = given.clone();
        private.push("--no-shconf".into());
        assert_eq!(sandboxed_eal_args(&given, Sandbox::Seccomp), private);
        assert_eq!(sandboxed_eal_args(&given, Sandbox::SeccompDpdk), private);
        assert_eq!(sandboxed_eal_args(&given, Sandbox::Off), given, "--no-seccomp: as given");
        for already in [&["--no-shconf", "-l", "1"][..], &["--in-memory", "-l", "1"][..]] {
            let a = strings(already);
            assert_eq!(sandboxed_eal_args(&a, Sandbox::Seccomp), a, "nothing added to {a:?}");
        }
    }

    #[test]
    fn finds_the_iface_of_a_net_tap_vdev_by_port_name() {
        let args: Vec<String> =
            ["--no-huge", "--vdev=net_tap0,iface=a0", "--vdev", "net_tap1,iface=b1", "--vdev=net_ring0"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(tap_vdev_iface(&args, "net_tap0").as_deref(), Some("a0"));
        assert_eq!(tap_vdev_iface(&args, "net_tap1").as_deref(), Some("b1"));
        assert_eq!(tap_vdev_iface(&args, "net_ring0"), None);
        assert_eq!(tap_vdev_iface(&args, "net_tap2"), None);
    }
}
