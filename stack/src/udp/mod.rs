//! UDP sockets: a bound port, an optional connected peer, and a bounded queue of received
//! datagrams, each kept in the buffer it arrived in unless it fills less than half of it: a
//! small datagram is copied into a buffer of its own size, so a flood of tiny datagrams holds
//! about their bytes, not a NIC buffer (2 KiB, or a DPDK mbuf) each. Datagrams sent from a
//! loaned payload (`Interface::udp_send_loaned`) come back here once the NIC is done with them.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use crate::nic::PacketBuf;
use crate::tcp::TxPayload;

/// A UDP socket's state.
#[derive(Debug)]
pub struct UdpSocket {
    port: u16,
    peer: Option<SocketAddrV4>,
    rx: VecDeque<(SocketAddrV4, PacketBuf)>,
    capacity: usize,
    /// Loaned payloads of sent (or dropped) datagrams, for the application to take back.
    returned: Vec<Box<dyn TxPayload>>,
}

impl UdpSocket {
    /// A socket bound to `port`, queueing at most `capacity` datagrams.
    pub fn new(port: u16, capacity: usize) -> Self {
        UdpSocket { port, peer: None, rx: VecDeque::new(), capacity, returned: Vec::new() }
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connected peer, if any.
    pub fn peer(&self) -> Option<SocketAddrV4> {
        self.peer
    }

    /// Sets the default destination and the only source accepted from now on.
    pub fn connect(&mut self, peer: SocketAddrV4) {
        self.peer = Some(peer);
    }

    /// Queues a received datagram; false when the queue is full (or the source is filtered).
    pub fn deliver(&mut self, from: SocketAddrV4, payload: PacketBuf) -> bool {
        if self.peer.is_some_and(|p| p != from) || self.rx.len() >= self.capacity {
            return false;
        }
        let payload = if payload.len() * 2 < payload.capacity() { compact(&payload) } else { payload };
        self.rx.push_back((from, payload));
        true
    }

    /// Bytes of buffer storage the queue holds.
    pub fn memory(&self) -> usize {
        self.rx.iter().map(|(_, b)| b.capacity()).sum()
    }

    /// The oldest datagram and its source.
    pub fn recv(&mut self) -> Option<(SocketAddrV4, PacketBuf)> {
        self.rx.pop_front()
    }

    /// True when a datagram waits.
    pub fn can_recv(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Hands a loaned payload back: its datagram left (or was dropped) and nothing reads it now.
    pub fn loan_returned(&mut self, payload: Box<dyn TxPayload>) {
        self.returned.push(payload);
    }

    /// The loaned payloads handed back since the last call.
    pub fn take_returned(&mut self) -> std::vec::Drain<'_, Box<dyn TxPayload>> {
        self.returned.drain(..)
    }
}

/// A copy of `payload` in a buffer of exactly its size.
fn compact(payload: &PacketBuf) -> PacketBuf {
    let mut b = PacketBuf::with_headroom(payload.len(), 0);
    if let Some(dst) = b.append(payload.len()) {
        dst.copy_from_slice(payload.as_slice());
    }
    b.rx_checksum_ok = payload.rx_checksum_ok;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_queue_and_connected_filter() {
        let a: SocketAddrV4 = "10.0.0.1:5".parse().expect("addr");
        let b: SocketAddrV4 = "10.0.0.2:5".parse().expect("addr");
        let mut s = UdpSocket::new(7, 2);
        assert!(s.deliver(a, PacketBuf::from_slice(b"1")));
        assert!(s.deliver(b, PacketBuf::from_slice(b"2")));
        assert!(!s.deliver(a, PacketBuf::from_slice(b"3")), "full");
        assert_eq!(s.recv().map(|(f, p)| (f, p.as_slice().to_vec())), Some((a, b"1".to_vec())));
        s.connect(a);
        assert!(!s.deliver(b, PacketBuf::from_slice(b"4")), "filtered");
        assert!(s.deliver(a, PacketBuf::from_slice(b"5")));
    }

    #[test]
    fn small_datagrams_hold_their_bytes_not_their_nic_buffers() {
        let a: SocketAddrV4 = "10.0.0.1:5000".parse().expect("addr");
        let mut s = UdpSocket::new(9, 256);
        for i in 0..=255u8 {
            let mut frame = PacketBuf::with_headroom(2048, 42);
            frame.append(1).expect("room")[0] = i;
            assert!(s.deliver(a, frame));
        }
        assert_eq!(s.memory(), 256, "one byte each");
        let big = PacketBuf::from_slice(&[5; 1400]);
        let cap = big.capacity();
        assert!(!s.deliver(a, big), "the queue is full");
        let mut t = UdpSocket::new(10, 4);
        assert!(t.deliver(a, PacketBuf::from_slice(&[5; 1400])));
        assert_eq!(t.memory(), cap, "a datagram filling its buffer is kept as it came");
        assert_eq!(s.recv().map(|(_, b)| b.as_slice().to_vec()), Some(vec![0]));
    }
}
