//! The receive path: filter, parse, demultiplex. Every rejected frame is counted by reason; no
//! frame can panic the worker or touch a connection it does not belong to.

use std::net::{Ipv4Addr, SocketAddrV4};

use super::counters::DropReason;
use super::martian::Martian;
use super::rx_flow::{HEADERS_LEN, LINK_IP_LEN};
use super::socket_set::{FourTuple, Socket, SocketHandle, TcpSocket};
use super::template::HeaderTemplate;
use super::udp_ops::PingReply;
use super::Interface;
use crate::nic::{Nic, PacketBuf};
use crate::tcp::syncookie::COOKIE_PERIOD;
use crate::tcp::{
    cookie_syn_ack, listen_input, reset_for_closed, Connection, CookieSyn, ListenAction, State,
};
use crate::time::Instant;
use crate::udp::Delivered;
use crate::wire::tcp::HEADER_LEN as TCP_HEADER_LEN;
use crate::wire::ChecksumCapabilities;
use crate::wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, Icmpv4Packet, Icmpv4Repr,
    IpProtocol, Ipv4Packet, Ipv4Repr, TcpFlags, TcpPacket, TcpRepr, UdpPacket, UdpRepr,
};

const ETH_LEN: usize = crate::wire::ethernet::HEADER_LEN;

/// Connections a listener may hold (SYN-RECEIVED or not yet accepted) once cookies made some,
/// as a multiple of its backlog: the backlog may be full of half-open connections from spoofed
/// sources; connections from valid cookies are real peers and get room of their own.
const COOKIE_BACKLOG_FACTOR: usize = 2;

/// What a listener found in an ACK that matched no connection.
enum CookieCheck {
    /// The listener sent no cookie lately: a stray ACK.
    NotChecked,
    /// No valid cookie.
    Invalid,
    /// No valid cookie, but the segment carries data or a FIN, which may begin after the peer's
    /// first byte, where no check can work (see [`Interface::check_cookie`]).
    Unverifiable,
    /// A valid cookie, but the listener holds too many connections already.
    Full,
    /// A valid cookie.
    Valid(CookieSyn),
}

impl<N: Nic> Interface<N> {
    pub(super) fn process_frame(&mut self, now: Instant, frame: &mut PacketBuf) {
        // Only the very next frame may continue a run of segments.
        let run = self.rx_flow.take();
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += frame.len() as u64;
        if run && self.take_continuation(now, frame) {
            return;
        }
        // Any other frame may touch the run's connection: what the run owes it is done first.
        self.settle_run(now);
        let (src_mac, ethertype) = {
            let eth = match EthernetFrame::new_checked(frame.as_slice()) {
                Ok(eth) => eth,
                Err(e) => return self.counters.drop(e.into()),
            };
            let dst = eth.dst_addr();
            if dst != self.cfg.mac && !dst.is_broadcast() {
                return self.counters.drop(DropReason::NotForUs);
            }
            (eth.src_addr(), eth.ethertype())
        };
        match ethertype {
            EtherType::Arp => self.process_arp(now, &frame.as_slice()[ETH_LEN..]),
            EtherType::Ipv4 => self.process_ipv4(now, src_mac, frame),
            EtherType::Unknown(_) => self.counters.drop(DropReason::Unsupported),
        }
    }

    /// The checksums to verify in software for a received frame ([`rx_checksum_caps`]).
    fn rx_checksum_caps(&self, frame: &PacketBuf) -> ChecksumCapabilities {
        rx_checksum_caps(frame.rx_checksum_ok)
    }

    fn process_ipv4(&mut self, now: Instant, src_mac: EthernetAddress, frame: &mut PacketBuf) {
        if frame.rx_checksum_ok == Some(false) {
            return self.counters.drop(DropReason::BadChecksum);
        }
        let caps = self.rx_checksum_caps(frame);
        let (ip_repr, l4_offset) = {
            let ip = match Ipv4Packet::new_checked(&frame.as_slice()[ETH_LEN..]) {
                Ok(ip) => ip,
                Err(e) => return self.counters.drop(e.into()),
            };
            match Ipv4Repr::parse(&ip, &caps) {
                Ok(r) => (r, ETH_LEN + ip.header_len()),
                Err(e) => return self.counters.drop(e.into()),
            }
        };
        if ip_repr.dst_addr != self.cfg.ip {
            return self.counters.drop(DropReason::NotForUs);
        }
        if let Some(kind) = Martian::classify(&self.cfg, ip_repr.src_addr) {
            return self.counters.drop_martian(kind);
        }
        // Strip Ethernet and IP headers (and any Ethernet padding): the buffer now holds L4.
        frame.advance(l4_offset);
        frame.truncate(ip_repr.payload_len);
        match ip_repr.protocol {
            IpProtocol::Tcp => self.process_tcp(now, src_mac, ip_repr.src_addr, frame, l4_offset),
            IpProtocol::Udp => self.process_udp(ip_repr.src_addr, frame),
            IpProtocol::Icmp => self.process_icmp(now, src_mac, ip_repr.src_addr, frame),
            IpProtocol::Unknown(_) => self.counters.drop(DropReason::Unsupported),
        }
    }

    fn process_arp(&mut self, now: Instant, bytes: &[u8]) {
        let repr = match ArpPacket::new_checked(bytes).and_then(|p| ArpRepr::parse(&p)) {
            Ok(r) => r,
            Err(e) => return self.counters.drop(e.into()),
        };
        let sender_ip = repr.source_protocol_addr;
        let sender_mac = repr.source_hardware_addr;
        if !sender_mac.is_unicast() || sender_ip.is_unspecified() || sender_ip == self.cfg.ip {
            return self.counters.drop(DropReason::Malformed);
        }
        let for_us = repr.target_protocol_addr == self.cfg.ip;
        // RFC 826: update an existing entry from any ARP; add one only when we are the target.
        if for_us || self.arp.lookup(sender_ip, now).is_some() {
            self.learn_neighbor(now, sender_ip, sender_mac);
        }
        if !for_us {
            return self.counters.drop(DropReason::NotForUs);
        }
        if repr.operation == ArpOperation::Request {
            let reply = ArpRepr {
                operation: ArpOperation::Reply,
                source_hardware_addr: self.cfg.mac,
                source_protocol_addr: self.cfg.ip,
                target_hardware_addr: sender_mac,
                target_protocol_addr: sender_ip,
            };
            if self.send_arp(sender_mac, &reply) {
                self.counters.arp_replies_sent += 1;
            }
        }
    }

    fn process_icmp(&mut self, now: Instant, src_mac: EthernetAddress, src: Ipv4Addr, l4: &PacketBuf) {
        let packet = match Icmpv4Packet::new_checked(l4.as_slice()) {
            Ok(p) => p,
            Err(e) => return self.counters.drop(e.into()),
        };
        match Icmpv4Repr::parse(&packet, &self.caps.checksum) {
            Ok(Icmpv4Repr::EchoRequest { ident, seq_no, data }) => {
                let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
                if self.send_icmp(src_mac, src, &reply) {
                    self.counters.icmp_echo_replies += 1;
                }
            }
            Ok(Icmpv4Repr::EchoReply { ident, seq_no, data }) => {
                self.queue_ping_reply(PingReply { from: src, ident, seq_no, len: data.len(), at: now });
            }
            Err(e) => self.counters.drop(e.into()),
        }
    }

    fn process_udp(&mut self, src: Ipv4Addr, l4: &mut PacketBuf) {
        let (repr, len) = {
            let packet = match UdpPacket::new_checked(l4.as_slice()) {
                Ok(p) => p,
                Err(e) => return self.counters.drop(e.into()),
            };
            match UdpRepr::parse(&packet, src, self.cfg.ip, &self.rx_checksum_caps(l4)) {
                Ok(r) => (r, usize::from(packet.len())),
                Err(e) => return self.counters.drop(e.into()),
            }
        };
        let from = SocketAddrV4::new(src, repr.src_port);
        let Some(h) = self.udp_ports.lookup(repr.dst_port, from) else {
            return self.counters.drop(DropReason::NoSocket);
        };
        l4.truncate(len);
        l4.advance(crate::wire::udp::HEADER_LEN);
        match self.sockets.udp_mut(h).map(|sock| sock.deliver(from, std::mem::take(l4))) {
            Some(Delivered::Queued) => {
                self.counters.udp_in += 1;
                self.note_activity(h);
            }
            Some(Delivered::QueueFull) => self.counters.drop(DropReason::UdpQueueFull),
            Some(Delivered::NoMemory) => self.counters.drop(DropReason::RxMemory),
            Some(Delivered::Filtered) | None => self.counters.drop(DropReason::NoSocket),
        }
    }

    /// A TCP segment (`l4`: its Ethernet and IPv4 headers, `link_ip_len` bytes, stripped).
    fn process_tcp(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        src: Ipv4Addr,
        l4: &mut PacketBuf,
        link_ip_len: usize,
    ) {
        let (repr, header_len) = {
            let packet = match TcpPacket::new_checked(l4.as_slice()) {
                Ok(p) => p,
                Err(e) => return self.counters.drop(e.into()),
            };
            match TcpRepr::parse(&packet, src, self.cfg.ip, &self.rx_checksum_caps(l4)) {
                Ok(r) => (r, packet.header_len()),
                Err(e) => return self.counters.drop(e.into()),
            }
        };
        l4.advance(header_len);
        let payload = l4;
        let tuple = FourTuple {
            local: SocketAddrV4::new(self.cfg.ip, repr.dst_port),
            remote: SocketAddrV4::new(src, repr.src_port),
        };
        if let Some(&h) = self.connections.get(&tuple) {
            if let Some(sock) = self.sockets.tcp_mut(h) {
                let reuse = sock.conn.state() == State::TimeWait
                    && repr.flags.contains(TcpFlags::SYN)
                    && repr.ack_number.is_none();
                if !reuse {
                    self.counters.tcp_segs_in += 1;
                    let payload_len = payload.len();
                    // The frame's headers, for a run this segment may start (only behind an
                    // IPv4 header without options; taken before the connection takes the frame).
                    let headers: Option<[u8; HEADERS_LEN]> = payload
                        .stripped(header_len + link_ip_len)
                        .filter(|_| link_ip_len == LINK_IP_LEN)
                        .and_then(|b| b.first_chunk().copied());
                    sock.conn.on_segment(now, &repr, payload);
                    Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
                    if let Some(headers) = &headers {
                        self.rx_flow.start(headers, &repr, payload_len, h);
                    }
                    return;
                }
                // A new SYN for a 4-tuple in TIME-WAIT: let the new connection take over.
                sock.conn.abort();
                self.connections.remove(&tuple);
                if sock.released {
                    self.free_socket(h);
                }
            }
        }
        let Some(&lh) = self.listeners.get(&repr.dst_port) else {
            self.counters.drop(DropReason::NoSocket);
            if let Some(rst) = reset_for_closed(&repr, payload.len()) {
                self.send_tcp_control(src_mac, tuple, &rst);
            }
            return;
        };
        match listen_input(&repr) {
            ListenAction::Accept => self.accept_syn(now, src_mac, tuple, lh, &repr),
            ListenAction::Reset(rst) => match self.check_cookie(now, tuple, lh, &repr, payload.len()) {
                CookieCheck::Valid(cookie) => {
                    self.accept_cookie(now, src_mac, tuple, lh, &repr, &cookie, payload)
                }
                CookieCheck::NotChecked => {
                    self.counters.drop(DropReason::NoSocket);
                    self.send_tcp_control(src_mac, tuple, &rst);
                }
                // Counted as `BadCookie`; answered like any stray ACK to a listener.
                CookieCheck::Invalid => self.send_tcp_control(src_mac, tuple, &rst),
                // Counted as `BadCookie`, not answered: the peer sends its first segment again.
                CookieCheck::Unverifiable => {}
                CookieCheck::Full => self.counters.drop(DropReason::BacklogFull),
            },
            ListenAction::Drop => self.counters.drop(DropReason::NoSocket),
        }
    }

    /// The received `frame` when it continues the run of segments the previous frame went on:
    /// given to that run's connection without a parse of its headers, the checks of its
    /// addresses or a lookup of its 4-tuple (`rx_flow.rs`), or dropped for a bad checksum.
    /// False when it is not such a continuation, or its connection does not take it the short
    /// way (it then takes the whole receive path).
    fn take_continuation(&mut self, now: Instant, frame: &mut PacketBuf) -> bool {
        let Some(next) = self.rx_flow.continued_by(frame.as_slice()) else { return false };
        let Some(sock) = self.sockets.tcp_mut(next.handle) else { return false };
        if !sock.conn.takes_continuation(next.seq, next.ack) {
            return false;
        }
        let caps = rx_checksum_caps(frame.rx_checksum_ok);
        let ip_ok = caps.ipv4.rx
            || frame
                .as_slice()
                .get(ETH_LEN..)
                .is_some_and(|ip| Ipv4Packet::new_unchecked(ip).verify_checksum());
        if frame.rx_checksum_ok == Some(false) || !ip_ok {
            self.counters.drop(DropReason::BadChecksum);
            return true;
        }
        frame.truncate(next.segment_end);
        frame.advance(LINK_IP_LEN);
        if let Err(e) =
            TcpPacket::new_unchecked(frame.as_slice()).check_checksum(next.src, self.cfg.ip, &caps)
        {
            self.counters.drop(e.into());
            return true;
        }
        frame.advance(TCP_HEADER_LEN);
        let payload_len = frame.len();
        self.counters.tcp_segs_in += 1;
        if sock.conn.take_continued_payload(now, next.push, frame) {
            self.rx_flow.owe(next.seq);
        } else {
            // The whole segment's way, after what the run owes the connection.
            if let Some(owed) = self.rx_flow.take_owed() {
                owed.settle(&mut sock.conn, now);
            }
            sock.conn.on_continuation(now, next.seq, next.window_len, next.push, frame);
            Self::schedule_dispatch(&mut self.dispatch_list, sock, next.handle);
        }
        self.rx_flow.extend(payload_len);
        true
    }

    /// Does the bookkeeping owed for the run's segments taken the short way (`rx_flow.rs`):
    /// before any frame that takes another way, and at the burst's end.
    pub(super) fn settle_run(&mut self, now: Instant) {
        let Some(owed) = self.rx_flow.take_owed() else { return };
        if let Some(sock) = self.sockets.tcp_mut(owed.handle) {
            owed.settle(&mut sock.conn, now);
            Self::schedule_dispatch(&mut self.dispatch_list, sock, owed.handle);
        }
    }

    /// Whether `ack` (for listener `lh`, matching no connection) returns a valid SYN cookie.
    ///
    /// The cookie is made over the peer's initial sequence number, which only a segment at the
    /// peer's first byte tells (its sequence number - 1). When the handshake's ACK and the first
    /// data segments are lost (a flooded link drops frames), a real client's later segment
    /// arrives first and fails the check: Linux resets such a client. A failed segment that
    /// carries data or a FIN (which may lie beyond the first byte) is therefore only dropped
    /// (`Unverifiable`): the client retransmits from its first byte, and that segment is
    /// checked. A failed segment without either is answered with a RST as any stray ACK.
    fn check_cookie(
        &mut self,
        now: Instant,
        tuple: FourTuple,
        lh: SocketHandle,
        ack: &TcpRepr,
        payload_len: usize,
    ) -> CookieCheck {
        let sockets = self.sockets.len();
        let Some(listener) = self.sockets.listener_mut(lh) else { return CookieCheck::NotChecked };
        let recent = listener.last_cookie.is_some_and(|t| now.saturating_since(t) < 2 * COOKIE_PERIOD);
        if !recent {
            return CookieCheck::NotChecked;
        }
        let Some(cookie) = self.cookies.check(tuple.local, tuple.remote, ack, now) else {
            self.counters.drop(DropReason::BadCookie);
            return if ack.segment_len(payload_len) > 0 {
                CookieCheck::Unverifiable
            } else {
                CookieCheck::Invalid
            };
        };
        if listener.pending >= listener.backlog * COOKIE_BACKLOG_FACTOR || sockets >= self.cfg.max_sockets {
            return CookieCheck::Full;
        }
        CookieCheck::Valid(cookie)
    }

    /// Answers a SYN for a listener whose backlog is full with a SYN cookie: no state is kept.
    fn send_cookie(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        tuple: FourTuple,
        lh: SocketHandle,
        syn: &TcpRepr,
    ) {
        let Some(listener) = self.sockets.listener_mut(lh) else { return };
        listener.last_cookie = Some(now);
        let cfg = listener.tcp_config.as_deref().unwrap_or(&self.tcp_cfg);
        let iss = self.cookies.make(tuple.local, tuple.remote, syn, now);
        let syn_ack = cookie_syn_ack(cfg, syn, iss);
        self.counters.tcp_segs_in += 1;
        self.counters.tcp_syn_cookies_sent += 1;
        self.send_tcp_control(src_mac, tuple, &syn_ack);
    }

    /// A connection from a valid SYN cookie: made in SYN-RECEIVED as if its SYN-ACK had just
    /// been sent, then fed the ACK that returned the cookie.
    #[allow(clippy::too_many_arguments)]
    fn accept_cookie(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        tuple: FourTuple,
        lh: SocketHandle,
        ack: &TcpRepr,
        cookie: &CookieSyn,
        payload: &mut PacketBuf,
    ) {
        let Some(listener) = self.sockets.listener_mut(lh) else { return };
        listener.pending += 1;
        let cfg = listener.tcp_config.clone().unwrap_or_else(|| std::sync::Arc::clone(&self.tcp_cfg));
        self.counters.tcp_segs_in += 1;
        self.counters.tcp_connections_opened += 1;
        self.counters.tcp_syn_cookies_accepted += 1;
        let mut conn = Connection::from_cookie(cfg, tuple.local, tuple.remote, cookie);
        conn.bind_rx_budget(&self.rx_budget);
        conn.on_segment(now, ack, payload);
        self.insert_passive(tuple, lh, src_mac, conn);
    }

    fn accept_syn(
        &mut self,
        now: Instant,
        src_mac: EthernetAddress,
        tuple: FourTuple,
        lh: SocketHandle,
        syn: &TcpRepr,
    ) {
        if self.sockets.len() >= self.cfg.max_sockets {
            // Refused out loud: the peer's connect fails at once instead of timing out.
            self.counters.drop(DropReason::SocketLimit);
            if let Some(rst) = reset_for_closed(syn, 0) {
                self.send_tcp_control(src_mac, tuple, &rst);
            }
            return;
        }
        let Some(listener) = self.sockets.listener_mut(lh) else {
            return self.counters.drop(DropReason::NoSocket);
        };
        if listener.pending >= listener.backlog {
            return self.send_cookie(now, src_mac, tuple, lh, syn);
        }
        listener.pending += 1;
        self.counters.tcp_segs_in += 1;
        self.counters.tcp_connections_opened += 1;
        let iss = self.isn.isn(tuple.local, tuple.remote, now);
        let cfg = listener.tcp_config.clone().unwrap_or_else(|| std::sync::Arc::clone(&self.tcp_cfg));
        let mut conn = Connection::accept(cfg, tuple.local, tuple.remote, syn, iss);
        conn.bind_rx_budget(&self.rx_budget);
        self.insert_passive(tuple, lh, src_mac, conn);
    }

    /// Files a connection a listener made, to be dispatched in this poll.
    fn insert_passive(
        &mut self,
        tuple: FourTuple,
        lh: SocketHandle,
        src_mac: EthernetAddress,
        conn: Connection,
    ) {
        // Reply straight to the sender's MAC: it is the next hop for this peer.
        let template = HeaderTemplate::new(self.cfg.mac, src_mac, tuple.local, tuple.remote);
        let sock = TcpSocket {
            conn,
            template: Some(template),
            listener: Some(lh),
            released: false,
            scheduled: None,
            queued: true,
            in_accept_queue: false,
            in_activity: false,
            tx_held: false,
        };
        let h = self.sockets.insert(Socket::Tcp(Box::new(sock)));
        self.connections.insert(tuple, h);
        self.dispatch_list.push(h);
    }

    /// Records `ip` at `mac` and releases whatever waited for it.
    fn learn_neighbor(&mut self, now: Instant, ip: Ipv4Addr, mac: EthernetAddress) {
        self.arp.insert(ip, mac, now);
        let Some(waiting) = self.pending.take(ip) else { return };
        for h in waiting.sockets {
            if let Some(sock) = self.sockets.tcp_mut(h) {
                Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
            }
        }
        for mut frame in waiting.frames {
            if let Ok(mut eth) = EthernetFrame::new_checked(frame.as_mut_slice()) {
                eth.set_dst_addr(mac);
            }
            self.enqueue_frame(frame);
        }
        for datagram in waiting.datagrams {
            self.queue_loaned_datagram(mac, datagram);
        }
    }
}

/// The checksums to verify in software for a received frame, from the NIC's verdict
/// ([`PacketBuf::rx_checksum_ok`]): none when the NIC verified them good, all of them when it
/// did not look, whatever receive offloads the NIC advertises (a DPDK port with receive offload
/// still reports "unknown" for frames its hardware could not classify). Frames the NIC found
/// bad are dropped before.
fn rx_checksum_caps(verdict: Option<bool>) -> ChecksumCapabilities {
    match verdict {
        Some(true) => ChecksumCapabilities::verified(),
        _ => ChecksumCapabilities::none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_good_verdict_skips_software_verification() {
        assert_eq!(rx_checksum_caps(Some(true)), ChecksumCapabilities::verified());
        let none = rx_checksum_caps(None);
        assert!(!none.ipv4.rx && !none.tcp.rx && !none.udp.rx, "no verdict: verify everything");
    }
}
