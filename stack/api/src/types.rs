//! The values the socket API speaks in: descriptors, protocols, options, readiness.

use std::fmt;

use super::SocketError;

/// A socket of the API, like a file descriptor. Numbers are not reused while the API lives,
/// so a stale descriptor is always `EBADF`, never someone else's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fd(pub u32);

impl fmt::Display for Fd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fd {}", self.0)
    }
}

/// An epoll-like readiness set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpollFd(pub u32);

/// Transport protocol of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// A TCP stream.
    Tcp,
    /// UDP datagrams.
    Udp,
}

/// Which directions `shutdown` closes (`SHUT_RD`, `SHUT_WR`, `SHUT_RDWR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// No more reads: queued and later data is discarded, reads return end of stream.
    Read,
    /// No more writes: a FIN follows the queued data.
    Write,
    /// Both.
    Both,
}

/// A socket option and its value (`setsockopt` takes one, `getsockopt` returns one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockOpt {
    /// `SO_RCVBUF`: receive buffer bytes (the largest window); before listen/connect.
    RecvBuffer(usize),
    /// `SO_SNDBUF`: send buffer bytes (queued + unacknowledged); before listen/connect.
    SendBuffer(usize),
    /// `TCP_MAXSEG`: the MSS to advertise and the largest segment to send; before connect.
    Mss(u16),
    /// Window-scale shift to offer (RFC 7323), `None` to offer none; before listen/connect.
    WindowScale(Option<u8>),
    /// `TCP_NODELAY`: SlimTCP never delays small segments, so only `true` is accepted.
    NoDelay(bool),
    /// Frames per receive/transmit burst of the worker (read-only: it is the interface's).
    Burst(usize),
    /// `O_NONBLOCK`: operations return `EAGAIN`/`EINPROGRESS` instead of waiting.
    NonBlocking(bool),
    /// `SO_ERROR`: the pending error, cleared by reading it (read-only).
    Error(Option<SocketError>),
    /// `SO_KEEPALIVE`: probe the peer of an idle connection (`KeepIdle`, `KeepInterval`,
    /// `KeepCount`); unanswered probes end it with `ETIMEDOUT`. Off by default.
    KeepAlive(bool),
    /// `TCP_KEEPIDLE`: seconds of silence before the first probe (1..=32767, default 7200).
    KeepIdle(u32),
    /// `TCP_KEEPINTVL`: seconds between probes (1..=32767, default 75).
    KeepInterval(u32),
    /// `TCP_KEEPCNT`: unanswered probes before the connection ends (1..=127, default 9).
    KeepCount(u32),
    /// `TCP_USER_TIMEOUT`: milliseconds sent data may stay unacknowledged (zero-window peers
    /// included) before the connection ends with `ETIMEDOUT`; 0: off (the default).
    UserTimeout(u32),
}

/// The name of a [`SockOpt`], for `getsockopt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockOptName {
    /// See [`SockOpt::RecvBuffer`].
    RecvBuffer,
    /// See [`SockOpt::SendBuffer`].
    SendBuffer,
    /// See [`SockOpt::Mss`].
    Mss,
    /// See [`SockOpt::WindowScale`].
    WindowScale,
    /// See [`SockOpt::NoDelay`].
    NoDelay,
    /// See [`SockOpt::Burst`].
    Burst,
    /// See [`SockOpt::NonBlocking`].
    NonBlocking,
    /// See [`SockOpt::Error`].
    Error,
    /// See [`SockOpt::KeepAlive`].
    KeepAlive,
    /// See [`SockOpt::KeepIdle`].
    KeepIdle,
    /// See [`SockOpt::KeepInterval`].
    KeepInterval,
    /// See [`SockOpt::KeepCount`].
    KeepCount,
    /// See [`SockOpt::UserTimeout`].
    UserTimeout,
}

/// Readiness and registration flags, with Linux's `EPOLL*` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Ready(pub u32);

impl Ready {
    /// `EPOLLIN`: data, end of stream, or a connection to accept.
    pub const IN: Ready = Ready(0x001);
    /// `EPOLLOUT`: room to send (or a non-blocking connect finished).
    pub const OUT: Ready = Ready(0x004);
    /// `EPOLLERR`: an error is pending (always reported).
    pub const ERR: Ready = Ready(0x008);
    /// `EPOLLHUP`: both directions are closed (always reported).
    pub const HUP: Ready = Ready(0x010);
    /// `EPOLLRDHUP`: the peer closed its sending side.
    pub const RDHUP: Ready = Ready(0x2000);
    /// `EPOLLONESHOT`: report once, then disarm until `Modify`.
    pub const ONESHOT: Ready = Ready(1 << 30);
    /// `EPOLLET`: edge-triggered (report changes, not states).
    pub const ET: Ready = Ready(1 << 31);

    /// No flags.
    pub const fn empty() -> Ready {
        Ready(0)
    }

    /// True when every flag of `other` is set.
    pub fn contains(self, other: Ready) -> bool {
        self.0 & other.0 == other.0
    }

    /// True when any flag of `other` is set.
    pub fn intersects(self, other: Ready) -> bool {
        self.0 & other.0 != 0
    }

    /// True when no flag is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Every readiness kind: a change that may concern any of them.
    pub const fn all_kinds() -> Ready {
        Ready(Self::IN.0 | Self::OUT.0 | Self::ERR.0 | Self::HUP.0 | Self::RDHUP.0)
    }

    /// The readiness bits only (without `ET`/`ONESHOT`).
    pub fn readiness(self) -> Ready {
        Ready(self.0 & !(Self::ET.0 | Self::ONESHOT.0))
    }
}

impl std::ops::BitOr for Ready {
    type Output = Ready;
    fn bitor(self, rhs: Ready) -> Ready {
        Ready(self.0 | rhs.0)
    }
}

impl std::ops::BitAnd for Ready {
    type Output = Ready;
    fn bitand(self, rhs: Ready) -> Ready {
        Ready(self.0 & rhs.0)
    }
}

impl std::ops::BitOrAssign for Ready {
    fn bitor_assign(&mut self, rhs: Ready) {
        self.0 |= rhs.0;
    }
}

/// What `epoll_wait` reports and `epoll_ctl` registers: flags plus the caller's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EpollEvent {
    /// Interest (registering) or readiness (reported).
    pub events: Ready,
    /// Returned unchanged with every report (often the descriptor).
    pub data: u64,
}

/// `epoll_ctl` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpollOp {
    /// `EPOLL_CTL_ADD` (`EEXIST` when already registered).
    Add,
    /// `EPOLL_CTL_MOD` (`ENOENT` when not registered).
    Modify,
    /// `EPOLL_CTL_DEL` (`ENOENT` when not registered).
    Delete,
}
