//! `slimtcp-perf`: an iperf-like tool that accepts the paper's `eqds-tcp-perf` command line.
//!
//! - [`cli`]: the command line as typed; [`config`]: the validated run.
//! - [`workload`]: sender and receiver, written once against `SocketApi`.
//! - [`host`]: SlimTCP's host runtime on memwire, TAP or DPDK; [`kernel`]: Linux sockets
//!   behind the same trait.
//! - [`meter`]: goodput and the once-a-second lines; [`report`]: the summary and its JSON.

pub mod cli;
pub mod config;
pub mod core_link;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod host;
pub mod kernel;
pub mod meter;
pub mod report;
pub mod run;
pub mod workload;
