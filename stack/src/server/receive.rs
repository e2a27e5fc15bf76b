//! Received data, pulled by the transport when it has room: stream bytes (held against the
//! receive window until released), the end of the stream, datagrams.

use std::net::SocketAddrV4;

use super::{Phase, SocketServer, Transport};
use crate::api::{Proto, SocketError};
use crate::nic::{Nic, PacketBuf};

/// What a readable socket has for the transport now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamReady {
    /// Stream bytes: take them with [`SocketServer::stream_read`].
    Data,
    /// The peer closed its side and everything before was taken (reported once).
    Eof,
    /// A datagram: take it with [`SocketServer::take_datagram`].
    Datagram,
    /// Nothing (a failed connection's [`Reset`](super::Event::Reset) is queued instead).
    Nothing,
}

impl<N: Nic, T: Transport> SocketServer<N, T> {
    /// The transport found nothing more to deliver on socket `id` ([`StreamReady::Nothing`],
    /// or [`StreamReady::Eof`] delivered): its next news is a new [`Event::Readable`].
    ///
    /// [`Event::Readable`]: super::Event::Readable
    pub fn readable_done(&mut self, id: u32) {
        if let Some(s) = self.sockets.get_mut(&id) {
            s.in_readable = false;
        }
    }

    /// What socket `id` has to deliver (see [`StreamReady`]).
    pub fn ready(&mut self, id: u32) -> StreamReady {
        let Some(s) = self.sockets.get_mut(&id) else { return StreamReady::Nothing };
        let Some(h) = s.handle else { return StreamReady::Nothing };
        match (s.proto, s.phase) {
            (_, Phase::Zombie) | (Proto::Tcp, Phase::Listening) => StreamReady::Nothing,
            (Proto::Udp, _) if self.iface.udp_can_recv(h) => StreamReady::Datagram,
            (Proto::Udp, _) => StreamReady::Nothing,
            (Proto::Tcp, _) if s.rx_partial.is_some() => StreamReady::Data,
            (Proto::Tcp, _) => match self.iface.tcp_recv_segment_held(h) {
                Ok(Some(seg)) => {
                    s.rx_partial = Some(seg);
                    StreamReady::Data
                }
                Ok(None) if !s.eof_sent => {
                    s.eof_sent = true;
                    StreamReady::Eof
                }
                Ok(None) => StreamReady::Nothing,
                Err(SocketError::Connection(e)) => {
                    self.connection_failed(id, SocketError::Connection(e));
                    StreamReady::Nothing
                }
                Err(_) => StreamReady::Nothing,
            },
        }
    }

    /// Stream bytes socket `id` has for [`stream_read`](Self::stream_read) now.
    pub fn stream_readable(&self, id: u32) -> usize {
        let Some(s) = self.sockets.get(&id) else { return 0 };
        let Some(h) = s.handle.filter(|_| s.proto == Proto::Tcp) else { return 0 };
        s.rx_partial.as_ref().map_or(0, PacketBuf::len) + self.iface.tcp_recv_queued(h)
    }

    /// Hands up to `room` stream bytes of socket `id` to `write`, in order, in as many calls as
    /// segments; returns the bytes handed. They count against the receive window until
    /// [`release`](Self::release)d.
    pub fn stream_read(&mut self, id: u32, room: usize, mut write: impl FnMut(&[u8])) -> usize {
        let Some(s) = self.sockets.get_mut(&id) else { return 0 };
        let Some(h) = s.handle.filter(|_| s.proto == Proto::Tcp) else { return 0 };
        if room == 0 {
            return 0;
        }
        let (mut total, mut partial) = (0, None);
        // Copies what fits of `seg`; false once `room` is used up (what did not fit is kept
        // for the next call).
        let mut take = |seg: PacketBuf| {
            let n = (room - total).min(seg.len());
            write(&seg.as_slice()[..n]);
            total += n;
            if n < seg.len() {
                let mut rest = seg;
                rest.advance(n);
                partial = Some(rest);
            }
            total < room
        };
        let more = s.rx_partial.take().is_none_or(&mut take);
        if more {
            // One socket lookup for the whole burst.
            self.iface.tcp_recv_segments_held(h, take);
        }
        s.rx_partial = partial;
        s.outstanding_rx += total;
        total
    }

    /// Every received segment of stream `id` there is now, whole and in order (first what is
    /// left of a segment [`stream_read`](Self::stream_read) took part of), appended to `out`:
    /// for a transport that gives the stack's buffers to its application as they are. Their
    /// bytes count against the receive window until [`release`](Self::release)d.
    pub fn take_segments(&mut self, id: u32, out: &mut Vec<PacketBuf>) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        let Some(h) = s.handle.filter(|_| s.proto == Proto::Tcp) else { return };
        if let Some(seg) = s.rx_partial.take() {
            s.outstanding_rx += seg.len();
            out.push(seg);
        }
        s.outstanding_rx += self.iface.tcp_recv_all_held(h, out);
    }

    /// The next datagram of UDP socket `id` and its source.
    pub fn take_datagram(&mut self, id: u32) -> Option<(SocketAddrV4, PacketBuf)> {
        let s = self.sockets.get(&id)?;
        let h = s.handle.filter(|_| s.proto == Proto::Udp)?;
        self.iface.udp_recv_buf(h).ok()
    }
}
