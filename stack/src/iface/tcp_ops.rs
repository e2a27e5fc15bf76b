//! TCP socket operations for applications (single-threaded: call between polls).

use std::net::SocketAddrV4;

use slimtcp_api::SocketError;

use super::socket_set::{FourTuple, Socket, TcpListener, TcpSocket};
use super::{Interface, SocketHandle, EPHEMERAL_PORT_COUNT, FIRST_EPHEMERAL_PORT};
use crate::nic::{Nic, PacketBuf};
use crate::tcp::{ConnError, ConnStats, Connection, SendError, State, TcpConfig, TxPayload};
use crate::time::Instant;

/// A snapshot of a connection for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpInfo {
    /// Current state.
    pub state: State,
    /// Our address.
    pub local: SocketAddrV4,
    /// The peer's address.
    pub remote: SocketAddrV4,
    /// Failure, if any.
    pub error: Option<ConnError>,
    /// Bytes readable now.
    pub recv_queued: usize,
    /// Bytes queued to send (unsent + unacknowledged).
    pub send_queued: usize,
    /// Free send-buffer bytes.
    pub send_space: usize,
    /// Payload bytes per segment we send.
    pub send_mss: usize,
    /// Counters.
    pub stats: ConnStats,
}

impl From<SendError> for SocketError {
    fn from(e: SendError) -> Self {
        match e {
            SendError::NotOpen => SocketError::BrokenPipe,
            SendError::Failed(c) => SocketError::Connection(c),
        }
    }
}

impl<N: Nic> Interface<N> {
    fn conn(&self, h: SocketHandle) -> Result<&TcpSocket, SocketError> {
        match self.sockets.get(h) {
            Some(Socket::Tcp(t)) if !t.released && t.listener.is_none() => Ok(t),
            Some(Socket::Tcp(_)) | None => Err(SocketError::BadHandle),
            Some(_) => Err(SocketError::NotSupported),
        }
    }

    fn conn_mut(&mut self, h: SocketHandle) -> Result<&mut TcpSocket, SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Tcp(t)) if !t.released && t.listener.is_none() => Ok(t),
            Some(Socket::Tcp(_)) | None => Err(SocketError::BadHandle),
            Some(_) => Err(SocketError::NotSupported),
        }
    }

    fn mark_dirty(&mut self, h: SocketHandle) {
        if let Some(sock) = self.sockets.tcp_mut(h) {
            Self::schedule_dispatch(&mut self.dispatch_list, sock, h);
        }
    }

    /// Listens on `port` with room for `backlog` connections not yet accepted.
    pub fn tcp_listen(&mut self, port: u16, backlog: usize) -> Result<SocketHandle, SocketError> {
        self.tcp_listen_with(port, backlog, None)
    }

    /// Like [`tcp_listen`](Self::tcp_listen), with settings for the accepted connections
    /// (the interface's when `None`).
    pub fn tcp_listen_with(
        &mut self,
        port: u16,
        backlog: usize,
        tcp_config: Option<TcpConfig>,
    ) -> Result<SocketHandle, SocketError> {
        if port == 0 || backlog == 0 {
            return Err(SocketError::InvalidInput);
        }
        if self.listeners.contains_key(&port) {
            return Err(SocketError::AddrInUse);
        }
        if self.sockets.len() >= self.cfg.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        let h = self.sockets.insert(Socket::Listener(Box::new(TcpListener {
            port,
            backlog,
            pending: 0,
            accept_queue: Default::default(),
            tcp_config: tcp_config.map(std::sync::Arc::new),
            in_activity: false,
            last_cookie: None,
        })));
        self.listeners.insert(port, h);
        Ok(h)
    }

    /// An established connection from the listener's queue (never blocks).
    pub fn tcp_accept(&mut self, listener: SocketHandle) -> Result<SocketHandle, SocketError> {
        let l = match self.sockets.get_mut(listener) {
            Some(Socket::Listener(l)) => l,
            Some(_) => return Err(SocketError::NotSupported),
            None => return Err(SocketError::BadHandle),
        };
        let h = l.accept_queue.pop_front().ok_or(SocketError::WouldBlock)?;
        l.pending = l.pending.saturating_sub(1);
        if let Some(sock) = self.sockets.tcp_mut(h) {
            sock.listener = None;
        }
        Ok(h)
    }

    /// True when `tcp_accept` would return a connection.
    pub fn tcp_can_accept(&self, listener: SocketHandle) -> bool {
        matches!(self.sockets.get(listener), Some(Socket::Listener(l)) if !l.accept_queue.is_empty())
    }

    /// Starts connecting to `remote` (non-blocking: the handle is in SYN-SENT; poll until
    /// `tcp_info(h).state` is ESTABLISHED or an error shows).
    pub fn tcp_connect(&mut self, now: Instant, remote: SocketAddrV4) -> Result<SocketHandle, SocketError> {
        self.tcp_connect_with(now, None, remote, None)
    }

    /// Like [`tcp_connect`](Self::tcp_connect), from `local_port` (an ephemeral port when
    /// `None`) and with `tcp_config` (the interface's when `None`).
    pub fn tcp_connect_with(
        &mut self,
        now: Instant,
        local_port: Option<u16>,
        remote: SocketAddrV4,
        tcp_config: Option<TcpConfig>,
    ) -> Result<SocketHandle, SocketError> {
        if remote.port() == 0 || remote.ip().is_unspecified() || remote.ip().is_broadcast() {
            return Err(SocketError::InvalidInput);
        }
        if self.cfg.next_hop(*remote.ip()).is_none() {
            return Err(SocketError::NetUnreachable);
        }
        if self.sockets.len() >= self.cfg.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        let local = match local_port {
            None | Some(0) => self.ephemeral_port(remote)?,
            Some(port) => {
                let local = SocketAddrV4::new(self.cfg.ip, port);
                if self.connections.contains_key(&FourTuple { local, remote }) {
                    return Err(SocketError::AddrInUse);
                }
                local
            }
        };
        let tuple = FourTuple { local, remote };
        let iss = self.isn.isn(local, remote, now);
        let cfg = tcp_config.map(std::sync::Arc::new).unwrap_or_else(|| std::sync::Arc::clone(&self.tcp_cfg));
        let mut conn = Connection::connect(cfg, local, remote, iss);
        conn.bind_rx_budget(&self.rx_budget);
        let sock = TcpSocket {
            conn,
            template: None,
            listener: None,
            released: false,
            scheduled: None,
            queued: false,
            in_accept_queue: false,
            in_activity: false,
            tx_held: false,
        };
        let h = self.sockets.insert(Socket::Tcp(Box::new(sock)));
        self.connections.insert(tuple, h);
        self.counters.tcp_connections_opened += 1;
        self.mark_dirty(h);
        Ok(h)
    }

    fn ephemeral_port(&mut self, remote: SocketAddrV4) -> Result<SocketAddrV4, SocketError> {
        let ip = self.cfg.ip;
        let port = self.next_free_ephemeral(|iface, port| {
            iface.connections.contains_key(&FourTuple { local: SocketAddrV4::new(ip, port), remote })
        })?;
        Ok(SocketAddrV4::new(ip, port))
    }

    /// An ephemeral port for a TCP socket bound before it listens or connects: free of
    /// listeners and of the ports the caller holds (`held`), from the interface's one cursor
    /// over the ephemeral range.
    pub fn tcp_ephemeral_port(&mut self, held: impl Fn(u16) -> bool) -> Result<u16, SocketError> {
        self.next_free_ephemeral(|_, port| held(port))
    }

    /// The next port of the ephemeral range (round robin) that no listener and no `taken` use.
    fn next_free_ephemeral(&mut self, taken: impl Fn(&Self, u16) -> bool) -> Result<u16, SocketError> {
        for _ in 0..EPHEMERAL_PORT_COUNT {
            let port = self.next_ephemeral;
            self.next_ephemeral = if port == u16::MAX { FIRST_EPHEMERAL_PORT } else { port + 1 };
            if !self.listeners.contains_key(&port) && !taken(self, port) {
                return Ok(port);
            }
        }
        Err(SocketError::AddrNotAvailable)
    }

    /// Queues a copy of `data`; returns bytes taken. `WouldBlock` when the send buffer is full.
    pub fn tcp_send(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        let sock = self.conn_mut(h)?;
        let n = sock.conn.send(data)?;
        if n == 0 && !data.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        self.mark_dirty(h);
        Ok(n)
    }

    /// Zero-copy send: the stack owns `payload` until the peer acknowledged it, then it comes
    /// back through `tcp_take_completed`. When it does not fit, it is returned in `Err`.
    pub fn tcp_send_loaned(
        &mut self,
        h: SocketHandle,
        payload: Box<dyn TxPayload>,
    ) -> Result<Result<(), Box<dyn TxPayload>>, SocketError> {
        let sock = self.conn_mut(h)?;
        let r = sock.conn.send_loaned(payload)?;
        self.mark_dirty(h);
        Ok(r)
    }

    /// Zero-copy buffers the peer acknowledged, returned to the application.
    pub fn tcp_take_completed(
        &mut self,
        h: SocketHandle,
        out: &mut Vec<Box<dyn TxPayload>>,
    ) -> Result<(), SocketError> {
        let sock = self.conn_mut(h)?;
        // Most calls find nothing (an ACK that completed no whole loan): no iterator then.
        if sock.conn.has_completed() {
            out.extend(sock.conn.take_completed());
        }
        Ok(())
    }

    /// Takes back every zero-copy buffer of `h` before the peer acknowledged it: the stack
    /// copies their bytes into its own memory (counted in `tx_loans_copied_bytes`) and hands
    /// them back through `tcp_take_completed`, at once or when the NIC no longer reads them.
    /// The connection goes on unchanged. Returns the bytes copied.
    pub fn tcp_unloan(&mut self, h: SocketHandle) -> Result<usize, SocketError> {
        let sock = self.conn_mut(h)?;
        let n = sock.conn.unloan_sends();
        self.counters.tx_loans_copied_bytes += n as u64;
        Ok(n)
    }

    /// Copies received bytes; `Ok(0)` only at end of stream, `WouldBlock` when nothing is queued.
    pub fn tcp_recv(&mut self, h: SocketHandle, buf: &mut [u8]) -> Result<usize, SocketError> {
        let sock = self.conn_mut(h)?;
        if buf.is_empty() {
            return Ok(0);
        }
        let n = sock.conn.recv(buf);
        if n > 0 {
            if sock.conn.wants_output() {
                self.mark_dirty(h);
            }
            return Ok(n);
        }
        Self::recv_empty(&sock.conn)
    }

    /// Zero-copy receive: the next payload buffer, owned by the caller. `Ok(None)` at end of
    /// stream, `WouldBlock` when nothing is queued.
    pub fn tcp_recv_segment(&mut self, h: SocketHandle) -> Result<Option<PacketBuf>, SocketError> {
        let sock = self.conn_mut(h)?;
        if let Some(seg) = sock.conn.recv_segment() {
            if sock.conn.wants_output() {
                self.mark_dirty(h);
            }
            return Ok(Some(seg));
        }
        Self::recv_empty(&sock.conn).map(|_| None)
    }

    /// Bytes connection `h` holds for the application to read now (0 for no connection).
    pub fn tcp_recv_queued(&self, h: SocketHandle) -> usize {
        self.conn(h).map_or(0, |t| t.conn.recv_queued())
    }

    /// Zero-copy receive for an application on another core: like
    /// [`tcp_recv_segment`](Self::tcp_recv_segment), but the bytes keep occupying the receive
    /// window until [`tcp_recv_release`](Self::tcp_recv_release).
    pub fn tcp_recv_segment_held(&mut self, h: SocketHandle) -> Result<Option<PacketBuf>, SocketError> {
        let sock = self.conn_mut(h)?;
        if let Some(seg) = sock.conn.recv_segment_held() {
            return Ok(Some(seg));
        }
        Self::recv_empty(&sock.conn).map(|_| None)
    }

    /// The segments [`tcp_recv_segment_held`](Self::tcp_recv_segment_held) would return now,
    /// in order, handed to `each` until it returns false or none is left (one socket lookup
    /// for a burst).
    pub fn tcp_recv_segments_held(&mut self, h: SocketHandle, mut each: impl FnMut(PacketBuf) -> bool) {
        let Ok(sock) = self.conn_mut(h) else { return };
        while let Some(seg) = sock.conn.recv_segment_held() {
            if !each(seg) {
                break;
            }
        }
    }

    /// Every segment [`tcp_recv_segment_held`](Self::tcp_recv_segment_held) would return now,
    /// appended to `out` in order (one socket lookup, the queue's accounting updated once);
    /// returns their bytes (0 for a handle that names no connection).
    pub fn tcp_recv_all_held(&mut self, h: SocketHandle, out: &mut Vec<PacketBuf>) -> usize {
        self.conn_mut(h).map_or(0, |sock| sock.conn.recv_all_held(out))
    }

    /// The application is done with `n` bytes taken by
    /// [`tcp_recv_segment_held`](Self::tcp_recv_segment_held).
    pub fn tcp_recv_release(&mut self, h: SocketHandle, n: usize) -> Result<(), SocketError> {
        let sock = self.conn_mut(h)?;
        sock.conn.release_recv(n);
        if sock.conn.wants_output() {
            self.mark_dirty(h);
        }
        Ok(())
    }

    fn recv_empty(conn: &Connection) -> Result<usize, SocketError> {
        if let Some(e) = conn.error() {
            return Err(SocketError::Connection(e));
        }
        if conn.at_eof() {
            return Ok(0);
        }
        match conn.state() {
            State::Closed => Ok(0),
            _ => Err(SocketError::WouldBlock),
        }
    }

    /// Shuts down the sending side (FIN after the queued data); reading continues.
    pub fn tcp_shutdown(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        self.conn_mut(h)?.conn.shutdown();
        self.mark_dirty(h);
        Ok(())
    }

    /// Closes the socket: the handle is invalid from now on; the stack finishes the close
    /// (FIN, TIME-WAIT) on its own. Closing a listener resets connections not yet accepted.
    pub fn tcp_close(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        match self.sockets.get_mut(h) {
            Some(Socket::Listener(l)) => {
                let queued: Vec<SocketHandle> = l.accept_queue.drain(..).collect();
                self.free_socket(h);
                for c in queued {
                    if let Some(sock) = self.sockets.tcp_mut(c) {
                        sock.listener = None;
                        sock.released = true;
                        sock.conn.abort();
                        Self::schedule_dispatch(&mut self.dispatch_list, sock, c);
                    }
                }
                Ok(())
            }
            Some(Socket::Tcp(_)) => {
                let sock = self.conn_mut(h)?;
                sock.released = true;
                sock.conn.close();
                self.mark_dirty(h);
                Ok(())
            }
            Some(Socket::Udp(_)) => {
                self.free_socket(h);
                Ok(())
            }
            None => Err(SocketError::BadHandle),
        }
    }

    /// Sets keepalive and the user timeout of a connection, effective now (`tcp/liveness.rs`).
    pub fn tcp_set_liveness(
        &mut self,
        h: SocketHandle,
        now: Instant,
        keepalive: Option<crate::tcp::KeepAlive>,
        user_timeout: Option<std::time::Duration>,
    ) -> Result<(), SocketError> {
        self.conn_mut(h)?.conn.set_liveness(now, keepalive, user_timeout);
        self.mark_dirty(h);
        Ok(())
    }

    /// Resets the connection at once and frees the handle.
    pub fn tcp_abort(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let sock = self.conn_mut(h)?;
        sock.released = true;
        sock.conn.abort();
        self.mark_dirty(h);
        Ok(())
    }

    /// The connection's state, addresses, queues and counters.
    pub fn tcp_info(&self, h: SocketHandle) -> Result<TcpInfo, SocketError> {
        let c = &self.conn(h)?.conn;
        Ok(TcpInfo {
            state: c.state(),
            local: c.local(),
            remote: c.remote(),
            error: c.error(),
            recv_queued: c.recv_queued(),
            send_queued: c.send_queued(),
            send_space: c.send_space(),
            send_mss: c.send_mss(),
            stats: c.stats(),
        })
    }

    /// One line per TCP connection of the interface (listeners aside), the application's and
    /// those it let go of that are still closing: see `Connection::describe`. For diagnosis
    /// (logs), not for programs.
    pub fn tcp_describe(&self, now: Instant) -> Vec<String> {
        self.sockets
            .tcp_handles()
            .into_iter()
            .filter_map(|h| match self.sockets.get(h) {
                Some(Socket::Tcp(t)) => Some(t),
                _ => None,
            })
            .map(|t| {
                let who = if t.released {
                    "released"
                } else if t.listener.is_some() {
                    "unaccepted"
                } else {
                    "open"
                };
                format!(
                    "{who}{}{}{}: {}",
                    if t.queued { " queued" } else { "" },
                    if t.scheduled.is_some() { " timer-filed" } else { "" },
                    if t.tx_held { " tx-blocked" } else { "" },
                    t.conn.describe(now)
                )
            })
            .collect()
    }
}
