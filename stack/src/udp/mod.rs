//! UDP sockets: a bound port, an optional connected peer, and a bounded queue of received
//! datagrams, each kept in the buffer it arrived in unless it fills less than half of it: a
//! small datagram is copied into a buffer of its own size, so a flood of tiny datagrams holds
//! about their bytes, not a NIC buffer (2 KiB, or a DPDK mbuf) each. Datagrams sent from a
//! loaned payload (`Interface::udp_send_loaned`) come back here once the NIC is done with them.
//! The queue's storage is charged to the interface's receive budget (`rx_memory.rs`).

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use crate::nic::PacketBuf;
use crate::rx_memory::{RxBudget, RxCharge};
use crate::tcp::TxPayload;

/// What [`UdpSocket::deliver`] did with a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// Queued for the application.
    Queued,
    /// From another source than the connected peer: not for this socket.
    Filtered,
    /// The queue holds its limit of datagrams.
    QueueFull,
    /// Its storage would not fit the receive budget.
    NoMemory,
}

/// A UDP socket's state.
#[derive(Debug)]
pub struct UdpSocket {
    port: u16,
    peer: Option<SocketAddrV4>,
    rx: VecDeque<(SocketAddrV4, PacketBuf)>,
    capacity: usize,
    /// Storage of the queued datagrams.
    memory: RxCharge,
    /// Loaned payloads of sent (or dropped) datagrams, for the application to take back.
    returned: Vec<Box<dyn TxPayload>>,
}

impl UdpSocket {
    /// A socket bound to `port`, queueing at most `capacity` datagrams.
    pub fn new(port: u16, capacity: usize) -> Self {
        UdpSocket {
            port,
            peer: None,
            rx: VecDeque::new(),
            capacity,
            memory: RxCharge::default(),
            returned: Vec::new(),
        }
    }

    /// Charges the queue's storage to `budget` from now on.
    pub fn bind_rx_budget(&mut self, budget: &RxBudget) {
        self.memory.bind(budget);
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

    /// Queues a received datagram, or says why not.
    pub fn deliver(&mut self, from: SocketAddrV4, payload: PacketBuf) -> Delivered {
        if self.peer.is_some_and(|p| p != from) {
            return Delivered::Filtered;
        }
        if self.rx.len() >= self.capacity {
            return Delivered::QueueFull;
        }
        let payload = if payload.len() * 2 < payload.capacity() { compact(&payload) } else { payload };
        if !self.memory.admit(payload.capacity()) {
            return Delivered::NoMemory;
        }
        self.memory.add(payload.capacity());
        self.rx.push_back((from, payload));
        Delivered::Queued
    }

    /// Bytes of buffer storage the queue holds.
    pub fn memory(&self) -> usize {
        self.memory.bytes()
    }

    /// The oldest datagram and its source.
    pub fn recv(&mut self) -> Option<(SocketAddrV4, PacketBuf)> {
        let (from, payload) = self.rx.pop_front()?;
        self.memory.sub(payload.capacity());
        Some((from, payload))
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
        assert_eq!(s.deliver(a, PacketBuf::from_slice(b"1")), Delivered::Queued);
        assert_eq!(s.deliver(b, PacketBuf::from_slice(b"2")), Delivered::Queued);
        assert_eq!(s.deliver(a, PacketBuf::from_slice(b"3")), Delivered::QueueFull);
        assert_eq!(s.recv().map(|(f, p)| (f, p.as_slice().to_vec())), Some((a, b"1".to_vec())));
        s.connect(a);
        assert_eq!(s.deliver(b, PacketBuf::from_slice(b"4")), Delivered::Filtered);
        assert_eq!(s.deliver(a, PacketBuf::from_slice(b"5")), Delivered::Queued);
    }

    #[test]
    fn small_datagrams_hold_their_bytes_not_their_nic_buffers() {
        let a: SocketAddrV4 = "10.0.0.1:5000".parse().expect("addr");
        let mut s = UdpSocket::new(9, 256);
        for i in 0..=255u8 {
            let mut frame = PacketBuf::with_headroom(2048, 42);
            frame.append(1).expect("room")[0] = i;
            assert_eq!(s.deliver(a, frame), Delivered::Queued);
        }
        assert_eq!(s.memory(), 256, "one byte each");
        let big = PacketBuf::from_slice(&[5; 1400]);
        let cap = big.capacity();
        assert_eq!(s.deliver(a, big), Delivered::QueueFull);
        let mut t = UdpSocket::new(10, 4);
        assert_eq!(t.deliver(a, PacketBuf::from_slice(&[5; 1400])), Delivered::Queued);
        assert_eq!(t.memory(), cap, "a datagram filling its buffer is kept as it came");
        assert_eq!(s.recv().map(|(_, b)| b.as_slice().to_vec()), Some(vec![0]));
    }

    #[test]
    fn the_budget_drops_what_would_not_fit() {
        let a: SocketAddrV4 = "10.0.0.1:5000".parse().expect("addr");
        let whole = |bytes: &[u8]| {
            let mut b = PacketBuf::with_headroom(bytes.len(), 0);
            b.append(bytes.len()).expect("room").copy_from_slice(bytes);
            b
        };
        let budget = RxBudget::new(3000);
        let mut s = UdpSocket::new(9, 256);
        s.bind_rx_budget(&budget);
        assert_eq!(s.deliver(a, whole(&[1; 1400])), Delivered::Queued);
        assert_eq!(s.deliver(a, whole(&[2; 1400])), Delivered::Queued);
        assert_eq!(s.deliver(a, whole(&[3; 1400])), Delivered::NoMemory);
        assert_eq!(s.deliver(a, whole(&[4; 200])), Delivered::Queued, "a small one fits");
        assert_eq!(budget.reading().used, 3000);
        assert!(s.recv().is_some());
        assert_eq!(budget.reading().used, 1600);
        drop(s);
        assert_eq!(
            budget.reading(),
            crate::rx_memory::RxReading { used: 0, peak: 3000, limit: 3000, refused: 1 }
        );
    }
}
