//! One tenant's settings, from the single-tenant flags or from a `--tenant` spec
//! (`socket=PATH,ip=ADDR/PREFIX,tap=IFNAME|port=N[,host-ip=..][,gateway=..][,mac=..][,core=N]
//! [,queues=N][,name=NAME][,max-sockets=N][,send-in-flight=BYTES][,rx-buffer=BYTES][,backlog=N]
//! [,udp-queue=N][,rx-memory=BYTES]`), validated on their own; [`super::Config`] checks them
//! together.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use slimtcp::wire::EthernetAddress;

use super::{parse_gateway, Cidr, ConfigError, MAX_QUEUE_PAIRS};
use crate::engine::{bounds, TenantLimits};
use slimtcp::iface::DEFAULT_RX_MEMORY;

/// Every key of a spec, for the error naming an unknown one.
pub(super) const KEYS: &str = "name, socket, tap, port, ip, host-ip, gateway, mac, promiscuous, \
                               checksum-offload, core, \
                               queues, max-sockets, send-in-flight, rx-buffer, backlog, udp-queue, \
                               rx-memory";

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
#[derive(Debug, Clone, PartialEq)]
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
    /// The stack's MAC (`None`: the NIC's own address for a DPDK port, [`super::DEFAULT_MAC`] on a
    /// TAP).
    pub mac: Option<EthernetAddress>,
    /// Receive every frame the port sees (DPDK ports; off: only the stack's MAC, broadcast
    /// and multicast).
    pub promiscuous: bool,
    /// Leave TCP/UDP checksums to the NIC where it offers that (a TAP's virtio-net header, a
    /// DPDK port's offloads); off: the stack computes and verifies every checksum itself.
    pub checksum_offload: bool,
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
    pub promiscuous: Option<bool>,
    pub checksum_offload: Option<bool>,
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
    once(slot, key, value.parse().map_err(|_| format!("{key}={value}: not a number"))?)
}

/// Parses a `--tenant` spec (see the module documentation).
pub(super) fn parse_spec(spec: &str) -> Result<RawTenant, ConfigError> {
    let bad = |why: String| ConfigError::BadTenant { spec: spec.to_owned(), why };
    let mut t = RawTenant::default();
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (key, value) = item.split_once('=').ok_or_else(|| bad(format!("{item:?} is not KEY=VALUE")))?;
        t.set(key.trim(), value.trim()).map_err(bad)?;
    }
    Ok(t)
}

/// Stores a setting given once.
fn once<T>(slot: &mut Option<T>, key: &str, value: T) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("{key} given twice"));
    }
    *slot = Some(value);
    Ok(())
}

impl RawTenant {
    /// Sets the setting `key` (a spec key, as in [`KEYS`]) from its text; fails naming the key
    /// when it is unknown, given twice or its value does not parse. The one parser of a
    /// tenant's settings: `--tenant` specs and the config file's `[[tenant]]` tables both use it.
    pub(super) fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "name" => once(&mut self.name, key, value.to_owned()),
            "socket" => once(&mut self.socket, key, PathBuf::from(value)),
            "tap" => once(&mut self.tap, key, value.to_owned()),
            "port" => {
                let port = value.parse().map_err(|_| format!("port={value}: not a DPDK port number"))?;
                once(&mut self.port, key, port)
            }
            "ip" => once(&mut self.ip, key, value.parse().map_err(|e| format!("ip={value}: {e}"))?),
            "host-ip" => {
                once(&mut self.host_ip, key, value.parse().map_err(|e| format!("host-ip={value}: {e}"))?)
            }
            "gateway" => {
                let gateway = parse_gateway(value).map_err(|e| format!("gateway={value}: {e}"))?;
                once(&mut self.gateway, key, gateway)
            }
            "mac" => {
                let mac = EthernetAddress::parse_unicast(value).map_err(|e| format!("mac={value}: {e}"))?;
                once(&mut self.mac, key, mac)
            }
            "promiscuous" => {
                let on = value.parse().map_err(|_| format!("promiscuous={value}: not true or false"))?;
                once(&mut self.promiscuous, key, on)
            }
            "checksum-offload" => {
                let on = value.parse().map_err(|_| format!("checksum-offload={value}: not true or false"))?;
                once(&mut self.checksum_offload, key, on)
            }
            "core" => {
                let core = value.parse().map_err(|_| format!("core={value}: not a core number"))?;
                once(&mut self.core, key, core)
            }
            "queues" => {
                let queues = value.parse().map_err(|_| format!("queues={value}: not a number"))?;
                once(&mut self.queues, key, queues)
            }
            other => match self.limits.set(other, value) {
                Some(set) => set,
                None => Err(format!("unknown key {other:?} (keys: {KEYS})")),
            },
        }
    }

    /// The first setting given, by its flag name (`port` and `name` have no flag).
    pub(super) fn first_given(&self) -> Option<&'static str> {
        let l = &self.limits;
        [
            ("socket", self.socket.is_some()),
            ("tap", self.tap.is_some()),
            ("ip", self.ip.is_some()),
            ("host-ip", self.host_ip.is_some()),
            ("gateway", self.gateway.is_some()),
            ("mac", self.mac.is_some()),
            ("promiscuous", self.promiscuous.is_some()),
            ("checksum-offload", self.checksum_offload.is_some()),
            ("core", self.core.is_some()),
            ("queues", self.queues.is_some()),
            ("max-sockets", l.max_sockets.is_some()),
            ("send-in-flight", l.send_in_flight.is_some()),
            ("rx-buffer", l.rx_buffer.is_some()),
            ("backlog", l.backlog.is_some()),
            ("udp-queue", l.udp_queue.is_some()),
            ("rx-memory", l.rx_memory.is_some()),
        ]
        .into_iter()
        .find_map(|(flag, given)| given.then_some(flag))
    }

    /// The settings of `self`, with each one `flags` gives taking its place (command-line flags
    /// over a config file's one tenant).
    pub(super) fn overridden_by(self, flags: RawTenant) -> RawTenant {
        let l = flags.limits;
        // A NIC given on the command line replaces the file's, whichever kind it is.
        let (tap, port) = if flags.tap.is_some() || flags.port.is_some() {
            (flags.tap, flags.port)
        } else {
            (self.tap, self.port)
        };
        RawTenant {
            name: flags.name.or(self.name),
            socket: flags.socket.or(self.socket),
            tap,
            port,
            ip: flags.ip.or(self.ip),
            host_ip: flags.host_ip.or(self.host_ip),
            gateway: flags.gateway.or(self.gateway),
            mac: flags.mac.or(self.mac),
            promiscuous: flags.promiscuous.or(self.promiscuous),
            checksum_offload: flags.checksum_offload.or(self.checksum_offload),
            core: flags.core.or(self.core),
            queues: flags.queues.or(self.queues),
            limits: RawLimits {
                max_sockets: l.max_sockets.or(self.limits.max_sockets),
                send_in_flight: l.send_in_flight.or(self.limits.send_in_flight),
                rx_buffer: l.rx_buffer.or(self.limits.rx_buffer),
                backlog: l.backlog.or(self.limits.backlog),
                udp_queue: l.udp_queue.or(self.limits.udp_queue),
                rx_memory: l.rx_memory.or(self.limits.rx_memory),
            },
        }
    }

    /// Validates one tenant. `dpdk` says whether the process has an EAL (`--dpdk`); `index`
    /// names the tenant when the spec does not.
    pub(super) fn validate(self, dpdk: bool, index: usize) -> Result<TenantSpec, ConfigError> {
        let socket = self.socket.ok_or(ConfigError::Missing("socket"))?;
        if socket.as_os_str().is_empty() {
            return Err(ConfigError::EmptySocket);
        }
        let dir = socket.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            return Err(ConfigError::NoSocketDir(dir.to_path_buf()));
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
            mac: self.mac,
            promiscuous: self.promiscuous.unwrap_or(false),
            checksum_offload: self.checksum_offload.unwrap_or(true),
            core: self.core,
            queue_pairs: queues,
            limits,
            udp_queue: stack.udp_queue,
            rx_memory: stack.rx_memory,
        })
    }
}
