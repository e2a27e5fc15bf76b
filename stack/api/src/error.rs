//! Errno-like socket errors with names, shared by every provider of the socket API.

/// Why a connection failed; the application sees it as an errno-like error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ConnError {
    /// The peer answered our SYN with a RST (ECONNREFUSED).
    #[error("connection refused")]
    Refused,
    /// The peer reset an established connection (ECONNRESET).
    #[error("connection reset by peer")]
    Reset,
    /// Retransmissions went unanswered past the retry limit (ETIMEDOUT).
    #[error("connection timed out")]
    TimedOut,
    /// The next hop's link-layer address could not be resolved (EHOSTUNREACH).
    #[error("no route to host")]
    Unreachable,
    /// The connection was aborted locally (ECONNABORTED).
    #[error("connection aborted")]
    Aborted,
}

/// Why a socket operation failed. Each variant maps to the POSIX errno an application expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum SocketError {
    /// EBADF: the handle is not (or no longer) a socket of this stack.
    #[error("bad socket handle")]
    BadHandle,
    /// EOPNOTSUPP: the operation does not apply to this kind of socket.
    #[error("operation not supported on this socket")]
    NotSupported,
    /// EAGAIN: nothing to read, no room to write, nothing to accept, right now.
    #[error("operation would block")]
    WouldBlock,
    /// EADDRINUSE: the port is taken.
    #[error("address already in use")]
    AddrInUse,
    /// EADDRNOTAVAIL: no ephemeral port left, or not our address.
    #[error("address not available")]
    AddrNotAvailable,
    /// ENOTCONN: the socket is not connected.
    #[error("socket not connected")]
    NotConnected,
    /// EPIPE: the sending side was shut down.
    #[error("broken pipe")]
    BrokenPipe,
    /// ENETUNREACH: no route to the destination.
    #[error("network unreachable")]
    NetUnreachable,
    /// EMSGSIZE: a datagram larger than the MTU allows.
    #[error("message too long")]
    MessageTooLong,
    /// EMFILE: the socket table is full.
    #[error("too many sockets")]
    TooManySockets,
    /// EINVAL: an argument is out of range.
    #[error("invalid argument")]
    InvalidInput,
    /// EINPROGRESS: a non-blocking connect started; completion shows as writability.
    #[error("operation now in progress")]
    InProgress,
    /// EALREADY: a connect is already in progress on this socket.
    #[error("operation already in progress")]
    Already,
    /// EISCONN: the socket is already connected (or listening).
    #[error("socket is already connected")]
    IsConnected,
    /// ENOBUFS: no transmit buffer or queue room left.
    #[error("no buffer space available")]
    NoBuffers,
    /// ENETDOWN: the stack's worker stopped (it exited or failed); nothing will progress.
    #[error("the network stack is down")]
    StackDown,
    /// EEXIST: already registered.
    #[error("already registered")]
    Exists,
    /// ENOENT: not registered.
    #[error("not registered")]
    NotRegistered,
    /// ECONNREFUSED, ECONNRESET, ETIMEDOUT, EHOSTUNREACH, ECONNABORTED.
    #[error(transparent)]
    Connection(#[from] ConnError),
}

impl SocketError {
    /// The Linux errno value.
    pub fn errno(self) -> i32 {
        match self {
            SocketError::BadHandle => libc::EBADF,
            SocketError::NotSupported => libc::EOPNOTSUPP,
            SocketError::WouldBlock => libc::EAGAIN,
            SocketError::AddrInUse => libc::EADDRINUSE,
            SocketError::AddrNotAvailable => libc::EADDRNOTAVAIL,
            SocketError::NotConnected => libc::ENOTCONN,
            SocketError::BrokenPipe => libc::EPIPE,
            SocketError::NetUnreachable => libc::ENETUNREACH,
            SocketError::MessageTooLong => libc::EMSGSIZE,
            SocketError::TooManySockets => libc::EMFILE,
            SocketError::InvalidInput => libc::EINVAL,
            SocketError::InProgress => libc::EINPROGRESS,
            SocketError::Already => libc::EALREADY,
            SocketError::IsConnected => libc::EISCONN,
            SocketError::NoBuffers => libc::ENOBUFS,
            SocketError::StackDown => libc::ENETDOWN,
            SocketError::Exists => libc::EEXIST,
            SocketError::NotRegistered => libc::ENOENT,
            SocketError::Connection(c) => match c {
                ConnError::Refused => libc::ECONNREFUSED,
                ConnError::Reset => libc::ECONNRESET,
                ConnError::TimedOut => libc::ETIMEDOUT,
                ConnError::Unreachable => libc::EHOSTUNREACH,
                ConnError::Aborted => libc::ECONNABORTED,
            },
        }
    }

    /// The errno's symbolic name ("ECONNREFUSED").
    pub fn name(self) -> &'static str {
        match self {
            SocketError::BadHandle => "EBADF",
            SocketError::NotSupported => "EOPNOTSUPP",
            SocketError::WouldBlock => "EAGAIN",
            SocketError::AddrInUse => "EADDRINUSE",
            SocketError::AddrNotAvailable => "EADDRNOTAVAIL",
            SocketError::NotConnected => "ENOTCONN",
            SocketError::BrokenPipe => "EPIPE",
            SocketError::NetUnreachable => "ENETUNREACH",
            SocketError::MessageTooLong => "EMSGSIZE",
            SocketError::TooManySockets => "EMFILE",
            SocketError::InvalidInput => "EINVAL",
            SocketError::InProgress => "EINPROGRESS",
            SocketError::Already => "EALREADY",
            SocketError::IsConnected => "EISCONN",
            SocketError::NoBuffers => "ENOBUFS",
            SocketError::StackDown => "ENETDOWN",
            SocketError::Exists => "EEXIST",
            SocketError::NotRegistered => "ENOENT",
            SocketError::Connection(c) => match c {
                ConnError::Refused => "ECONNREFUSED",
                ConnError::Reset => "ECONNRESET",
                ConnError::TimedOut => "ETIMEDOUT",
                ConnError::Unreachable => "EHOSTUNREACH",
                ConnError::Aborted => "ECONNABORTED",
            },
        }
    }
}
