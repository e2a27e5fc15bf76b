//! smoltcp's side: two `smoltcp::iface::Interface`s, each with its own socket set, over the two
//! ends of a memwire link ([`MemwireDevice`]), polled on a real clock.
//!
//! smoltcp's `Interface::poll` takes in every frame the device holds but sends at most one
//! segment per socket; SlimTCP's `poll` takes in up to a burst (32 frames) and sends what the
//! window allows (handing frames to the link 32 at a time). [`SmolPair`] therefore calls
//! `poll_egress` after `poll` until smoltcp has nothing more to send: one step then does the same
//! work in both stacks. [`SmolPairOnePoll`] calls `poll` alone (one segment per step and side),
//! to show what that choice is worth.

use slimtcp::nic::memwire;
use slimtcp::time::Clock;
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

use super::device::MemwireDevice;
use super::{link_config, Pair, PeerError, Side, BUFFER, PORT, SETUP_STEPS};

/// One smoltcp host: interface, device, sockets and its connection.
struct Host {
    iface: Interface,
    device: MemwireDevice,
    sockets: SocketSet<'static>,
    conn: SocketHandle,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("device", &self.device).field("conn", &self.conn).finish()
    }
}

/// A connected smoltcp pair whose step sends up to `EGRESS` segments per side (`poll`, then
/// `poll_egress` while it sends).
#[derive(Debug)]
pub struct SmolPairWith<const EGRESS: usize> {
    clock: Clock,
    a: Host,
    b: Host,
}

/// smoltcp sending all it can per step (the comparison with SlimTCP).
pub type SmolPair = SmolPairWith<{ usize::MAX }>;
/// smoltcp with one `poll` per step (at most one segment sent per step and side).
pub type SmolPairOnePoll = SmolPairWith<1>;

fn err(what: impl std::fmt::Display) -> PeerError {
    PeerError::Stack { stack: "smoltcp", what: what.to_string() }
}

fn smol_now(clock: &Clock) -> (slimtcp::time::Instant, smoltcp::time::Instant) {
    let now = clock.now();
    let micros = i64::try_from(now.total_micros()).unwrap_or(i64::MAX);
    (now, smoltcp::time::Instant::from_micros(micros))
}

/// A socket with [`BUFFER`] each way, no Nagle and no congestion control (as SlimTCP). Its
/// window scale follows from the buffer: 256 KiB gives shift 3, SlimTCP's.
fn socket() -> tcp::Socket<'static> {
    let mut s =
        tcp::Socket::new(tcp::SocketBuffer::new(vec![0; BUFFER]), tcp::SocketBuffer::new(vec![0; BUFFER]));
    s.set_nagle_enabled(false);
    s.set_congestion_control(tcp::CongestionControl::None);
    s
}

impl Host {
    fn new(nic: memwire::MemwireNic, mss: u16, mac: [u8; 6], ip: [u8; 4], seed: u64, clock: &Clock) -> Self {
        let mut device = MemwireDevice::new(nic, mss);
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(mac)));
        config.random_seed = seed;
        let mut iface = Interface::new(config, &mut device, smol_now(clock).1);
        iface.update_ip_addrs(|addrs| {
            // A fresh interface has room for its first address.
            let _ = addrs.push(IpCidr::new(IpAddress::v4(ip[0], ip[1], ip[2], ip[3]), 24));
        });
        let mut sockets = SocketSet::new(Vec::new());
        let conn = sockets.add(socket());
        Host { iface, device, sockets, conn }
    }

    fn poll(&mut self, clock: &Clock, egress: usize) -> Result<(), PeerError> {
        let (now, smol) = smol_now(clock);
        self.device.set_now(now);
        // See the module's documentation for why `poll_egress` follows `poll`.
        let mut result = self.iface.poll(smol, &mut self.device, &mut self.sockets);
        let mut sent = 1;
        while result == PollResult::SocketStateChanged && sent < egress {
            result = self.iface.poll_egress(smol, &mut self.device, &mut self.sockets);
            sent += 1;
        }
        self.device.flush().map_err(err)
    }

    fn conn(&mut self) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(self.conn)
    }
}

impl<const EGRESS: usize> Pair for SmolPairWith<EGRESS> {
    const NAME: &'static str = if EGRESS == 1 { "smoltcp-one-poll" } else { "smoltcp" };

    fn connect(mss: u16) -> Result<Self, PeerError> {
        let (na, nb) = memwire::link(link_config())?;
        let clock = Clock::real();
        let mut a = Host::new(na, mss, [2, 0, 0, 0, 0, 0x0a], [10, 0, 0, 1], 1, &clock);
        let mut b = Host::new(nb, mss, [2, 0, 0, 0, 0, 0x0b], [10, 0, 0, 2], 2, &clock);
        b.conn().listen(PORT).map_err(err)?;
        let remote = (IpAddress::v4(10, 0, 0, 2), PORT);
        let cx = a.iface.context();
        a.sockets.get_mut::<tcp::Socket>(a.conn).connect(cx, remote, 49152).map_err(err)?;
        for _ in 0..SETUP_STEPS {
            a.poll(&clock, EGRESS)?;
            b.poll(&clock, EGRESS)?;
            if a.conn().state() == tcp::State::Established && b.conn().state() == tcp::State::Established {
                return Ok(SmolPairWith { clock, a, b });
            }
        }
        Err(PeerError::SetupTimeout)
    }

    fn step(&mut self) -> Result<(), PeerError> {
        self.a.poll(&self.clock, EGRESS)?;
        self.b.poll(&self.clock, EGRESS)
    }

    fn send(&mut self, side: Side, data: &[u8]) -> Result<usize, PeerError> {
        let host = match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        };
        host.conn().send_slice(data).map_err(err)
    }

    fn recv(&mut self, side: Side, buf: &mut [u8]) -> Result<usize, PeerError> {
        let host = match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        };
        host.conn().recv_slice(buf).map_err(err)
    }

    fn frames(&self) -> (u64, u64) {
        let s = self.a.device.nic().stats();
        (s.tx.sent, s.rx.sent)
    }
}
