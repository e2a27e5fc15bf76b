//! Command line and validated configuration: clap derive arguments, `TryFrom` into a [`Config`]
//! of one or more tenants ([`tenant`]).

mod eal;
mod file;
mod tenant;

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use slimtcp::wire::EthernetAddress;

use crate::sandbox::Sandbox;

pub use file::DaemonSettings;
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
        /// socket, TAP interface, DPDK port, core, name, address or host address.
        what: &'static str,
        /// The tenant key that gives it.
        key: &'static str,
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
    /// The directory a socket is to be created in is not there.
    #[error("--socket: directory {0} does not exist")]
    NoSocketDir(PathBuf),
    /// The config file could not be read.
    #[error("{}: {why}", .path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        why: String,
    },
    /// A setting of the config file is wrong.
    #[error("{}:{line}: {}{why}", .path.display(), .key.as_deref().map(|k| format!("{k}: ")).unwrap_or_default())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// The key, when the error is about one.
        key: Option<String>,
        /// What is wrong.
        why: String,
    },
    /// `--tenant` next to `--config`.
    #[error("--tenant with --config: put the tenants in the file ([[tenant]] tables)")]
    TenantWithConfig,
    /// Single-tenant flags over a config file of several tenants.
    #[error("--{0} with --config overrides the file's one tenant, and it has {1}")]
    FlagOverMany(&'static str, usize),
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
#[command(name = "slimtcp-vhost", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    /// What to do instead of serving (without one: serve).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Read the daemon and its tenants from this TOML file (docs/operating.md, "Config file");
    /// the one-tenant flags below override its single tenant, --dpdk/--control/--metrics its
    /// [daemon] table.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve the control socket here (`slimtcp-vhost stats`, `capture`).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Serve Prometheus metrics over HTTP on this address (GET /metrics).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
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
    /// Put a DPDK port in promiscuous mode (default: it receives the stack's MAC, broadcast and
    /// multicast only).
    #[arg(long)]
    pub promiscuous: bool,
    /// Compute and verify every TCP/UDP checksum in the stack instead of leaving them to the
    /// NIC (a TAP's virtio-net header, a DPDK port's checksum offloads), e.g. to rule out a
    /// device that gets them wrong.
    #[arg(long)]
    pub no_checksum_offload: bool,
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
    /// gateway=, mac=, promiscuous=, checksum-offload=, core=, queues=, name=, and the limits max-sockets=, send-in-flight=,
    /// rx-buffer=, backlog=, udp-queue=, rx-memory=. Repeat for each tenant.
    #[arg(long, value_name = "SPEC")]
    pub tenant: Vec<String>,
    /// Run without the seccomp filters on the worker and control threads (for debugging: a
    /// system call the filters refuse is logged as `sandbox: thread ... made system call N`).
    #[arg(long)]
    pub no_seccomp: bool,
}

/// What `slimtcp-vhost` does besides serving.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Validate a config file without starting anything: exit 0 when valid, 2 (with the error)
    /// when not.
    Check {
        /// The file.
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
    },
    /// Show each tenant's live counters, from a running daemon's control socket.
    Stats {
        /// The daemon's control socket.
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Refresh until interrupted.
        #[arg(long)]
        watch: bool,
        /// Seconds between refreshes with --watch.
        #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
        interval: f64,
    },
    /// Capture a tenant's NIC traffic into a pcap file while the daemon runs.
    Capture {
        /// The daemon's control socket.
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
        /// The tenant's name.
        tenant: String,
        /// The pcap file to write.
        #[arg(long, value_name = "FILE")]
        file: PathBuf,
        /// Stop after this many seconds.
        #[arg(long, value_name = "S")]
        seconds: Option<f64>,
        /// Stop after this many frames.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
    },
}

/// A validated configuration: the tenants, the EAL they share and the daemon's endpoints.
#[derive(Debug, Clone)]
pub struct Config {
    /// The tenants, in command-line (or file) order (at least one).
    pub tenants: Vec<TenantSpec>,
    /// EAL arguments (`--dpdk`), when the process runs DPDK.
    pub eal_args: Option<Vec<String>>,
    /// Seccomp filters on the worker and control threads (off with `--no-seccomp`).
    pub sandbox: Sandbox,
    /// The control socket.
    pub control: Option<PathBuf>,
    /// The Prometheus endpoint.
    pub metrics: Option<SocketAddr>,
    /// The log level the file asks for.
    pub log: Option<String>,
    /// The config file.
    pub file: Option<PathBuf>,
    /// The command line that read the config file, read again on SIGHUP (`None`: no file).
    pub reload: Option<Args>,
}

impl Config {
    /// The configuration of a config file alone (what `slimtcp-vhost --config FILE` would run,
    /// without other flags): `check` uses it.
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let mut args = Args::parse_from(["slimtcp-vhost"]);
        args.config = Some(path.to_path_buf());
        Config::try_from(args)
    }
}

impl Args {
    /// The one-tenant flags as tenant settings.
    fn flag_tenant(&self, dpdk: bool) -> tenant::RawTenant {
        tenant::RawTenant {
            name: None,
            socket: self.socket.clone(),
            tap: self.tap.clone(),
            // The single-tenant form runs on DPDK port 0.
            port: (dpdk && self.config.is_none()).then_some(0),
            ip: self.ip,
            host_ip: self.host_ip,
            gateway: self.gateway,
            mac: self.mac,
            promiscuous: self.promiscuous.then_some(true),
            checksum_offload: self.no_checksum_offload.then_some(false),
            core: self.core,
            queues: self.queues,
            limits: tenant::RawLimits {
                max_sockets: self.max_sockets,
                send_in_flight: self.send_in_flight,
                rx_buffer: self.rx_buffer,
                backlog: self.backlog,
                udp_queue: self.udp_queue,
                rx_memory: self.rx_memory,
            },
        }
    }
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(a: Args) -> Result<Self, Self::Error> {
        if a.dpdk.is_some() && cfg!(not(feature = "dpdk")) {
            return Err(ConfigError::DpdkNotBuilt);
        }
        let sandbox = if a.no_seccomp { Sandbox::Off } else { Sandbox::Seccomp };
        if let Some(path) = &a.config {
            return from_file(path, &a, sandbox);
        }
        let eal_args = a.dpdk.as_deref().map(split_eal);
        let dpdk = eal_args.is_some();
        let flags = a.flag_tenant(dpdk);
        let tenants = if a.tenant.is_empty() {
            if flags.socket.is_none() {
                return Err(ConfigError::Missing("socket"));
            }
            vec![flags.validate(dpdk, 0)?]
        } else {
            if let Some(flag) = flags.first_given() {
                return Err(ConfigError::MixedForms(flag));
            }
            let mut tenants = Vec::with_capacity(a.tenant.len());
            for (i, spec) in a.tenant.iter().enumerate() {
                tenants.push(tenant::parse_spec(spec)?.validate(dpdk, i)?);
            }
            check_unshared(&tenants).map_err(|(_, e)| e)?;
            tenants
        };
        check_eal_cores(&tenants, eal_args.as_deref()).map_err(|(_, e)| e)?;
        Ok(Config {
            tenants,
            eal_args,
            sandbox,
            control: a.control,
            metrics: a.metrics,
            log: None,
            file: None,
            reload: None,
        })
    }
}

/// EAL arguments as given in one string.
fn split_eal(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

/// The configuration of `path`, with the command line's flags over it.
fn from_file(path: &std::path::Path, a: &Args, sandbox: Sandbox) -> Result<Config, ConfigError> {
    if !a.tenant.is_empty() {
        return Err(ConfigError::TenantWithConfig);
    }
    let mut file = file::ConfigFile::read(path)?;
    let eal_args = a.dpdk.as_deref().map(split_eal).or(file.daemon.eal.take());
    let dpdk = eal_args.is_some();
    let flags = a.flag_tenant(dpdk);
    if let Some(flag) = flags.first_given() {
        if file.tenants.len() != 1 {
            return Err(ConfigError::FlagOverMany(flag, file.tenants.len()));
        }
    }
    let raws = std::mem::take(&mut file.tenants);
    let count = raws.len();
    let mut tenants = Vec::with_capacity(count);
    for (i, raw) in raws.into_iter().enumerate() {
        let raw = if count == 1 { raw.overridden_by(flags.clone()) } else { raw };
        tenants.push(raw.validate(dpdk, i).map_err(|e| file.tenant_error(i, e))?);
    }
    check_unshared(&tenants).map_err(|(i, e)| file.tenant_error(i, e))?;
    check_eal_cores(&tenants, eal_args.as_deref()).map_err(|(i, e)| file.tenant_error(i, e))?;
    if dpdk && cfg!(not(feature = "dpdk")) {
        return Err(file.eal_error(ConfigError::DpdkNotBuilt));
    }
    Ok(Config {
        tenants,
        eal_args,
        sandbox,
        control: a.control.clone().or(file.daemon.control.take()),
        metrics: a.metrics.or(file.daemon.metrics),
        log: file.daemon.log.take(),
        file: Some(path.to_path_buf()),
        reload: Some(a.clone()),
    })
}

impl ConfigError {
    /// The tenant setting (a `--tenant` spec key, a `[[tenant]]` key of the config file) the
    /// error is about, when it is about one.
    pub fn tenant_key(&self) -> Option<&'static str> {
        Some(match self {
            ConfigError::NoDevice => "tap",
            ConfigError::PortWithoutDpdk => "port",
            ConfigError::Missing(key) => key,
            ConfigError::Shared { key, .. } => key,
            ConfigError::BadTapName(_) => "tap",
            ConfigError::HostIpIsOwnIp { .. } => "host-ip",
            ConfigError::GatewayOffLink { .. } => "gateway",
            ConfigError::BadQueues(_) => "queues",
            ConfigError::BadCore { .. } | ConfigError::CoreOfEal { .. } => "core",
            ConfigError::EmptySocket | ConfigError::NoSocketDir(_) => "socket",
            ConfigError::BadLimit { key, .. } => key,
            _ => return None,
        })
    }
}

/// A tenant's error, with the tenant's index in the configuration.
pub(crate) type TenantError = (usize, ConfigError);

/// No worker core is one the EAL's lcores run on.
fn check_eal_cores(tenants: &[TenantSpec], eal_args: Option<&[String]>) -> Result<(), TenantError> {
    // An unparsable core option is about the EAL, not a tenant: it is reported with tenant 0.
    if let Some(eal) = eal_args.map(eal::eal_cpus).transpose().map_err(|e| (0, e))?.flatten() {
        for (i, t) in tenants.iter().enumerate() {
            if let Some(core) = t.core.filter(|&c| eal.contains(c)) {
                return Err((i, ConfigError::CoreOfEal { core, eal: eal.to_string() }));
            }
        }
    }
    Ok(())
}

/// Sockets, TAP interfaces, DPDK ports, cores, names and addresses belong to one tenant each.
fn check_unshared(tenants: &[TenantSpec]) -> Result<(), TenantError> {
    let mut seen: HashSet<(&'static str, String)> = HashSet::new();
    for (i, t) in tenants.iter().enumerate() {
        let mut keys = vec![
            ("socket", "socket", t.socket.display().to_string()),
            ("name", "name", t.name.clone()),
            ("address", "ip", t.ip.addr.to_string()),
        ];
        match &t.nic {
            TenantNic::Tap { name } => keys.push(("TAP interface", "tap", name.clone())),
            TenantNic::Dpdk { port } => keys.push(("DPDK port", "port", port.to_string())),
        }
        if let Some(c) = t.core {
            keys.push(("core", "core", c.to_string()));
        }
        if let Some(h) = t.host_ip {
            keys.push(("host address", "host-ip", h.addr.to_string()));
        }
        for (what, key, value) in keys {
            if !seen.insert((what, value.clone())) {
                return Err((i, ConfigError::Shared { what, key, value }));
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
        let (_, e) =
            check_eal_cores(&c.tenants, Some(&eal("--no-pci -l 0,2"))).expect_err("core 0 is the EAL's");
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
    fn checksum_offload_is_on_unless_a_flag_a_spec_or_the_file_turns_it_off() {
        let one = |extra: &[&str]| {
            let mut args = vec!["--socket", "/tmp/a", "--ip", "10.0.0.2/24", "--tap", "ta"];
            args.extend_from_slice(extra);
            config(&args).expect("valid").tenants[0].checksum_offload
        };
        assert!(one(&[]));
        assert!(!one(&["--no-checksum-offload"]));
        let spec = |s: &str| config(&["--tenant", s]).map(|c| c.tenants[0].checksum_offload);
        assert!(!spec("socket=/tmp/a,ip=10.0.0.2/24,tap=ta,checksum-offload=false").expect("valid"));
        assert!(spec("socket=/tmp/a,ip=10.0.0.2/24,tap=ta,checksum-offload=true").expect("valid"));
        let bad = spec("socket=/tmp/a,ip=10.0.0.2/24,tap=ta,checksum-offload=no").expect_err("not a bool");
        assert!(bad.to_string().contains("checksum-offload=no: not true or false"), "{bad}");
        let file = write(
            "csum",
            "[[tenant]]\nsocket = \"/tmp/a\"\nip = \"10.0.0.2/24\"\ntap = \"ta\"\nchecksum-offload = false\n",
        );
        let c = Config::from_file(&file).expect("valid file");
        std::fs::remove_file(&file).ok();
        assert!(!c.tenants[0].checksum_offload);
    }

    fn write(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("slimtcp-cfg-{}-{name}.toml", std::process::id()));
        std::fs::write(&p, text).expect("write the test file");
        p
    }

    const TWO: &str = "[daemon]\ncontrol = \"/tmp/c\"\n\n[[tenant]]\nname = \"a\"\nsocket = \"/tmp/a\"\n\
                       ip = \"10.0.0.2/24\"\ntap = \"ta\"\ncore = 0\n\n[[tenant]]\nname = \"b\"\n\
                       socket = \"/tmp/b\"\nip = \"10.0.1.2/24\"\ntap = \"tb\"\n";

    #[test]
    fn a_file_of_two_tenants_with_the_daemon_table() {
        let p = write("two", TWO);
        let c = Config::from_file(&p).expect("valid");
        assert_eq!(c.tenants.len(), 2);
        assert_eq!((c.tenants[0].name.as_str(), c.tenants[0].core), ("a", Some(0)));
        assert_eq!(c.control.as_deref(), Some(std::path::Path::new("/tmp/c")));
        assert_eq!(c.file.as_deref(), Some(p.as_path()));
        let e = config(&["--config", p.to_str().expect("utf-8"), "--core", "1"]).expect_err("two tenants");
        assert_eq!(e, ConfigError::FlagOverMany("core", 2));
        let e = config(&["--config", p.to_str().expect("utf-8"), "--tenant", "socket=/tmp/x"])
            .expect_err("mixed");
        assert_eq!(e, ConfigError::TenantWithConfig);
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn flags_override_the_files_one_tenant() {
        let p =
            write("one", "[[tenant]]\nsocket = \"/tmp/a\"\nip = \"10.0.0.2/24\"\ntap = \"ta\"\nqueues = 2\n");
        let c = config(&[
            "--config",
            p.to_str().expect("utf-8"),
            "--queues",
            "3",
            "--tap",
            "tz",
            "--metrics",
            "127.0.0.1:1",
        ])
        .expect("valid");
        let t = &c.tenants[0];
        assert_eq!((t.queue_pairs, &t.nic), (3, &TenantNic::Tap { name: "tz".into() }));
        assert_eq!(c.metrics, Some("127.0.0.1:1".parse().expect("addr")));
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn errors_across_tenants_name_the_line_of_the_second_ones_key() {
        let cases = [
            (
                "dup-core",
                TWO.replace("tap = \"tb\"\n", "tap = \"tb\"\ncore = 0\n"),
                16,
                "core: two tenants use the same core 0",
            ),
            (
                "dup-ip",
                TWO.replace("10.0.1.2/24", "10.0.0.2/24"),
                14,
                "ip: two tenants use the same address 10.0.0.2",
            ),
            (
                "dup-tap",
                TWO.replace("\"tb\"", "\"ta\""),
                15,
                "tap: two tenants use the same TAP interface ta",
            ),
            (
                "no-socket-dir",
                TWO.replace("/tmp/b", "/nonexistent/b"),
                13,
                "socket: --socket: directory /nonexistent does not exist",
            ),
            ("no-ip", TWO.replace("ip = \"10.0.1.2/24\"\n", ""), 11, "ip: --ip is required"),
            (
                "core-not-allowed",
                TWO.replace("core = 0", "core = 100000"),
                9,
                "core: --core 100000: this process may run on CPUs",
            ),
        ];
        for (name, text, line, says) in cases {
            let p = write(name, &text);
            let e = Config::from_file(&p).expect_err(name).to_string();
            let at = format!("{}:{line}: {says}", p.display());
            assert!(e.starts_with(&at), "{name}: {e:?} does not start with {at:?}");
            let _ = std::fs::remove_file(p);
        }
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
