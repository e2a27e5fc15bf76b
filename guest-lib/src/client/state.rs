//! The library's view of one socket, and readiness computed from it (the same rules as the
//! host runtime's, so epoll and blocking calls behave identically on both).

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::api::{EpollFd, Fd, Proto, Ready, SocketError};
use slimtcp_abi::SocketId;

use super::buffers::RxBuf;

/// Datagrams kept per UDP socket; newer ones are dropped beyond it (UDP semantics).
pub const DATAGRAM_QUEUE: usize = 1024;

/// Where a socket is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Created (and perhaps bound).
    Fresh,
    /// A TCP listener.
    Listening,
    /// A TCP connect is in progress.
    Connecting,
    /// A TCP connection (it may since have failed or closed; see the fields).
    Connected,
    /// A TCP connect failed.
    Failed,
}

/// One socket.
#[derive(Debug)]
pub struct SockEntry {
    pub sid: SocketId,
    pub proto: Proto,
    pub nonblocking: bool,
    pub phase: Phase,
    pub bound: bool,
    pub local: Option<SocketAddrV4>,
    pub peer: Option<SocketAddrV4>,
    /// Accepted connections not yet handed out (listeners).
    pub accept_q: VecDeque<(Fd, SocketAddrV4)>,
    pub rxq: VecDeque<RxBuf>,
    pub eof: bool,
    pub rd_shut: bool,
    pub wr_shut: bool,
    /// `SO_ERROR`: reported once.
    pub pending_error: Option<SocketError>,
    /// The connection's failure: every later operation reports it.
    pub failure: Option<SocketError>,
    /// Send payload bytes whose chains the device holds.
    pub in_flight: usize,
    /// The limit of `in_flight` (SO_SNDBUF, at most the backend's `max_send_in_flight`).
    pub sndbuf: usize,
    /// The receive window (SO_RCVBUF): credit is returned in batches of a quarter of it.
    pub rcvbuf: usize,
    /// Consumed received bytes not yet credited back.
    pub credit_pending: u32,
    pub datagrams: VecDeque<(SocketAddrV4, RxBuf)>,
    pub datagrams_dropped: u64,
    pub epolls: Vec<EpollFd>,
}

impl SockEntry {
    pub fn new(sid: SocketId, proto: Proto, sndbuf: usize, rcvbuf: usize) -> Self {
        SockEntry {
            sid,
            proto,
            nonblocking: false,
            phase: Phase::Fresh,
            bound: false,
            local: None,
            peer: None,
            accept_q: VecDeque::new(),
            rxq: VecDeque::new(),
            eof: false,
            rd_shut: false,
            wr_shut: false,
            pending_error: None,
            failure: None,
            in_flight: 0,
            sndbuf,
            rcvbuf,
            credit_pending: 0,
            datagrams: VecDeque::new(),
            datagrams_dropped: 0,
            epolls: Vec::new(),
        }
    }

    /// Send bytes that may be put in flight now.
    pub fn send_room(&self) -> usize {
        self.sndbuf.saturating_sub(self.in_flight)
    }

    /// A read would not block.
    pub fn readable(&self) -> bool {
        match self.proto {
            Proto::Udp => !self.datagrams.is_empty(),
            Proto::Tcp => match self.phase {
                Phase::Listening => !self.accept_q.is_empty(),
                Phase::Connected => {
                    !self.rxq.is_empty() || self.eof || self.rd_shut || self.failure.is_some()
                }
                Phase::Failed => true,
                _ => false,
            },
        }
    }

    /// A write would not block.
    pub fn writable(&self) -> bool {
        match self.proto {
            Proto::Udp => true,
            Proto::Tcp => match self.phase {
                Phase::Connected => self.send_room() > 0 || self.wr_shut || self.failure.is_some(),
                Phase::Failed => true,
                _ => false,
            },
        }
    }

    /// Readiness as epoll reports it (Linux's rules for TCP).
    pub fn readiness(&self) -> Ready {
        let mut r = Ready::empty();
        if self.readable() {
            r |= Ready::IN;
        }
        if self.writable() {
            r |= Ready::OUT;
        }
        if self.proto == Proto::Tcp {
            if self.eof || self.rd_shut {
                r |= Ready::RDHUP;
            }
            if self.pending_error.is_some() || self.phase == Phase::Failed {
                r |= Ready::ERR;
            }
            if self.failure.is_some() || (self.eof && self.wr_shut) {
                r |= Ready::HUP;
            }
        }
        r
    }

    /// The address `getsockname` reports.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
    }
}
