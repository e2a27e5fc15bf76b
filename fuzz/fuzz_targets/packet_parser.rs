//! Every wire parser on arbitrary frames: no panic, and what parses re-emits to a frame that
//! parses to the same representation (the parsers and emitters agree).
#![no_main]

use libfuzzer_sys::fuzz_target;
use slimtcp::wire::{
    ArpPacket, ArpRepr, ChecksumCapabilities, EtherType, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr, UdpPacket, UdpRepr,
};

fuzz_target!(|frame: &[u8]| {
    let caps = ChecksumCapabilities::default();
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return };
    let Ok(eth_repr) = EthernetRepr::parse(&eth) else { return };
    let payload = eth.payload();
    match eth_repr.ethertype {
        EtherType::Arp => {
            if let Ok(arp) = ArpPacket::new_checked(payload) {
                if let Ok(repr) = ArpRepr::parse(&arp) {
                    let mut out = vec![0u8; 28];
                    repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
                    let again = ArpPacket::new_checked(&out[..]).expect("emitted ARP is well-formed");
                    assert_eq!(ArpRepr::parse(&again), Ok(repr));
                }
            }
        }
        EtherType::Ipv4 => {
            let Ok(ip) = Ipv4Packet::new_checked(payload) else { return };
            let Ok(ip_repr) = Ipv4Repr::parse(&ip, &caps) else { return };
            let l4 = ip.payload();
            match ip_repr.protocol {
                IpProtocol::Tcp => {
                    let (src, dst) = (ip_repr.src_addr, ip_repr.dst_addr);
                    let Ok(tcp) = TcpPacket::new_checked(l4) else { return };
                    let Ok(repr) = TcpRepr::parse(&tcp, src, dst, &caps) else { return };
                    let plen = tcp.payload().len();
                    let mut out = vec![0u8; repr.header_len() + plen];
                    out[repr.header_len()..].copy_from_slice(tcp.payload());
                    repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), src, dst, plen, &caps);
                    let again = TcpPacket::new_checked(&out[..]).expect("emitted TCP is well-formed");
                    assert_eq!(TcpRepr::parse(&again, src, dst, &caps), Ok(repr));
                }
                IpProtocol::Udp => {
                    if let Ok(udp) = UdpPacket::new_checked(l4) {
                        let _ = UdpRepr::parse(&udp, ip_repr.src_addr, ip_repr.dst_addr, &caps);
                    }
                }
                IpProtocol::Icmp => {
                    if let Ok(icmp) = Icmpv4Packet::new_checked(l4) {
                        let _ = Icmpv4Repr::parse(&icmp, &caps);
                    }
                }
                _ => {}
            }
        }
        _ => {}
    }
});
