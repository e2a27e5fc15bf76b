//! Socket control: open, bind, listen, connect, shutdown, close, options, window releases.

use std::net::SocketAddrV4;

use super::options::{OptionEffect, OptionStage, SocketOptions};
use super::{open_in, Event, Phase, ServerSocket, SocketServer, Transport};
use crate::api::{Proto, SockOpt, SockOptName, SocketError};
use crate::iface::SocketHandle;
use crate::nic::Nic;
use crate::tcp::TcpConfig;

/// What a connect leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connecting {
    /// A TCP handshake started from this local address: [`Event::ConnectDone`] follows.
    Started(SocketAddrV4),
    /// A UDP socket now sends to and receives from the peer only; bound to this address.
    Done(SocketAddrV4),
}

impl<N: Nic, T: Transport> SocketServer<N, T> {
    /// A new socket on `lane`; its id. `TooManySockets` at the limit.
    pub fn open(&mut self, lane: usize, proto: Proto) -> Result<u32, SocketError> {
        if self.visible >= self.limits.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        let id = self.new_id();
        let opts = self.default_options();
        self.insert(id, ServerSocket::new(lane, proto, opts));
        Ok(id)
    }

    fn default_options(&self) -> SocketOptions {
        SocketOptions::new(&self.iface.config().tcp, self.limits.default_rcvbuf, self.limits.default_sndbuf)
    }

    /// Binds to `local` (our address or unspecified; port 0: an ephemeral one).
    pub fn bind(&mut self, id: u32, local: SocketAddrV4) -> Result<SocketAddrV4, SocketError> {
        let ip = self.iface.config().ip;
        if !local.ip().is_unspecified() && *local.ip() != ip {
            return Err(SocketError::AddrNotAvailable);
        }
        let s = open_in(&mut self.sockets, id)?;
        if s.port.is_some() || s.phase != Phase::Fresh {
            return Err(SocketError::InvalidInput);
        }
        let port = match s.proto {
            Proto::Tcp => {
                let ports = &self.tcp_ports;
                let port = match local.port() {
                    0 => self.iface.tcp_ephemeral_port(|p| ports.contains_key(&p))?,
                    port if ports.contains_key(&port) => return Err(SocketError::AddrInUse),
                    port => port,
                };
                self.hold_port(id, port);
                port
            }
            Proto::Udp => {
                let h = self.iface.udp_bind(local.port())?;
                self.attach(id, h);
                let port = self.iface.udp_local(h)?.port();
                self.hold_port(id, port);
                port
            }
        };
        Ok(SocketAddrV4::new(ip, port))
    }

    /// Listens on the bound port with room for `backlog` connections (cut to the limit).
    pub fn listen(&mut self, id: u32, backlog: usize) -> Result<(), SocketError> {
        let tx_floor = self.limits.max_send_in_flight;
        let s = open_in(&mut self.sockets, id)?;
        match (s.proto, s.phase, s.port) {
            (Proto::Udp, _, _) => Err(SocketError::NotSupported),
            (Proto::Tcp, Phase::Fresh, Some(port)) => {
                let cfg = s.opts.tcp_config(&self.iface.config().tcp, tx_floor);
                let backlog = backlog.clamp(1, self.limits.max_backlog);
                let h = self.iface.tcp_listen_with(port, backlog, Some(cfg))?;
                self.attach(id, h);
                open_in(&mut self.sockets, id)?.phase = Phase::Listening;
                Ok(())
            }
            (Proto::Tcp, Phase::Connected | Phase::Connecting { .. }, _) => Err(SocketError::IsConnected),
            _ => Err(SocketError::InvalidInput),
        }
    }

    /// Connects to `remote`: a TCP handshake (its result comes in [`Event::ConnectDone`] with
    /// `call`), or a UDP socket's default peer.
    pub fn connect(
        &mut self,
        id: u32,
        remote: SocketAddrV4,
        call: T::Call,
    ) -> Result<Connecting, SocketError> {
        let now = self.clock.now();
        let tx_floor = self.limits.max_send_in_flight;
        let s = open_in(&mut self.sockets, id)?;
        match (s.proto, s.phase) {
            (Proto::Tcp, Phase::Fresh) => {
                let cfg = s.opts.tcp_config(&self.iface.config().tcp, tx_floor);
                let h = self.iface.tcp_connect_with(now, s.port, remote, Some(cfg))?;
                self.attach(id, h);
                let local = self.iface.tcp_info(h)?.local;
                self.hold_port(id, local.port());
                open_in(&mut self.sockets, id)?.phase = Phase::Connecting { call };
                Ok(Connecting::Started(local))
            }
            (Proto::Tcp, Phase::Connecting { .. }) => Err(SocketError::Already),
            (Proto::Tcp, _) => Err(SocketError::IsConnected),
            (Proto::Udp, _) => {
                let h = self.udp_handle(id)?;
                self.iface.udp_connect(h, remote)?;
                let local = self.iface.udp_local(h)?;
                open_in(&mut self.sockets, id)?.phase = Phase::Connected;
                Ok(Connecting::Done(local))
            }
        }
    }

    /// The stack socket of UDP socket `id`, bound to an ephemeral port if it was not bound.
    pub(super) fn udp_handle(&mut self, id: u32) -> Result<SocketHandle, SocketError> {
        if let Some(h) = open_in(&mut self.sockets, id)?.handle {
            return Ok(h);
        }
        let h = self.iface.udp_bind(0)?;
        self.attach(id, h);
        let port = self.iface.udp_local(h)?.port();
        self.hold_port(id, port);
        Ok(h)
    }

    /// Shuts down reading (nothing to do: data still arrives and is delivered) and/or writing
    /// (FIN after the queued data).
    pub fn shutdown(&mut self, id: u32, write: bool) -> Result<(), SocketError> {
        let s = open_in(&mut self.sockets, id)?;
        match (s.proto, s.phase, s.handle) {
            (Proto::Tcp, Phase::Connected, Some(h)) => {
                if write && !s.write_shut {
                    s.write_shut = true;
                    self.iface.tcp_shutdown(h)?;
                }
                Ok(())
            }
            (Proto::Udp, _, _) => Err(SocketError::NotSupported),
            _ => Err(SocketError::NotConnected),
        }
    }

    /// Closes socket `id`: its id is gone for requests at once. A connection with held sends
    /// finishes them first (FIN after them; their [`Event::SendDone`]s still come); one with
    /// data the transport never took is reset, as a kernel resets a connection closed with
    /// unread data (RFC 2525 2.17); `abort` resets it anyway.
    pub fn close(&mut self, id: u32, abort: bool) -> Result<(), SocketError> {
        let closed = self.close_socket(id, abort);
        // A socket fewer: listeners stopped at the socket limit may take connections again.
        self.retry_accepts();
        closed
    }

    fn close_socket(&mut self, id: u32, abort: bool) -> Result<(), SocketError> {
        let s = open_in(&mut self.sockets, id)?;
        let in_stack = match (s.proto, s.handle) {
            (Proto::Tcp, Some(h)) => self.iface.tcp_info(h).map_or(0, |i| i.recv_queued),
            _ => 0,
        };
        let s = open_in(&mut self.sockets, id)?;
        let abort = abort || in_stack > 0 || s.rx_partial.is_some();
        // No release comes after this: the window must not stay shut on bytes the transport
        // still held, or a peer with more to send would wait for ever.
        let held = std::mem::take(&mut s.outstanding_rx);
        if let (Proto::Tcp, Some(h)) = (s.proto, s.handle) {
            let _ = self.iface.tcp_recv_release(h, held);
        }
        let s = open_in(&mut self.sockets, id)?;
        let finishing = !abort && !s.sends.is_empty();
        match (s.proto, s.phase) {
            // Datagrams the NIC still reads: the sends complete when it is done.
            (Proto::Udp, _) if finishing => {
                self.bury(id);
                return Ok(());
            }
            (Proto::Tcp, Phase::Connected) if finishing => {
                let h = s.handle;
                let shut = std::mem::replace(&mut s.write_shut, true);
                self.bury(id);
                if let (Some(h), false) = (h, shut) {
                    let _ = self.iface.tcp_shutdown(h);
                }
                return Ok(());
            }
            _ => {}
        }
        self.fail_sends(id, SocketError::Connection(crate::tcp::ConnError::Aborted));
        self.remove(id, abort);
        Ok(())
    }

    /// Sets an option (UDP sockets: only the buffers). Keepalive and the user timeout change
    /// a live connection at once; the burst is the interface's.
    pub fn set_option(&mut self, id: u32, opt: SockOpt) -> Result<(), SocketError> {
        let bounds = self.bounds;
        let s = open_in(&mut self.sockets, id)?;
        if s.proto == Proto::Udp && !matches!(opt, SockOpt::RecvBuffer(_) | SockOpt::SendBuffer(_)) {
            return Err(SocketError::NotSupported);
        }
        let stage = if s.phase == Phase::Fresh { OptionStage::Fresh } else { OptionStage::Started };
        match s.opts.set(opt, stage, &bounds)? {
            OptionEffect::Stored => {}
            OptionEffect::Burst(n) => self.iface.set_burst(n),
            OptionEffect::Liveness => {
                let live = s.opts.live();
                let connection = s.handle.filter(|_| !matches!(s.phase, Phase::Fresh | Phase::Listening));
                if let Some(h) = connection {
                    let now = self.clock.now();
                    // A connection the stack already freed has nothing to keep alive.
                    let _ = self.iface.tcp_set_liveness(h, now, live.keepalive(), live.user_timeout());
                }
            }
        }
        self.wake_writer(id);
        Ok(())
    }

    /// An option's value.
    pub fn get_option(&mut self, id: u32, name: SockOptName) -> Result<SockOpt, SocketError> {
        let burst = self.iface.config().burst;
        open_in(&mut self.sockets, id)?.opts.get(name, burst)
    }

    /// The connection settings socket `id` would connect with now (for tests and reports).
    pub fn tcp_config_of(&mut self, id: u32) -> Result<TcpConfig, SocketError> {
        let tx_floor = self.limits.max_send_in_flight;
        let base = self.iface.config().tcp.clone();
        Ok(open_in(&mut self.sockets, id)?.opts.tcp_config(&base, tx_floor))
    }

    /// The transport is done with `bytes` of the data it took from stream `id`: they reopen the
    /// receive window. More than it holds: `InvalidInput`.
    pub fn release(&mut self, id: u32, bytes: usize) -> Result<(), SocketError> {
        let s = open_in(&mut self.sockets, id)?;
        let Some(h) = s.handle.filter(|_| s.proto == Proto::Tcp) else {
            return Err(SocketError::NotSupported);
        };
        if bytes > s.outstanding_rx {
            return Err(SocketError::InvalidInput);
        }
        s.outstanding_rx -= bytes;
        // A connection the stack already freed has no window left to open.
        let _ = self.iface.tcp_recv_release(h, bytes);
        Ok(())
    }

    /// A socket waiting for send room gets [`Event::Writable`] once it has some.
    pub(super) fn wake_writer(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if s.writable_wanted && s.in_flight < s.opts.sndbuf() {
            s.writable_wanted = false;
            let available = s.opts.sndbuf() - s.in_flight;
            let lane = s.lane;
            self.emit(lane, id, Event::Writable { available });
        }
    }
}
