//! SlimTCP: a deliberately minimal user-space TCP/IP stack for reliable, ordered data-center links.
//!
//! Layers, bottom up: [`wire`] (zero-copy packet views and `Repr` parse/emit), [`nic`] (the batched
//! device interface and software NICs), [`tcp`] and [`udp`] (sans-IO protocol state), [`iface`]
//! (the worker: rx burst, demux, one ACK per socket per burst, timers, tx burst) and [`runtime`]
//! (the host runtime: the socket API over a worker that owns an interface); [`cpu`] is a small
//! helper for the runtimes and binaries. The application contract ([`api`]: `SocketApi`,
//! `AppSockets`, errors, epoll; and [`report`]) is the crate `slimtcp-api`, which the stack builds
//! on and the guest library shares. See `docs/architecture.md`.

/// The application contract (the crate `slimtcp-api`).
pub use slimtcp_api as api;
/// Errors as one line of text (from `slimtcp-api`).
pub use slimtcp_api::report;

pub mod cpu;
pub mod iface;
pub mod nic;
pub mod runtime;
pub mod rx_memory;
pub mod server;
pub mod sim;
pub mod tcp;
pub mod time;
pub mod udp;
pub mod wire;
