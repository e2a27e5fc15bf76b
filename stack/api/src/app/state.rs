//! The application side's view of one socket: a mirror of what the link reported (received
//! buffers, end of stream, errors, send credit). Readiness for epoll and blocking calls is
//! computed here, without asking the provider.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use super::send_budget::{BudgetMark, SendBudget};
use crate::{EpollFd, Fd, Proto, Ready, SocketError};

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

/// One socket of the application side.
#[derive(Debug)]
pub struct SockEntry<R> {
    /// TCP or UDP.
    pub proto: Proto,
    /// `O_NONBLOCK`.
    pub nonblocking: bool,
    /// Where it is in its life.
    pub phase: Phase,
    /// Bound to a local address.
    pub bound: bool,
    /// Our address, once known.
    pub local: Option<SocketAddrV4>,
    /// The peer (or a UDP socket's default destination).
    pub peer: Option<SocketAddrV4>,
    /// A listener has a connection waiting on the link (as last reported).
    pub acceptable: bool,
    /// Connections the link pushed, not yet handed out (listeners).
    pub accept_q: VecDeque<(Fd, SocketAddrV4)>,
    /// Received stream payload.
    pub rxq: VecDeque<R>,
    /// The peer closed its side.
    pub eof: bool,
    /// Shut for reading.
    pub rd_shut: bool,
    /// Shut for writing.
    pub wr_shut: bool,
    /// `SO_ERROR`: reported once.
    pub pending_error: Option<SocketError>,
    /// The connection's failure: every later operation reports it.
    pub failure: Option<SocketError>,
    /// Stream bytes handed to the link and not yet acknowledged.
    pub in_flight: usize,
    /// The limit of `in_flight` (`SO_SNDBUF`).
    pub sndbuf: usize,
    /// Its place in the application's shared send budget (`in_flight` is charged to it).
    pub budget: BudgetMark,
    /// Received datagrams and their sources.
    pub datagrams: VecDeque<(SocketAddrV4, R)>,
    /// Datagrams dropped because the queue was full.
    pub datagrams_dropped: u64,
    /// The readiness sets this socket is registered in.
    pub epolls: Vec<EpollFd>,
    /// A non-blocking send found the link's request ring full (`EAGAIN`): not writable until
    /// the link moves, so that epoll's `EPOLLOUT` means a send can go.
    pub no_link_room: bool,
}

impl<R> SockEntry<R> {
    /// A fresh socket with a send buffer of `sndbuf` bytes.
    pub fn new(proto: Proto, sndbuf: usize) -> Self {
        SockEntry {
            proto,
            nonblocking: false,
            phase: Phase::Fresh,
            bound: false,
            local: None,
            peer: None,
            acceptable: false,
            accept_q: VecDeque::new(),
            rxq: VecDeque::new(),
            eof: false,
            rd_shut: false,
            wr_shut: false,
            pending_error: None,
            failure: None,
            in_flight: 0,
            sndbuf,
            budget: BudgetMark::default(),
            datagrams: VecDeque::new(),
            datagrams_dropped: 0,
            epolls: Vec::new(),
            no_link_room: false,
        }
    }

    /// Send bytes its own buffer has room for (`SO_SNDBUF` less what is in flight).
    pub fn send_room(&self) -> usize {
        self.sndbuf.saturating_sub(self.in_flight)
    }

    /// Send bytes that may be handed to the link now: its own room, within the shared budget.
    pub fn send_room_within(&self, budget: &SendBudget) -> usize {
        self.send_room().min(budget.room(self.budget))
    }

    /// A socket that would be writable on its own but that the shared budget keeps from
    /// sending (it must then wait for its turn, to be woken).
    pub fn held_by_budget(&self, budget: &SendBudget) -> bool {
        self.writable_with(self.send_room()) && !self.writable(budget)
    }

    /// A read would not block.
    pub fn readable(&self) -> bool {
        match self.proto {
            Proto::Udp => !self.datagrams.is_empty(),
            Proto::Tcp => match self.phase {
                Phase::Listening => self.acceptable || !self.accept_q.is_empty(),
                Phase::Connected => {
                    !self.rxq.is_empty() || self.eof || self.rd_shut || self.failure.is_some()
                }
                Phase::Failed => true,
                _ => false,
            },
        }
    }

    /// A write would not block.
    pub fn writable(&self, budget: &SendBudget) -> bool {
        self.writable_with(self.send_room_within(budget))
    }

    /// A write would not block if a stream had `room` bytes to send.
    fn writable_with(&self, room: usize) -> bool {
        match self.proto {
            Proto::Udp => !self.no_link_room,
            Proto::Tcp => match self.phase {
                Phase::Connected => {
                    (room > 0 && !self.no_link_room) || self.wr_shut || self.failure.is_some()
                }
                Phase::Failed => true,
                _ => false,
            },
        }
    }

    /// Readiness as epoll reports it (Linux's rules for TCP).
    pub fn readiness(&self, budget: &SendBudget) -> Ready {
        let mut r = Ready::empty();
        if self.readable() {
            r |= Ready::IN;
        }
        if self.writable(budget) {
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
