//! `send` and `recv`: one pattern stream each way, every byte checked (the receiver of `send`
//! is Linux, which reports the stream's SHA-256 to the test).

use std::net::SocketAddrV4;
use std::time::Instant;

use slimtcp::api::{Proto, Shutdown, SocketApi, ZeroCopyTx};
use slimtcp_guest::DeviceSpec;
use slimtcp_testkit::data::{hex, pattern, pattern_mismatch, StreamHasher};

use crate::{api, send_all, sock, AppError};

const CHUNK: usize = 64 * 1024;

fn rate(bytes: u64, t: Instant) -> String {
    let s = t.elapsed().as_secs_f64();
    format!("{bytes} B in {s:.2} s ({:.1} MB/s)", bytes as f64 / s / 1e6)
}

pub fn send(
    device: &DeviceSpec,
    memory: usize,
    server: SocketAddrV4,
    bytes: u64,
    seed: u64,
    zero_copy: bool,
) -> Result<String, AppError> {
    let mut api = api(device, memory)?;
    let fd = api.socket(Proto::Tcp).map_err(sock("socket"))?;
    api.connect(fd, server).map_err(sock("connect"))?;
    // A marker for tests that act mid-transfer (kill, stop/cont, backend restart).
    println!("vm-guest: send connected");
    let start = Instant::now();
    let mut sent = 0u64;
    let mut buf = vec![0u8; CHUNK];
    let mut zc = Vec::new();
    while sent < bytes {
        let n = CHUNK.min((bytes - sent) as usize);
        if zero_copy {
            let mut tx = api.alloc_tx(n).map_err(sock("alloc_tx"))?;
            pattern(seed, sent, &mut tx.space_mut()[..n]);
            tx.set_len(n);
            zc.push(tx);
            while !zc.is_empty() {
                api.send_zc(fd, &mut zc).map_err(sock("send_zc"))?;
            }
        } else {
            pattern(seed, sent, &mut buf[..n]);
            send_all(&mut api, fd, &buf[..n])?;
        }
        sent += n as u64;
    }
    api.shutdown(fd, Shutdown::Write).map_err(sock("shutdown"))?;
    let mut rest = [0u8; 16];
    let n = api.recv(fd, &mut rest).map_err(sock("recv at end"))?;
    if n != 0 {
        return Err(AppError::Check(format!("the receiver sent {n} bytes")));
    }
    api.close(fd).map_err(sock("close"))?;
    let api_kind = if zero_copy { "zero-copy" } else { "copy" };
    Ok(format!("sent {} ({api_kind})", rate(sent, start)))
}

pub fn recv(
    device: &DeviceSpec,
    memory: usize,
    server: SocketAddrV4,
    bytes: u64,
    seed: u64,
) -> Result<String, AppError> {
    let mut api = api(device, memory)?;
    let fd = api.socket(Proto::Tcp).map_err(sock("socket"))?;
    api.connect(fd, server).map_err(sock("connect"))?;
    let start = Instant::now();
    let mut got = 0u64;
    let mut digest = StreamHasher::new();
    loop {
        let Some(rx) = api.recv_zc(fd).map_err(sock("recv_zc"))? else { break };
        let data = rx.as_slice();
        if let Some(at) = pattern_mismatch(seed, got, data) {
            return Err(AppError::Check(format!("byte {} differs from the pattern", got + at as u64)));
        }
        digest.update(data);
        got += data.len() as u64;
    }
    api.close(fd).map_err(sock("close"))?;
    if got != bytes {
        return Err(AppError::Check(format!("{got} bytes received, {bytes} expected")));
    }
    Ok(format!("received {} sha256={}", rate(got, start), hex(&digest.finish())))
}
