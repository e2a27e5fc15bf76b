//! The application side's view of one socket: options before it exists on the worker, then a
//! mirror of what the worker reported (received buffers, end of stream, errors, send credit).
//! Readiness for epoll and blocking calls is computed here, without asking the worker.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use super::buffers::RxBuf;
use crate::api::{EpollFd, Proto, Ready, SocketError};
use crate::tcp::TcpConfig;

/// Datagrams kept per UDP socket; newer ones are dropped beyond it (UDP semantics).
pub const DATAGRAM_QUEUE: usize = 1024;

/// Where a socket is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Created; options may change. A UDP socket stays here until bound.
    Fresh,
    /// A UDP socket bound on the worker.
    Bound,
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
pub struct SockEntry {
    pub proto: Proto,
    pub nonblocking: bool,
    pub config: TcpConfig,
    pub window_scale_explicit: bool,
    pub bound_port: Option<u16>,
    pub local: Option<SocketAddrV4>,
    pub peer: Option<SocketAddrV4>,
    pub phase: Phase,
    /// A listener has a connection waiting (as last reported).
    pub acceptable: bool,
    pub rxq: VecDeque<RxBuf>,
    pub eof: bool,
    pub rd_shut: bool,
    pub wr_shut: bool,
    /// `SO_ERROR`: reported once.
    pub pending_error: Option<SocketError>,
    /// The connection's failure: every later operation reports it.
    pub failure: Option<SocketError>,
    /// Send-buffer bytes we may still hand to the worker.
    pub credit: usize,
    pub datagrams: VecDeque<(SocketAddrV4, RxBuf)>,
    pub datagrams_dropped: u64,
    pub epolls: Vec<EpollFd>,
}

impl SockEntry {
    pub fn new(proto: Proto, config: TcpConfig) -> Self {
        SockEntry {
            proto,
            nonblocking: false,
            config,
            window_scale_explicit: false,
            bound_port: None,
            local: None,
            peer: None,
            phase: Phase::Fresh,
            acceptable: false,
            rxq: VecDeque::new(),
            eof: false,
            rd_shut: false,
            wr_shut: false,
            pending_error: None,
            failure: None,
            credit: 0,
            datagrams: VecDeque::new(),
            datagrams_dropped: 0,
            epolls: Vec::new(),
        }
    }

    /// True when the socket exists on the worker.
    pub fn on_worker(&self) -> bool {
        self.phase != Phase::Fresh
    }

    /// A read would not block.
    pub fn readable(&self) -> bool {
        match self.proto {
            Proto::Udp => !self.datagrams.is_empty(),
            Proto::Tcp => match self.phase {
                Phase::Listening => self.acceptable,
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
                Phase::Connected => self.credit > 0 || self.wr_shut || self.failure.is_some(),
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
        self.local.unwrap_or_else(|| SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, self.bound_port.unwrap_or(0)))
    }
}
