//! Command line and validated configuration: clap derive arguments, `TryFrom` into a [`Config`]
//! of one or more tenants ([`tenant`]).

mod eal;
mod tenant;

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::Parser;
use slimtcp::wire::EthernetAddress;

use crate::sandbox::Sandbox;

pub use tenant::{TenantNic, TenantSpec};

/// Largest virtqueue size the device accepts (QEMU queues go up to 1024).
pub const MAX_QUEUE_SIZE: usize = 1024;
/// Most queue pairs a tenant may have (one guest thread each).
pub const MAX_QUEUE_PAIRS: usize = 64;
/// The stack's MAC address unless told otherwise.
pub const DEFAULT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);

/// Why the command line does not make a configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// Neither or both of a TAP and a DPDK port.
    #[error(
        "exactly one of --tap IFNAME or --dpdk 'EAL ARGS' is required (in a --tenant spec: tap=IFNAME, or port=N with --dpdk)"
    )]
    NoDevice,
    /// `port=N` in a spec without `--dpdk`.
    #[error("a --tenant spec with port=N needs --dpdk 'EAL ARGS' (one EAL serves every tenant)")]
    PortWithoutDpdk,
    /// `--dpdk` without the `dpdk` feature.
    #[error(
        "--dpdk needs DPDK support: rebuild with `cargo build --release -p slimtcp-vhost --features dpdk`"
    )]
    DpdkNotBuilt,
    /// A required setting is missing.
    #[error("--{0} is required (or use --tenant specs)")]
    Missing(&'static str),
    /// Single-tenant flags next to `--tenant`.
    #[error("--{0} belongs to the single-tenant form; with --tenant, put it in the spec")]
    MixedForms(&'static str),
    /// A `--tenant` spec that does not parse.
    #[error("--tenant {spec:?}: {why}")]
    BadTenant {
        /// The spec.
        spec: String,
        /// What is wrong.
        why: String,
    },
    /// Two tenants share what only one can have.
    #[error("two tenants use the same {what} {value}")]
    Shared {
        /// socket, TAP interface, DPDK port, core or name.
        what: &'static str,
        /// The value.
        value: String,
    },
    /// A TAP name the kernel cannot take.
    #[error("--tap {0:?}: an interface name has 1 to 15 bytes, no '/', whitespace or ':'")]
    BadTapName(String),
    /// Both ends of the link have the same address.
    #[error("--host-ip {host} is the stack's own address (--ip {ip})")]
    HostIpIsOwnIp {
        /// The kernel side's address.
        host: Cidr,
        /// The stack's address.
        ip: Cidr,
    },
    /// The gateway is not on the stack's subnet.
    #[error("--gateway {gateway} is not on the subnet of --ip {ip}")]
    GatewayOffLink {
        /// The gateway.
        gateway: Ipv4Addr,
        /// The stack's address.
        ip: Cidr,
    },
    /// Queue pairs out of range.
    #[error("--queues {0}: a tenant has 1 to {MAX_QUEUE_PAIRS} queue pairs")]
    BadQueues(usize),
    /// A core outside the process's CPU affinity (the cores it may run on: all online cores,
    /// less what `taskset`, a cpuset or `isolcpus` left out).
    #[error(
        "--core {core}: this process may run on CPUs {allowed} only (start it with a CPU set that \
         holds the worker cores, e.g. taskset -c {allowed},{core})"
    )]
    BadCore {
        /// The requested core.
        core: usize,
        /// The process's CPU set, in the kernel's CPU-list format.
        allowed: String,
    },
    /// A worker core the EAL takes for an lcore (`-l`, `-c`, `--lcores` in `--dpdk`).
    #[error("--core {core}: the EAL's lcores run on CPUs {eal} (--dpdk); give workers other cores")]
    CoreOfEal {
        /// The worker core.
        core: usize,
        /// The EAL's CPUs, in the kernel's CPU-list form.
        eal: String,
    },
    /// An EAL core option that does not parse.
    #[error("--dpdk {opt} {value:?}: not a core list (0-3,6), core mask (0xf) or lcore map")]
    BadEalCores {
        /// The option.
        opt: String,
        /// Its value.
        value: String,
    },
    /// An empty socket path.
    #[error("--socket: the path is empty")]
    EmptySocket,
    /// A resource limit out of its bounds.
    #[error("{key} {value}: must be between {min} and {max}")]
    BadLimit {
        /// The limit's name (as a spec key; the flag is `--KEY`).
        key: &'static str,
        /// The value given.
        value: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
}

/// An IPv4 address with a prefix length, as `10.0.0.2/24` (the stack's type).
pub type Cidr = slimtcp::iface::Ipv4Cidr;

fn parse_gateway(s: &str) -> Result<Ipv4Addr, String> {
    let a: Ipv4Addr = s.parse().map_err(|_| format!("{s:?} is not an IPv4 address"))?;
    if a.is_unspecified() || a.is_broadcast() || a.is_multicast() {
        return Err(format!("{a} is not a usable gateway address"));
    }
    Ok(a)
}

/// SlimTCP as a vhost-user-net device: serves the SlimTCP guest protocol (docs/protocol.md) to
/// VMs (tenants), each on its own vhost-user socket, with one worker thread per tenant that owns
/// the tenant's TCP/IP stack and NIC and busy-polls its virtqueues. A VMM may disconnect and
/// reconnect at any time.
///
/// One tenant: --socket, --ip and --tap or --dpdk (DPDK port 0). Several tenants in one
/// process: one --tenant spec each (and --dpdk once, if any tenant uses a DPDK port).
#[derive(Debug, Clone, Parser)]
#[command(name = "slimtcp-vhost", version)]
pub struct Args {
    /// vhost-user socket path to listen on (created; an existing file is replaced).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Linux TAP interface carrying the tenant's traffic (created in the current network
    /// namespace, or attached to when it exists).
    #[arg(long, value_name = "IFNAME")]
    pub tap: Option<String>,
    /// Start DPDK's EAL with these arguments split at whitespace, e.g. '--no-huge --no-pci
    /// --vdev=net_tap0,iface=slim0' (build with `--features dpdk`). A single tenant uses port 0;
    /// --tenant specs pick theirs with port=N.
    #[arg(long, value_name = "EAL ARGS", allow_hyphen_values = true)]
    pub dpdk: Option<String>,
    /// The guest's (the stack's) IPv4 address and prefix length, told to the guest in hello.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub ip: Option<Cidr>,
    /// Give the kernel side of the TAP link (or of a DPDK net_tap vdev) this address.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub host_ip: Option<Cidr>,
    /// Default gateway for destinations off the subnet (none: off-subnet is ENETUNREACH).
    #[arg(long, value_name = "ADDR", value_parser = parse_gateway)]
    pub gateway: Option<Ipv4Addr>,
    /// The stack's MAC address (a unicast address; distinct per tenant on a shared link)
    /// [default: 02:00:00:00:00:01].
    #[arg(long, value_name = "MAC", value_parser = EthernetAddress::parse_unicast)]
    pub mac: Option<EthernetAddress>,
    /// Pin the tenant's worker thread to this CPU core (default: not pinned).
    #[arg(long, value_name = "N")]
    pub core: Option<usize>,
    /// Queue pairs offered to the guest (one per guest thread), 1..=64 [default: 1].
    #[arg(long, value_name = "N")]
    pub queues: Option<usize>,
    /// Guest sockets open at once; more get EMFILE (1..=65000) [default: 4096].
    #[arg(long, value_name = "N")]
    pub max_sockets: Option<u32>,
    /// Send payload bytes in flight per guest socket (1024..=64 MiB) [default: 262144].
    #[arg(long, value_name = "BYTES")]
    pub send_in_flight: Option<u32>,
    /// Default receive window per guest socket (2048..=64 MiB) [default: 262144].
    #[arg(long, value_name = "BYTES")]
    pub rx_buffer: Option<u32>,
    /// Largest listener backlog; larger listen() backlogs are cut to it (1..=65535)
    /// [default: 4096].
    #[arg(long, value_name = "N")]
    pub backlog: Option<u32>,
    /// Datagrams queued per UDP socket; more are dropped and counted (1..=65536) [default: 256].
    #[arg(long, value_name = "N")]
    pub udp_queue: Option<u32>,
    /// Receive memory of the tenant's stack, all sockets together: windows close as it fills,
    /// and data past it is dropped and counted (1 MiB..=1 TiB) [default: 268435456].
    #[arg(long, value_name = "BYTES")]
    pub rx_memory: Option<u64>,
    /// One tenant of several, as comma-separated KEY=VALUE: socket=PATH and ip=ADDR/PREFIX
    /// (required), tap=IFNAME or port=N (a DPDK port of --dpdk), and optionally host-ip=,
    /// gateway=, mac=, core=, queues=, name=, and the limits max-sockets=, send-in-flight=,
    /// rx-buffer=, backlog=, udp-queue=, rx-memory=. Repeat for each tenant.
    #[arg(long, value_name = "SPEC")]
    pub tenant: Vec<String>,
    /// Run without the seccomp filters on the worker and control threads (for debugging: a
    /// system call the filters refuse is logged as `sandbox: thread ... made system call N`).
    #[arg(long)]
    pub no_seccomp: bool,
}

/// A validated configuration: the tenants and the EAL they share.
#[derive(Debug, Clone)]
pub struct Config {
    /// The tenants, in command-line order (at least one).
    pub tenants: Vec<TenantSpec>,
    /// EAL arguments (`--dpdk`), when the process runs DPDK.
    pub eal_args: Option<Vec<String>>,
    /// Seccomp filters on the worker and control threads (off with `--no-seccomp`).
    pub sandbox: Sandbox,
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(a: Args) -> Result<Self, Self::Error> {
        if a.dpdk.is_some() && cfg!(not(feature = "dpdk")) {
            return Err(ConfigError::DpdkNotBuilt);
        }
        let eal_args = a.dpdk.as_deref().map(|e| e.split_whitespace().map(str::to_owned).collect());
        let dpdk = eal_args.is_some();
        let tenants = if a.tenant.is_empty() {
            let raw = tenant::RawTenant {
                name: None,
                socket: a.socket,
                tap: a.tap,
                // The single-tenant form runs on DPDK port 0.
                port: dpdk.then_some(0),
                ip: a.ip,
                host_ip: a.host_ip,
                gateway: a.gateway,
                mac: a.mac,
                core: a.core,
                queues: a.queues,
                limits: tenant::RawLimits {
                    max_sockets: a.max_sockets,
                    send_in_flight: a.send_in_flight,
                    rx_buffer: a.rx_buffer,
                    backlog: a.backlog,
                    udp_queue: a.udp_queue,
                    rx_memory: a.rx_memory,
                },
            };
            if raw.socket.is_none() {
                return Err(ConfigError::Missing("socket"));
            }
            vec![raw.validate(dpdk, 0)?]
        } else {
            let single = [
                ("socket", a.socket.is_some()),
                ("tap", a.tap.is_some()),
                ("ip", a.ip.is_some()),
                ("host-ip", a.host_ip.is_some()),
                ("gateway", a.gateway.is_some()),
                ("mac", a.mac.is_some()),
                ("core", a.core.is_some()),
                ("queues", a.queues.is_some()),
                ("max-sockets", a.max_sockets.is_some()),
                ("send-in-flight", a.send_in_flight.is_some()),
                ("rx-buffer", a.rx_buffer.is_some()),
                ("backlog", a.backlog.is_some()),
                ("udp-queue", a.udp_queue.is_some()),
                ("rx-memory", a.rx_memory.is_some()),
            ];
            if let Some((flag, _)) = single.iter().find(|(_, given)| *given) {
                return Err(ConfigError::MixedForms(flag));
            }
            let mut tenants = Vec::with_capacity(a.tenant.len());
            for (i, spec) in a.tenant.iter().enumerate() {
                tenants.push(tenant::parse_spec(spec)?.validate(dpdk, i)?);
            }
            check_unshared(&tenants)?;
            tenants
        };
        check_eal_cores(&tenants, eal_args.as_deref())?;
        let sandbox = if a.no_seccomp { Sandbox::Off } else { Sandbox::Seccomp };
        Ok(Config { tenants, eal_args, sandbox })
    }
}

/// No worker core is one the EAL's lcores run on.
fn check_eal_cores(tenants: &[TenantSpec], eal_args: Option<&[String]>) -> Result<(), ConfigError> {
    if let Some(eal) = eal_args.map(eal::eal_cpus).transpose()?.flatten() {
        if let Some(core) = tenants.iter().filter_map(|t| t.core).find(|&c| eal.contains(c)) {
            return Err(ConfigError::CoreOfEal { core, eal: eal.to_string() });
        }
    }
    Ok(())
}

/// Sockets, TAP interfaces, DPDK ports, cores and names belong to one tenant each.
fn check_unshared(tenants: &[TenantSpec]) -> Result<(), ConfigError> {
    let mut seen: HashSet<(&'static str, String)> = HashSet::new();
    for t in tenants {
        let mut keys = vec![("socket", t.socket.display().to_string()), ("name", t.name.clone())];
        match &t.nic {
            TenantNic::Tap { name } => keys.push(("TAP interface", name.clone())),
            TenantNic::Dpdk { port } => keys.push(("DPDK port", port.to_string())),
        }
        if let Some(c) = t.core {
            keys.push(("core", c.to_string()));
        }
        for (what, value) in keys {
            if !seen.insert((what, value.clone())) {
                return Err(ConfigError::Shared { what, value });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TenantLimits;

    fn config(args: &[&str]) -> Result<Config, ConfigError> {
        let mut argv = vec!["slimtcp-vhost"];
        argv.extend_from_slice(args);
        Config::try_from(Args::try_parse_from(argv).expect("parses"))
    }

    #[test]
    fn a_worker_core_the_eal_takes_is_refused() {
        let c = config(&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=ta,core=0"]).expect("valid");
        let eal = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let e = check_eal_cores(&c.tenants, Some(&eal("--no-pci -l 0,2"))).expect_err("core 0 is the EAL's");
        assert_eq!(
            e.to_string(),
            "--core 0: the EAL's lcores run on CPUs 0,2 (--dpdk); give workers other cores"
        );
        check_eal_cores(&c.tenants, Some(&eal("-l 1"))).expect("other cores");
        check_eal_cores(&c.tenants, Some(&eal("--no-huge"))).expect("DPDK's default: nothing to check");
        check_eal_cores(&c.tenants, None).expect("no EAL");
        assert!(check_eal_cores(&c.tenants, Some(&eal("-c 0xq"))).is_err());
    }

    #[test]
    fn limits_from_flags_and_specs_with_defaults_and_bounds() {
        let c = config(&["--socket", "/tmp/s", "--ip", "10.0.0.2/24", "--tap", "t0", "--max-sockets", "10"])
            .expect("valid");
        let t = &c.tenants[0];
        assert_eq!(t.limits, TenantLimits { max_sockets: 10, ..TenantLimits::default() });
        assert_eq!(t.udp_queue, 256);

        let c = config(&[
            "--tenant",
            "socket=/tmp/a,ip=10.0.0.2/24,tap=ta,backlog=64,udp-queue=32,rx-buffer=65536,send-in-flight=4096",
            "--tenant",
            "socket=/tmp/b,ip=10.0.1.2/24,tap=tb",
        ])
        .expect("valid");
        let a = &c.tenants[0];
        assert_eq!(
            (a.limits.backlog, a.udp_queue, a.limits.rx_buffer, a.limits.send_in_flight),
            (64, 32, 65536, 4096)
        );
        assert_eq!(c.tenants[1].limits, TenantLimits::default(), "each tenant its own");

        let e = config(&["--socket", "/tmp/s", "--ip", "10.0.0.2/24", "--tap", "t0", "--max-sockets", "0"])
            .expect_err("out of bounds");
        assert_eq!(e.to_string(), "max-sockets 0: must be between 1 and 65000");
        let e = config(&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=ta,udp-queue=x"])
            .expect_err("not a number");
        assert!(e.to_string().contains("udp-queue=x: not a number"), "{e}");
        let e = config(&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=ta,backlog=1,backlog=2"])
            .expect_err("twice");
        assert!(e.to_string().contains("backlog given twice"), "{e}");
        let e = config(&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=ta", "--backlog", "5"])
            .expect_err("mixed");
        assert_eq!(e, ConfigError::MixedForms("backlog"));
    }

    #[test]
    fn receive_memory_from_a_flag_or_a_spec_in_bytes() {
        let c = config(&["--socket", "/tmp/s", "--ip", "10.0.0.2/24", "--tap", "t0"]).expect("valid");
        assert_eq!(c.tenants[0].rx_memory, slimtcp::iface::DEFAULT_RX_MEMORY);
        let c = config(&[
            "--socket",
            "/tmp/s",
            "--ip",
            "10.0.0.2/24",
            "--tap",
            "t0",
            "--rx-memory",
            "8589934592",
        ])
        .expect("valid");
        assert_eq!(c.tenants[0].rx_memory, 8 << 30, "more than 4 GiB");
        let c =
            config(&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=ta,rx-memory=4194304"]).expect("valid");
        assert_eq!(c.tenants[0].rx_memory, 4 << 20);
        let e = config(&["--tenant", "socket=/tmp/a,ip=10.0.0.2/24,tap=ta,rx-memory=4096"])
            .expect_err("too small");
        assert_eq!(e.to_string(), "rx-memory 4096: must be between 1048576 and 1099511627776");
    }
}
