//! Which sockets have something new for the application, so a runtime on another core can
//! forward events without scanning every socket after each poll.
//!
//! Tracking is off until the first [`Interface::take_activity`] call: applications that call
//! the socket operations directly never pay for it, and the list cannot grow unread.

use super::socket_set::Socket;
use super::{Interface, SocketHandle};
use crate::api::SocketError;
use crate::nic::Nic;
use crate::tcp::Events;

/// Something new on one socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// The socket.
    pub handle: SocketHandle,
    /// What happened: for connections, their events since last reported; for listeners and
    /// UDP sockets, `READABLE` (a connection to accept, a datagram to read).
    pub events: Events,
    /// The owner's number for the socket ([`Interface::set_tag`]; 0 when not given).
    pub tag: u32,
}

impl<N: Nic> Interface<N> {
    /// Gives the socket of `h` a number of the caller's (the socket server: its id), reported
    /// with the socket's activity ([`Activity::tag`]) until the socket is freed: the caller
    /// finds its own record for the socket without a map from handles. A stale handle is
    /// `BadHandle`.
    pub fn set_tag(&mut self, h: SocketHandle, tag: u32) -> Result<(), SocketError> {
        if self.sockets.set_tag(h, tag) {
            Ok(())
        } else {
            Err(SocketError::BadHandle)
        }
    }

    /// Moves the sockets with news since the last call into `out` (each once), and keeps
    /// tracking from now on.
    pub fn take_activity(&mut self, out: &mut Vec<Activity>) {
        self.track_activity = true;
        for h in self.activity.drain(..) {
            let (events, tag) = match self.sockets.get_mut_tagged(h) {
                Some((Socket::Tcp(t), tag)) => {
                    t.in_activity = false;
                    (t.conn.take_events(), tag)
                }
                Some((Socket::Listener(l), tag)) => {
                    l.in_activity = false;
                    (Events::READABLE, tag)
                }
                Some((Socket::Udp(_), tag)) => (Events::READABLE, tag),
                None => continue,
            };
            if !events.is_empty() {
                out.push(Activity { handle: h, events, tag });
            }
        }
    }

    /// Notes news on any socket: a connection with pending events, or a UDP socket.
    pub(super) fn note_news(&mut self, h: SocketHandle) {
        match self.sockets.get_mut(h) {
            Some(Socket::Tcp(t)) => {
                if self.track_activity
                    && !t.in_activity
                    && !t.released
                    && t.listener.is_none()
                    && !t.conn.pending_events().is_empty()
                {
                    t.in_activity = true;
                    self.activity.push(h);
                }
            }
            Some(Socket::Udp(_)) => self.note_activity(h),
            Some(Socket::Listener(_)) | None => {}
        }
    }

    /// Notes news on a socket that has no event flags of its own (UDP).
    pub(super) fn note_activity(&mut self, h: SocketHandle) {
        if self.track_activity && !self.activity.contains(&h) {
            self.activity.push(h);
        }
    }
}
