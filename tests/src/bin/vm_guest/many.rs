//! `many`: N connections open at once to an echo server; each sends its own pattern, and
//! epoll says which to read; every echo is compared.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use slimtcp::api::{EpollEvent, EpollOp, Fd, Proto, Ready, Shutdown, SocketApi};
use slimtcp_guest::DeviceSpec;
use slimtcp_testkit::data::pattern_mismatch;

use crate::{api, send_all, sock, AppError};

const LIMIT: Duration = Duration::from_secs(240);

struct Conn {
    fd: Fd,
    got: usize,
    done: bool,
}

pub fn run(
    device: &DeviceSpec,
    memory: usize,
    server: SocketAddrV4,
    connections: usize,
    size: usize,
) -> Result<String, AppError> {
    let mut api = api(device, memory)?;
    let start = Instant::now();
    let ep = api.epoll_create().map_err(sock("epoll_create"))?;
    let mut conns = Vec::with_capacity(connections);
    for i in 0..connections {
        let fd = api.socket(Proto::Tcp).map_err(sock("socket"))?;
        api.connect(fd, server).map_err(sock("connect"))?;
        api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::IN, data: i as u64 })
            .map_err(sock("epoll_ctl"))?;
        conns.push(Conn { fd, got: 0, done: false });
    }
    let mut msg = vec![0u8; size];
    for (i, c) in conns.iter().enumerate() {
        slimtcp_testkit::data::pattern(1000 + i as u64, 0, &mut msg);
        send_all(&mut api, c.fd, &msg)?;
    }
    let mut events = vec![EpollEvent { events: Ready::empty(), data: 0 }; 64];
    let mut buf = vec![0u8; 16 * 1024];
    let mut finished = 0;
    while finished < connections {
        if start.elapsed() > LIMIT {
            return Err(AppError::Check(format!(
                "{finished} of {connections} echoes complete after {LIMIT:?}"
            )));
        }
        let n = api.epoll_wait(ep, &mut events, 1000).map_err(sock("epoll_wait"))?;
        for ev in &events[..n] {
            let i = ev.data as usize;
            let Some(c) = conns.get_mut(i) else {
                return Err(AppError::Check(format!("epoll reported unknown data {i}")));
            };
            if c.done {
                continue;
            }
            let got = api.recv(c.fd, &mut buf).map_err(sock("recv"))?;
            if got == 0 {
                return Err(AppError::Check(format!(
                    "connection {i}: end of stream after {} of {size} bytes",
                    c.got
                )));
            }
            if let Some(at) = pattern_mismatch(1000 + i as u64, c.got as u64, &buf[..got]) {
                return Err(AppError::Check(format!("connection {i}: byte {} differs", c.got + at)));
            }
            c.got += got;
            if c.got > size {
                return Err(AppError::Check(format!("connection {i}: {} bytes echoed, {size} sent", c.got)));
            }
            if c.got == size {
                c.done = true;
                finished += 1;
            }
        }
    }
    for c in &conns {
        api.epoll_ctl(ep, EpollOp::Delete, c.fd, EpollEvent { events: Ready::empty(), data: 0 })
            .map_err(sock("epoll_ctl delete"))?;
        api.shutdown(c.fd, Shutdown::Write).map_err(sock("shutdown"))?;
        let n = api.recv(c.fd, &mut buf).map_err(sock("recv at end"))?;
        if n != 0 {
            return Err(AppError::Check(format!("{n} unexpected bytes at the end")));
        }
        api.close(c.fd).map_err(sock("close"))?;
    }
    api.epoll_close(ep).map_err(sock("epoll_close"))?;
    Ok(format!("{connections} connections x {size} B echoed in {:.2} s", start.elapsed().as_secs_f64()))
}
