//! The sending side: N non-blocking connections, each sending as fast as the stack accepts.

use std::collections::HashMap;
use std::net::SocketAddrV4;

use slimtcp::api::{
    EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName, SocketApi, SocketError,
    ZeroCopyTx,
};

use super::{sock_err, socket_options, Settings, WorkloadError, COPY_CHUNK, EVENTS_PER_WAIT};

/// Zero-copy buffers allocated per refill of one connection.
const ZC_BATCH: usize = 32;
/// Target bytes of one zero-copy buffer (rounded down to whole segments).
const ZC_BUFFER: usize = 16 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnState {
    Connecting,
    Established,
    /// Our side is shut down; waiting for the peer's end of stream.
    Draining,
}

#[derive(Debug)]
struct Conn<B> {
    state: ConnState,
    /// Zero-copy buffers filled but not yet accepted.
    unsent: Vec<B>,
}

/// The sending side of a run (see the module documentation).
#[derive(Debug)]
pub struct Sender<A: SocketApi> {
    ep: EpollFd,
    target: SocketAddrV4,
    settings: Settings,
    conns: HashMap<Fd, Conn<A::TxBuf>>,
    events: Vec<EpollEvent>,
    chunk: Vec<u8>,
    scratch: Vec<u8>,
    zc_len: usize,
    sending: bool,
    established: usize,
    sent: u64,
}

fn interest(ready: Ready, fd: Fd) -> EpollEvent {
    EpollEvent { events: ready, data: u64::from(fd.0) }
}

impl<A: SocketApi> Sender<A> {
    /// Opens `connections` non-blocking connections to `target` (their handshakes proceed as
    /// the sender is stepped).
    pub fn open(
        api: &mut A,
        target: SocketAddrV4,
        connections: usize,
        settings: Settings,
    ) -> Result<Self, WorkloadError> {
        let ep = api.epoll_create().map_err(|e| sock_err("epoll_create", e))?;
        let mss = usize::from(settings.mss).max(1);
        let mut sender = Sender {
            ep,
            target,
            settings,
            conns: HashMap::with_capacity(connections),
            events: vec![EpollEvent::default(); EVENTS_PER_WAIT],
            chunk: vec![0x5a; COPY_CHUNK],
            scratch: vec![0; 64 << 10],
            zc_len: (ZC_BUFFER / mss).max(1) * mss,
            sending: false,
            established: 0,
            sent: 0,
        };
        for _ in 0..connections {
            sender.open_one(api)?;
        }
        Ok(sender)
    }

    fn open_one(&mut self, api: &mut A) -> Result<(), WorkloadError> {
        let s = self.settings;
        let fd = api.socket(Proto::Tcp).map_err(|e| sock_err("socket(TCP)", e))?;
        for opt in socket_options(&s) {
            api.setsockopt(fd, opt).map_err(|e| sock_err(format!("setsockopt({opt:?})"), e))?;
        }
        let state = match api.connect(fd, self.target) {
            Ok(()) => ConnState::Established,
            Err(SocketError::InProgress) => ConnState::Connecting,
            Err(e) => return Err(WorkloadError::Connection { peer: self.target, source: e }),
        };
        if state == ConnState::Established {
            self.established += 1;
        }
        api.epoll_ctl(self.ep, EpollOp::Add, fd, interest(Ready::OUT, fd))
            .map_err(|e| sock_err("epoll_ctl(ADD)", e))?;
        self.conns.insert(fd, Conn { state, unsent: Vec::new() });
        Ok(())
    }

    /// Connections whose handshake completed.
    pub fn established(&self) -> usize {
        self.established
    }

    /// Connections still open (not yet closed after draining).
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    /// Bytes the stack accepted so far.
    pub fn bytes_sent(&self) -> u64 {
        self.sent
    }

    /// True once every connection was drained and closed.
    pub fn is_done(&self) -> bool {
        self.conns.is_empty()
    }

    /// Handles ready connections once; `timeout_ms` as in `epoll_wait`. Returns whether
    /// anything was ready.
    pub fn step(&mut self, api: &mut A, timeout_ms: i32) -> Result<bool, WorkloadError> {
        let n =
            api.epoll_wait(self.ep, &mut self.events, timeout_ms).map_err(|e| sock_err("epoll_wait", e))?;
        for i in 0..n {
            let ev = self.events[i];
            let fd = Fd(u32::try_from(ev.data).unwrap_or(u32::MAX));
            self.on_ready(api, fd, ev.events)?;
        }
        Ok(n > 0)
    }

    fn on_ready(&mut self, api: &mut A, fd: Fd, ready: Ready) -> Result<(), WorkloadError> {
        let Some(state) = self.conns.get(&fd).map(|c| c.state) else { return Ok(()) };
        match state {
            ConnState::Connecting => {
                if let SockOpt::Error(Some(e)) =
                    api.getsockopt(fd, SockOptName::Error).map_err(|e| sock_err("getsockopt(SO_ERROR)", e))?
                {
                    return Err(WorkloadError::Connection { peer: self.target, source: e });
                }
                if ready.intersects(Ready::OUT) {
                    self.established += 1;
                    if let Some(c) = self.conns.get_mut(&fd) {
                        c.state = ConnState::Established;
                    }
                    if self.sending {
                        self.fill(api, fd)?;
                    }
                }
                Ok(())
            }
            ConnState::Established if self.sending => self.fill(api, fd),
            ConnState::Established => Ok(()),
            ConnState::Draining => self.drain(api, fd),
        }
    }

    /// Sends until the stack takes no more.
    fn fill(&mut self, api: &mut A, fd: Fd) -> Result<(), WorkloadError> {
        let result =
            if self.settings.zero_copy { self.fill_zero_copy(api, fd) } else { self.fill_copy(api, fd) };
        match result {
            Ok(()) | Err(SocketError::WouldBlock) => Ok(()),
            Err(e) => Err(WorkloadError::Connection { peer: self.target, source: e }),
        }
    }

    fn fill_copy(&mut self, api: &mut A, fd: Fd) -> Result<(), SocketError> {
        loop {
            let n = api.send(fd, &self.chunk)?;
            self.sent += n as u64;
            if n < self.chunk.len() {
                return Ok(());
            }
        }
    }

    fn fill_zero_copy(&mut self, api: &mut A, fd: Fd) -> Result<(), SocketError> {
        let Some(conn) = self.conns.get_mut(&fd) else { return Ok(()) };
        loop {
            if conn.unsent.is_empty() {
                for _ in 0..ZC_BATCH {
                    let mut buf = match api.alloc_tx(self.zc_len) {
                        Ok(b) => b,
                        Err(SocketError::NoBuffers) if !conn.unsent.is_empty() => break,
                        Err(e) => return Err(e),
                    };
                    buf.space_mut()[..self.zc_len].fill(0x5a);
                    buf.set_len(self.zc_len);
                    conn.unsent.push(buf);
                }
            }
            let before: u64 = conn.unsent.iter().map(|b| b.filled().len() as u64).sum();
            let accepted = api.send_zc(fd, &mut conn.unsent)?;
            let after: u64 = conn.unsent.iter().map(|b| b.filled().len() as u64).sum();
            self.sent += before - after;
            if accepted == 0 || !conn.unsent.is_empty() {
                return Ok(());
            }
        }
    }

    /// Reads (and discards) until the peer's end of stream, then closes.
    fn drain(&mut self, api: &mut A, fd: Fd) -> Result<(), WorkloadError> {
        loop {
            match api.recv(fd, &mut self.scratch) {
                Ok(0) => {
                    self.close(api, fd)?;
                    return Ok(());
                }
                Ok(_) => {}
                Err(SocketError::WouldBlock) => return Ok(()),
                Err(e) => return Err(WorkloadError::Connection { peer: self.target, source: e }),
            }
        }
    }

    fn close(&mut self, api: &mut A, fd: Fd) -> Result<(), WorkloadError> {
        if let Some(conn) = self.conns.remove(&fd) {
            for buf in conn.unsent {
                drop(buf);
            }
            api.close(fd).map_err(|e| sock_err(format!("close({fd})"), e))?;
        }
        Ok(())
    }

    /// Starts sending on every established connection (call once all are up, so the
    /// handshakes are not slowed down by data).
    pub fn start_sending(&mut self, api: &mut A) -> Result<(), WorkloadError> {
        self.sending = true;
        let fds: Vec<Fd> =
            self.conns.iter().filter(|(_, c)| c.state == ConnState::Established).map(|(fd, _)| *fd).collect();
        for fd in fds {
            self.fill(api, fd)?;
        }
        Ok(())
    }

    /// Stops sending: every established connection half-closes (its queued data still goes
    /// out) and waits for the peer's end of stream; connections not yet up are closed.
    pub fn stop_sending(&mut self, api: &mut A) -> Result<(), WorkloadError> {
        self.sending = false;
        let fds: Vec<Fd> = self.conns.keys().copied().collect();
        for fd in fds {
            let Some(conn) = self.conns.get_mut(&fd) else { continue };
            match conn.state {
                ConnState::Connecting => self.close(api, fd)?,
                ConnState::Established => {
                    conn.state = ConnState::Draining;
                    conn.unsent.clear();
                    api.shutdown(fd, Shutdown::Write)
                        .map_err(|e| sock_err(format!("shutdown({fd}, WR)"), e))?;
                    api.epoll_ctl(self.ep, EpollOp::Modify, fd, interest(Ready::IN | Ready::RDHUP, fd))
                        .map_err(|e| sock_err("epoll_ctl(MOD)", e))?;
                }
                ConnState::Draining => {}
            }
        }
        Ok(())
    }

    /// Closes whatever is still open (after a drain that took too long).
    pub fn abandon(&mut self, api: &mut A) {
        let fds: Vec<Fd> = self.conns.keys().copied().collect();
        for fd in fds {
            if let Err(e) = self.close(api, fd) {
                log::warn!("{e}");
            }
        }
        if let Err(e) = api.epoll_close(self.ep) {
            log::debug!("epoll_close: {}", e.name());
        }
    }
}
