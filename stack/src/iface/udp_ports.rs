//! Which UDP socket a datagram to a local port goes to.
//!
//! A port holds at most one socket that is not connected, plus any number of sockets each
//! connected to a different peer. A datagram goes to the socket connected to its source, else
//! to the unconnected one. This is what a UDP server that connects one socket per client and
//! binds a fresh one for the next (iperf3's UDP server) needs, and what Linux gives with
//! `SO_REUSEADDR`; delivery is never ambiguous. (Linux also asks for `SO_REUSEADDR` before it
//! lets a socket bind next to connected ones; SlimTCP has no such option and allows it.)

use std::collections::HashMap;
use std::net::SocketAddrV4;

use slimtcp_api::SocketError;

use super::SocketHandle;

#[derive(Debug, Default)]
struct Port {
    open: Option<SocketHandle>,
    connected: Vec<(SocketAddrV4, SocketHandle)>,
}

/// The UDP ports in use (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct UdpPorts(HashMap<u16, Port>);

impl UdpPorts {
    /// Whether no socket uses `port` (an ephemeral port must be wholly free).
    pub fn is_free(&self, port: u16) -> bool {
        !self.0.contains_key(&port)
    }

    /// Whether a new socket may bind `port` (no unconnected socket holds it).
    pub fn can_bind(&self, port: u16) -> bool {
        self.0.get(&port).is_none_or(|p| p.open.is_none())
    }

    /// Binds `h` to `port`: `AddrInUse` when an unconnected socket holds it already.
    pub fn bind(&mut self, port: u16, h: SocketHandle) -> Result<(), SocketError> {
        let p = self.0.entry(port).or_default();
        if p.open.is_some() {
            return Err(SocketError::AddrInUse);
        }
        p.open = Some(h);
        Ok(())
    }

    /// Connects `h` (bound to `port`) to `peer`: `AddrInUse` when another socket of the port is
    /// connected to the same peer.
    pub fn connect(&mut self, port: u16, h: SocketHandle, peer: SocketAddrV4) -> Result<(), SocketError> {
        let p = self.0.get_mut(&port).ok_or(SocketError::BadHandle)?;
        if p.connected.iter().any(|&(q, other)| q == peer && other != h) {
            return Err(SocketError::AddrInUse);
        }
        if p.open == Some(h) {
            p.open = None;
        }
        match p.connected.iter_mut().find(|(_, other)| *other == h) {
            Some(slot) => slot.0 = peer,
            None => p.connected.push((peer, h)),
        }
        Ok(())
    }

    /// Forgets `h` on `port`.
    pub fn remove(&mut self, port: u16, h: SocketHandle) {
        let Some(p) = self.0.get_mut(&port) else { return };
        if p.open == Some(h) {
            p.open = None;
        }
        p.connected.retain(|&(_, other)| other != h);
        if p.open.is_none() && p.connected.is_empty() {
            self.0.remove(&port);
        }
    }

    /// The socket a datagram from `from` to `port` goes to.
    pub fn lookup(&self, port: u16, from: SocketAddrV4) -> Option<SocketHandle> {
        let p = self.0.get(&port)?;
        p.connected.iter().find(|&&(q, _)| q == from).map(|&(_, h)| h).or(p.open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u32) -> SocketHandle {
        SocketHandle::for_test(n)
    }

    #[test]
    fn a_connected_socket_shares_its_port_with_a_fresh_one() {
        let (a, b): (SocketAddrV4, SocketAddrV4) =
            ("10.0.0.1:4000".parse().expect("a"), "10.0.0.1:4001".parse().expect("b"));
        let mut ports = UdpPorts::default();
        ports.bind(5201, h(1)).expect("bind");
        assert_eq!(ports.bind(5201, h(2)), Err(SocketError::AddrInUse), "one unconnected socket per port");
        ports.connect(5201, h(1), a).expect("connect");
        ports.bind(5201, h(2)).expect("the port's unconnected slot is free again");
        assert_eq!(ports.lookup(5201, a), Some(h(1)), "the connected peer's datagrams");
        assert_eq!(ports.lookup(5201, b), Some(h(2)), "everyone else's");
        assert_eq!(ports.connect(5201, h(2), a), Err(SocketError::AddrInUse), "one socket per peer");
        ports.connect(5201, h(2), b).expect("another peer");
        assert_eq!(ports.lookup(5201, "10.0.0.9:1".parse().expect("c")), None);
        assert!(!ports.is_free(5201));
        ports.remove(5201, h(1));
        ports.remove(5201, h(2));
        assert!(ports.is_free(5201));
    }
}
