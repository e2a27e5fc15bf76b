//! Martian source addresses (RFC 1122 section 3.2.1.3, RFC 1812 section 5.3.7): a datagram whose
//! source can be no host's own address is silently discarded at the IPv4 layer, before any
//! protocol sees it, so no SYN-ACK, RST, UDP delivery or ICMP echo reply ever answers it (a
//! reply to a broadcast or multicast source would go to a whole network; a reply to our own
//! address or to loopback is the "land" attack's loop).

use std::net::Ipv4Addr;

use super::InterfaceConfig;

/// Why a source address is martian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Martian {
    /// 0.0.0.0/8 ("this network": only a host that does not know its address uses it, and
    /// SlimTCP serves no such protocol, e.g. DHCP).
    Unspecified,
    /// 255.255.255.255, the limited broadcast.
    Broadcast,
    /// The broadcast address of our own subnet (prefixes up to /30).
    SubnetBroadcast,
    /// 224.0.0.0/4 (multicast) or 240.0.0.0/4 (class E, reserved).
    Multicast,
    /// 127.0.0.0/8: never valid outside a host.
    Loopback,
    /// Our own address, from outside (the "land" attack).
    OwnAddress,
}

impl Martian {
    /// Every kind, in counter order.
    pub const ALL: [Martian; 6] = [
        Martian::Unspecified,
        Martian::Broadcast,
        Martian::SubnetBroadcast,
        Martian::Multicast,
        Martian::Loopback,
        Martian::OwnAddress,
    ];

    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// A short name for logs.
    pub fn name(self) -> &'static str {
        match self {
            Martian::Unspecified => "unspecified",
            Martian::Broadcast => "broadcast",
            Martian::SubnetBroadcast => "subnet-broadcast",
            Martian::Multicast => "multicast",
            Martian::Loopback => "loopback",
            Martian::OwnAddress => "own-address",
        }
    }

    /// Why `src` cannot be the source of a datagram reaching interface `cfg`, if it cannot.
    #[inline]
    pub fn classify(cfg: &InterfaceConfig, src: Ipv4Addr) -> Option<Martian> {
        let first = src.octets()[0];
        if first == 0 {
            return Some(Martian::Unspecified);
        }
        if src.is_broadcast() {
            return Some(Martian::Broadcast);
        }
        if first >= 224 {
            return Some(Martian::Multicast);
        }
        if src.is_loopback() {
            return Some(Martian::Loopback);
        }
        if src == cfg.ip {
            return Some(Martian::OwnAddress);
        }
        if cfg.prefix_len <= 30 {
            let host_mask = u32::MAX >> cfg.prefix_len.min(32);
            let subnet_broadcast = u32::from(cfg.ip) | host_mask;
            if u32::from(src) == subnet_broadcast {
                return Some(Martian::SubnetBroadcast);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::EthernetAddress;

    fn cfg(prefix_len: u8) -> InterfaceConfig {
        InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(10, 9, 8, 2), prefix_len)
    }

    fn classify(prefix_len: u8, src: &str) -> Option<Martian> {
        Martian::classify(&cfg(prefix_len), src.parse().expect("address"))
    }

    #[test]
    fn each_martian_kind_is_recognised() {
        assert_eq!(classify(24, "0.0.0.0"), Some(Martian::Unspecified));
        assert_eq!(classify(24, "0.1.2.3"), Some(Martian::Unspecified));
        assert_eq!(classify(24, "255.255.255.255"), Some(Martian::Broadcast));
        assert_eq!(classify(24, "10.9.8.255"), Some(Martian::SubnetBroadcast));
        assert_eq!(classify(16, "10.9.255.255"), Some(Martian::SubnetBroadcast));
        assert_eq!(classify(24, "224.0.0.1"), Some(Martian::Multicast));
        assert_eq!(classify(24, "239.255.255.250"), Some(Martian::Multicast));
        assert_eq!(classify(24, "240.0.0.1"), Some(Martian::Multicast));
        assert_eq!(classify(24, "127.0.0.1"), Some(Martian::Loopback));
        assert_eq!(classify(24, "127.255.0.9"), Some(Martian::Loopback));
        assert_eq!(classify(24, "10.9.8.2"), Some(Martian::OwnAddress));
    }

    #[test]
    fn ordinary_sources_pass() {
        for src in ["10.9.8.1", "10.9.8.254", "10.9.9.255", "192.168.1.1", "8.8.8.8", "223.255.255.254"] {
            assert_eq!(classify(24, src), None, "{src}");
        }
        // The subnet's network address is a (deprecated) directed broadcast in RFC 1122 but a
        // host address on /31 links (RFC 3021); Linux accepts it, so do we.
        assert_eq!(classify(24, "10.9.8.0"), None);
    }

    #[test]
    fn point_to_point_prefixes_have_no_subnet_broadcast() {
        // On a /31 (RFC 3021) both addresses are hosts: 10.9.8.3 is the peer, not a broadcast.
        assert_eq!(classify(31, "10.9.8.3"), None);
        assert_eq!(classify(32, "10.9.8.3"), None);
        assert_eq!(classify(30, "10.9.8.3"), Some(Martian::SubnetBroadcast));
    }
}
