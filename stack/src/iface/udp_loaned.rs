//! UDP datagrams sent by reference: the payload stays where the application loaned it (guest
//! memory) and the NIC appends it to headers the stack builds ([`Nic::transmit_external`]).
//!
//! The loan comes back through [`Interface::udp_take_returned`] once nothing reads it: after the
//! NIC completed the transmission, or at once when the datagram was copied instead (a NIC
//! without by-reference transmit, a payload that is not `by_reference`, a payload shorter than
//! [`EXTERNAL_MIN_PAYLOAD`], which costs less copied, as for TCP) or
//! dropped (transmit queue full, next hop unresolvable). A datagram waiting for ARP keeps its
//! loan until it leaves. Over a NIC that fills UDP checksums (a TAP with its virtio-net header,
//! a DPDK port, memwire with offload) the stack leaves the checksum to it and never reads the
//! payload; otherwise it is computed in software over the headers and the payload (read through
//! the payload's own copies: guest memory is no slice, see [`crate::tcp::tx_payload`]). UDP
//! promises no order: a datagram sent by reference may leave ahead of copied frames queued in
//! the same round.

use std::net::SocketAddrV4;

use slimtcp_api::SocketError;

use super::counters::DropReason;
use super::neighbor::LoanedDatagram;
use super::tx::{emit_eth_ipv4, EXTERNAL_MIN_PAYLOAD};
use super::udp_ops::{Route, ETH_IP_LEN, UDP_LEN};
use super::{Interface, SocketHandle, TX_BACKLOG_BURSTS};
use crate::nic::{L4Proto, Nic, TxOffload};
use crate::tcp::{payload_sum, TxPayload};
use crate::time::Instant;
use crate::wire::{ChecksumCapabilities, EthernetAddress, IpProtocol, UdpPacket, UdpRepr};

impl<N: Nic> Interface<N> {
    /// Sends one datagram (to `dst`, or to the connected peer when `dst` is `None`) whose
    /// payload the application loans. On `Ok` the payload comes back through
    /// [`udp_take_returned`](Self::udp_take_returned) (see the module documentation for when);
    /// on `Err` it is dropped.
    pub fn udp_send_loaned(
        &mut self,
        now: Instant,
        h: SocketHandle,
        payload: Box<dyn TxPayload>,
        dst: Option<SocketAddrV4>,
    ) -> Result<usize, SocketError> {
        let len = payload.len();
        let (src_port, dst) = self.udp_destination(h, dst, len)?;
        let by_reference = payload.external_addr().is_some() && self.nic.supports_external();
        let short = len < EXTERNAL_MIN_PAYLOAD;
        if !by_reference || short {
            let n = self.udp_send_filled(now, h, len, Some(dst), |room| payload.copy_to(0, room))?;
            if by_reference {
                self.counters.tx_short_payload_copied_bytes += len as u64;
            }
            self.return_datagram_loan(h, payload);
            return Ok(n);
        }
        let mut headers = self.nic.alloc_tx().map_err(|_| SocketError::WouldBlock)?;
        let frame = headers.append(ETH_IP_LEN + UDP_LEN).ok_or(SocketError::MessageTooLong)?;
        let (src, dst_ip) = (self.cfg.ip, *dst.ip());
        // The NIC fills the UDP checksum (and the IPv4 one if it offers that), or nothing is
        // left to it: every checksum is written here, the payload read for its sum.
        let caps = if self.caps.checksum.udp.tx { self.caps.checksum } else { ChecksumCapabilities::none() };
        let placeholder = EthernetAddress([0; 6]);
        emit_eth_ipv4(frame, self.cfg.mac, placeholder, src, dst_ip, IpProtocol::Udp, UDP_LEN + len, &caps);
        let repr = UdpRepr { src_port, dst_port: dst.port() };
        let udp = &mut UdpPacket::new_unchecked(&mut frame[ETH_IP_LEN..]);
        let sum = (!caps.udp.tx).then(|| payload_sum(payload.as_ref(), 0, len));
        repr.emit_header(udp, src, dst_ip, len, sum);
        headers.offload =
            if caps.udp.tx { TxOffload::ipv4(L4Proto::Udp, &caps) } else { TxOffload::default() };
        let datagram = LoanedDatagram { socket: h, headers, payload };
        match self.route(now, dst_ip)? {
            Route::Now(mac) => self.queue_loaned_datagram(mac, datagram),
            Route::Later(hop, request) => {
                if request {
                    self.send_arp_request(hop);
                }
                if self.pending.add_datagram(hop, datagram).is_err() {
                    self.counters.drop(DropReason::Unresolved);
                    return Err(SocketError::WouldBlock);
                }
            }
        }
        self.counters.udp_out += 1;
        Ok(len)
    }

    /// The loaned payloads of `h`'s datagrams that nothing reads any more, handed back.
    pub fn udp_take_returned(
        &mut self,
        h: SocketHandle,
        out: &mut Vec<Box<dyn TxPayload>>,
    ) -> Result<(), SocketError> {
        out.extend(self.udp_socket(h)?.take_returned());
        Ok(())
    }

    /// Queues a datagram whose next hop is at `mac` for the NIC (dropped, counted, when the
    /// device is far behind).
    pub(super) fn queue_loaned_datagram(&mut self, mac: EthernetAddress, mut datagram: LoanedDatagram) {
        if self.ext.queue.len() >= self.cfg.burst * TX_BACKLOG_BURSTS {
            self.counters.drop(DropReason::TxFull);
            return self.return_datagram_loan(datagram.socket, datagram.payload);
        }
        datagram.headers.as_mut_slice()[0..6].copy_from_slice(&mac.0);
        if let Err(datagram) = self.ext.push_datagram(datagram) {
            log::error!("a loaned datagram payload without an address; dropped");
            self.counters.drop(DropReason::TxFull);
            self.return_datagram_loan(datagram.socket, datagram.payload);
        }
    }

    /// Takes back every loaned payload of `h` that waits for ARP: each datagram becomes an
    /// ordinary frame with its payload copied (its checksums already cover those bytes), keeps
    /// its place in the hold, and the loan comes back through
    /// [`udp_take_returned`](Self::udp_take_returned) at once. A datagram whose frame has no
    /// room for the copy is dropped (counted; UDP may lose it). Loans the NIC reads already come
    /// back on their completion. Returns the bytes copied (also in `tx_loans_copied_bytes`).
    pub fn udp_unloan(&mut self, h: SocketHandle) -> Result<usize, SocketError> {
        self.udp_socket(h)?;
        let mut held = Vec::new();
        self.pending.take_datagrams_of(h, |ip, d| held.push((ip, d)));
        let mut copied = 0;
        for (ip, LoanedDatagram { socket, mut headers, payload }) in held {
            let whole = match headers.append(payload.len()) {
                Some(room) => {
                    copied += payload.copy_to(0, room);
                    self.pending.add_frame(ip, headers).is_ok()
                }
                None => false,
            };
            if !whole {
                self.counters.drop(DropReason::TxFull);
            }
            self.return_datagram_loan(socket, payload);
        }
        self.counters.tx_loans_copied_bytes += copied as u64;
        Ok(copied)
    }

    /// A datagram whose next hop could not be resolved is dropped: its loan goes back.
    pub(super) fn drop_loaned_datagram(&mut self, datagram: LoanedDatagram) {
        self.counters.drop(DropReason::Unresolved);
        self.return_datagram_loan(datagram.socket, datagram.payload);
    }

    fn return_datagram_loan(&mut self, h: SocketHandle, payload: Box<dyn TxPayload>) {
        // A socket closed meanwhile: nothing reads the payload, so dropping it is the release.
        if let Some(u) = self.sockets.udp_mut(h) {
            u.loan_returned(payload);
            self.note_activity(h);
        }
    }
}
