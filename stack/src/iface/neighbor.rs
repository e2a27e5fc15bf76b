//! Work waiting for ARP: connections whose next hop is unresolved, and a few frames (UDP, ICMP)
//! held per address, complete or as headers plus a loaned payload. Bounded: beyond `hold` frames
//! per address, new ones are dropped.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use super::socket_set::SocketHandle;
use crate::nic::PacketBuf;
use crate::tcp::TxPayload;

/// A UDP datagram sent by reference: its headers and the payload loaned by `socket`.
#[derive(Debug)]
pub struct LoanedDatagram {
    /// The UDP socket the payload goes back to.
    pub socket: SocketHandle,
    /// Ethernet, IPv4 and UDP headers (destination MAC filled in when resolved).
    pub headers: PacketBuf,
    /// The payload, sent from where it lies.
    pub payload: Box<dyn TxPayload>,
}

/// What waits for one address.
#[derive(Debug, Default)]
pub struct Waiting {
    /// Connections to dispatch once resolved.
    pub sockets: Vec<SocketHandle>,
    /// Complete frames whose destination MAC is filled in once resolved.
    pub frames: Vec<PacketBuf>,
    /// Datagrams with loaned payloads, likewise.
    pub datagrams: Vec<LoanedDatagram>,
}

impl Waiting {
    fn held(&self) -> usize {
        self.frames.len() + self.datagrams.len()
    }
}

/// All addresses being resolved.
#[derive(Debug)]
pub struct PendingNeighbors {
    by_ip: HashMap<Ipv4Addr, Waiting>,
    hold: usize,
}

impl PendingNeighbors {
    /// Holds at most `hold` frames per address.
    pub fn new(hold: usize) -> Self {
        PendingNeighbors { by_ip: HashMap::new(), hold }
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.by_ip.is_empty()
    }

    /// Number of addresses something waits for.
    pub fn len(&self) -> usize {
        self.by_ip.len()
    }

    /// Addresses being resolved.
    pub fn addresses(&self) -> Vec<Ipv4Addr> {
        self.by_ip.keys().copied().collect()
    }

    /// Registers a connection waiting for `ip`.
    pub fn add_socket(&mut self, ip: Ipv4Addr, h: SocketHandle) {
        let w = self.by_ip.entry(ip).or_default();
        if !w.sockets.contains(&h) {
            w.sockets.push(h);
        }
    }

    /// Holds a frame for `ip`; gives it back when the hold is full.
    pub fn add_frame(&mut self, ip: Ipv4Addr, frame: PacketBuf) -> Result<(), PacketBuf> {
        let w = self.by_ip.entry(ip).or_default();
        if w.held() >= self.hold {
            return Err(frame);
        }
        w.frames.push(frame);
        Ok(())
    }

    /// Holds a datagram with a loaned payload for `ip`; gives it back when the hold is full.
    pub fn add_datagram(&mut self, ip: Ipv4Addr, datagram: LoanedDatagram) -> Result<(), LoanedDatagram> {
        let w = self.by_ip.entry(ip).or_default();
        if w.held() >= self.hold {
            return Err(datagram);
        }
        w.datagrams.push(datagram);
        Ok(())
    }

    /// Takes every datagram of socket `h` out of the hold, whatever address it waits for, and
    /// gives each to `f` with that address.
    pub fn take_datagrams_of(&mut self, h: SocketHandle, mut f: impl FnMut(Ipv4Addr, LoanedDatagram)) {
        for (&ip, w) in self.by_ip.iter_mut() {
            let (mine, others): (Vec<_>, Vec<_>) = w.datagrams.drain(..).partition(|d| d.socket == h);
            w.datagrams = others;
            for d in mine {
                f(ip, d);
            }
        }
    }

    /// Everything that waited for `ip` (resolved or failed).
    pub fn take(&mut self, ip: Ipv4Addr) -> Option<Waiting> {
        self.by_ip.remove(&ip)
    }
}
