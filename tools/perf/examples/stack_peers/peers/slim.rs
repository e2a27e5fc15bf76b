//! SlimTCP's side: two `Interface<MemwireNic>`s on one link, polled on a real clock.

use std::net::SocketAddrV4;

use slimtcp::api::SocketError;
use slimtcp::iface::{Interface, SocketHandle};
use slimtcp::nic::memwire::{self, MemwireNic};
use slimtcp::sim::{default_configs, B_IP};
use slimtcp::tcp::{State, TcpConfig};
use slimtcp::time::Clock;

use super::{link_config, Pair, PeerError, Side, BUFFER, PORT, SETUP_STEPS};

/// A connected SlimTCP pair.
#[derive(Debug)]
pub struct SlimPair {
    clock: Clock,
    a: Interface<MemwireNic>,
    b: Interface<MemwireNic>,
    conn_a: SocketHandle,
    conn_b: SocketHandle,
}

fn err(what: impl std::fmt::Display) -> PeerError {
    PeerError::Stack { stack: "slimtcp", what: what.to_string() }
}

/// The TCP settings both sides use: `mss`, [`BUFFER`] each way, window scale 3, no Nagle.
pub fn tcp_config(mss: u16) -> TcpConfig {
    TcpConfig {
        mss,
        rx_buffer: BUFFER,
        tx_buffer: BUFFER,
        window_scale: Some(3),
        nodelay: true,
        ..TcpConfig::default()
    }
}

impl Pair for SlimPair {
    const NAME: &'static str = "slimtcp";

    fn connect(mss: u16) -> Result<Self, PeerError> {
        let (na, nb) = memwire::link(link_config())?;
        let (mut ca, mut cb) = default_configs();
        ca.tcp = tcp_config(mss);
        cb.tcp = tcp_config(mss);
        let clock = Clock::real();
        let mut a = Interface::new(na, ca);
        let mut b = Interface::new(nb, cb);
        let listener = b.tcp_listen(PORT, 1).map_err(err)?;
        let conn_a = a.tcp_connect(clock.now(), SocketAddrV4::new(B_IP, PORT)).map_err(err)?;
        for _ in 0..SETUP_STEPS {
            let now = clock.now();
            a.poll(now).map_err(err)?;
            b.poll(now).map_err(err)?;
            match b.tcp_accept(listener) {
                Ok(conn_b) => {
                    if a.tcp_info(conn_a).map_err(err)?.state == State::Established {
                        return Ok(SlimPair { clock, a, b, conn_a, conn_b });
                    }
                    // Accepted connections are established; A learns it from the SYN-ACK,
                    // which it has processed by now.
                    return Err(err("B accepted before A was established"));
                }
                Err(SocketError::WouldBlock) => {}
                Err(e) => return Err(err(e)),
            }
        }
        Err(PeerError::SetupTimeout)
    }

    fn step(&mut self) -> Result<(), PeerError> {
        let now = self.clock.now();
        self.a.poll(now).map_err(err)?;
        self.b.poll(now).map_err(err)?;
        Ok(())
    }

    fn send(&mut self, side: Side, data: &[u8]) -> Result<usize, PeerError> {
        let (iface, h) = match side {
            Side::A => (&mut self.a, self.conn_a),
            Side::B => (&mut self.b, self.conn_b),
        };
        match iface.tcp_send(h, data) {
            Ok(n) => Ok(n),
            Err(SocketError::WouldBlock) => Ok(0),
            Err(e) => Err(err(e)),
        }
    }

    fn recv(&mut self, side: Side, buf: &mut [u8]) -> Result<usize, PeerError> {
        let (iface, h) = match side {
            Side::A => (&mut self.a, self.conn_a),
            Side::B => (&mut self.b, self.conn_b),
        };
        match iface.tcp_recv(h, buf) {
            Ok(0) => Err(err("unexpected end of stream")),
            Ok(n) => Ok(n),
            Err(SocketError::WouldBlock) => Ok(0),
            Err(e) => Err(err(e)),
        }
    }

    fn frames(&self) -> (u64, u64) {
        let s = self.a.nic().stats();
        (s.tx.sent, s.rx.sent)
    }
}
