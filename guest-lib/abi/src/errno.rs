//! Linux errno values carried in completions and error events.

macro_rules! errnos {
    ($($(#[$m:meta])* $name:ident = $val:literal,)*) => {
        /// The errors of the protocol, as Linux (x86-64 and aarch64) errno values. The set covers
        /// every `slimtcp_api::SocketError` plus the protocol's own (EPROTO, EPROTONOSUPPORT,
        /// ENOPROTOOPT, ENOBUFS, EFAULT, EISCONN, EALREADY, EAFNOSUPPORT). The backend maps a
        /// `SocketError` with `Errno::from_errno(e.errno())`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u16)]
        pub enum Errno {
            $($(#[$m])* $name = $val,)*
        }

        impl Errno {
            /// Every value, in errno order.
            pub const ALL: &'static [Errno] = &[$(Errno::$name,)*];

            /// The errno value, as `errno` and `libc::E*` spell it.
            pub fn errno(self) -> i32 {
                self as i32
            }

            /// The symbolic name, e.g. `"ECONNREFUSED"`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Errno::$name => stringify!($name),)*
                }
            }

            /// The variant for an errno value, `None` for 0 and for values outside the protocol.
            pub fn from_errno(value: i32) -> Option<Errno> {
                match value {
                    $($val => Some(Errno::$name),)*
                    _ => None,
                }
            }
        }
    };
}

errnos! {
    /// Operation not permitted (e.g. an op before hello on this queue pair).
    EPERM = 1,
    /// Not a socket of this guest on this queue pair, or already closed.
    EBADF = 9,
    /// Try again: no room right now (send window, accept queue).
    EAGAIN = 11,
    /// A descriptor points outside guest memory or has the wrong direction.
    EFAULT = 14,
    /// An argument is out of range, or the request is malformed.
    EINVAL = 22,
    /// The socket table (max_sockets) is full.
    EMFILE = 24,
    /// The sending side was shut down.
    EPIPE = 32,
    /// Not a SlimTCP request (bad magic) or an unusable frame.
    EPROTO = 71,
    /// Datagram larger than max_datagram, or a send larger than max_send_in_flight.
    EMSGSIZE = 90,
    /// Unknown socket option.
    ENOPROTOOPT = 92,
    /// The hello's major version is not supported.
    EPROTONOSUPPORT = 93,
    /// Unknown op, or an op that does not apply to this kind of socket.
    EOPNOTSUPP = 95,
    /// Address family not supported.
    EAFNOSUPPORT = 97,
    /// The port is taken.
    EADDRINUSE = 98,
    /// No ephemeral port left, or not our address.
    EADDRNOTAVAIL = 99,
    /// No route to the destination.
    ENETUNREACH = 101,
    /// The connection was aborted locally.
    ECONNABORTED = 103,
    /// The peer reset the connection.
    ECONNRESET = 104,
    /// Too many requests outstanding on this queue pair (max_requests).
    ENOBUFS = 105,
    /// Already connected.
    EISCONN = 106,
    /// Not connected.
    ENOTCONN = 107,
    /// Retransmissions or the handshake went unanswered.
    ETIMEDOUT = 110,
    /// The peer refused the connection.
    ECONNREFUSED = 111,
    /// The next hop could not be resolved.
    EHOSTUNREACH = 113,
    /// A connect is already in progress.
    EALREADY = 114,
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.errno())
    }
}
