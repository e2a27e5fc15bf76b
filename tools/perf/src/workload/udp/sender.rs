//! The sending side of the UDP workload: N connected, non-blocking UDP sockets on one epoll
//! set, each sending datagrams of one payload size as fast as the provider takes them.

use std::collections::HashSet;
use std::net::SocketAddrV4;

use slimtcp::api::{
    EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, SockOpt, SocketApi, SocketError, ZeroCopyTx,
};
use slimtcp::tcp::ConnError;

use crate::workload::{sock_err, Settings, WorkloadError, EVENTS_PER_WAIT};

/// Datagrams sent per readiness report of one socket (keeps the sockets fair).
const PER_EVENT: usize = 256;

/// The sending side of a UDP run (see the module documentation).
#[derive(Debug)]
pub struct UdpSender {
    ep: EpollFd,
    target: SocketAddrV4,
    socks: HashSet<Fd>,
    events: Vec<EpollEvent>,
    payload: Vec<u8>,
    zero_copy: bool,
    datagrams: u64,
    bytes: u64,
    refused: u64,
}

impl UdpSender {
    /// Opens `sockets` non-blocking UDP sockets, each connected to `target`; datagrams carry
    /// `settings.mss` payload bytes.
    pub fn open<A: SocketApi>(
        api: &mut A,
        target: SocketAddrV4,
        sockets: usize,
        settings: Settings,
    ) -> Result<Self, WorkloadError> {
        let ep = api.epoll_create().map_err(|e| sock_err("epoll_create", e))?;
        let mut socks = HashSet::with_capacity(sockets);
        for _ in 0..sockets {
            let fd = api.socket(Proto::Udp).map_err(|e| sock_err("socket(UDP)", e))?;
            api.setsockopt(fd, SockOpt::NonBlocking(true))
                .map_err(|e| sock_err("setsockopt(O_NONBLOCK)", e))?;
            api.connect(fd, target).map_err(|e| sock_err(format!("connect(UDP, {target})"), e))?;
            api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::OUT, data: u64::from(fd.0) })
                .map_err(|e| sock_err("epoll_ctl(ADD)", e))?;
            socks.insert(fd);
        }
        Ok(UdpSender {
            ep,
            target,
            socks,
            events: vec![EpollEvent::default(); EVENTS_PER_WAIT],
            payload: vec![0x5a; usize::from(settings.mss).max(1)],
            zero_copy: settings.zero_copy,
            datagrams: 0,
            bytes: 0,
            refused: 0,
        })
    }

    /// Open sockets.
    pub fn sockets(&self) -> usize {
        self.socks.len()
    }

    /// Datagrams the provider took so far.
    pub fn datagrams_sent(&self) -> u64 {
        self.datagrams
    }

    /// Payload bytes the provider took so far.
    pub fn bytes_sent(&self) -> u64 {
        self.bytes
    }

    /// Sends on every writable socket once (`send = false`: only lets the provider progress);
    /// `timeout_ms` as in `epoll_wait`. Returns whether anything was ready.
    pub fn step<A: SocketApi>(
        &mut self,
        api: &mut A,
        timeout_ms: i32,
        send: bool,
    ) -> Result<bool, WorkloadError> {
        let n =
            api.epoll_wait(self.ep, &mut self.events, timeout_ms).map_err(|e| sock_err("epoll_wait", e))?;
        if !send {
            return Ok(n > 0);
        }
        for i in 0..n {
            let fd = Fd(u32::try_from(self.events[i].data).unwrap_or(u32::MAX));
            if self.socks.contains(&fd) {
                self.fill(api, fd)?;
            }
        }
        Ok(n > 0)
    }

    /// Up to [`PER_EVENT`] datagrams, until the provider takes no more.
    fn fill<A: SocketApi>(&mut self, api: &mut A, fd: Fd) -> Result<(), WorkloadError> {
        for _ in 0..PER_EVENT {
            let sent =
                if self.zero_copy { self.send_zero_copy(api, fd) } else { api.send(fd, &self.payload) };
            match sent {
                Ok(n) => {
                    self.datagrams += 1;
                    self.bytes += n as u64;
                }
                Err(SocketError::WouldBlock | SocketError::NoBuffers) => return Ok(()),
                // An ICMP port unreachable for an earlier datagram (no receiver yet): UDP loses
                // it and goes on.
                Err(SocketError::Connection(ConnError::Refused)) => {
                    self.refused += 1;
                    return Ok(());
                }
                Err(e) => return Err(WorkloadError::Connection { peer: self.target, source: e }),
            }
        }
        Ok(())
    }

    /// One datagram through the zero-copy path; its payload length.
    fn send_zero_copy<A: SocketApi>(&mut self, api: &mut A, fd: Fd) -> Result<usize, SocketError> {
        let len = self.payload.len();
        let mut buf = api.alloc_tx(len)?;
        buf.space_mut()[..len].fill(0x5a);
        buf.set_len(len);
        let mut bufs = vec![buf];
        match api.send_zc(fd, &mut bufs)? {
            0 => Err(SocketError::WouldBlock),
            _ => Ok(len),
        }
    }

    /// Closes every socket and the epoll set.
    pub fn close<A: SocketApi>(&mut self, api: &mut A) {
        if self.refused > 0 {
            log::info!("{} sends reported the receiver's port unreachable", self.refused);
        }
        for fd in self.socks.drain() {
            if let Err(e) = api.close(fd) {
                log::debug!("close({fd}): {}", e.name());
            }
        }
        if let Err(e) = api.epoll_close(self.ep) {
            log::debug!("epoll_close: {}", e.name());
        }
    }
}
