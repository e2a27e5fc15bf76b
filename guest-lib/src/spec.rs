//! Which device a guest-library instance attaches to, as one string: the same text in a Rust
//! app's configuration, the C ABI's `slim_open`, `slimtcp-perf --nic` and `SLIMTCP_DEVICE`.
//!
//! - `pci` : the first virtio-net PCI function (1af4:1041) of this VM;
//! - `pci:DDDD:BB:DD.F` (or `pci:BB:DD.F`) : that PCI function;
//! - `vhost-user:PATH` : a backend's vhost-user socket on this host (this process plays the VMM).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A parsed device string (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    /// A virtio-net PCI function inside a VM; `None`: the first one found.
    Pci(Option<PciAddress>),
    /// A backend's vhost-user socket.
    VhostUser(PathBuf),
}

/// A PCI function address, `domain:bus:device.function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    /// Domain (segment).
    pub domain: u16,
    /// Bus.
    pub bus: u8,
    /// Device (0..32).
    pub device: u8,
    /// Function (0..8).
    pub function: u8,
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}.{:x}", self.domain, self.bus, self.device, self.function)
    }
}

impl FromStr for PciAddress {
    type Err = String;

    /// `DDDD:BB:DD.F` or `BB:DD.F` (domain 0), hexadecimal, as sysfs and lspci print them.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a PCI address (DDDD:BB:DD.F, e.g. 0000:00:03.0)");
        let (head, function) = s.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, v] => (*d, *b, *v),
            [b, v] => ("0", *b, *v),
            _ => return Err(bad()),
        };
        let hex16 = |t: &str| u16::from_str_radix(t, 16).map_err(|_| bad());
        let hex8 = |t: &str| u8::from_str_radix(t, 16).map_err(|_| bad());
        let a = PciAddress {
            domain: hex16(domain)?,
            bus: hex8(bus)?,
            device: hex8(device)?,
            function: hex8(function)?,
        };
        if a.device >= 32 || a.function >= 8 {
            return Err(bad());
        }
        Ok(a)
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Pci(None) => write!(f, "pci"),
            DeviceSpec::Pci(Some(a)) => write!(f, "pci:{a}"),
            DeviceSpec::VhostUser(p) => write!(f, "vhost-user:{}", p.display()),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "pci" {
            return Ok(DeviceSpec::Pci(None));
        }
        if let Some(addr) = s.strip_prefix("pci:") {
            return Ok(DeviceSpec::Pci(Some(addr.parse()?)));
        }
        match s.strip_prefix("vhost-user:") {
            Some(path) if !path.is_empty() => Ok(DeviceSpec::VhostUser(path.into())),
            _ => Err(format!("{s:?} is not a device: use pci, pci:DDDD:BB:DD.F or vhost-user:SOCKET")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_strings_round_trip() {
        for s in ["pci", "pci:0000:00:03.0", "pci:0001:1a:1f.7", "vhost-user:/run/slimtcp/t0.sock"] {
            let spec: DeviceSpec = s.parse().expect(s);
            assert_eq!(spec.to_string(), s);
        }
        let short: DeviceSpec = "pci:00:03.0".parse().expect("short form");
        assert_eq!(short.to_string(), "pci:0000:00:03.0");
    }

    #[test]
    fn bad_device_strings_say_what_is_expected() {
        for s in ["", "pcie", "pci:", "pci:00:20.0", "pci:00:03.8", "pci:zz:03.0", "vhost-user:", "tap:x"] {
            let e = s.parse::<DeviceSpec>().expect_err(s);
            assert!(e.contains("DDDD:BB:DD.F"), "{s}: {e}");
        }
    }
}
