//! The socket table: a slab with generation-checked handles, so a stale handle (use after close)
//! is detected instead of reaching a new socket in the same slot.

use std::net::SocketAddrV4;

use crate::tcp::Connection;
use crate::time::Instant;
use crate::udp::UdpSocket;

use super::template::HeaderTemplate;

/// Identifies a socket of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketHandle {
    index: u32,
    generation: u32,
}

impl SocketHandle {
    /// A handle of no socket (no table grows to `u32::MAX` entries), for a field that a flag
    /// marks unset.
    pub(crate) const NONE: SocketHandle = SocketHandle { index: u32::MAX, generation: u32::MAX };

    /// A handle for unit tests of tables keyed by handles.
    #[cfg(test)]
    pub(crate) fn for_test(index: u32) -> SocketHandle {
        SocketHandle { index, generation: 0 }
    }

    /// The slot index (stable while the socket lives; for tables indexed by socket).
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// A connection's addresses, the demultiplexing key (compared in full, never by hash alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FourTuple {
    /// Our address and port.
    pub local: SocketAddrV4,
    /// The peer's address and port.
    pub remote: SocketAddrV4,
}

/// One write of the four numbers (the connection table's key, hashed for every segment): the
/// two addresses as one word, the two ports as another. Consistent with `Eq`: equal tuples
/// write the same words.
impl std::hash::Hash for FourTuple {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let addrs = (u64::from(self.local.ip().to_bits()) << 32) | u64::from(self.remote.ip().to_bits());
        let ports = (u32::from(self.local.port()) << 16) | u32::from(self.remote.port());
        state.write_u64(addrs);
        state.write_u32(ports);
    }
}

/// Bytes of one connection's state: its boxed TCB (protocol state, header template,
/// bookkeeping) and its slot in the socket table, without the contents of its send and
/// receive buffers, which grow with use. The connection table's entry comes on top.
pub const TCP_STATE_BYTES: usize = std::mem::size_of::<TcpSocket>() + std::mem::size_of::<Slot>();

/// The budget of [`TCP_STATE_BYTES`]. State most connections never use goes behind a box that
/// exists only once it is needed (see `tcp/recovery.rs`, `tcp/persist.rs`, `tcp/stats.rs`).
pub const TCP_STATE_BUDGET: usize = 512;

const _: () = assert!(
    TCP_STATE_BYTES <= TCP_STATE_BUDGET,
    "a connection's state (TcpSocket and its slot) outgrew TCP_STATE_BUDGET"
);

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpListener {
    /// The port listened on.
    pub port: u16,
    /// Connections in SYN-RECEIVED or waiting in the accept queue, at most.
    pub backlog: usize,
    /// Connections counted against the backlog.
    pub pending: usize,
    /// Established connections not yet accepted.
    pub accept_queue: std::collections::VecDeque<SocketHandle>,
    /// Settings for the connections it accepts (the interface's when `None`).
    pub tcp_config: Option<std::sync::Arc<crate::tcp::TcpConfig>>,
    /// Already on the interface's activity list.
    pub in_activity: bool,
    /// When the listener last answered a SYN with a SYN cookie: ACKs are checked for cookies
    /// only while one sent then may still come back (as Linux does), so a listener that never
    /// overflowed offers no cookie to guess.
    pub last_cookie: Option<Instant>,
}

/// A TCP connection socket and what the worker keeps beside the protocol state.
#[derive(Debug)]
pub struct TcpSocket {
    /// Protocol state.
    pub conn: Connection,
    /// Prebuilt Ethernet/IPv4/TCP headers, once the next hop is known.
    pub template: Option<HeaderTemplate>,
    /// The listener that created it, until accepted.
    pub listener: Option<SocketHandle>,
    /// The application let go of the handle; freed once CLOSED.
    pub released: bool,
    /// Deadline currently in the timer wheel (earlier deadlines are re-inserted).
    pub scheduled: Option<Instant>,
    /// Already on this poll's dispatch list.
    pub queued: bool,
    /// Already pushed onto its listener's accept queue.
    pub in_accept_queue: bool,
    /// Already on the interface's activity list.
    pub in_activity: bool,
    /// On the interface's list of connections a full transmit backlog held back.
    pub tx_held: bool,
}

impl TcpSocket {
    /// Its demux key (the connection's addresses, kept once).
    pub fn tuple(&self) -> FourTuple {
        FourTuple { local: self.conn.local(), remote: self.conn.remote() }
    }
}

/// Any socket, boxed: a slot of the socket table stays small (two words) whatever it holds.
#[derive(Debug)]
pub enum Socket {
    /// A listener.
    Listener(Box<TcpListener>),
    /// A TCP connection.
    Tcp(Box<TcpSocket>),
    /// A UDP socket.
    Udp(Box<UdpSocket>),
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    /// The owner's number for the socket ([`SocketSet::set_tag`]); in the padding beside
    /// `generation`, so it costs no byte.
    tag: u32,
    socket: Option<Socket>,
}

/// All sockets of an interface.
#[derive(Debug, Default)]
pub struct SocketSet {
    slots: Vec<Slot>,
    free: Vec<u32>,
    len: usize,
}

impl SocketSet {
    /// Live sockets.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no socket lives.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores `socket`; returns its handle.
    pub fn insert(&mut self, socket: Socket) -> SocketHandle {
        self.len += 1;
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.tag = 0;
            slot.socket = Some(socket);
            return SocketHandle { index, generation: slot.generation };
        }
        let index = self.slots.len() as u32;
        self.slots.push(Slot { generation: 0, tag: 0, socket: Some(socket) });
        SocketHandle { index, generation: 0 }
    }

    /// The slot `h` names, unless the handle is stale (the one generation check).
    #[inline]
    fn slot_mut(&mut self, h: SocketHandle) -> Option<&mut Slot> {
        let slot = self.slots.get_mut(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        Some(slot)
    }

    /// The socket of `h`, if it still lives.
    pub fn get(&self, h: SocketHandle) -> Option<&Socket> {
        let slot = self.slots.get(h.index as usize)?;
        if slot.generation != h.generation {
            return None;
        }
        slot.socket.as_ref()
    }

    /// The socket of `h`, mutable, if it still lives.
    #[inline]
    pub fn get_mut(&mut self, h: SocketHandle) -> Option<&mut Socket> {
        self.slot_mut(h)?.socket.as_mut()
    }

    /// Gives the socket of `h` the owner's number `tag` (0 until given), reported with its
    /// activity so that an owner finds its own record without a map. False when `h` is stale.
    pub fn set_tag(&mut self, h: SocketHandle, tag: u32) -> bool {
        match self.slot_mut(h) {
            Some(slot) if slot.socket.is_some() => {
                slot.tag = tag;
                true
            }
            _ => false,
        }
    }

    /// The socket of `h`, mutable, with its tag, if it still lives.
    #[inline]
    pub fn get_mut_tagged(&mut self, h: SocketHandle) -> Option<(&mut Socket, u32)> {
        let slot = self.slot_mut(h)?;
        let tag = slot.tag;
        slot.socket.as_mut().map(|s| (s, tag))
    }

    /// The TCP connection socket of `h` (inline: a few loads and tests at every segment).
    #[inline]
    pub fn tcp_mut(&mut self, h: SocketHandle) -> Option<&mut TcpSocket> {
        match self.get_mut(h)? {
            Socket::Tcp(s) => Some(s),
            _ => None,
        }
    }

    /// The listener of `h`.
    pub fn listener_mut(&mut self, h: SocketHandle) -> Option<&mut TcpListener> {
        match self.get_mut(h)? {
            Socket::Listener(l) => Some(l),
            _ => None,
        }
    }

    /// The UDP socket of `h`.
    pub fn udp_mut(&mut self, h: SocketHandle) -> Option<&mut UdpSocket> {
        match self.get_mut(h)? {
            Socket::Udp(u) => Some(u),
            _ => None,
        }
    }

    /// Frees the socket of `h`; its handle (and every copy) becomes stale.
    pub fn remove(&mut self, h: SocketHandle) -> Option<Socket> {
        let slot = self.slot_mut(h)?;
        let socket = slot.socket.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(h.index);
        self.len -= 1;
        Some(socket)
    }

    /// Handles of every TCP connection (a walk for rare events; allocates).
    pub fn tcp_handles(&self) -> Vec<SocketHandle> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s.socket, Some(Socket::Tcp(_))))
            .map(|(i, s)| SocketHandle { index: i as u32, generation: s.generation })
            .collect()
    }

    /// Listening sockets.
    pub fn listener_count(&self) -> usize {
        self.slots.iter().filter(|s| matches!(s.socket, Some(Socket::Listener(_)))).count()
    }

    /// Every TCP connection.
    pub fn tcp_sockets(&self) -> impl Iterator<Item = &TcpSocket> {
        self.slots.iter().filter_map(|s| match &s.socket {
            Some(Socket::Tcp(t)) => Some(&**t),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::UdpSocket;

    #[test]
    fn stale_handles_are_rejected() {
        let mut set = SocketSet::default();
        let a = set.insert(Socket::Udp(Box::new(UdpSocket::new(1, 4))));
        assert!(set.get(a).is_some());
        assert!(set.remove(a).is_some());
        let b = set.insert(Socket::Udp(Box::new(UdpSocket::new(2, 4))));
        assert_eq!(a.index(), b.index(), "slot reused");
        assert!(set.get(a).is_none(), "old handle is stale");
        assert!(set.get(b).is_some());
        assert!(set.remove(a).is_none());
        assert_eq!(set.len(), 1);
    }

    #[test]
    fn a_tag_stays_with_its_socket_and_not_its_slot() {
        let mut set = SocketSet::default();
        let a = set.insert(Socket::Udp(Box::new(UdpSocket::new(1, 4))));
        assert_eq!(set.get_mut_tagged(a).map(|(_, t)| t), Some(0), "untagged");
        assert!(set.set_tag(a, 7));
        assert_eq!(set.get_mut_tagged(a).map(|(_, t)| t), Some(7));
        assert!(set.remove(a).is_some());
        assert!(!set.set_tag(a, 8), "a stale handle tags nothing");
        let b = set.insert(Socket::Udp(Box::new(UdpSocket::new(2, 4))));
        assert_eq!(a.index(), b.index(), "slot reused");
        assert_eq!(set.get_mut_tagged(b).map(|(_, t)| t), Some(0), "the new socket starts untagged");
        assert!(set.get_mut_tagged(a).is_none());
    }
}
