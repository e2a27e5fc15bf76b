//! `slimtcp-api`: the application contract of SlimTCP, shared by every provider of sockets (the
//! host runtime in `slimtcp`, the guest library `slimtcp-guest` in VMs).
//!
//! - [`SocketApi`]: the contract (POSIX-like control, copy and zero-copy data paths, epoll-like
//!   readiness) that every provider implements; [`SocketError`] (and [`ConnError`], why a
//!   connection failed) the errno-like errors it answers with; [`EpollSet`] its readiness sets.
//! - [`app`]: the application side shared by every provider: [`AppSockets`](app::AppSockets)
//!   implements [`SocketApi`] once over a narrow [`Link`](app::Link) (socket table,
//!   readiness, credit, receive queues, blocking rules, epoll).
//! - [`report`]: errors as one line of text, for binaries and C callers.
//!
//! Providers: the host runtime (`slimtcp::runtime`) is the shared application side over a link
//! of SPSC rings to a worker that owns the stack; the guest library's is over virtqueues to
//! `slimtcp-vhost`. This crate knows neither: the stack depends on it, never the reverse.

pub mod app;
mod epoll;
mod error;
pub mod id_map;
pub mod prefetch;
mod release_list;
pub mod report;
mod socket_api;
pub mod spares;
pub mod tx_classes;
mod types;

pub use epoll::EpollSet;
pub use error::{ConnError, SocketError};
pub use release_list::ReleaseList;
pub use socket_api::{SocketApi, ZeroCopyTx};
pub use types::{EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName};
