//! One tenant's settings, from the single-tenant flags or from a `--tenant` spec
//! (`socket=PATH,ip=ADDR/PREFIX,tap=IFNAME|port=N[,host-ip=..][,gateway=..][,mac=..][,core=N]
//! [,queues=N][,name=NAME][,max-sockets=N][,send-in-flight=BYTES][,rx-buffer=BYTES][,backlog=N]
//! [,udp-queue=N][,rx-memory=BYTES]`), validated on their own; [`super::Config`] checks them
//! together.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use slimtcp::wire::EthernetAddress;

use super::{parse_gateway, Cidr, ConfigError, DEFAULT_MAC, MAX_QUEUE_PAIRS};
use crate::engine::{bounds, TenantLimits};
use slimtcp::iface::DEFAULT_RX_MEMORY;

/// Every key of a spec, for the error naming an unknown one.
const KEYS: &str = "name, socket, tap, port, ip, host-ip, gateway, mac, core, queues, max-sockets, \
                    send-in-flight, rx-buffer, backlog, udp-queue, rx-memory";

/// Datagrams queued per UDP socket unless told otherwise (the stack's default).
const DEFAULT_UDP_QUEUE: u32 = 256;

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
    /// The guest's resource limits.
    pub limits: TenantLimits,
    /// Datagrams queued per UDP socket.
    pub udp_queue: usize,
    /// Receive memory of the tenant's stack (its budget, `slimtcp::rx_memory`).
    pub rx_memory: usize,
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
    pub limits: RawLimits,
}

/// The tenant's limits as given (`None`: the default).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RawLimits {
    pub max_sockets: Option<u32>,
    pub send_in_flight: Option<u32>,
    pub rx_buffer: Option<u32>,
    pub backlog: Option<u32>,
    pub udp_queue: Option<u32>,
    pub rx_memory: Option<u64>,
}

/// What the stack enforces for a tenant beside the guest's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StackLimits {
    pub udp_queue: usize,
    pub rx_memory: usize,
}

/// `v` (or `default`) when inside `range`, else the error naming `key`.
fn check<T: Copy + PartialOrd + Into<u64>>(
    key: &'static str,
    v: Option<T>,
    range: std::ops::RangeInclusive<T>,
    default: T,
) -> Result<T, ConfigError> {
    let v = v.unwrap_or(default);
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(ConfigError::BadLimit {
            key,
            value: v.into(),
            min: (*range.start()).into(),
            max: (*range.end()).into(),
        })
    }
}

impl RawLimits {
    /// Parses `value` into the limit named `key`; `None` when `key` names no limit.
    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let slot32 = match key {
            "max-sockets" => &mut self.max_sockets,
            "send-in-flight" => &mut self.send_in_flight,
            "rx-buffer" => &mut self.rx_buffer,
            "backlog" => &mut self.backlog,
            "udp-queue" => &mut self.udp_queue,
            "rx-memory" => return Some(fill(&mut self.rx_memory, key, value)),
            _ => return None,
        };
        Some(fill(slot32, key, value))
    }

    /// Checks every given limit against its bounds; the rest take their defaults.
    fn validate(self) -> Result<(TenantLimits, StackLimits), ConfigError> {
        let d = TenantLimits::default();
        let limits = TenantLimits {
            max_sockets: check("max-sockets", self.max_sockets, bounds::MAX_SOCKETS, d.max_sockets)?,
            send_in_flight: check(
                "send-in-flight",
                self.send_in_flight,
                bounds::SEND_IN_FLIGHT,
                d.send_in_flight,
            )?,
            rx_buffer: check("rx-buffer", self.rx_buffer, bounds::RX_BUFFER, d.rx_buffer)?,
            backlog: check("backlog", self.backlog, bounds::BACKLOG, d.backlog)?,
        };
        let udp_queue = check("udp-queue", self.udp_queue, bounds::UDP_QUEUE, DEFAULT_UDP_QUEUE)?;
        let rx_memory = check("rx-memory", self.rx_memory, bounds::RX_MEMORY, DEFAULT_RX_MEMORY as u64)?;
        // In bounds, so it fits a usize on the 64-bit targets the backend builds for.
        let rx_memory = usize::try_from(rx_memory).unwrap_or(usize::MAX);
        Ok((limits, StackLimits { udp_queue: udp_queue as usize, rx_memory }))
    }
}

/// Stores a limit given once, parsed.
fn fill<T: std::str::FromStr>(slot: &mut Option<T>, key: &str, value: &str) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("{key} given twice"));
    }
    *slot = Some(value.parse().map_err(|_| format!("{key}={value}: not a number"))?);
    Ok(())
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
                t.port =
                    Some(value.parse().map_err(|_| bad(format!("port={value}: not a DPDK port number")))?);
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
                t.mac = Some(
                    EthernetAddress::parse_unicast(value).map_err(|e| bad(format!("mac={value}: {e}")))?,
                );
            }
            "core" => {
                dup(t.core.is_some())?;
                t.core = Some(value.parse().map_err(|_| bad(format!("core={value}: not a core number")))?);
            }
            "queues" => {
                dup(t.queues.is_some())?;
                t.queues = Some(value.parse().map_err(|_| bad(format!("queues={value}: not a number")))?);
            }
            other => match t.limits.set(other, value) {
                Some(set) => set.map_err(bad)?,
                None => return Err(bad(format!("unknown key {other:?} (keys: {KEYS})"))),
            },
        }
    }
    Ok(t)
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
            // The cores this process may run on (read before the EAL pins the main thread):
            // core ids, not a count (with `isolcpus` or `taskset` they have gaps). Unreadable,
            // the pin itself is the check.
            if let Ok(allowed) = slimtcp::cpu::current_affinity() {
                if !allowed.contains(core) {
                    return Err(ConfigError::BadCore { core, allowed: allowed.to_string() });
                }
            }
        }
        let (limits, stack) = self.limits.validate()?;
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
            limits,
            udp_queue: stack.udp_queue,
            rx_memory: stack.rx_memory,
        })
    }
}
