//! `slimtcp-vm-guest`: the guest application of the real-VM tier. It runs inside a QEMU guest,
//! attaches to the `slimtcp-vhost` device with the guest library (`--device pci`, or any device
//! string), and plays one scenario against a Linux peer on the host, checking every byte:
//!
//! - `echo`: messages to an echo server, each answer compared;
//! - `send`: a pattern stream to a Linux receiver (which reports its SHA-256 to the test);
//! - `recv`: a pattern stream from a Linux sender, its SHA-256 printed and compared here;
//! - `many`: N concurrent connections to an echo server driven by epoll;
//! - `udp`: datagrams to a UDP echo server with send_to / recv_from, addresses checked;
//! - `hostile`: hostile descriptor chains through the real device (see hostile.rs).
//!
//! Every scenario ends with one line `vm-guest: <scenario> ok ...` on stdout, or a line
//! `vm-guest: <scenario> FAILED: <why>` on stderr and exit status 1.

mod bulk;
mod echo;
mod hostile;
mod many;
mod udp;

use std::net::SocketAddrV4;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use slimtcp::api::{Fd, SocketApi, SocketError};
use slimtcp::report::error_chain;
use slimtcp_guest::{DeviceSpec, GuestConfig, GuestDevice, GuestError, GuestSockets};

#[derive(Debug, Parser)]
#[command(about = "SlimTCP guest application of the VM test tier")]
struct Args {
    /// The device: pci, pci:DDDD:BB:DD.F or vhost-user:SOCKET.
    #[arg(long, default_value = "pci")]
    device: DeviceSpec,
    /// Bytes of DMA memory (hugepages on pci).
    #[arg(long, default_value_t = 32 << 20)]
    memory: usize,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Messages to an echo server, each answer compared.
    Echo {
        /// The echo server.
        #[arg(long)]
        server: SocketAddrV4,
        /// Messages.
        #[arg(long, default_value_t = 100)]
        count: usize,
        /// Bytes per message.
        #[arg(long, default_value_t = 64)]
        size: usize,
    },
    /// A pattern stream (seed `--seed`) of `--bytes` to a Linux receiver.
    Send {
        /// The receiver.
        #[arg(long)]
        server: SocketAddrV4,
        /// Bytes to send.
        #[arg(long)]
        bytes: u64,
        /// Pattern seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Send with the zero-copy API (alloc_tx / send_zc).
        #[arg(long)]
        zero_copy: bool,
    },
    /// Receives a stream from a Linux sender until its end; checks it is pattern `--seed`.
    Recv {
        /// The sender.
        #[arg(long)]
        server: SocketAddrV4,
        /// Bytes expected.
        #[arg(long)]
        bytes: u64,
        /// Pattern seed.
        #[arg(long, default_value_t = 2)]
        seed: u64,
    },
    /// Concurrent connections to an echo server, driven by epoll.
    Many {
        /// The echo server.
        #[arg(long)]
        server: SocketAddrV4,
        /// Connections.
        #[arg(long, default_value_t = 256)]
        connections: usize,
        /// Bytes each connection sends and gets back.
        #[arg(long, default_value_t = 4096)]
        size: usize,
    },
    /// Datagrams to a UDP echo server.
    Udp {
        /// The echo server.
        #[arg(long)]
        server: SocketAddrV4,
        /// Datagrams.
        #[arg(long, default_value_t = 200)]
        count: usize,
    },
    /// Hostile descriptor chains on queue pair 1, then an echo on pair 0.
    Hostile {
        /// The echo server for the check afterwards.
        #[arg(long)]
        server: SocketAddrV4,
    },
}

/// Why a scenario failed.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Attaching to the device failed.
    #[error("cannot attach to the device")]
    Attach(#[source] GuestError),
    /// A socket call failed.
    #[error("{what} failed ({})", .source.name())]
    Socket {
        /// The call.
        what: &'static str,
        /// Why.
        #[source]
        source: SocketError,
    },
    /// The data or a count was wrong.
    #[error("{0}")]
    Check(String),
}

/// Maps a socket error to [`AppError::Socket`] naming the call.
pub fn sock(what: &'static str) -> impl FnOnce(SocketError) -> AppError {
    move |source| AppError::Socket { what, source }
}

/// Opens the device with `pairs` queue pairs.
pub fn open(device: &DeviceSpec, memory: usize, pairs: usize) -> Result<GuestDevice, AppError> {
    let cfg = GuestConfig { memory_size: memory, queue_pairs: pairs, ..GuestConfig::default() };
    GuestDevice::open(device, cfg).map_err(AppError::Attach)
}

/// The socket API on queue pair 0.
pub fn api(device: &DeviceSpec, memory: usize) -> Result<GuestSockets, AppError> {
    open(device, memory, 1)?.take(0).map_err(AppError::Attach)
}

/// Sends all of `data`.
pub fn send_all<A: SocketApi>(api: &mut A, fd: Fd, mut data: &[u8]) -> Result<(), AppError> {
    while !data.is_empty() {
        let n = api.send(fd, data).map_err(sock("send"))?;
        data = &data[n..];
    }
    Ok(())
}

/// Fills `buf` completely.
pub fn recv_exact<A: SocketApi>(api: &mut A, fd: Fd, buf: &mut [u8]) -> Result<(), AppError> {
    let mut got = 0;
    while got < buf.len() {
        let n = api.recv(fd, &mut buf[got..]).map_err(sock("recv"))?;
        if n == 0 {
            return Err(AppError::Check(format!("end of stream after {got} of {} bytes", buf.len())));
        }
        got += n;
    }
    Ok(())
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args = Args::parse();
    let (name, result) = match args.scenario {
        Scenario::Echo { server, count, size } => {
            ("echo", echo::run(&args.device, args.memory, server, count, size))
        }
        Scenario::Send { server, bytes, seed, zero_copy } => {
            ("send", bulk::send(&args.device, args.memory, server, bytes, seed, zero_copy))
        }
        Scenario::Recv { server, bytes, seed } => {
            ("recv", bulk::recv(&args.device, args.memory, server, bytes, seed))
        }
        Scenario::Many { server, connections, size } => {
            ("many", many::run(&args.device, args.memory, server, connections, size))
        }
        Scenario::Udp { server, count } => ("udp", udp::run(&args.device, args.memory, server, count)),
        Scenario::Hostile { server } => ("hostile", hostile::run(&args.device, args.memory, server)),
    };
    match result {
        Ok(summary) => {
            println!("vm-guest: {name} ok {summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vm-guest: {name} FAILED: {}", error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
