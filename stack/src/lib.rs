//! SlimTCP: a deliberately minimal user-space TCP/IP stack for reliable, ordered data-center links.
//!
//! Layers, bottom up: [`wire`] (zero-copy packet views and `Repr` parse/emit), [`nic`] (the batched
//! device interface and software NICs), [`tcp`] and [`udp`] (sans-IO protocol state), [`iface`]
//! (the worker: rx burst, demux, one ACK per socket per burst, timers, tx burst), [`api`]
//! (sockets for applications) and [`runtime`] (the host runtime: the socket API over a worker);
//! [`cpu`] and [`report`] are small helpers for the runtimes and binaries. See
//! `docs/architecture.md`.

pub mod api;
pub mod cpu;
pub mod iface;
pub mod nic;
pub mod report;
pub mod runtime;
pub mod rx_memory;
pub mod sim;
pub mod tcp;
pub mod time;
pub mod udp;
pub mod wire;
