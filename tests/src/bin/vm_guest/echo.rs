//! `echo`: messages to an echo server, each answer compared; round-trip times reported.

use std::net::SocketAddrV4;
use std::time::Instant;

use slimtcp::api::{Proto, Shutdown, SocketApi};
use slimtcp_guest::DeviceSpec;
use slimtcp_testkit::data::pattern;

use crate::{api, recv_exact, send_all, sock, AppError};

pub fn run(
    device: &DeviceSpec,
    memory: usize,
    server: SocketAddrV4,
    count: usize,
    size: usize,
) -> Result<String, AppError> {
    exchange(&mut api(device, memory)?, server, count, size)
}

/// One connection to `server`: `count` messages of `size` bytes, each answer compared.
pub fn exchange<A: SocketApi>(
    api: &mut A,
    server: SocketAddrV4,
    count: usize,
    size: usize,
) -> Result<String, AppError> {
    let fd = api.socket(Proto::Tcp).map_err(sock("socket"))?;
    api.connect(fd, server).map_err(sock("connect"))?;
    let mut out = vec![0u8; size];
    let mut back = vec![0u8; size];
    let mut rtts = Vec::with_capacity(count);
    for i in 0..count {
        pattern(7, (i * size) as u64, &mut out);
        let t = Instant::now();
        send_all(api, fd, &out)?;
        recv_exact(api, fd, &mut back)?;
        rtts.push(t.elapsed());
        if back != out {
            return Err(AppError::Check(format!("echo {i}: the answer differs from the message")));
        }
    }
    api.shutdown(fd, Shutdown::Write).map_err(sock("shutdown"))?;
    let mut rest = [0u8; 16];
    let n = api.recv(fd, &mut rest).map_err(sock("recv at end"))?;
    if n != 0 {
        return Err(AppError::Check(format!("{n} unexpected bytes after the last echo")));
    }
    api.close(fd).map_err(sock("close"))?;
    rtts.sort();
    let p =
        |q: f64| rtts.get(((rtts.len() as f64 - 1.0) * q) as usize).map_or(0.0, |d| d.as_secs_f64() * 1e6);
    Ok(format!("{count} messages of {size} B, round trip p50 {:.0} us p99 {:.0} us", p(0.5), p(0.99)))
}
