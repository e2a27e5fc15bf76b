//! Work waiting for ARP: connections whose next hop is unresolved, and a few frames (UDP, ICMP)
//! held per address. Bounded: beyond `hold` frames per address, new ones are dropped.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use super::socket_set::SocketHandle;
use crate::nic::PacketBuf;

/// What waits for one address.
#[derive(Debug, Default)]
pub struct Waiting {
    /// Connections to dispatch once resolved.
    pub sockets: Vec<SocketHandle>,
    /// Complete frames whose destination MAC is filled in once resolved.
    pub frames: Vec<PacketBuf>,
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
        if w.frames.len() >= self.hold {
            return Err(frame);
        }
        w.frames.push(frame);
        Ok(())
    }

    /// Everything that waited for `ip` (resolved or failed).
    pub fn take(&mut self, ip: Ipv4Addr) -> Option<Waiting> {
        self.by_ip.remove(&ip)
    }
}
