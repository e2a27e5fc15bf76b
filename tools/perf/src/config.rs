//! The validated run: [`Config`], built from the parsed [`Args`] with `TryFrom`; every check
//! that clap cannot do lives here, each failure one clear line.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;
use std::time::Duration;

use slimtcp::wire::{EthernetAddress, UnicastMacError};

use crate::cli::Args;

/// Port the memwire receiver listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5001;
/// Run time of a sender unless told otherwise.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// MAC of a TAP-attached stack unless told otherwise (locally administered unicast).
pub const DEFAULT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
/// Prefix length of `--bind-ip` without one.
pub const DEFAULT_PREFIX: u8 = 24;
/// Largest burst accepted.
const MAX_BURST: usize = 512;
/// Largest MSS the paper's tool accepts.
const MAX_MSS: u32 = 1460;
/// Largest window-scale shift (RFC 7323).
const MAX_WIN_SCALE: u32 = 14;
/// Most connections one run may open (one per ephemeral port, at most).
const MAX_CONNECTIONS: usize = 60_000;

/// A bad combination or value of arguments.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// A value that does not parse or is out of range.
    #[error("--{option} {value:?}: {why}")]
    BadValue {
        /// The option, without dashes.
        option: &'static str,
        /// What was given.
        value: String,
        /// What is expected.
        why: String,
    },
    /// An option that is needed here is missing.
    #[error("{what} needs {needs}")]
    Missing {
        /// The mode or option that needs it.
        what: String,
        /// What is missing.
        needs: &'static str,
    },
    /// Options that cannot be used together.
    #[error("{0}")]
    Conflict(String),
    /// The NIC needs a build feature that is off.
    #[error("--nic dpdk needs slimtcp-perf built with the `dpdk` feature (cargo build --features dpdk); use --nic memwire or --nic tap:IFNAME")]
    DpdkNotBuilt,
}

/// Which NIC the stack runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NicChoice {
    /// A DPDK port (number or device name).
    Dpdk {
        /// `--iface`.
        port: String,
    },
    /// A Linux TAP interface (created or attached to).
    Tap {
        /// The interface name.
        ifname: String,
    },
    /// Both ends of an in-memory link, sender and receiver in this process.
    Memwire,
    /// The guest library attached to a `slimtcp-vhost` device: over vhost-user from the host
    /// (`guest:SOCKET`), or over the virtio-net PCI function inside a VM (`pci`, `pci:ADDR`). The
    /// backend's stack and NIC carry the traffic; the address comes from the backend.
    Guest {
        /// Which device.
        device: slimtcp_guest::DeviceSpec,
    },
}

impl NicChoice {
    /// The name reports use.
    pub fn label(&self) -> String {
        match self {
            NicChoice::Dpdk { port } => format!("dpdk:{port}"),
            NicChoice::Tap { ifname } => format!("tap:{ifname}"),
            NicChoice::Memwire => "memwire".to_owned(),
            NicChoice::Guest { device: slimtcp_guest::DeviceSpec::VhostUser(socket) } => {
                format!("guest:{}", socket.display())
            }
            NicChoice::Guest { device } => device.to_string(),
        }
    }
}

impl FromStr for NicChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "memwire" => Ok(NicChoice::Memwire),
            "dpdk" => Ok(NicChoice::Dpdk { port: "0".to_owned() }),
            _ if s.starts_with("guest:") => match s.strip_prefix("guest:") {
                Some(path) if !path.is_empty() => {
                    Ok(NicChoice::Guest { device: slimtcp_guest::DeviceSpec::VhostUser(path.into()) })
                }
                _ => Err("guest:PATH needs the backend's vhost-user socket path".to_owned()),
            },
            _ if s == "pci" || s.starts_with("pci:") => Ok(NicChoice::Guest { device: s.parse()? }),
            _ => match s.strip_prefix("tap:") {
                Some(name) if !name.is_empty() && name.len() <= 15 && !name.contains('/') => {
                    Ok(NicChoice::Tap { ifname: name.to_owned() })
                }
                Some(_) => Err("tap interface names are 1..=15 bytes without '/'".to_owned()),
                None => Err("expected dpdk, memwire, tap:IFNAME, guest:SOCKET_PATH, pci or pci:DDDD:BB:DD.F"
                    .to_owned()),
            },
        }
    }
}

/// How the SlimTCP runtime uses cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeMode {
    /// The application thread plus one worker thread.
    TwoCore,
    /// Everything on the calling thread.
    Single,
}

impl RuntimeMode {
    /// What this machine serves best: two-core when a third core is left for everything else.
    pub fn for_this_machine() -> RuntimeMode {
        let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
        if cores >= 3 {
            RuntimeMode::TwoCore
        } else {
            RuntimeMode::Single
        }
    }

    /// The name reports and `--runtime` use.
    pub fn label(self) -> &'static str {
        match self {
            RuntimeMode::TwoCore => "two-core",
            RuntimeMode::Single => "single",
        }
    }
}

/// What this process does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Opens connections and sends.
    Sender,
    /// Listens and receives.
    Receiver,
    /// Both, over memwire.
    Both,
}

impl Role {
    /// The name reports use.
    pub fn label(self) -> &'static str {
        match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
            Role::Both => "sender+receiver",
        }
    }
}

/// This stack's addresses (`--bind-ip`, `--bind-eth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalAddr {
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of the subnet.
    pub prefix_len: u8,
    /// MAC address.
    pub mac: EthernetAddress,
}

/// A validated run.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Arguments for the DPDK EAL.
    pub eal_args: Vec<String>,
    /// The NIC (ignored with `kernel`).
    pub nic: NicChoice,
    /// The runtime mode.
    pub runtime: RuntimeMode,
    /// Linux sockets instead of SlimTCP.
    pub kernel: bool,
    /// The UDP workload instead of TCP.
    pub udp: bool,
    /// What this process does.
    pub role: Role,
    /// Our addresses (`None` for memwire and the kernel).
    pub local: Option<LocalAddr>,
    /// Frames per burst.
    pub burst: usize,
    /// MSS to use.
    pub mss: u16,
    /// Window-scale shift to offer (`None`: the stack's default).
    pub win_scale: Option<u8>,
    /// Port the receiver listens on.
    pub listen_port: u16,
    /// Where the sender connects.
    pub connect: SocketAddrV4,
    /// Connections the sender opens (or the receiver waits for).
    pub connections: usize,
    /// Whether `--connections` was given (a lone receiver then waits for that many).
    pub connections_given: bool,
    /// Measured run time (`None`: a lone receiver runs until its connections end).
    pub duration: Option<Duration>,
    /// Zero-copy data path.
    pub zero_copy: bool,
    /// The sockets' send and receive buffers (`--socket-buffer`).
    pub socket_buffer: crate::workload::SocketBuffer,
    /// The memwire link offers checksum offload.
    pub checksum_offload: bool,
    /// The TAP goes without its checksum offload (`--no-checksum-offload`).
    pub no_checksum_offload: bool,
    /// JSON output.
    pub json: bool,
    /// Static neighbours from `--arp`.
    pub arp: Vec<(Ipv4Addr, EthernetAddress)>,
}

fn bad(option: &'static str, value: impl ToString, why: impl ToString) -> ConfigError {
    ConfigError::BadValue { option, value: value.to_string(), why: why.to_string() }
}

fn parse_ip(option: &'static str, s: &str) -> Result<Ipv4Addr, ConfigError> {
    let ip: Ipv4Addr = s.parse().map_err(|_| bad(option, s, "not an IPv4 address"))?;
    if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        return Err(bad(option, s, "not a unicast host address"));
    }
    Ok(ip)
}

fn parse_mac(option: &'static str, s: &str) -> Result<EthernetAddress, ConfigError> {
    EthernetAddress::parse_unicast(s).map_err(|e| match e {
        UnicastMacError::Parse(_) => bad(option, s, "not a MAC address (aa:bb:cc:dd:ee:ff)"),
        UnicastMacError::NotUnicast(_) => bad(option, s, "not a unicast MAC address"),
    })
}

fn parse_local(args: &Args, nic: &NicChoice) -> Result<Option<LocalAddr>, ConfigError> {
    let Some(text) = args.bind_ip.as_deref() else {
        return match nic {
            NicChoice::Memwire | NicChoice::Guest { .. } => Ok(None),
            other => {
                Err(ConfigError::Missing { what: format!("--nic {}", other.label()), needs: "--bind-ip" })
            }
        };
    };
    let (ip, prefix_len) = match text.split_once('/') {
        Some((ip, prefix)) => {
            let p = prefix.parse::<u8>().ok().filter(|p| (1..=32).contains(p));
            (ip, p.ok_or_else(|| bad("bind-ip", text, "prefix length must be 1..=32"))?)
        }
        None => (text, DEFAULT_PREFIX),
    };
    let ip = parse_ip("bind-ip", ip)?;
    let mac = match args.bind_eth.as_deref() {
        Some(m) => parse_mac("bind-eth", m)?,
        None => DEFAULT_MAC,
    };
    Ok(Some(LocalAddr { ip, prefix_len, mac }))
}

fn parse_duration(args: &Args) -> Result<Option<Duration>, ConfigError> {
    let one = |option: &'static str, v: f64| -> Result<Duration, ConfigError> {
        if v.is_finite() && v > 0.0 && v <= 86_400.0 {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(bad(option, v, "seconds must be > 0 and at most 86400"))
        }
    };
    let timeout = args.timeout.map(|v| one("timeout", v)).transpose()?;
    let duration = args.duration.map(|v| one("duration", v)).transpose()?;
    match (timeout, duration) {
        (Some(t), Some(d)) if t != d => {
            Err(ConfigError::Conflict("--timeout and --duration both set the run time; give one".to_owned()))
        }
        (t, d) => Ok(d.or(t)),
    }
}

fn parse_arp(entries: &[String]) -> Result<Vec<(Ipv4Addr, EthernetAddress)>, ConfigError> {
    entries
        .iter()
        .map(|e| {
            let (ip, mac) = e.split_once(':').ok_or_else(|| bad("arp", e, "expected IP:MAC"))?;
            Ok((parse_ip("arp", ip)?, parse_mac("arp", mac)?))
        })
        .collect()
}

/// Config plus the EAL arguments that preceded `--`.
impl TryFrom<(Vec<String>, Args)> for Config {
    type Error = ConfigError;

    fn try_from((eal_args, args): (Vec<String>, Args)) -> Result<Self, Self::Error> {
        let nic: NicChoice = args.nic.parse().map_err(|why: String| bad("nic", &args.nic, why))?;
        let nic = match (nic, &args.iface) {
            (NicChoice::Dpdk { .. }, Some(port)) => NicChoice::Dpdk { port: port.clone() },
            (nic, _) => nic,
        };
        if matches!(nic, NicChoice::Dpdk { .. }) && !args.kernel && !cfg!(feature = "dpdk") {
            return Err(ConfigError::DpdkNotBuilt);
        }
        let runtime = match args.runtime.as_deref() {
            None => RuntimeMode::for_this_machine(),
            Some("two-core") => RuntimeMode::TwoCore,
            Some("single") => RuntimeMode::Single,
            Some(other) => return Err(bad("runtime", other, "expected two-core or single")),
        };
        if args.burst == 0 || args.burst > MAX_BURST {
            return Err(bad("burst", args.burst, format!("must be 1..={MAX_BURST}")));
        }
        if args.mss == 0 || args.mss > MAX_MSS {
            return Err(bad("mss", args.mss, format!("must be 1..={MAX_MSS}")));
        }
        let mss = u16::try_from(args.mss).map_err(|_| bad("mss", args.mss, "too large"))?;
        let win_scale = match args.win_scale {
            Some(s) if s > MAX_WIN_SCALE => return Err(bad("win-scale", s, "must be 0..=14")),
            Some(s) => Some(u8::try_from(s).map_err(|_| bad("win-scale", s, "must be 0..=14"))?),
            None => None,
        };
        let connections = args.connections.unwrap_or(1);
        if connections == 0 || connections > MAX_CONNECTIONS {
            return Err(bad("connections", connections, format!("must be 1..={MAX_CONNECTIONS}")));
        }
        if args.kernel && args.zero_copy {
            return Err(ConfigError::Conflict(
                "--zero-copy is SlimTCP's API; the kernel path copies".to_owned(),
            ));
        }
        let socket_buffer =
            args.socket_buffer.parse().map_err(|e| bad("socket-buffer", &args.socket_buffer, e))?;
        let connect_ip = args.connect_ip.as_deref().map(|ip| parse_ip("connect-ip", ip)).transpose()?;
        let memwire = nic == NicChoice::Memwire && !args.kernel;
        if args.checksum_offload && !memwire {
            return Err(ConfigError::Conflict(
                "--checksum-offload is memwire's (other NICs report what they offload)".to_owned(),
            ));
        }
        let tap = matches!(nic, NicChoice::Tap { .. }) && !args.kernel;
        if args.no_checksum_offload && !tap {
            return Err(ConfigError::Conflict(
                "--no-checksum-offload is the TAP's (other NICs report what they offload)".to_owned(),
            ));
        }
        let role = if memwire {
            Role::Both
        } else {
            match (args.listen, connect_ip.is_some()) {
                (true, true) => {
                    return Err(ConfigError::Conflict(
                        "--listen and --connect-ip: one process is a receiver or a sender (both only with --nic memwire)"
                            .to_owned(),
                    ))
                }
                (true, false) => Role::Receiver,
                (false, true) => Role::Sender,
                (false, false) => {
                    return Err(ConfigError::Missing {
                        what: "a run".to_owned(),
                        needs: "--listen (receiver) or --connect-ip (sender)",
                    })
                }
            }
        };
        let listen_port = match role {
            Role::Receiver => args
                .bind_port
                .ok_or(ConfigError::Missing { what: "--listen".into(), needs: "--bind-port" })?,
            _ => args.bind_port.or(args.connect_port).unwrap_or(DEFAULT_PORT),
        };
        if listen_port == 0 {
            return Err(bad("bind-port", 0, "must be 1..=65535"));
        }
        let connect = match role {
            Role::Sender => {
                let port = args
                    .connect_port
                    .ok_or(ConfigError::Missing { what: "--connect-ip".into(), needs: "--connect-port" })?;
                if port == 0 {
                    return Err(bad("connect-port", 0, "must be 1..=65535"));
                }
                SocketAddrV4::new(connect_ip.unwrap_or(Ipv4Addr::UNSPECIFIED), port)
            }
            _ => SocketAddrV4::new(slimtcp::sim::B_IP, listen_port),
        };
        let local = if args.kernel || memwire { None } else { parse_local(&args, &nic)? };
        let duration = match (parse_duration(&args)?, role) {
            (Some(d), _) => Some(d),
            (None, Role::Receiver) => None,
            (None, _) => Some(DEFAULT_DURATION),
        };
        Ok(Config {
            eal_args,
            nic,
            runtime,
            kernel: args.kernel,
            udp: args.udp,
            role,
            local,
            burst: args.burst,
            mss,
            win_scale,
            listen_port,
            connect,
            connections,
            connections_given: args.connections.is_some(),
            duration,
            zero_copy: args.zero_copy,
            socket_buffer,
            checksum_offload: args.checksum_offload,
            no_checksum_offload: args.no_checksum_offload,
            json: args.json,
            arp: parse_arp(&args.arp)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn config(line: &str) -> Result<Config, ConfigError> {
        let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        let (eal, ours) = crate::cli::split_eal(argv);
        let args = Args::try_parse_from(std::iter::once("slimtcp-perf".to_owned()).chain(ours))
            .map_err(|e| ConfigError::Conflict(e.to_string()))?;
        Config::try_from((eal, args))
    }

    #[test]
    fn nic_pci_is_the_guest_library_inside_a_vm() {
        use slimtcp_guest::DeviceSpec;
        assert_eq!("pci".parse::<NicChoice>(), Ok(NicChoice::Guest { device: DeviceSpec::Pci(None) }));
        let at: NicChoice = "pci:00:03.0".parse().expect("pci address");
        assert_eq!(at.label(), "pci:0000:00:03.0");
        let host: NicChoice = "guest:/run/t.sock".parse().expect("vhost-user");
        assert_eq!(host.label(), "guest:/run/t.sock");
        assert!("pci:zz".parse::<NicChoice>().is_err());
    }

    #[test]
    fn the_papers_receiver_line_is_accepted() {
        let c = config(
            "-l 0,1 -- --iface 0 --bind-ip 10.0.0.2 --bind-eth 02:00:00:00:00:0b --burst 32 --tcp \
             --arp 10.0.0.1:02:00:00:00:00:0a --mss 1460 --win-scale 3 --listen --bind-port 5000 --kernel",
        )
        .expect("valid");
        assert_eq!(c.eal_args, vec!["-l", "0,1"]);
        assert_eq!(c.role, Role::Receiver);
        assert_eq!(c.listen_port, 5000);
        assert_eq!(c.win_scale, Some(3));
        assert_eq!(c.arp.len(), 1);
        assert_eq!(c.duration, None);
    }

    #[test]
    fn the_papers_sender_line_is_accepted() {
        let c = config(
            "-l 0,1 -- --iface 0 --bind-ip 10.0.0.1 --bind-eth 02:00:00:00:00:0a --burst 32 --tcp --mss 64 \
             --connect-ip 10.0.0.2 --connect-port 5000 --connections 1024 --timeout 20 --kernel",
        )
        .expect("valid");
        assert_eq!(c.role, Role::Sender);
        assert_eq!(c.connect, SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5000));
        assert_eq!(c.connections, 1024);
        assert_eq!(c.mss, 64);
        assert_eq!(c.duration, Some(Duration::from_secs(20)));
    }

    #[test]
    fn memwire_runs_both_roles_with_default_addresses() {
        let c = config("--nic memwire --tcp --mss 64 --connections 1 --duration 5 --json").expect("valid");
        assert_eq!(c.role, Role::Both);
        assert_eq!(c.connect, SocketAddrV4::new(slimtcp::sim::B_IP, DEFAULT_PORT));
        assert!(c.json);
    }

    #[test]
    fn out_of_range_values_name_the_option() {
        let e = config("--nic memwire --mss 1461").expect_err("mss too large");
        assert!(e.to_string().starts_with("--mss \"1461\""), "{e}");
        let e = config("--nic memwire --win-scale 15").expect_err("scale too large");
        assert!(e.to_string().starts_with("--win-scale"), "{e}");
        let e = config("--nic memwire --connections 0").expect_err("no connections");
        assert!(e.to_string().starts_with("--connections"), "{e}");
        let e = config("--nic memwire --runtime three").expect_err("bad runtime");
        assert!(e.to_string().starts_with("--runtime"), "{e}");
    }

    #[test]
    fn socket_buffers_are_split_by_default_the_stacks_own_or_one_size() {
        use crate::workload::SocketBuffer;
        let per_conn = |line: &str| {
            let c = config(line).expect("valid");
            c.socket_buffer.per_connection(c.connections)
        };
        assert_eq!(per_conn("--nic memwire --connections 4096"), Some(16 << 10), "64 MiB split");
        assert_eq!(per_conn("--nic memwire --connections 1"), Some(256 << 10));
        assert_eq!(per_conn("--nic memwire --connections 4096 --socket-buffer split"), Some(16 << 10));
        assert_eq!(per_conn("--nic memwire --connections 4096 --socket-buffer stack"), None);
        assert_eq!(per_conn("--nic memwire --connections 4096 --socket-buffer 65536"), Some(65536));
        assert_eq!(config("--nic memwire").expect("valid").socket_buffer, SocketBuffer::Split);
        for bad in ["4095", "16777217", "auto", "-1", ""] {
            let e = config(&format!("--nic memwire --socket-buffer={bad}")).expect_err(bad);
            assert!(e.to_string().starts_with("--socket-buffer"), "{bad}: {e}");
        }
    }

    #[test]
    fn each_checksum_switch_belongs_to_its_nic() {
        let tap = config("--nic tap:x --bind-ip 10.1.0.2 --listen --bind-port 9 --no-checksum-offload");
        assert!(tap.expect("the TAP can go without offload").no_checksum_offload);
        let e = config("--nic memwire --no-checksum-offload").expect_err("memwire has no such switch");
        assert!(e.to_string().contains("--no-checksum-offload is the TAP's"), "{e}");
        let e = config("--nic tap:x --bind-ip 10.1.0.2 --listen --bind-port 9 --checksum-offload")
            .expect_err("memwire's switch");
        assert!(e.to_string().contains("--checksum-offload is memwire's"), "{e}");
    }

    #[test]
    fn a_process_is_a_sender_or_a_receiver() {
        let e = config("--nic tap:x --bind-ip 10.1.0.2 --listen --bind-port 1 --connect-ip 10.1.0.1")
            .expect_err("both roles");
        assert!(matches!(e, ConfigError::Conflict(_)));
        let e = config("--nic tap:x --bind-ip 10.1.0.2").expect_err("no role");
        assert!(matches!(e, ConfigError::Missing { .. }));
        let e = config("--nic tap:x --listen --bind-port 9").expect_err("no address");
        assert_eq!(e.to_string(), "--nic tap:x needs --bind-ip");
    }

    #[test]
    fn dpdk_without_the_feature_is_a_clear_error() {
        if !cfg!(feature = "dpdk") {
            let e = config("--listen --bind-port 1 --bind-ip 10.0.0.2").expect_err("no dpdk");
            assert_eq!(e, ConfigError::DpdkNotBuilt);
        }
    }

    #[test]
    fn udp_selects_the_datagram_workload() {
        assert!(config("--nic memwire --udp").expect("udp over memwire").udp);
        assert!(!config("--nic memwire --tcp").expect("tcp over memwire").udp);
        let c = config("--kernel --udp --listen --bind-port 7").expect("kernel udp receiver");
        assert!(c.udp && c.role == Role::Receiver);
    }

    #[test]
    fn timeout_and_duration_must_agree() {
        assert!(config("--nic memwire --timeout 2 --duration 2").is_ok());
        assert!(matches!(config("--nic memwire --timeout 2 --duration 3"), Err(ConfigError::Conflict(_))));
        assert!(config("--nic memwire --duration -1").is_err());
    }
}
