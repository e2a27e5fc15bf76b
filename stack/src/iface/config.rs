//! Interface configuration.

use std::net::Ipv4Addr;

use super::arp_cache::ArpConfig;
use crate::tcp::TcpConfig;
use crate::wire::EthernetAddress;

/// The default receive memory budget: 256 MiB, 1,024 default windows of full-sized segments.
pub const DEFAULT_RX_MEMORY: usize = 256 << 20;

/// How an interface is set up: its addresses, limits, and the defaults for new sockets.
#[derive(Debug, Clone)]
pub struct InterfaceConfig {
    /// Our MAC address (see [`mac_from_nic`](Self::mac_from_nic)).
    pub mac: EthernetAddress,
    /// Use the NIC's own address ([`Nic::mac_address`](crate::nic::Nic::mac_address)) instead of
    /// `mac` when the NIC has one (a DPDK port); `mac` stays for NICs without one. Default off.
    pub mac_from_nic: bool,
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// Prefix length of our subnet (addresses inside it are resolved directly with ARP).
    pub prefix_len: u8,
    /// Next hop for addresses outside the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// Settings for new TCP connections.
    pub tcp: TcpConfig,
    /// ARP cache settings.
    pub arp: ArpConfig,
    /// Frames received or transmitted per burst.
    pub burst: usize,
    /// Sockets of all kinds at most (a SYN beyond it is dropped).
    pub max_sockets: usize,
    /// Datagrams queued per UDP socket before new ones are dropped.
    pub udp_queue: usize,
    /// Bytes of receive storage all sockets together may hold (`rx_memory.rs`): windows close
    /// as it fills, and data that would pass it is dropped.
    pub rx_memory: usize,
    /// Frames held while their next hop is being resolved, per address.
    pub arp_hold: usize,
    /// Neighbours known in advance (never expire, never resolved with ARP).
    pub static_neighbors: Vec<(Ipv4Addr, EthernetAddress)>,
}

impl InterfaceConfig {
    /// A configuration with defaults for everything but the addresses.
    pub fn new(mac: EthernetAddress, ip: Ipv4Addr, prefix_len: u8) -> Self {
        InterfaceConfig {
            mac,
            mac_from_nic: false,
            ip,
            prefix_len,
            gateway: None,
            tcp: TcpConfig::default(),
            arp: ArpConfig::default(),
            burst: 32,
            max_sockets: 65_536,
            udp_queue: 256,
            rx_memory: DEFAULT_RX_MEMORY,
            arp_hold: 8,
            static_neighbors: Vec::new(),
        }
    }

    /// True when `addr` is on our subnet.
    pub fn on_link(&self, addr: Ipv4Addr) -> bool {
        let mask =
            if self.prefix_len == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix_len.min(32))) };
        u32::from(addr) & mask == u32::from(self.ip) & mask
    }

    /// The address whose MAC frames to `dst` go to, if any route exists.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Option<Ipv4Addr> {
        if self.on_link(dst) {
            Some(dst)
        } else {
            self.gateway
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iface::Interface;
    use crate::nic::{Nic, NicCapabilities, NicError, PacketBuf};
    use crate::time::Instant;

    /// A NIC that has an address of its own (as a DPDK port has) and no traffic.
    struct NicWithAddress(Option<EthernetAddress>);

    impl Nic for NicWithAddress {
        fn capabilities(&self) -> NicCapabilities {
            NicCapabilities::default()
        }
        fn receive(&mut self, _: Instant, _: &mut Vec<PacketBuf>, _: usize) -> Result<usize, NicError> {
            Ok(0)
        }
        fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
            Err(NicError::NoBuffers)
        }
        fn transmit(&mut self, _: Instant, _: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
            Ok(0)
        }
        fn mac_address(&self) -> Option<EthernetAddress> {
            self.0
        }
    }

    const CONFIGURED: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const THE_NICS: EthernetAddress = EthernetAddress([2, 0x11, 0x22, 0x33, 0x44, 0x55]);

    fn mac_of(nic: NicWithAddress, mac_from_nic: bool) -> EthernetAddress {
        let mut cfg = InterfaceConfig::new(CONFIGURED, Ipv4Addr::new(10, 0, 0, 2), 24);
        cfg.mac_from_nic = mac_from_nic;
        Interface::new(nic, cfg).config().mac
    }

    #[test]
    fn the_nics_own_address_is_used_only_when_asked_for_and_there() {
        assert_eq!(mac_of(NicWithAddress(Some(THE_NICS)), true), THE_NICS);
        assert_eq!(mac_of(NicWithAddress(None), true), CONFIGURED, "a NIC without one: the configured");
        assert_eq!(mac_of(NicWithAddress(Some(THE_NICS)), false), CONFIGURED, "not asked: the configured");
    }
}
