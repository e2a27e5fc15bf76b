//! UDP sockets: a bound port, an optional connected peer, and a bounded queue of received
//! datagrams (each kept in the buffer it arrived in).

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use crate::nic::PacketBuf;

/// A UDP socket's state.
#[derive(Debug)]
pub struct UdpSocket {
    port: u16,
    peer: Option<SocketAddrV4>,
    rx: VecDeque<(SocketAddrV4, PacketBuf)>,
    capacity: usize,
}

impl UdpSocket {
    /// A socket bound to `port`, queueing at most `capacity` datagrams.
    pub fn new(port: u16, capacity: usize) -> Self {
        UdpSocket { port, peer: None, rx: VecDeque::new(), capacity }
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
        self.rx.push_back((from, payload));
        true
    }

    /// The oldest datagram and its source.
    pub fn recv(&mut self) -> Option<(SocketAddrV4, PacketBuf)> {
        self.rx.pop_front()
    }

    /// True when a datagram waits.
    pub fn can_recv(&self) -> bool {
        !self.rx.is_empty()
    }
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
}
