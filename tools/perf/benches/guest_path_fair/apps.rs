//! Thread A's work: the application under test and the peer's application, both driven from
//! the calling thread with non-blocking calls (neither ever waits for the other). Every byte
//! is checked: a bulk receiver compares each read with the pattern sent and counts the stream
//! to its end; each echo must equal its message.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use slimtcp::api::{Fd, Proto, Shutdown, SockOpt, SocketApi, SocketError};

use super::idle::Idle;

/// The peer's bulk port and echo port.
const BULK_PORT: u16 = 5001;
const ECHO_PORT: u16 = 7000;
/// Socket buffers on both sides (as the three-thread bench and slimtcp-perf's one connection).
const BUFFER: usize = 256 << 10;
/// Bytes offered per send call, and read per receive call.
const CHUNK: usize = 64 << 10;
/// The stream's byte at offset `i` is `i % PERIOD` (a prime: chunk edges never line up with it).
const PERIOD: usize = 251;
/// How long the end of a stream may take after the measured window.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);
/// Bytes per round trip.
pub const MESSAGE: usize = 64;

/// What failed on the application side.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A socket call failed.
    #[error("{op}")]
    Socket {
        /// The call.
        op: &'static str,
        /// Why.
        #[source]
        source: SocketError,
    },
    /// The receiver's count differs from the sender's.
    #[error("the receiver counted {received} bytes to the end of the stream, the sender sent {sent}")]
    Count {
        /// Bytes the sender's stack accepted.
        sent: u64,
        /// Bytes read before the end of the stream.
        received: u64,
    },
    /// A read did not hold the bytes sent at its offset.
    #[error("the {len} bytes read at stream offset {offset} differ from those sent")]
    Corrupt {
        /// Stream offset of the read.
        offset: u64,
        /// Its length.
        len: usize,
    },
    /// The end of the stream did not come in time.
    #[error("no end of stream within {0:?} after the window (received {1} bytes)")]
    Drain(Duration, u64),
    /// An echo differs from its message.
    #[error("round trip {0}: the echo differs from the message")]
    Echo(usize),
    /// A connection ended in the middle of the round trips.
    #[error("round trip {0}: end of stream")]
    EchoEnded(usize),
}

fn sock(op: &'static str) -> impl FnOnce(SocketError) -> AppError {
    move |source| AppError::Socket { op, source }
}

/// Which way the bulk data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The application under test sends, the peer receives.
    Sends,
    /// The peer sends, the application under test receives.
    Receives,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::Sends => "guest sends",
            Direction::Receives => "guest receives",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Direction::Sends => "sends",
            Direction::Receives => "receives",
        }
    }
}

/// What one bulk run measured.
#[derive(Clone, Copy, Debug)]
pub struct Bulk {
    /// Payload bytes read by the receiver in the window.
    pub bytes: u64,
    /// The window.
    pub secs: f64,
    /// Bytes moved in the whole run (window and drain), every one checked.
    pub checked: u64,
}

/// One connection, `under` connecting to `peer` (listening at `peer_ip`), options set before
/// the connect (accepted sockets take the listener's), both sockets non-blocking once up.
fn connect_pair<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    peer_ip: Ipv4Addr,
    port: u16,
    mss: u16,
) -> Result<(Fd, Fd, Fd), AppError> {
    let opts = [SockOpt::Mss(mss), SockOpt::SendBuffer(BUFFER), SockOpt::RecvBuffer(BUFFER)];
    let l = peer.socket(Proto::Tcp).map_err(sock("peer socket"))?;
    for opt in opts {
        peer.setsockopt(l, opt).map_err(sock("peer setsockopt"))?;
    }
    peer.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).map_err(sock("peer bind"))?;
    peer.listen(l, 1).map_err(sock("peer listen"))?;
    let c = under.socket(Proto::Tcp).map_err(sock("socket"))?;
    for opt in opts.into_iter().chain([SockOpt::NoDelay(true)]) {
        under.setsockopt(c, opt).map_err(sock("setsockopt"))?;
    }
    // Blocking: the handshake needs only the stacks (thread B), the peer accepts from its
    // backlog afterwards.
    under.connect(c, SocketAddrV4::new(peer_ip, port)).map_err(sock("connect"))?;
    let (s, _) = peer.accept(l).map_err(sock("peer accept"))?;
    peer.setsockopt(s, SockOpt::NoDelay(true)).map_err(sock("peer setsockopt(TCP_NODELAY)"))?;
    under.setsockopt(c, SockOpt::NonBlocking(true)).map_err(sock("setsockopt(O_NONBLOCK)"))?;
    peer.setsockopt(s, SockOpt::NonBlocking(true)).map_err(sock("peer setsockopt(O_NONBLOCK)"))?;
    Ok((c, s, l))
}

/// `f`'s result, `WouldBlock` as `Ok(None)`.
fn nb<T>(r: Result<T, SocketError>) -> Result<Option<T>, SocketError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(SocketError::WouldBlock) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The pattern, long enough for a chunk at any phase.
fn pattern() -> Vec<u8> {
    (0..PERIOD + CHUNK).map(|i| (i % PERIOD) as u8).collect()
}

/// Bulk transfer over one connection for `window`: sender and receiver alternate on this
/// thread; then the sender shuts down and the receiver reads to the end of the stream.
pub fn bulk<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    peer_ip: Ipv4Addr,
    dir: Direction,
    mss: u16,
    window: Duration,
) -> Result<Bulk, AppError> {
    let (c, s, l) = connect_pair(under, peer, peer_ip, BULK_PORT, mss)?;
    let r = match dir {
        Direction::Sends => pump(under, c, peer, s, window),
        Direction::Receives => pump(peer, s, under, c, window),
    };
    let _ = under.close(c);
    let _ = peer.close(s);
    let _ = peer.close(l);
    r
}

fn pump<S: SocketApi, R: SocketApi>(
    tx: &mut S,
    tfd: Fd,
    rx: &mut R,
    rfd: Fd,
    window: Duration,
) -> Result<Bulk, AppError> {
    let pat = pattern();
    let mut buf = vec![0u8; CHUNK];
    let (mut sent, mut received) = (0u64, 0u64);
    let mut read = |rx: &mut R, received: &mut u64| -> Result<Option<usize>, AppError> {
        let Some(n) = nb(rx.recv(rfd, &mut buf)).map_err(sock("recv"))? else { return Ok(None) };
        let at = (*received % PERIOD as u64) as usize;
        if buf[..n] != pat[at..at + n] {
            return Err(AppError::Corrupt { offset: *received, len: n });
        }
        *received += n as u64;
        Ok(Some(n))
    };
    let mut idle = Idle::default();
    let t0 = Instant::now();
    let end = t0 + window;
    let now = loop {
        let at = (sent % PERIOD as u64) as usize;
        let wrote = nb(tx.send(tfd, &pat[at..at + CHUNK])).map_err(sock("send"))?;
        if let Some(n) = wrote {
            sent += n as u64;
        }
        let got = read(rx, &mut received)?;
        idle.pass(wrote.is_some() || got.is_some());
        let now = Instant::now();
        if now >= end {
            break now;
        }
    };
    let (bytes, secs) = (received, (now - t0).as_secs_f64());
    tx.shutdown(tfd, Shutdown::Write).map_err(sock("shutdown(SHUT_WR)"))?;
    let limit = Instant::now() + DRAIN_LIMIT;
    loop {
        match read(rx, &mut received)? {
            Some(0) => break,
            got => idle.pass(got.is_some()),
        }
        if Instant::now() > limit {
            return Err(AppError::Drain(DRAIN_LIMIT, received));
        }
    }
    if received != sent {
        return Err(AppError::Count { sent, received });
    }
    Ok(Bulk { bytes, secs, checked: received })
}

/// `count` round trips of [`MESSAGE`] bytes (after `warm_up` more) from `under` to an echo on
/// `peer`; each message differs from the last and each echo is compared with it.
pub fn round_trips<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    peer_ip: Ipv4Addr,
    count: usize,
    warm_up: usize,
) -> Result<Vec<Duration>, AppError> {
    let (c, s, l) = connect_pair(under, peer, peer_ip, ECHO_PORT, 1460)?;
    let r = echo_loop(under, c, peer, s, count, warm_up);
    let _ = under.close(c);
    let _ = peer.close(s);
    let _ = peer.close(l);
    r
}

fn echo_loop<G: SocketApi, P: SocketApi>(
    under: &mut G,
    c: Fd,
    peer: &mut P,
    s: Fd,
    count: usize,
    warm_up: usize,
) -> Result<Vec<Duration>, AppError> {
    let mut samples = Vec::with_capacity(count);
    let mut echo = [0u8; 4 * MESSAGE];
    let (mut echo_len, mut echo_sent) = (0usize, 0usize);
    let mut back = [0u8; MESSAGE];
    let mut idle = Idle::default();
    for i in 0..count + warm_up {
        let msg: [u8; MESSAGE] = std::array::from_fn(|k| (i.wrapping_mul(31) + k) as u8);
        let t0 = Instant::now();
        let (mut sent, mut got) = (0usize, 0usize);
        while got < MESSAGE {
            let mut work = false;
            if sent < MESSAGE {
                let n = nb(under.send(c, &msg[sent..])).map_err(sock("send"))?.unwrap_or(0);
                sent += n;
                work |= n > 0;
            }
            // The peer's application: echoes what it reads.
            if echo_sent == echo_len {
                match nb(peer.recv(s, &mut echo)).map_err(sock("peer recv"))? {
                    Some(0) => return Err(AppError::EchoEnded(i)),
                    Some(n) => {
                        (echo_len, echo_sent) = (n, 0);
                        work = true;
                    }
                    None => {}
                }
            }
            if echo_sent < echo_len {
                let n = nb(peer.send(s, &echo[echo_sent..echo_len])).map_err(sock("peer send"))?.unwrap_or(0);
                echo_sent += n;
                work |= n > 0;
            }
            match nb(under.recv(c, &mut back[got..])).map_err(sock("recv"))? {
                Some(0) => return Err(AppError::EchoEnded(i)),
                Some(n) => {
                    got += n;
                    work = true;
                }
                None => {}
            }
            idle.pass(work);
        }
        let rtt = t0.elapsed();
        if back != msg {
            return Err(AppError::Echo(i));
        }
        if i >= warm_up {
            samples.push(rtt);
        }
    }
    Ok(samples)
}
