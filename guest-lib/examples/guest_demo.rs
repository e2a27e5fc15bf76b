//! The demo guest application: an ordinary program written against `SocketApi`, running over
//! slimtcp-guest's vhost-user transport to a `slimtcp-vhost` backend, which carries its sockets
//! to a Linux server (scripts/demo_linux_server.py) over TAP.
//!
//! 1. 64-byte echo round trips: p50/p99 latency.
//! 2. A bulk transfer to the discard port with a live progress line; the server reports the
//!    byte count and SHA-256 it saw, and we compare.
//! 3. A 4 MiB echo transfer verified byte for byte.
//!
//! `guest_demo --socket PATH --server IP [--bulk-mb N] [--round-trips N]`

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use clap::Parser;
use sha2::{Digest, Sha256};
use slimtcp_api::{Fd, Proto, Shutdown, SocketApi, SocketError};
use slimtcp_guest::{GuestConfig, GuestSockets};

const ECHO_PORT: u16 = 7000;
const DISCARD_PORT: u16 = 9000;

#[derive(Debug, Parser)]
#[command(about = "SlimTCP demo application over the guest library (vhost-user transport)")]
struct Args {
    /// The backend's vhost-user socket.
    #[arg(long)]
    socket: std::path::PathBuf,
    /// The Linux server's address (echo on 7000, discard on 9000).
    #[arg(long)]
    server: Ipv4Addr,
    /// Megabytes for the bulk transfer.
    #[arg(long, default_value_t = 200)]
    bulk_mb: u64,
    /// 64-byte round trips for the latency run.
    #[arg(long, default_value_t = 2000)]
    round_trips: usize,
}

#[derive(Debug, thiserror::Error)]
enum DemoError {
    #[error("{what} failed: {} ({})", .source, .source.name())]
    Socket { what: &'static str, source: SocketError },
    #[error("{0}")]
    Check(String),
}

fn sock(what: &'static str) -> impl FnOnce(SocketError) -> DemoError {
    move |source| DemoError::Socket { what, source }
}

fn connect<A: SocketApi>(api: &mut A, addr: SocketAddrV4) -> Result<Fd, DemoError> {
    let fd = api.socket(Proto::Tcp).map_err(sock("socket"))?;
    api.connect(fd, addr).map_err(sock("connect"))?;
    Ok(fd)
}

fn send_all<A: SocketApi>(api: &mut A, fd: Fd, mut data: &[u8]) -> Result<(), DemoError> {
    while !data.is_empty() {
        let n = api.send(fd, data).map_err(sock("send"))?;
        data = &data[n..];
    }
    Ok(())
}

fn recv_exact<A: SocketApi>(api: &mut A, fd: Fd, buf: &mut [u8]) -> Result<(), DemoError> {
    let mut got = 0;
    while got < buf.len() {
        match api.recv(fd, &mut buf[got..]).map_err(sock("recv"))? {
            0 => return Err(DemoError::Check("the server closed early".into())),
            n => got += n,
        }
    }
    Ok(())
}

fn latency<A: SocketApi>(api: &mut A, server: Ipv4Addr, n: usize) -> Result<(f64, f64), DemoError> {
    let fd = connect(api, SocketAddrV4::new(server, ECHO_PORT))?;
    let msg = [0x42u8; 64];
    let mut back = [0u8; 64];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        send_all(api, fd, &msg)?;
        recv_exact(api, fd, &mut back)?;
        samples.push(t0.elapsed());
    }
    api.close(fd).map_err(sock("close"))?;
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e6;
    Ok((at(0.5), at(0.99)))
}

/// Incompressible bytes for stream offset `offset..`: SHA-256 of each 32-byte block's index (the
/// guest library needs no random generator, and the demo none of the stack's).
fn fill_block(buf: &mut [u8], offset: u64) {
    for (i, chunk) in buf.chunks_mut(32).enumerate() {
        let digest = Sha256::digest((offset / 32 + i as u64).to_le_bytes());
        chunk.copy_from_slice(&digest[..chunk.len()]);
    }
}

fn bulk<A: SocketApi>(api: &mut A, server: Ipv4Addr, total: u64) -> Result<f64, DemoError> {
    let fd = connect(api, SocketAddrV4::new(server, DISCARD_PORT))?;
    let mut block = vec![0u8; 256 * 1024];
    let mut hasher = Sha256::new();
    let mut sent = 0u64;
    let start = Instant::now();
    let mut last = start;
    while sent < total {
        let n = block.len().min((total - sent) as usize);
        fill_block(&mut block[..n], sent);
        hasher.update(&block[..n]);
        send_all(api, fd, &block[..n])?;
        sent += n as u64;
        if last.elapsed() >= Duration::from_millis(250) || sent == total {
            last = Instant::now();
            let gbps = sent as f64 * 8.0 / start.elapsed().as_secs_f64() / 1e9;
            print!("\r   bulk: {:>4} / {} MB   {gbps:5.2} Gb/s ", sent >> 20, total >> 20);
            let _ = std::io::stdout().flush();
        }
    }
    api.shutdown(fd, Shutdown::Write).map_err(sock("shutdown"))?;
    // The server answers "<bytes> <sha256>\n" once it has read everything.
    let mut answer = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        match api.recv(fd, &mut buf).map_err(sock("recv"))? {
            0 => break,
            n => answer.extend_from_slice(&buf[..n]),
        }
    }
    let secs = start.elapsed().as_secs_f64();
    api.close(fd).map_err(sock("close"))?;
    println!();
    let want = format!("{sent} {}", hex(&hasher.finalize()));
    let got = String::from_utf8_lossy(&answer).trim().to_owned();
    if got != want {
        return Err(DemoError::Check(format!("the server saw '{got}', we sent '{want}'")));
    }
    println!("   the server received {} MB with the same SHA-256", sent >> 20);
    Ok(sent as f64 * 8.0 / secs / 1e9)
}

fn echo_verified<A: SocketApi>(api: &mut A, server: Ipv4Addr, total: usize) -> Result<(), DemoError> {
    let fd = connect(api, SocketAddrV4::new(server, ECHO_PORT))?;
    let data: Vec<u8> = (0..total).map(|i| (i * 7 % 251) as u8).collect();
    let mut back = vec![0u8; total];
    let mut got = 0;
    for chunk in data.chunks(64 * 1024) {
        send_all(api, fd, chunk)?;
        // Read what came back so far, so neither side's window stays full.
        let want = got + chunk.len();
        recv_exact(api, fd, &mut back[got..want])?;
        got = want;
    }
    api.close(fd).map_err(sock("close"))?;
    if back != data {
        return Err(DemoError::Check("the echoed bytes differ".into()));
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() {
    let args = Args::parse();
    println!("== guest application: connecting to the backend at {}", args.socket.display());
    let mut api = match GuestSockets::connect_vhost_user(&args.socket, GuestConfig::default()) {
        Ok(api) => api,
        Err(e) => {
            eprintln!("guest_demo: cannot attach to {}: {e}", args.socket.display());
            std::process::exit(1);
        }
    };
    let run = |api: &mut GuestSockets| -> Result<(), DemoError> {
        println!(
            "== 1. {} echo round trips of 64 bytes (guest -> backend -> Linux -> back)",
            args.round_trips
        );
        let (p50, p99) = latency(api, args.server, args.round_trips)?;
        println!("   round trip p50 {p50:.0} us, p99 {p99:.0} us");
        println!("== 2. bulk transfer of {} MB to the Linux discard server", args.bulk_mb);
        let gbps = bulk(api, args.server, args.bulk_mb << 20)?;
        println!("== 3. 4 MiB echo, verified byte for byte");
        echo_verified(api, args.server, 4 << 20)?;
        println!("   echo verified");
        println!();
        println!(
            "== summary: 64 B round trip p50 {p50:.0} us / p99 {p99:.0} us; bulk goodput {gbps:.2} Gb/s"
        );
        Ok(())
    };
    if let Err(e) = run(&mut api) {
        eprintln!("guest_demo: {e}");
        std::process::exit(1);
    }
}
