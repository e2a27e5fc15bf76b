//! Command line and validated configuration: clap derive arguments, `TryFrom` into a [`Config`].

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::Parser;
use slimtcp::wire::EthernetAddress;

/// Largest virtqueue size the device accepts (QEMU queues go up to 1024).
pub const MAX_QUEUE_SIZE: usize = 1024;
/// Most queue pairs a tenant may have (one guest thread each).
pub const MAX_QUEUE_PAIRS: usize = 64;

/// Why the command line does not make a configuration.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// Neither or both of `--tap` and `--dpdk`.
    #[error("exactly one of --tap IFNAME or --dpdk 'EAL ARGS' is required")]
    NoDevice,
    /// `--dpdk` without the `dpdk` feature.
    #[error(
        "--dpdk needs DPDK support: rebuild with `cargo build --release -p slimtcp-vhost --features dpdk`"
    )]
    DpdkNotBuilt,
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
    /// A core this machine does not have.
    #[error("--core {core}: this machine has cores 0 to {last}")]
    BadCore {
        /// The requested core.
        core: usize,
        /// The highest core number.
        last: usize,
    },
    /// An empty socket path.
    #[error("--socket: the path is empty")]
    EmptySocket,
}

/// An IPv4 address with a prefix length, as `10.0.0.2/24` (the stack's type).
pub type Cidr = slimtcp::iface::Ipv4Cidr;

fn parse_mac(s: &str) -> Result<EthernetAddress, String> {
    let mac = EthernetAddress::from_str(s).map_err(|e| e.to_string())?;
    if !mac.is_unicast() {
        return Err(format!("{mac} is not a unicast MAC address"));
    }
    Ok(mac)
}

fn parse_gateway(s: &str) -> Result<Ipv4Addr, String> {
    let a: Ipv4Addr = s.parse().map_err(|_| format!("{s:?} is not an IPv4 address"))?;
    if a.is_unspecified() || a.is_broadcast() || a.is_multicast() {
        return Err(format!("{a} is not a usable gateway address"));
    }
    Ok(a)
}

/// SlimTCP as a vhost-user-net device: serves the SlimTCP guest protocol (docs/protocol.md) to one
/// VM (tenant) on a vhost-user socket, with one worker thread that owns the tenant's TCP/IP stack
/// and NIC and busy-polls the virtqueues. The VMM may disconnect and reconnect at any time.
#[derive(Debug, Clone, Parser)]
#[command(name = "slimtcp-vhost", version)]
pub struct Args {
    /// vhost-user socket path to listen on (created; an existing file is replaced).
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Linux TAP interface carrying the tenant's traffic (created in the current network
    /// namespace, or attached to when it exists).
    #[arg(long, value_name = "IFNAME")]
    pub tap: Option<String>,
    /// Use DPDK port 0 instead, starting the EAL with these arguments split at whitespace, e.g.
    /// '--no-huge --no-pci --vdev=net_tap0,iface=slim0' (build with `--features dpdk`).
    #[arg(long, value_name = "EAL ARGS", allow_hyphen_values = true)]
    pub dpdk: Option<String>,
    /// The guest's (the stack's) IPv4 address and prefix length, told to the guest in hello.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub ip: Cidr,
    /// Give the kernel side of the TAP link (or of a DPDK net_tap vdev) this address.
    #[arg(long, value_name = "ADDR/PREFIX")]
    pub host_ip: Option<Cidr>,
    /// Default gateway for destinations off the subnet (none: off-subnet is ENETUNREACH).
    #[arg(long, value_name = "ADDR", value_parser = parse_gateway)]
    pub gateway: Option<Ipv4Addr>,
    /// The stack's MAC address (a unicast address; distinct per tenant on a shared link).
    #[arg(long, value_name = "MAC", default_value = "02:00:00:00:00:01", value_parser = parse_mac)]
    pub mac: EthernetAddress,
    /// Pin the tenant's worker thread to this CPU core (default: not pinned).
    #[arg(long, value_name = "N")]
    pub core: Option<usize>,
    /// Queue pairs offered to the guest (one per guest thread), 1..=64.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub queues: usize,
}

/// Where the tenant's packets go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NicConfig {
    /// A Linux TAP interface.
    Tap {
        /// Its name.
        name: String,
    },
    /// DPDK port 0 with these EAL arguments.
    Dpdk {
        /// EAL arguments.
        eal_args: Vec<String>,
    },
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// vhost-user socket path.
    pub socket: PathBuf,
    /// The NIC.
    pub nic: NicConfig,
    /// The guest's address.
    pub ip: Cidr,
    /// The kernel side's address, if to be configured.
    pub host_ip: Option<Cidr>,
    /// Default gateway.
    pub gateway: Option<Ipv4Addr>,
    /// The stack's MAC.
    pub mac: EthernetAddress,
    /// Worker core.
    pub core: Option<usize>,
    /// Queue pairs.
    pub queue_pairs: usize,
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(a: Args) -> Result<Self, Self::Error> {
        if a.socket.as_os_str().is_empty() {
            return Err(ConfigError::EmptySocket);
        }
        let nic = match (a.tap, a.dpdk) {
            (Some(name), None) => {
                let ok = !name.is_empty()
                    && name.len() <= 15
                    && !name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace());
                if !ok {
                    return Err(ConfigError::BadTapName(name));
                }
                NicConfig::Tap { name }
            }
            (None, Some(eal)) => {
                if cfg!(not(feature = "dpdk")) {
                    return Err(ConfigError::DpdkNotBuilt);
                }
                NicConfig::Dpdk { eal_args: eal.split_whitespace().map(str::to_owned).collect() }
            }
            _ => return Err(ConfigError::NoDevice),
        };
        if let Some(host) = a.host_ip {
            if host.addr == a.ip.addr {
                return Err(ConfigError::HostIpIsOwnIp { host, ip: a.ip });
            }
        }
        if let Some(gateway) = a.gateway {
            if !a.ip.contains(gateway) {
                return Err(ConfigError::GatewayOffLink { gateway, ip: a.ip });
            }
        }
        if a.queues == 0 || a.queues > MAX_QUEUE_PAIRS {
            return Err(ConfigError::BadQueues(a.queues));
        }
        if let Some(core) = a.core {
            let n = cores();
            if core >= n {
                return Err(ConfigError::BadCore { core, last: n - 1 });
            }
        }
        Ok(Config {
            socket: a.socket,
            nic,
            ip: a.ip,
            host_ip: a.host_ip,
            gateway: a.gateway,
            mac: a.mac,
            core: a.core,
            queue_pairs: a.queues,
        })
    }
}
