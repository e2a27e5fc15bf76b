//! Socket activity from the stack turned into the server's events.

use super::{Event, Phase, ServerEvent, ServerSocket, SocketServer, Transport};
use crate::api::{Proto, SocketError};
use crate::iface::SocketHandle;
use crate::nic::Nic;
use crate::tcp::{ConnError, Events};

impl<N: Nic, T: Transport> SocketServer<N, T> {
    pub(super) fn emit(&mut self, lane: usize, id: u32, what: Event<T>) {
        self.events.push_back(ServerEvent { lane, id, what });
    }

    /// Reports socket `id` readable, unless it is already (or a zombie).
    fn mark_readable(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if !s.in_readable && s.phase != Phase::Zombie {
            s.in_readable = true;
            let lane = s.lane;
            self.emit(lane, id, Event::Readable);
        }
    }

    /// Turns the news of stack socket `h`, tagged `id`, into events. A socket the server
    /// let go of (its record gone, or holding another stack socket now) has none to give.
    pub(super) fn on_activity(&mut self, id: u32, h: SocketHandle, events: Events) {
        let Some(s) = self.sockets.get(&id) else { return };
        if s.handle != Some(h) {
            return;
        }
        match (s.proto, s.phase) {
            (Proto::Udp, _) => {
                // A datagram to read, or a loaned one the NIC is done with.
                self.mark_readable(id);
                self.collect_completed(id);
            }
            (Proto::Tcp, Phase::Listening) => self.accept_all(id, h),
            (Proto::Tcp, Phase::Connecting { call }) => self.connect_progress(id, h, call, events),
            (Proto::Tcp, _) => {
                if events.contains(Events::READABLE) && self.zombie_got_data(id, h) {
                    return;
                }
                if events.intersects(Events::READABLE | Events::PEER_CLOSED | Events::ERROR | Events::CLOSED)
                {
                    self.mark_readable(id);
                }
                if events.contains(Events::ERROR)
                    && self.sockets.get(&id).is_some_and(|s| s.phase == Phase::Zombie)
                {
                    if let Some(e) = self.iface.tcp_info(h).ok().and_then(|i| i.error) {
                        self.connection_failed(id, SocketError::Connection(e));
                        return;
                    }
                }
                self.collect_completed(id);
            }
        }
    }

    fn connect_progress(&mut self, id: u32, h: SocketHandle, call: T::Call, events: Events) {
        let Some(s) = self.sockets.get(&id) else { return };
        let lane = s.lane;
        let info = self.iface.tcp_info(h);
        if let Some(e) = info.as_ref().ok().and_then(|i| i.error) {
            // The socket may connect again; the stack's connection is gone.
            let _ = self.iface.tcp_close(h);
            if let Some(s) = self.sockets.get_mut(&id) {
                let port = s.port.take();
                s.handle = None;
                s.phase = Phase::Fresh;
                self.drop_port(Proto::Tcp, port);
            }
            self.emit(lane, id, Event::ConnectDone { call, result: Err(SocketError::Connection(e)) });
        } else if events.contains(Events::CONNECTED) {
            let local = info.map(|i| i.local).unwrap_or_else(|_| self.local_addr(0));
            if let Some(s) = self.sockets.get_mut(&id) {
                s.phase = Phase::Connected;
            }
            self.emit(lane, id, Event::ConnectDone { call, result: Ok(local) });
            self.mark_readable(id);
        }
    }

    fn local_addr(&self, port: u16) -> std::net::SocketAddrV4 {
        std::net::SocketAddrV4::new(self.iface.config().ip, port)
    }

    /// Takes every established connection of listener `id` while sockets are left; the rest
    /// wait in the stack's accept queue until a socket closes ([`Self::retry_accepts`]).
    fn accept_all(&mut self, listener: u32, lh: SocketHandle) {
        let Some(l) = self.sockets.get(&listener) else { return };
        let (lane, opts) = (l.lane, l.opts.clone());
        loop {
            if self.visible >= self.limits.max_sockets {
                if self.iface.tcp_can_accept(lh) && !self.accept_waiting.contains(&listener) {
                    self.accept_waiting.push(listener);
                }
                break;
            }
            let Ok(h) = self.iface.tcp_accept(lh) else { break };
            let Ok(info) = self.iface.tcp_info(h) else { continue };
            let id = self.new_id();
            let mut s = ServerSocket::new(lane, Proto::Tcp, opts.clone());
            s.handle = Some(h);
            s.phase = Phase::Connected;
            self.insert(id, s);
            self.emit(lane, listener, Event::Accepted { socket: id, local: info.local, remote: info.remote });
            self.mark_readable(id);
        }
    }

    /// A socket went away: listeners that stopped at the socket limit take their waiting
    /// connections now.
    pub(super) fn retry_accepts(&mut self) {
        if self.accept_waiting.is_empty() || self.visible >= self.limits.max_sockets {
            return;
        }
        for listener in std::mem::take(&mut self.accept_waiting) {
            let handle =
                self.sockets.get(&listener).filter(|s| s.phase == Phase::Listening).and_then(|s| s.handle);
            if let Some(lh) = handle {
                self.accept_all(listener, lh);
            }
        }
    }

    /// Data for a connection closed by the transport (its sends still finishing): nobody will
    /// read it, so the connection is reset, as a kernel does for data after close. True when it
    /// was.
    fn zombie_got_data(&mut self, id: u32, h: SocketHandle) -> bool {
        let zombie = self.sockets.get(&id).is_some_and(|s| s.phase == Phase::Zombie);
        if !zombie || self.iface.tcp_info(h).map_or(0, |i| i.recv_queued) == 0 {
            return false;
        }
        self.fail_sends(id, SocketError::Connection(ConnError::Aborted));
        self.remove(id, true);
        true
    }

    /// The connection of `id` failed: its held sends fail, then [`Event::Reset`] (once); a
    /// zombie is gone.
    pub(super) fn connection_failed(&mut self, id: u32, error: SocketError) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let zombie = s.phase == Phase::Zombie;
        let first = !s.reset_sent;
        s.reset_sent = true;
        let lane = s.lane;
        self.fail_sends(id, error);
        if zombie {
            self.remove(id, true);
        } else if first {
            self.emit(lane, id, Event::Reset { error });
        }
    }
}
