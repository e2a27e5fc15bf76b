//! One tenant's settings, from the single-tenant flags or from a `--tenant` spec
//! (`socket=PATH,ip=ADDR/PREFIX,tap=IFNAME|port=N[,host-ip=..][,gateway=..][,mac=..][,core=N]
//! [,queues=N][,name=NAME]`), validated on their own; [`super::Config`] checks them together.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use slimtcp::wire::EthernetAddress;

use super::{parse_gateway, parse_mac, Cidr, ConfigError, DEFAULT_MAC, MAX_QUEUE_PAIRS};

/// Where one tenant's packets go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantNic {
    /// A Linux TAP interface.
    Tap {
        /// Its name.
        name: String,
    },
    /// A DPDK port (of the process's one EAL, `--dpdk`), by port number.
    Dpdk {
        /// The port number.
        port: u16,
    },
}

/// A validated tenant.
#[derive(Debug, Clone)]
pub struct TenantSpec {
    /// A name for logs and thread names.
    pub name: String,
    /// vhost-user socket path.
    pub socket: PathBuf,
    /// The NIC.
    pub nic: TenantNic,
    /// The guest's address.
    pub ip: Cidr,
    /// The kernel side's address, if to be configured (TAP, or a DPDK net_tap vdev).
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

/// The tenant's settings before validation (what the flags or a spec say).
#[derive(Debug, Clone, Default)]
pub(super) struct RawTenant {
    pub name: Option<String>,
    pub socket: Option<PathBuf>,
    pub tap: Option<String>,
    pub port: Option<u16>,
    pub ip: Option<Cidr>,
    pub host_ip: Option<Cidr>,
    pub gateway: Option<Ipv4Addr>,
    pub mac: Option<EthernetAddress>,
    pub core: Option<usize>,
    pub queues: Option<usize>,
}

/// Parses a `--tenant` spec (see the module documentation).
pub(super) fn parse_spec(spec: &str) -> Result<RawTenant, ConfigError> {
    let bad = |why: String| ConfigError::BadTenant { spec: spec.to_owned(), why };
    let mut t = RawTenant::default();
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| bad(format!("{item:?} is not KEY=VALUE")))?;
        let value = value.trim();
        let dup = |present: bool| if present { Err(bad(format!("{key} given twice"))) } else { Ok(()) };
        match key.trim() {
            "name" => {
                dup(t.name.is_some())?;
                t.name = Some(value.to_owned());
            }
            "socket" => {
                dup(t.socket.is_some())?;
                t.socket = Some(PathBuf::from(value));
            }
            "tap" => {
                dup(t.tap.is_some())?;
                t.tap = Some(value.to_owned());
            }
            "port" => {
                dup(t.port.is_some())?;
                t.port = Some(value.parse().map_err(|_| bad(format!("port={value}: not a DPDK port number")))?);
            }
            "ip" => {
                dup(t.ip.is_some())?;
                t.ip = Some(value.parse().map_err(|e| bad(format!("ip={value}: {e}")))?);
            }
            "host-ip" => {
                dup(t.host_ip.is_some())?;
                t.host_ip = Some(value.parse().map_err(|e| bad(format!("host-ip={value}: {e}")))?);
            }
            "gateway" => {
                dup(t.gateway.is_some())?;
                t.gateway = Some(parse_gateway(value).map_err(|e| bad(format!("gateway={value}: {e}")))?);
            }
            "mac" => {
                dup(t.mac.is_some())?;
                t.mac = Some(parse_mac(value).map_err(|e| bad(format!("mac={value}: {e}")))?);
            }
            "core" => {
                dup(t.core.is_some())?;
                t.core = Some(value.parse().map_err(|_| bad(format!("core={value}: not a core number")))?);
            }
            "queues" => {
                dup(t.queues.is_some())?;
                t.queues = Some(value.parse().map_err(|_| bad(format!("queues={value}: not a number")))?);
            }
            other => {
                return Err(bad(format!(
                    "unknown key {other:?} (keys: name, socket, tap, port, ip, host-ip, gateway, mac, core, queues)"
                )))
            }
        }
    }
    Ok(t)
}

fn cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

impl RawTenant {
    /// Validates one tenant. `dpdk` says whether the process has an EAL (`--dpdk`); `index`
    /// names the tenant when the spec does not.
    pub(super) fn validate(self, dpdk: bool, index: usize) -> Result<TenantSpec, ConfigError> {
        let socket = self.socket.ok_or(ConfigError::Missing("socket"))?;
        if socket.as_os_str().is_empty() {
            return Err(ConfigError::EmptySocket);
        }
        let ip = self.ip.ok_or(ConfigError::Missing("ip"))?;
        let nic = match (self.tap, self.port, dpdk) {
            (Some(name), None, _) => {
                let ok = !name.is_empty()
                    && name.len() <= 15
                    && !name.bytes().any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace());
                if !ok {
                    return Err(ConfigError::BadTapName(name));
                }
                TenantNic::Tap { name }
            }
            (None, Some(port), true) => TenantNic::Dpdk { port },
            (None, Some(_), false) => return Err(ConfigError::PortWithoutDpdk),
            _ => return Err(ConfigError::NoDevice),
        };
        if let Some(host) = self.host_ip {
            if host.addr == ip.addr {
                return Err(ConfigError::HostIpIsOwnIp { host, ip });
            }
        }
        if let Some(gateway) = self.gateway {
            if !ip.contains(gateway) {
                return Err(ConfigError::GatewayOffLink { gateway, ip });
            }
        }
        let queues = self.queues.unwrap_or(1);
        if queues == 0 || queues > MAX_QUEUE_PAIRS {
            return Err(ConfigError::BadQueues(queues));
        }
        if let Some(core) = self.core {
            let n = cores();
            if core >= n {
                return Err(ConfigError::BadCore { core, last: n - 1 });
            }
        }
        Ok(TenantSpec {
            name: self.name.unwrap_or_else(|| format!("tenant{index}")),
            socket,
            nic,
            ip,
            host_ip: self.host_ip,
            gateway: self.gateway,
            mac: self.mac.unwrap_or(DEFAULT_MAC),
            core: self.core,
            queue_pairs: queues,
        })
    }
}
