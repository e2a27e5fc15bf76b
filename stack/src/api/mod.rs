//! The socket API for applications. Issue-2 scope: the single-threaded operations live on
//! [`Interface`](crate::iface::Interface) (`tcp_*`, `udp_*`, `ping`); errors are errno-like
//! [`SocketError`]s.

mod error;

pub use error::SocketError;
