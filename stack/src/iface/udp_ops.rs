//! UDP socket operations and ICMP echo (ping) for applications.

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp_api::SocketError;

use super::counters::DropReason;
use super::socket_set::Socket;
use super::{Interface, SocketHandle, FIRST_EPHEMERAL_PORT};
use crate::iface::arp_cache::Resolution;
use crate::nic::{Nic, PacketBuf};
use crate::time::Instant;
use crate::udp::UdpSocket;
use crate::wire::{EthernetAddress, Icmpv4Repr, UdpPacket, UdpRepr};

pub(super) const ETH_IP_LEN: usize = 14 + 20;
pub(super) const UDP_LEN: usize = 8;

/// An ICMP echo reply received for one of our pings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PingReply {
    /// Who answered.
    pub from: Ipv4Addr,
    /// Identifier of the request.
    pub ident: u16,
    /// Sequence number of the request.
    pub seq_no: u16,
    /// Data bytes echoed.
    pub len: usize,
    /// When it arrived.
    pub at: Instant,
}

/// Where a frame to `dst` can go now.
pub(super) enum Route {
    Now(EthernetAddress),
    Later(Ipv4Addr, bool),
}

impl<N: Nic> Interface<N> {
    pub(super) fn route(&mut self, now: Instant, dst: Ipv4Addr) -> Result<Route, SocketError> {
        if dst.is_broadcast() {
            return Ok(Route::Now(EthernetAddress::BROADCAST));
        }
        let hop = self.cfg.next_hop(dst).ok_or(SocketError::NetUnreachable)?;
        match self.arp.resolve(hop, now) {
            Resolution::Known(mac) => Ok(Route::Now(mac)),
            Resolution::SendRequest => Ok(Route::Later(hop, true)),
            Resolution::Wait => Ok(Route::Later(hop, false)),
            Resolution::Failed => Err(SocketError::Connection(crate::tcp::ConnError::Unreachable)),
        }
    }

    /// Queues a finished frame for `dst`, or holds it until ARP resolves the next hop.
    fn send_routed(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        mut frame: crate::nic::PacketBuf,
    ) -> Result<(), SocketError> {
        match self.route(now, dst)? {
            Route::Now(mac) => {
                frame.as_mut_slice()[0..6].copy_from_slice(&mac.0);
                self.enqueue_frame(frame);
            }
            Route::Later(hop, request) => {
                if request {
                    self.send_arp_request(hop);
                }
                if self.pending.add_frame(hop, frame).is_err() {
                    self.counters.drop(DropReason::Unresolved);
                    return Err(SocketError::WouldBlock);
                }
            }
        }
        Ok(())
    }

    /// Binds a UDP socket to `port` (0 picks an ephemeral port).
    pub fn udp_bind(&mut self, port: u16) -> Result<SocketHandle, SocketError> {
        let port = if port == 0 {
            (FIRST_EPHEMERAL_PORT..=u16::MAX)
                .find(|&p| self.udp_ports.is_free(p))
                .ok_or(SocketError::AddrNotAvailable)?
        } else {
            port
        };
        if !self.udp_ports.can_bind(port) {
            return Err(SocketError::AddrInUse);
        }
        if self.sockets.len() >= self.cfg.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        let mut sock = UdpSocket::new(port, self.cfg.udp_queue);
        sock.bind_rx_budget(&self.rx_budget);
        let h = self.sockets.insert(Socket::Udp(Box::new(sock)));
        if let Err(e) = self.udp_ports.bind(port, h) {
            self.sockets.remove(h);
            return Err(e);
        }
        Ok(h)
    }

    /// Sets the default destination (and only accepted source) of a UDP socket.
    pub fn udp_connect(&mut self, h: SocketHandle, peer: SocketAddrV4) -> Result<(), SocketError> {
        let port = self.udp_socket(h)?.port();
        self.udp_ports.connect(port, h, peer)?;
        self.udp_socket(h)?.connect(peer);
        Ok(())
    }

    /// The local address of UDP socket `h`.
    pub fn udp_local(&self, h: SocketHandle) -> Result<SocketAddrV4, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Udp(u)) => Ok(SocketAddrV4::new(self.cfg.ip, u.port())),
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    pub(super) fn udp_socket(&mut self, h: SocketHandle) -> Result<&mut UdpSocket, SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Udp(u)) => Ok(u),
            Some(_) => Err(SocketError::NotSupported),
            None => Err(SocketError::BadHandle),
        }
    }

    /// The source port and destination of a datagram of `len` bytes from `h` (to `dst`, or to
    /// the connected peer when `dst` is `None`), if it can be sent.
    pub(super) fn udp_destination(
        &mut self,
        h: SocketHandle,
        dst: Option<SocketAddrV4>,
        len: usize,
    ) -> Result<(u16, SocketAddrV4), SocketError> {
        let mtu = self.caps.mtu;
        let sock = self.udp_socket(h)?;
        let dst = dst.or(sock.peer()).ok_or(SocketError::NotConnected)?;
        if UDP_LEN + len + 20 > mtu {
            return Err(SocketError::MessageTooLong);
        }
        Ok((sock.port(), dst))
    }

    /// Sends one datagram (to `dst`, or to the connected peer when `dst` is `None`).
    pub fn udp_send_to(
        &mut self,
        now: Instant,
        h: SocketHandle,
        data: &[u8],
        dst: Option<SocketAddrV4>,
    ) -> Result<usize, SocketError> {
        self.udp_send_filled(now, h, data.len(), dst, |room| {
            room.copy_from_slice(data);
            data.len()
        })
    }

    /// [`udp_send_to`](Self::udp_send_to) of `len` payload bytes that `fill` writes into the
    /// frame (returning how many it wrote; a short fill is zero-padded, as the length is
    /// already announced).
    pub(super) fn udp_send_filled(
        &mut self,
        now: Instant,
        h: SocketHandle,
        len: usize,
        dst: Option<SocketAddrV4>,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<usize, SocketError> {
        let (src_port, dst) = self.udp_destination(h, dst, len)?;
        let mut buf = self.nic.alloc_tx().map_err(|_| SocketError::WouldBlock)?;
        let l4_len = UDP_LEN + len;
        let frame = buf.append(ETH_IP_LEN + l4_len).ok_or(SocketError::MessageTooLong)?;
        let room = &mut frame[ETH_IP_LEN + UDP_LEN..];
        let filled = fill(room);
        room[filled.min(len)..].fill(0);
        self.counters.tx_payload_copied_bytes += len as u64;
        let repr = UdpRepr { src_port, dst_port: dst.port() };
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut frame[ETH_IP_LEN..]),
            self.cfg.ip,
            *dst.ip(),
            len,
            &self.caps.checksum,
        );
        self.frame_headers(frame, EthernetAddress([0; 6]), *dst.ip(), l4_len);
        buf.offload = crate::nic::TxOffload::ipv4(crate::nic::L4Proto::Udp, &self.caps.checksum);
        self.send_routed(now, *dst.ip(), buf)?;
        self.counters.udp_out += 1;
        Ok(len)
    }

    /// Copies the oldest datagram into `buf` (truncating) and returns its length and source.
    pub fn udp_recv_from(
        &mut self,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Result<(usize, SocketAddrV4), SocketError> {
        let (from, payload) = self.udp_socket(h)?.recv().ok_or(SocketError::WouldBlock)?;
        let n = payload.len().min(buf.len());
        buf[..n].copy_from_slice(&payload.as_slice()[..n]);
        Ok((n, from))
    }

    /// Zero-copy receive: the oldest datagram's payload buffer and its source.
    pub fn udp_recv_buf(&mut self, h: SocketHandle) -> Result<(SocketAddrV4, PacketBuf), SocketError> {
        self.udp_socket(h)?.recv().ok_or(SocketError::WouldBlock)
    }

    /// True when a datagram waits on `h`.
    pub fn udp_can_recv(&self, h: SocketHandle) -> bool {
        matches!(self.sockets.get(h), Some(Socket::Udp(u)) if u.can_recv())
    }

    /// Sends an ICMP echo request with `len` data bytes.
    pub fn ping(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        len: usize,
    ) -> Result<(), SocketError> {
        if len > self.caps.mtu.saturating_sub(28) {
            return Err(SocketError::MessageTooLong);
        }
        let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let repr = Icmpv4Repr::EchoRequest { ident, seq_no, data: &data };
        let frame = self.build_icmp(EthernetAddress([0; 6]), dst, &repr).ok_or(SocketError::WouldBlock)?;
        self.send_routed(now, dst, frame)
    }

    /// The oldest echo reply received, if any.
    pub fn take_ping_reply(&mut self) -> Option<PingReply> {
        self.ping_replies.pop_front()
    }
}
