//! The preload library's settings, all from the environment (an unmodified application has no
//! other way to pass them):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `SLIMTCP_DEVICE` | `vhost-user:SOCKET`, `pci` or `pci:DDDD:BB:DD.F` | required |
//! | `SLIMTCP_LOG` | `off`, `error`, `warn`, `info` (one-line banner), `debug`, `trace` | `warn` |
//! | `SLIMTCP_KERNEL` | comma-separated IPv4 networks (`10.1.0.0/16`, `192.0.2.7`) left to the kernel | none |
//! | `SLIMTCP_FALLBACK` | `1`: when attaching fails, every socket goes to the kernel | `0` |
//! | `SLIMTCP_QUEUE_PAIRS` | queue pairs to use (0: all the device has) | `0` |
//! | `SLIMTCP_MEMORY_MB` | shared memory for all pairs, MiB | `64` |
//! | `SLIMTCP_LINGER_MS` | how long exit waits for sent data to be acknowledged | `2000` |
//!
//! `127.0.0.0/8` always goes to the kernel.

use std::net::Ipv4Addr;
use std::time::Duration;

use slimtcp_guest::DeviceSpec;

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `SLIMTCP_DEVICE` is not set.
    #[error("SLIMTCP_DEVICE is not set: use vhost-user:SOCKET, pci or pci:DDDD:BB:DD.F")]
    NoDevice,
    /// A variable's value is not understood.
    #[error("{var}={value:?}: {why}")]
    Bad {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: String,
    },
}

/// An IPv4 network: address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: u32,
    mask: u32,
}

impl Net {
    /// Whether `ip` is in the network.
    pub fn contains(self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask == self.addr
    }

    fn parse(s: &str) -> Result<Net, String> {
        let (ip, len) = match s.split_once('/') {
            Some((ip, len)) => (ip, len.parse::<u32>().map_err(|_| format!("bad prefix length in {s:?}"))?),
            None => (s, 32),
        };
        if len > 32 {
            return Err(format!("prefix length {len} is more than 32"));
        }
        let ip: Ipv4Addr = ip.parse().map_err(|_| format!("{ip:?} is not an IPv4 address"))?;
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        Ok(Net { addr: u32::from(ip) & mask, mask })
    }
}

/// Loopback, always the kernel's.
const LOOPBACK: Net = Net { addr: 0x7f00_0000, mask: 0xff00_0000 };

/// The settings (see the module documentation).
#[derive(Debug, Clone)]
pub struct Config {
    /// The device string.
    pub device: DeviceSpec,
    /// The log level.
    pub log: log::LevelFilter,
    /// Networks whose peers and local addresses stay with the kernel.
    pub kernel: Vec<Net>,
    /// Fall back to the kernel when attaching fails.
    pub fallback: bool,
    /// Queue pairs to set up (0: all).
    pub queue_pairs: usize,
    /// Shared memory, bytes.
    pub memory: usize,
    /// Exit's wait for acknowledgements.
    pub linger: Duration,
}

impl Config {
    /// The settings from the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|var| std::env::var(var).ok())
    }

    /// The settings from `get` (a variable's value, if set).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let bad =
            |var: &'static str, value: &str, why: String| ConfigError::Bad { var, value: value.into(), why };
        let device = get("SLIMTCP_DEVICE").filter(|s| !s.is_empty()).ok_or(ConfigError::NoDevice)?;
        let device = device.parse().map_err(|why| bad("SLIMTCP_DEVICE", &device, why))?;
        let log = match get("SLIMTCP_LOG") {
            None => log::LevelFilter::Warn,
            Some(v) => v
                .parse()
                .map_err(|_| bad("SLIMTCP_LOG", &v, "use off, error, warn, info, debug or trace".into()))?,
        };
        let mut kernel = vec![LOOPBACK];
        if let Some(v) = get("SLIMTCP_KERNEL") {
            for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                kernel.push(Net::parse(part).map_err(|why| bad("SLIMTCP_KERNEL", &v, why))?);
            }
        }
        let fallback = match get("SLIMTCP_FALLBACK").as_deref() {
            None | Some("0") | Some("") => false,
            Some("1") => true,
            Some(v) => return Err(bad("SLIMTCP_FALLBACK", v, "use 0 or 1".into())),
        };
        let number = |var: &'static str, default: u64, max: u64| -> Result<u64, ConfigError> {
            match get(var) {
                None => Ok(default),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if n <= max => Ok(n),
                    _ => Err(bad(var, &v, format!("use a whole number up to {max}"))),
                },
            }
        };
        let queue_pairs = number("SLIMTCP_QUEUE_PAIRS", 0, 256)? as usize;
        let memory_mb = number("SLIMTCP_MEMORY_MB", 64, 1 << 16)?;
        if memory_mb < 4 {
            return Err(bad("SLIMTCP_MEMORY_MB", &memory_mb.to_string(), "at least 4".into()));
        }
        let linger = Duration::from_millis(number("SLIMTCP_LINGER_MS", 2000, 600_000)?);
        Ok(Config { device, log, kernel, fallback, queue_pairs, memory: (memory_mb as usize) << 20, linger })
    }

    /// Whether traffic with `ip` stays with the kernel.
    pub fn kernel_owns(&self, ip: Ipv4Addr) -> bool {
        self.kernel.iter().any(|n| n.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn defaults_and_networks() {
        let c = Config::from_lookup(lookup(&[
            ("SLIMTCP_DEVICE", "vhost-user:/tmp/x.sock"),
            ("SLIMTCP_KERNEL", "10.1.0.0/16, 192.0.2.7"),
        ]))
        .expect("valid");
        assert!(c.kernel_owns("127.0.0.1".parse().expect("ip")));
        assert!(c.kernel_owns("10.1.200.3".parse().expect("ip")));
        assert!(c.kernel_owns("192.0.2.7".parse().expect("ip")));
        assert!(!c.kernel_owns("192.0.2.8".parse().expect("ip")));
        assert!(!c.kernel_owns("10.2.0.1".parse().expect("ip")));
        assert!(!c.fallback);
        assert_eq!(c.memory, 64 << 20);
        assert_eq!(c.log, log::LevelFilter::Warn);
    }

    #[test]
    fn bad_values_name_the_variable() {
        assert!(matches!(Config::from_lookup(lookup(&[])), Err(ConfigError::NoDevice)));
        let e = Config::from_lookup(lookup(&[("SLIMTCP_DEVICE", "tap:x")])).expect_err("bad device");
        assert!(e.to_string().starts_with("SLIMTCP_DEVICE=\"tap:x\""), "{e}");
        let e = Config::from_lookup(lookup(&[("SLIMTCP_DEVICE", "pci"), ("SLIMTCP_KERNEL", "10.0.0.0/33")]))
            .expect_err("bad prefix");
        assert!(e.to_string().contains("SLIMTCP_KERNEL"), "{e}");
        let e = Config::from_lookup(lookup(&[("SLIMTCP_DEVICE", "pci"), ("SLIMTCP_FALLBACK", "yes")]))
            .expect_err("bad flag");
        assert!(e.to_string().contains("use 0 or 1"), "{e}");
    }
}
