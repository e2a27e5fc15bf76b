//! Frames at the byte level for the offload suite: what the stack's TCP/UDP checksum fields held
//! in a capture, hand-made UDP frames (good or with a bad checksum), and injecting frames on the
//! kernel side of a TAP with an `AF_PACKET` socket.

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use slimtcp::nic::pcap::read_pcap;
use slimtcp::wire::{checksum, EthernetAddress, IpProtocol};

/// Ethernet header bytes.
const ETH_LEN: usize = 14;

/// What the TCP/UDP checksum fields of one sender's frames held in a capture.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChecksumFields {
    /// TCP and UDP frames from the sender.
    pub frames: usize,
    /// Of those, frames whose field held the pseudo-header sum only (left to the device).
    pub pseudo_header_only: usize,
    /// Of those, frames whose field held the complete, correct checksum.
    pub complete: usize,
}

/// Sorts the IPv4 TCP/UDP frames sent by `src_mac` in the pcap at `path` by what their checksum
/// field holds.
pub fn checksum_fields(path: &Path, src_mac: EthernetAddress) -> ChecksumFields {
    let mut out = ChecksumFields::default();
    for (_, frame) in read_pcap(path).expect("read the capture") {
        if frame.get(6..12) != Some(&src_mac.0[..]) || frame.get(12..14) != Some(&[0x08, 0x00][..]) {
            continue;
        }
        let Some(&version_ihl) = frame.get(ETH_LEN) else { continue };
        let ihl = usize::from(version_ihl & 0x0f) * 4;
        let Some(ip) = frame.get(ETH_LEN..ETH_LEN + ihl) else { continue };
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        let (protocol, field_at) = match ip[9] {
            6 => (IpProtocol::Tcp, 16),
            17 => (IpProtocol::Udp, 6),
            _ => continue,
        };
        let Some(segment) = frame.get(ETH_LEN + ihl..ETH_LEN + total) else { continue };
        let Some(field) = segment.get(field_at..field_at + 2) else { continue };
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        let pseudo = checksum::pseudo_header(src, dst, protocol, segment.len() as u32);
        out.frames += 1;
        if u16::from_be_bytes([field[0], field[1]]) == pseudo {
            out.pseudo_header_only += 1;
        }
        if checksum::combine(&[pseudo, checksum::data(segment)]) == 0xffff {
            out.complete += 1;
        }
    }
    out
}

/// Addresses of a hand-made UDP frame.
#[derive(Debug, Clone, Copy)]
pub struct UdpAddrs {
    /// Ethernet source.
    pub src_mac: EthernetAddress,
    /// Ethernet destination.
    pub dst_mac: EthernetAddress,
    /// IPv4 source.
    pub src: Ipv4Addr,
    /// IPv4 destination.
    pub dst: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
}

/// What to break in a hand-made frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Damage {
    /// Nothing: every checksum right.
    None,
    /// A payload byte changed after the UDP checksum was computed.
    UdpChecksum,
    /// The IPv4 header checksum off by one.
    Ipv4Checksum,
}

/// An Ethernet + IPv4 + UDP frame carrying `payload`, with its checksums right except `damage`.
pub fn udp_frame(a: &UdpAddrs, payload: &[u8], damage: Damage) -> Vec<u8> {
    let l4_len = 8 + payload.len();
    let total = 20 + l4_len;
    let mut frame = Vec::with_capacity(ETH_LEN + total);
    frame.extend_from_slice(&a.dst_mac.0);
    frame.extend_from_slice(&a.src_mac.0);
    frame.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&a.src.octets());
    ip[16..20].copy_from_slice(&a.dst.octets());
    let mut sum = !checksum::data(&ip);
    if damage == Damage::Ipv4Checksum {
        sum = sum.wrapping_add(1);
    }
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    frame.extend_from_slice(&ip);
    let mut udp = Vec::with_capacity(l4_len);
    udp.extend_from_slice(&a.src_port.to_be_bytes());
    udp.extend_from_slice(&a.dst_port.to_be_bytes());
    udp.extend_from_slice(&(l4_len as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let pseudo = checksum::pseudo_header(a.src, a.dst, IpProtocol::Udp, l4_len as u32);
    let mut sum = !checksum::combine(&[pseudo, checksum::data(&udp)]);
    if sum == 0 {
        sum = 0xffff;
    }
    udp[6..8].copy_from_slice(&sum.to_be_bytes());
    if damage == Damage::UdpChecksum {
        if let Some(last) = udp.last_mut() {
            *last ^= 0x01;
        }
    }
    frame.extend_from_slice(&udp);
    frame
}

/// Sends `frames` out of interface `ifname` of the calling thread's namespace through an
/// `AF_PACKET` socket: on a TAP's kernel side they reach the TAP's reader as they are, with no
/// checksum verdict (the kernel never looked at them).
pub fn inject(ifname: &str, frames: &[Vec<u8>]) -> io::Result<()> {
    let name = CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `name` is a NUL-terminated string alive for the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain socket(2) call with constant arguments (protocol 0: send only).
    let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a freshly created socket descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    for frame in frames {
        let mut dst = [0u8; 8];
        dst[..6].copy_from_slice(frame.get(..6).unwrap_or(&[0; 6]));
        let addr = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: 0,
            sll_ifindex: index as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 6,
            sll_addr: dst,
        };
        // SAFETY: `frame` and `addr` are valid for reads for the whole call, with the lengths
        // given; the kernel only reads them.
        let rc = unsafe {
            libc::sendto(
                socket.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
