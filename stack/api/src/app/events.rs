//! Applying a link's [`Event`]s to the socket table.

use super::state::{Phase, SockEntry, DATAGRAM_QUEUE};
use super::{AppSockets, Event, Link, Request};
use crate::{Fd, Proto, Ready};

impl<L: Link> AppSockets<L> {
    /// Applies `event`; returns the socket and the readiness it may have gained, for epoll
    /// (`None`: the event concerned no socket).
    pub(super) fn on_event(&mut self, event: Event<L::RxBuf>) -> Option<(Fd, Ready)> {
        let grown = grown_readiness(&event);
        let fd = match event {
            Event::Reply { ticket, result } => {
                self.replies.insert(ticket, result);
                return None;
            }
            Event::Connected { fd, local } => {
                if let Some(s) = self.sockets.get_mut(&fd).filter(|s| s.phase == Phase::Connecting) {
                    s.phase = Phase::Connected;
                    s.bound = true;
                    if local.is_some() {
                        s.local = local;
                    }
                    self.drop_in_flight(fd);
                }
                fd
            }
            Event::Data { fd, buf, mut more } => {
                match self.sockets.get_mut(&fd) {
                    Some(s) if !s.rd_shut => {
                        self.rxq_spares.storage_for(&mut s.rxq);
                        s.rxq.push_back(buf);
                        s.rxq.extend(more.drain(..));
                    }
                    _ => {
                        drop(buf);
                        more.clear();
                    }
                }
                if more.capacity() > 0 {
                    self.link.reuse_vec(more);
                }
                fd
            }
            Event::Datagram { fd, from, buf } => {
                match self.sockets.get_mut(&fd) {
                    Some(s) if s.datagrams.len() < DATAGRAM_QUEUE => s.datagrams.push_back((from, buf)),
                    Some(s) => {
                        s.datagrams_dropped += 1;
                        drop(buf);
                    }
                    None => drop(buf),
                }
                fd
            }
            Event::Eof { fd } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.eof = true;
                }
                fd
            }
            Event::Failed { fd, error } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.failure = Some(error);
                    s.pending_error = Some(error);
                    if s.phase == Phase::Connecting {
                        s.phase = Phase::Failed;
                    }
                }
                // Nothing it had in flight will be acknowledged now.
                self.drop_in_flight(fd);
                fd
            }
            Event::Error { fd, error } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.pending_error = Some(error);
                }
                fd
            }
            Event::Acceptable { fd } => {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.acceptable = true;
                }
                fd
            }
            Event::Accepted { listener, conn, local, remote } => {
                self.on_accepted(listener, conn, local, remote);
                listener
            }
            Event::SendDone { fd, bytes } => {
                if self.sockets.get(&fd).is_some_and(|s| s.proto == Proto::Tcp) {
                    self.release_send(fd, bytes);
                }
                fd
            }
            Event::Writable { fd } => fd,
        };
        Some((fd, grown))
    }

    /// A connection the link established on `listener`: queued for `accept`, or refused when
    /// nobody listens any more.
    fn on_accepted(
        &mut self,
        listener: Fd,
        conn: u64,
        local: std::net::SocketAddrV4,
        remote: std::net::SocketAddrV4,
    ) {
        let listening = self.sockets.get(&listener).filter(|s| s.phase == Phase::Listening);
        let sndbuf = listening.map(|l| l.sndbuf);
        let fd = match (sndbuf, self.new_fd()) {
            (Some(sndbuf), Ok(fd)) => {
                let mut entry = SockEntry::new(Proto::Tcp, sndbuf);
                entry.phase = Phase::Connected;
                entry.bound = true;
                entry.local = Some(local);
                entry.peer = Some(remote);
                self.sockets.insert(fd, entry);
                Some(fd)
            }
            _ => None,
        };
        if let Err(e) = self.request(Request::Adopt { conn, fd, listener }) {
            log::debug!("adopting a connection on {listener}: {e}");
            if let Some(fd) = fd {
                self.sockets.remove(&fd);
            }
            return;
        }
        if let (Some(fd), Some(l)) = (fd, self.sockets.get_mut(&listener)) {
            l.accept_q.push_back((fd, remote));
        }
    }
}

/// The readiness an event may have added to its socket, for epoll: an edge-triggered
/// registration is woken only by a kind it asked for (as Linux's wakeup keys do), so acknowledged
/// sends do not report unread data a second time.
fn grown_readiness<B>(event: &Event<B>) -> Ready {
    match event {
        Event::Reply { .. } => Ready::empty(),
        Event::Connected { .. } | Event::SendDone { .. } | Event::Writable { .. } => Ready::OUT,
        Event::Data { .. } | Event::Datagram { .. } | Event::Acceptable { .. } | Event::Accepted { .. } => {
            Ready::IN
        }
        Event::Eof { .. } => Ready::IN | Ready::RDHUP,
        Event::Failed { .. } | Event::Error { .. } => Ready::IN | Ready::OUT | Ready::ERR | Ready::HUP,
    }
}
