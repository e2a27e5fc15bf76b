//! The receiving side: a listener and its connections on one epoll set, every byte counted.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::api::{EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, SockOpt, SocketApi, SocketError};

use super::{sock_err, socket_options, Settings, WorkloadError, COPY_CHUNK, EVENTS_PER_WAIT};

/// Connections waiting to be accepted, at most (the stack clamps larger values).
const BACKLOG: usize = 4096;
/// Zero-copy buffers taken per readiness report of one connection (keeps connections fair).
const ZC_PER_EVENT: usize = 1024;

/// The receiving side of a run (see the module documentation).
#[derive(Debug)]
pub struct Receiver {
    ep: EpollFd,
    listener: Fd,
    zero_copy: bool,
    conns: HashSet<Fd>,
    events: Vec<EpollEvent>,
    buf: Vec<u8>,
    accepted: usize,
    bytes: u64,
}

fn interest(ready: Ready, fd: Fd) -> EpollEvent {
    EpollEvent { events: ready, data: u64::from(fd.0) }
}

impl Receiver {
    /// Listens on `port` (any local address) with `settings` for the accepted connections.
    pub fn open<A: SocketApi>(api: &mut A, port: u16, settings: Settings) -> Result<Self, WorkloadError> {
        let ep = api.epoll_create().map_err(|e| sock_err("epoll_create", e))?;
        let listener = api.socket(Proto::Tcp).map_err(|e| sock_err("socket(TCP)", e))?;
        for opt in socket_options(&settings) {
            api.setsockopt(listener, opt).map_err(|e| sock_err(format!("setsockopt({opt:?})"), e))?;
        }
        let local = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
        api.bind(listener, local).map_err(|e| sock_err(format!("bind({local})"), e))?;
        api.listen(listener, BACKLOG).map_err(|e| sock_err(format!("listen(port {port})"), e))?;
        api.epoll_ctl(ep, EpollOp::Add, listener, interest(Ready::IN, listener))
            .map_err(|e| sock_err("epoll_ctl(ADD listener)", e))?;
        Ok(Receiver {
            ep,
            listener,
            zero_copy: settings.zero_copy,
            conns: HashSet::new(),
            events: vec![EpollEvent::default(); EVENTS_PER_WAIT],
            buf: if settings.zero_copy { Vec::new() } else { vec![0; COPY_CHUNK] },
            accepted: 0,
            bytes: 0,
        })
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted
    }

    /// Connections accepted and not yet ended.
    pub fn active(&self) -> usize {
        self.conns.len()
    }

    /// Bytes read so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Handles ready sockets once; `timeout_ms` as in `epoll_wait`. Returns whether anything
    /// was ready.
    pub fn step<A: SocketApi>(&mut self, api: &mut A, timeout_ms: i32) -> Result<bool, WorkloadError> {
        let n =
            api.epoll_wait(self.ep, &mut self.events, timeout_ms).map_err(|e| sock_err("epoll_wait", e))?;
        for i in 0..n {
            let fd = Fd(u32::try_from(self.events[i].data).unwrap_or(u32::MAX));
            if fd == self.listener {
                self.accept_all(api)?;
            } else {
                self.read(api, fd)?;
            }
        }
        Ok(n > 0)
    }

    fn accept_all<A: SocketApi>(&mut self, api: &mut A) -> Result<(), WorkloadError> {
        loop {
            let (fd, _peer) = match api.accept(self.listener) {
                Ok(c) => c,
                Err(SocketError::WouldBlock) => return Ok(()),
                Err(e) => return Err(sock_err("accept", e)),
            };
            api.setsockopt(fd, SockOpt::NonBlocking(true))
                .map_err(|e| sock_err("setsockopt(O_NONBLOCK)", e))?;
            api.epoll_ctl(self.ep, EpollOp::Add, fd, interest(Ready::IN | Ready::RDHUP, fd))
                .map_err(|e| sock_err("epoll_ctl(ADD)", e))?;
            self.conns.insert(fd);
            self.accepted += 1;
        }
    }

    /// One 1 MiB read (or up to [`ZC_PER_EVENT`] zero-copy buffers); closes at end of stream.
    fn read<A: SocketApi>(&mut self, api: &mut A, fd: Fd) -> Result<(), WorkloadError> {
        if !self.conns.contains(&fd) {
            return Ok(());
        }
        let ended = if self.zero_copy { self.read_zero_copy(api, fd) } else { self.read_copy(api, fd) };
        match ended {
            Ok(false) | Err(SocketError::WouldBlock) => Ok(()),
            Ok(true) => self.close(api, fd),
            Err(e) => {
                let peer = api.peer_addr(fd).unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
                self.close(api, fd)?;
                Err(WorkloadError::Connection { peer, source: e })
            }
        }
    }

    /// True at end of stream.
    fn read_copy<A: SocketApi>(&mut self, api: &mut A, fd: Fd) -> Result<bool, SocketError> {
        let n = api.recv(fd, &mut self.buf)?;
        self.bytes += n as u64;
        Ok(n == 0)
    }

    /// True at end of stream.
    fn read_zero_copy<A: SocketApi>(&mut self, api: &mut A, fd: Fd) -> Result<bool, SocketError> {
        for _ in 0..ZC_PER_EVENT {
            match api.recv_zc(fd)? {
                Some(buf) => {
                    self.bytes += buf.as_ref().len() as u64;
                    api.free_rx(buf);
                }
                None => return Ok(true),
            }
        }
        Ok(false)
    }

    fn close<A: SocketApi>(&mut self, api: &mut A, fd: Fd) -> Result<(), WorkloadError> {
        if self.conns.remove(&fd) {
            api.close(fd).map_err(|e| sock_err(format!("close({fd})"), e))?;
        }
        Ok(())
    }

    /// Closes every connection, the listener and the epoll set.
    pub fn shut<A: SocketApi>(&mut self, api: &mut A) {
        let fds: Vec<Fd> = self.conns.drain().collect();
        for fd in fds.into_iter().chain(std::iter::once(self.listener)) {
            if let Err(e) = api.close(fd) {
                log::debug!("close({fd}): {}", e.name());
            }
        }
        if let Err(e) = api.epoll_close(self.ep) {
            log::debug!("epoll_close: {}", e.name());
        }
    }
}
