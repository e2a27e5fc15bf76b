//! The socket API for applications.
//!
//! - [`SocketApi`]: the contract (POSIX-like control, copy and zero-copy data paths, epoll-like
//!   readiness) that every provider implements: the host runtime here, the guest library in VMs.
//! - [`app`]: the application side shared by every provider: [`AppSockets`](app::AppSockets)
//!   implements [`SocketApi`] once over a narrow [`Link`](app::Link) (socket table,
//!   readiness, credit, receive queues, blocking rules, epoll).
//! - The host runtime ([`crate::runtime`]) is the shared application side over a `HostLink`: one
//!   worker owns the [`Interface`](crate::iface::Interface), its NIC, sockets and timers; the
//!   application talks to it over lock-free SPSC rings, either from another core (two-core mode)
//!   or by stepping the worker itself (single-thread mode).
//! - The single-threaded operations on [`Interface`](crate::iface::Interface) (`tcp_*`,
//!   `udp_*`) stay available for code that owns the loop itself.

pub mod app;
mod epoll;
mod error;
mod socket_api;
mod types;

pub use epoll::EpollSet;
pub use error::SocketError;
pub use socket_api::{SocketApi, ZeroCopyTx};
pub use types::{EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName};
