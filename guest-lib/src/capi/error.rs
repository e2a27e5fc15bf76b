//! Why a C entry point failed, and the negative errno it returns for it.

use std::ffi::c_int;

use slimtcp_api::SocketError;

use crate::GuestError;

/// Why a `slim_*` call failed. [`CapiError::errno`] is what the call returns (negated);
/// `slim_last_error` shows the message.
#[derive(Debug, thiserror::Error)]
pub enum CapiError {
    /// A pointer argument that must not be NULL was NULL.
    #[error("argument `{0}` is NULL")]
    Null(&'static str),
    /// A string argument is not UTF-8.
    #[error("argument `{0}` is not valid UTF-8")]
    NotUtf8(&'static str),
    /// An integer argument is out of range or an unknown constant.
    #[error("argument `{arg}` = {value} is not valid: {expected}")]
    BadArgument {
        /// The argument.
        arg: &'static str,
        /// Its value.
        value: i64,
        /// What is accepted.
        expected: &'static str,
    },
    /// An address is not `AF_INET`.
    #[error("address family {0} is not AF_INET")]
    AddressFamily(i32),
    /// `socket()` was asked for a protocol the library does not have.
    #[error("socket type {kind} with protocol {protocol} is not supported (SOCK_STREAM or SOCK_DGRAM)")]
    SocketType {
        /// The type argument (flags removed).
        kind: i32,
        /// The protocol argument.
        protocol: i32,
    },
    /// A transmit buffer handle whose buffer was already given to `slim_send_zc`.
    #[error("the transmit buffer was already sent")]
    BufferSent,
    /// The device string does not parse.
    #[error("bad device string: {0}")]
    Device(String),
    /// The configuration is out of range.
    #[error("bad slim_config")]
    Config(#[source] GuestError),
    /// Attaching to the device failed.
    #[error("cannot open device {device}")]
    Open {
        /// The device string.
        device: String,
        /// Why.
        #[source]
        source: GuestError,
    },
    /// Taking a queue pair of an open device failed.
    #[error("cannot take queue pair {pair}")]
    Take {
        /// The pair.
        pair: usize,
        /// Why.
        #[source]
        source: GuestError,
    },
    /// A socket-API call failed.
    #[error("{call} failed")]
    Socket {
        /// The socket-API operation.
        call: &'static str,
        /// Why.
        #[source]
        source: SocketError,
    },
    /// The library panicked (a bug); the context may be inconsistent: close it.
    #[error("internal error (panic): {0}")]
    Panic(String),
}

impl CapiError {
    /// The positive errno value for this error.
    pub fn errno(&self) -> c_int {
        match self {
            CapiError::Null(_)
            | CapiError::NotUtf8(_)
            | CapiError::BadArgument { .. }
            | CapiError::BufferSent
            | CapiError::Device(_)
            | CapiError::Config(_) => libc::EINVAL,
            CapiError::AddressFamily(_) => libc::EAFNOSUPPORT,
            CapiError::SocketType { .. } => libc::EPROTONOSUPPORT,
            CapiError::Open { source, .. } | CapiError::Take { source, .. } => guest_errno(source),
            CapiError::Socket { source, .. } => source.errno(),
            CapiError::Panic(_) => libc::EIO,
        }
    }

    /// A socket-API error of `call`, as a closure for `map_err`.
    pub(crate) fn socket(call: &'static str) -> impl FnOnce(SocketError) -> CapiError {
        move |source| CapiError::Socket { call, source }
    }
}

/// The errno for a set-up failure: the operating system's where one is underneath.
fn guest_errno(e: &GuestError) -> c_int {
    use vhost::vhost_user::Error as Vu;
    let io = |e: &std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    match e {
        GuestError::VhostUser { source: vhost::Error::VhostUserProtocol(vu), .. } => match vu {
            Vu::SocketConnect(e) | Vu::SocketError(e) | Vu::SocketBroken(e) | Vu::SocketRetry(e) => io(e),
            Vu::Disconnected => libc::ECONNRESET,
            _ => libc::EPROTO,
        },
        GuestError::VhostUser { source: vhost::Error::IOError(e), .. } => io(e),
        GuestError::VhostUser { .. } | GuestError::Refused { .. } | GuestError::Protocol(_) => libc::EPROTO,
        GuestError::MissingFeatures { .. } => libc::EOPNOTSUPP,
        GuestError::TooManyQueuePairs { .. } | GuestError::NoSuchQueuePair(_) | GuestError::Config(_) => {
            libc::EINVAL
        }
        GuestError::Memory(e) | GuestError::Notify(e) => io(e),
        GuestError::Ring(_) => libc::EIO,
        GuestError::Disconnected => libc::ECONNRESET,
        GuestError::HelloTimeout | GuestError::NoAnswer { .. } => libc::ETIMEDOUT,
        GuestError::VersionRefused { .. } => libc::EPROTONOSUPPORT,
        GuestError::Pci(e) => e.errno(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_errors_keep_their_errno() {
        let e = CapiError::socket("connect")(SocketError::Connection(slimtcp_api::ConnError::Refused));
        assert_eq!(e.errno(), libc::ECONNREFUSED);
        assert_eq!(e.to_string(), "connect failed");
    }

    #[test]
    fn a_missing_backend_socket_is_enoent() {
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let source = GuestError::VhostUser {
            step: "connect",
            source: vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketConnect(io)),
        };
        let e = CapiError::Open { device: "vhost-user:/nowhere".into(), source };
        assert_eq!(e.errno(), libc::ENOENT);
    }
}
