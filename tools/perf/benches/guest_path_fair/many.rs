//! Bulk over N connections at once (the paper's experiment 2, issue 12's 1..4096 connections),
//! copy API, every stream checked as over one connection: the application under test opens N
//! connections to one peer listener; the senders and the receivers each run on an epoll set
//! (level-triggered, polled with timeout 0), as an application with many sockets would; a
//! ready sender offers one chunk, a ready receiver reads once. After the window every sender
//! shuts down and each receiver reads its stream to the end; each stream's count must equal
//! what its sender's stack accepted. The measured window follows a warm-up (`Shape::warm_up`):
//! the start of many connections at once is a transient of its own (seen: a pause of ~1 s
//! with 4096 connections), reported apart from the steady goodput.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use slimtcp::api::app::MAX_BACKLOG;
use slimtcp::api::{EpollEvent, EpollFd, EpollOp, Fd, Ready, Shutdown, SocketApi};

use super::apps::{connect_one, listen, options, sock, AppError, Bulk, Direction, DRAIN_LIMIT};
use super::idle::Idle;
use super::stream::{Api, Pattern, Receiving, Sending, CHUNK};
use super::watchdog;

/// The peer's port for many-connection runs.
const MANY_PORT: u16 = 5002;
/// Interval of the progress log (debug level).
const TICK: Duration = Duration::from_millis(250);
/// Readiness events fetched per wait (as slimtcp-perf's workload).
const EVENTS_PER_WAIT: usize = 1024;

/// The many-connection run's shape.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub connections: usize,
    pub mss: u16,
    /// Send and receive buffer of every socket, both ends (`None`: the stack's own).
    pub buffer: Option<usize>,
    /// Sending before the measured window (bytes checked, not counted).
    pub warm_up: Duration,
}

fn interest(ready: Ready, fd: Fd) -> EpollEvent {
    EpollEvent { events: ready, data: u64::from(fd.0) }
}

/// One epoll set over `fds`, for `ready`.
fn epoll_over<A: SocketApi>(
    api: &mut A,
    fds: impl Iterator<Item = Fd>,
    ready: Ready,
) -> Result<EpollFd, AppError> {
    let ep = api.epoll_create().map_err(sock("epoll_create"))?;
    for fd in fds {
        api.epoll_ctl(ep, EpollOp::Add, fd, interest(ready, fd)).map_err(sock("epoll_ctl(ADD)"))?;
    }
    Ok(ep)
}

/// The fds `epoll_wait` reports ready (timeout 0) into `out`.
fn ready<A: SocketApi>(
    api: &mut A,
    ep: EpollFd,
    events: &mut [EpollEvent],
    out: &mut Vec<Fd>,
) -> Result<(), AppError> {
    out.clear();
    let n = api.epoll_wait(ep, events, 0).map_err(sock("epoll_wait"))?;
    out.extend(events[..n].iter().filter_map(|e| u32::try_from(e.data).ok().map(Fd)));
    Ok(())
}

/// Bulk over `shape.connections` connections for `window`.
pub fn bulk_many<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    peer_ip: Ipv4Addr,
    dir: Direction,
    shape: Shape,
    window: Duration,
) -> Result<Bulk, AppError> {
    let opts = options(shape.mss, shape.buffer);
    let l = listen(peer, MANY_PORT, &opts, shape.connections.clamp(1, MAX_BACKLOG))?;
    let mut pairs = Vec::with_capacity(shape.connections);
    let mut r = Ok(());
    for k in 0..shape.connections {
        if k % 256 == 0 {
            log::debug!("connecting {k} of {}", shape.connections);
        }
        watchdog::beat(Instant::now());
        match connect_one(under, peer, l, SocketAddrV4::new(peer_ip, MANY_PORT), &opts) {
            Ok(p) => pairs.push(p),
            Err(e) => {
                r = Err(e);
                break;
            }
        }
    }
    let r = r.and_then(|()| match dir {
        Direction::Sends => {
            let tx = pairs.iter().map(|&(c, _)| Sending::new(c, Api::Copy, shape.mss)).collect();
            let rx = pairs.iter().map(|&(_, s)| Receiving::new(s, Api::Copy)).collect();
            pump_many(under, tx, peer, rx, shape.warm_up, window)
        }
        Direction::Receives => {
            let tx = pairs.iter().map(|&(_, s)| Sending::new(s, Api::Copy, shape.mss)).collect();
            let rx = pairs.iter().map(|&(c, _)| Receiving::new(c, Api::Copy)).collect();
            pump_many(peer, tx, under, rx, shape.warm_up, window)
        }
    });
    for (c, s) in pairs {
        let _ = under.close(c);
        let _ = peer.close(s);
    }
    let _ = peer.close(l);
    r
}

/// Sending `i` feeds receiving `i`.
fn pump_many<S: SocketApi, R: SocketApi>(
    tx: &mut S,
    mut sending: Vec<Sending<S::TxBuf>>,
    rx: &mut R,
    mut receiving: Vec<Receiving>,
    warm_up: Duration,
    window: Duration,
) -> Result<Bulk, AppError> {
    let pat = Pattern::new();
    let mut buf = vec![0u8; CHUNK];
    let tx_of: HashMap<Fd, usize> = sending.iter().enumerate().map(|(i, s)| (s.fd, i)).collect();
    let rx_of: HashMap<Fd, usize> = receiving.iter().enumerate().map(|(i, r)| (r.fd, i)).collect();
    let tx_ep = epoll_over(tx, sending.iter().map(|s| s.fd), Ready::OUT)?;
    let rx_ep = epoll_over(rx, receiving.iter().map(|r| r.fd), Ready::IN)?;
    let mut events = vec![EpollEvent { events: Ready::empty(), data: 0 }; EVENTS_PER_WAIT];
    let mut fds = Vec::with_capacity(EVENTS_PER_WAIT);
    let mut idle = Idle::default();
    let read_ready = |rx: &mut R,
                      receiving: &mut [Receiving],
                      events: &mut [EpollEvent],
                      fds: &mut Vec<Fd>,
                      buf: &mut [u8]|
     -> Result<(u64, bool), AppError> {
        ready(rx, rx_ep, events, fds)?;
        let (mut bytes, mut work) = (0u64, false);
        for fd in fds.iter() {
            let Some(&i) = rx_of.get(fd) else { continue };
            let r = &mut receiving[i];
            if r.ended {
                continue;
            }
            if let Some(n) = r.read(rx, buf, &pat)? {
                work = true;
                bytes += n as u64;
                if r.ended {
                    rx.epoll_ctl(rx_ep, EpollOp::Delete, r.fd, interest(Ready::IN, r.fd))
                        .map_err(sock("epoll_ctl(DEL)"))?;
                }
            }
        }
        Ok((bytes, work))
    };
    let start = Instant::now();
    let t0 = start + warm_up;
    let end = t0 + window;
    let mut received = 0u64;
    let mut counting = warm_up.is_zero();
    let mut tick = start + TICK;
    let now = loop {
        ready(tx, tx_ep, &mut events, &mut fds)?;
        let mut work = false;
        for fd in &fds {
            if let Some(&i) = tx_of.get(fd) {
                work |= sending[i].fill(tx, &pat)?;
            }
        }
        let (bytes, got) = read_ready(rx, &mut receiving, &mut events, &mut fds, &mut buf)?;
        if counting {
            received += bytes;
        }
        idle.pass(work || got);
        let now = Instant::now();
        watchdog::beat(now);
        counting = now >= t0;
        if now >= tick {
            let read: u64 = receiving.iter().map(|r| r.received).sum();
            log::debug!("{:.2} s: {read} B read", (now - start).as_secs_f64());
            tick += TICK;
        }
        if now >= end {
            break now;
        }
    };
    let secs = (now - t0).as_secs_f64();
    log::debug!("window over: {received} B read; draining");
    for s in &mut sending {
        s.abandon();
        tx.shutdown(s.fd, Shutdown::Write).map_err(sock("shutdown(SHUT_WR)"))?;
    }
    let _ = tx.epoll_close(tx_ep);
    let limit = Instant::now() + DRAIN_LIMIT;
    let mut open = receiving.iter().filter(|r| !r.ended).count();
    while open > 0 {
        let (_, got) = read_ready(rx, &mut receiving, &mut events, &mut fds, &mut buf)?;
        open = receiving.iter().filter(|r| !r.ended).count();
        idle.pass(got);
        let now = Instant::now();
        watchdog::beat(now);
        if now > limit {
            for (s, r) in sending.iter().zip(&receiving).filter(|(_, r)| !r.ended).take(4) {
                log::warn!(
                    "stream not ended: receiver {:?} read {} B, sender {:?} sent {} B",
                    r.fd,
                    r.received,
                    s.fd,
                    s.sent
                );
            }
            log::warn!("{open} of {} streams not ended", receiving.len());
            let received = receiving.iter().map(|r| r.received).sum();
            return Err(AppError::Drain(DRAIN_LIMIT, received));
        }
    }
    let _ = rx.epoll_close(rx_ep);
    for (s, r) in sending.iter().zip(&receiving) {
        if r.received != s.sent {
            return Err(AppError::Count { sent: s.sent, received: r.received });
        }
    }
    let checked = receiving.iter().map(|r| r.received).sum();
    Ok(Bulk { bytes: received, secs, checked })
}
