//! Protocol errno values to the socket API's errors.

use slimtcp_abi::Errno;
use slimtcp_api::{ConnError, SocketError};

/// The [`SocketError`] an application sees for an errno from the backend.
pub fn to_socket_error(e: Errno) -> SocketError {
    match e {
        Errno::EBADF => SocketError::BadHandle,
        Errno::EAGAIN => SocketError::WouldBlock,
        Errno::EPERM | Errno::EFAULT | Errno::EINVAL | Errno::ENOPROTOOPT => SocketError::InvalidInput,
        Errno::EMFILE => SocketError::TooManySockets,
        Errno::EPIPE => SocketError::BrokenPipe,
        Errno::EPROTO => SocketError::StackDown,
        Errno::EMSGSIZE => SocketError::MessageTooLong,
        Errno::EPROTONOSUPPORT | Errno::EOPNOTSUPP | Errno::EAFNOSUPPORT => SocketError::NotSupported,
        Errno::EADDRINUSE => SocketError::AddrInUse,
        Errno::EADDRNOTAVAIL => SocketError::AddrNotAvailable,
        Errno::ENETUNREACH => SocketError::NetUnreachable,
        Errno::ECONNABORTED => SocketError::Connection(ConnError::Aborted),
        Errno::ECONNRESET => SocketError::Connection(ConnError::Reset),
        Errno::ENOBUFS => SocketError::NoBuffers,
        Errno::EISCONN => SocketError::IsConnected,
        Errno::ENOTCONN => SocketError::NotConnected,
        Errno::ETIMEDOUT => SocketError::Connection(ConnError::TimedOut),
        Errno::ECONNREFUSED => SocketError::Connection(ConnError::Refused),
        Errno::EHOSTUNREACH => SocketError::Connection(ConnError::Unreachable),
        Errno::EALREADY => SocketError::Already,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_errno_maps_to_an_error_with_the_same_number_where_the_api_has_one() {
        for &e in Errno::ALL {
            let s = to_socket_error(e);
            let same = matches!(
                e,
                Errno::EPERM
                    | Errno::EFAULT
                    | Errno::ENOPROTOOPT
                    | Errno::EPROTO
                    | Errno::EPROTONOSUPPORT
                    | Errno::EAFNOSUPPORT
            );
            if !same {
                assert_eq!(s.errno(), e.errno(), "{e}");
            }
        }
    }
}
