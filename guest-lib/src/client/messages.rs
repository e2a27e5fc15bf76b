//! Receive-queue messages (completions and events) as the application side's events.

use std::net::SocketAddrV4;

use slimtcp_abi::{Done, Errno, RxMessage, SocketId};
use slimtcp_api::app::Event;
use slimtcp_api::{Fd, SocketError};

use super::buffers::{Release, RxBuf};
use super::errno;
use super::link::GuestLink;
use super::{TAG_CALL, TAG_CLOSE, TAG_CONNECT, TAG_HELLO, TAG_QUIET_CREDIT, TAG_QUIET_SEND};

impl GuestLink {
    /// The payload of a data or datagram message in receive buffer `slot`: read in place while
    /// fewer than `rx_hold_max` buffers hold unread payloads, else copied out.
    fn rx_buf(&mut self, ptr: *const u8, len: usize, slot: u16, credit_fd: Option<Fd>) -> RxBuf {
        if self.rx_held < self.rx_hold_max {
            self.rx_held += 1;
            let release = Release { slot: Some(slot), fd: credit_fd, bytes: len as u32 };
            return RxBuf::in_place(ptr, len, release, self.releases.clone());
        }
        // Most posted buffers hold payloads the application has not read: this one is copied
        // out and its buffer reposted, so completions, events and other sockets' data still
        // find buffers (unread data never holds up the rest).
        // SAFETY: `ptr..ptr + len` lies in the receive buffer the device just returned (checked
        // when the message was parsed); it is reposted only after this copy.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
        self.rx_to_post.push(slot);
        self.rx_copied_out += 1;
        RxBuf::copied(bytes, Release { slot: None, fd: credit_fd, bytes: len as u32 }, self.releases.clone())
    }

    /// Applies one message; `slot` is reposted unless a payload keeps it. True when the
    /// message pushed a connection (the batch ends there).
    pub(super) fn on_message(
        &mut self,
        msg: RxMessage,
        slot: u16,
        payload: *const u8,
        payload_len: usize,
        events: &mut Vec<Event<RxBuf>>,
    ) -> bool {
        let fd_of = |g: &Self, sid: &SocketId| g.by_sid.get(sid).copied();
        if !matches!(msg, RxMessage::Data { .. } | RxMessage::Datagram { .. }) {
            self.rx_to_post.push(slot);
        }
        match msg {
            RxMessage::Complete { cookie, socket, op, result } => {
                self.on_complete(cookie, socket, op, result, events)
            }
            RxMessage::HelloDone { cookie, version, result } => {
                if cookie == TAG_HELLO {
                    self.hello = Some((version, result));
                }
            }
            RxMessage::Data { socket, .. } => {
                let fd = fd_of(self, &socket);
                let buf = self.rx_buf(payload, payload_len, slot, fd);
                match fd {
                    Some(fd) => events.push(Event::Data { fd, buf, more: Vec::new() }),
                    None => drop(buf),
                }
            }
            RxMessage::Datagram { socket, from, .. } => {
                let buf = self.rx_buf(payload, payload_len, slot, None);
                match fd_of(self, &socket) {
                    Some(fd) => events.push(Event::Datagram { fd, from, buf }),
                    None => drop(buf),
                }
            }
            RxMessage::Accepted { listener, socket, remote, local } => {
                return self.on_accepted(listener, socket, remote, local, events);
            }
            RxMessage::Writable { socket, .. } => {
                events.extend(fd_of(self, &socket).map(|fd| Event::Writable { fd }))
            }
            RxMessage::Acked { socket, bytes } => {
                let bytes = bytes as usize;
                events.extend(fd_of(self, &socket).map(|fd| Event::SendDone { fd, bytes }));
            }
            RxMessage::PeerClosed { socket } => {
                events.extend(fd_of(self, &socket).map(|fd| Event::Eof { fd }))
            }
            RxMessage::Reset { socket, errno } => {
                let error = errno::to_socket_error(errno);
                events.extend(fd_of(self, &socket).map(|fd| Event::Failed { fd, error }));
            }
            RxMessage::Error { socket, errno } => {
                let error = errno::to_socket_error(errno);
                events.extend(fd_of(self, &socket).map(|fd| Event::Error { fd, error }));
            }
        }
        false
    }

    fn on_accepted(
        &mut self,
        listener: SocketId,
        socket: SocketId,
        remote: SocketAddrV4,
        local: SocketAddrV4,
        events: &mut Vec<Event<RxBuf>>,
    ) -> bool {
        match self.by_sid.get(&listener).copied() {
            Some(listener) => {
                events.push(Event::Accepted { listener, conn: u64::from(socket.0), local, remote });
                true
            }
            None => {
                // Nobody will accept it: close it at once (reset), if the queue has room.
                if !self.tx_room(0) {
                    log::debug!("slimtcp-guest: no room to close an unwanted connection");
                } else if let Err(e) = self.refuse(socket) {
                    log::debug!("slimtcp-guest: closing an unwanted connection: {e}");
                }
                false
            }
        }
    }

    fn on_complete(
        &mut self,
        cookie: u64,
        socket: SocketId,
        op: u8,
        result: Result<Done, Errno>,
        events: &mut Vec<Event<RxBuf>>,
    ) {
        match cookie & 0xff {
            TAG_CALL => {
                let Some(kind) = self.calls.remove(&cookie) else {
                    log::warn!("slimtcp-guest: completion of op {op:#x} for no call ({cookie:#x})");
                    return;
                };
                let result = match result {
                    Ok(done) => self.on_call_done(kind, socket, done),
                    Err(e) => Err(errno::to_socket_error(e)),
                };
                events.push(Event::Reply { ticket: cookie, result });
            }
            TAG_CONNECT => {
                let Some(fd) = self.by_sid.get(&socket).copied() else { return };
                events.push(match result {
                    Ok(done) => Event::Connected { fd, local: Some(done.addr) },
                    Err(e) => Event::Failed { fd, error: errno::to_socket_error(e) },
                });
            }
            TAG_CLOSE => {
                self.closing.remove(&socket);
            }
            TAG_QUIET_SEND => {
                let fd = Fd((cookie >> 8) as u32);
                if let Err(e) = result {
                    log::debug!("slimtcp-guest: send on {fd} failed: {e}");
                    if self.socks.get(&fd).is_some_and(|s| s.sid == socket) {
                        let error: SocketError = errno::to_socket_error(e);
                        events.push(Event::Failed { fd, error });
                    }
                }
            }
            TAG_QUIET_CREDIT => {
                if let Err(e) = result {
                    log::warn!("slimtcp-guest: credit on socket {} refused: {e}", socket.0);
                }
            }
            _ => log::warn!("slimtcp-guest: completion of op {op:#x} with unknown cookie {cookie:#x}"),
        }
    }
}
