//! The receiving side of the UDP workload: one non-blocking UDP socket bound to the port,
//! counting datagrams and payload bytes (copy reads, or zero-copy buffers).

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Instant;

use slimtcp::api::{EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, SockOpt, SocketApi, SocketError};

use crate::workload::{sock_err, Settings, WorkloadError};

/// Datagrams read per step at most (keeps a pair's sender stepping).
const PER_STEP: usize = 4096;
/// Copy buffer: larger than any datagram.
const COPY_BUF: usize = 64 << 10;

/// The receiving side of a UDP run (see the module documentation).
#[derive(Debug)]
pub struct UdpReceiver {
    ep: EpollFd,
    fd: Fd,
    zero_copy: bool,
    events: Vec<EpollEvent>,
    buf: Vec<u8>,
    sources: HashSet<SocketAddrV4>,
    last_source: Option<SocketAddrV4>,
    last_arrival: Option<Instant>,
    datagrams: u64,
    bytes: u64,
}

impl UdpReceiver {
    /// Binds a non-blocking UDP socket to `port` (any local address).
    pub fn open<A: SocketApi>(api: &mut A, port: u16, settings: Settings) -> Result<Self, WorkloadError> {
        let ep = api.epoll_create().map_err(|e| sock_err("epoll_create", e))?;
        let fd = api.socket(Proto::Udp).map_err(|e| sock_err("socket(UDP)", e))?;
        api.setsockopt(fd, SockOpt::NonBlocking(true)).map_err(|e| sock_err("setsockopt(O_NONBLOCK)", e))?;
        let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        api.bind(fd, local).map_err(|e| sock_err(format!("bind(UDP, {local})"), e))?;
        api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::IN, data: u64::from(fd.0) })
            .map_err(|e| sock_err("epoll_ctl(ADD)", e))?;
        Ok(UdpReceiver {
            ep,
            fd,
            zero_copy: settings.zero_copy,
            events: vec![EpollEvent::default(); 1],
            buf: if settings.zero_copy { Vec::new() } else { vec![0; COPY_BUF] },
            sources: HashSet::new(),
            last_source: None,
            last_arrival: None,
            datagrams: 0,
            bytes: 0,
        })
    }

    /// Datagrams received so far.
    pub fn datagrams(&self) -> u64 {
        self.datagrams
    }

    /// Payload bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Distinct sources seen (copy reads report them; zero-copy buffers do not, so then 1 once
    /// anything arrived).
    pub fn peers(&self) -> usize {
        if self.zero_copy {
            usize::from(self.datagrams > 0)
        } else {
            self.sources.len()
        }
    }

    /// When the last datagram was read.
    pub fn last_arrival(&self) -> Option<Instant> {
        self.last_arrival
    }

    /// Reads what arrived (up to [`PER_STEP`] datagrams); `timeout_ms` as in `epoll_wait`.
    /// Returns whether anything was read.
    pub fn step<A: SocketApi>(&mut self, api: &mut A, timeout_ms: i32) -> Result<bool, WorkloadError> {
        let n =
            api.epoll_wait(self.ep, &mut self.events, timeout_ms).map_err(|e| sock_err("epoll_wait", e))?;
        if n == 0 {
            return Ok(false);
        }
        let before = self.datagrams;
        for _ in 0..PER_STEP {
            match self.read_one(api) {
                Ok(len) => {
                    self.datagrams += 1;
                    self.bytes += len as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(sock_err("recv(UDP)", e)),
            }
        }
        let read = self.datagrams > before;
        if read {
            self.last_arrival = Some(Instant::now());
        }
        Ok(read)
    }

    /// One datagram's payload length.
    fn read_one<A: SocketApi>(&mut self, api: &mut A) -> Result<usize, SocketError> {
        if self.zero_copy {
            let buf = api.recv_zc(self.fd)?.ok_or(SocketError::WouldBlock)?;
            let len = buf.as_ref().len();
            api.free_rx(buf);
            return Ok(len);
        }
        let (len, from) = api.recv_from(self.fd, &mut self.buf)?;
        if self.last_source != Some(from) {
            self.last_source = Some(from);
            self.sources.insert(from);
        }
        Ok(len)
    }

    /// Closes the socket and the epoll set.
    pub fn close<A: SocketApi>(&mut self, api: &mut A) {
        if let Err(e) = api.close(self.fd) {
            log::debug!("close({}): {}", self.fd, e.name());
        }
        if let Err(e) = api.epoll_close(self.ep) {
            log::debug!("epoll_close: {}", e.name());
        }
    }
}
