//! An interface address with its prefix length, as operators write it (`10.0.0.2/24`).

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// A unicast IPv4 host address and its prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Cidr {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length, 0..=32.
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    /// True when `a` is on this address's subnet.
    pub fn contains(&self, a: Ipv4Addr) -> bool {
        let mask = if self.prefix_len == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix_len)) };
        u32::from(a) & mask == u32::from(self.addr) & mask
    }
}

impl FromStr for Ipv4Cidr {
    type Err = String;

    /// Parses `ADDR/PREFIX`; the message says what is wrong, for a command-line error.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = s.split_once('/').ok_or_else(|| format!("{s:?} is not ADDR/PREFIX"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| format!("{addr:?} is not an IPv4 address"))?;
        let prefix_len: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32)
            .ok_or_else(|| format!("/{prefix} is not a prefix length 0..=32"))?;
        if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() {
            return Err(format!("{addr} is not a usable host address"));
        }
        Ok(Ipv4Cidr { addr, prefix_len })
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_checks_the_subnet() {
        let c: Ipv4Cidr = "10.9.0.2/24".parse().expect("valid");
        assert_eq!(c.to_string(), "10.9.0.2/24");
        assert!(c.contains(Ipv4Addr::new(10, 9, 0, 200)));
        assert!(!c.contains(Ipv4Addr::new(10, 9, 1, 1)));
        assert!("10.0.0.1/0".parse::<Ipv4Cidr>().expect("any").contains(Ipv4Addr::new(1, 2, 3, 4)));
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        assert_eq!("10.0.0.1".parse::<Ipv4Cidr>(), Err("\"10.0.0.1\" is not ADDR/PREFIX".into()));
        assert_eq!("10.0.0.1/33".parse::<Ipv4Cidr>(), Err("/33 is not a prefix length 0..=32".into()));
        assert_eq!("x/24".parse::<Ipv4Cidr>(), Err("\"x\" is not an IPv4 address".into()));
        assert_eq!("224.0.0.1/4".parse::<Ipv4Cidr>(), Err("224.0.0.1 is not a usable host address".into()));
    }
}
