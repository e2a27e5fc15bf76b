//! Thread A's work: the application under test and the peer's application, both driven from
//! the calling thread with non-blocking calls (neither ever waits for the other). Every byte
//! is checked: a bulk receiver compares each read with the pattern sent and counts the stream
//! to its end; each echo must equal its message.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use slimtcp::api::{Fd, Proto, Shutdown, SockOpt, SocketApi, SocketError};

use super::idle::Idle;
use super::stream::{nb, Api, Pattern, Receiving, Sending, CHUNK};
use super::watchdog;

/// The peer's bulk port and echo port.
const BULK_PORT: u16 = 5001;
const ECHO_PORT: u16 = 7000;
/// Socket buffers on both sides (as the three-thread bench and slimtcp-perf's one connection).
const BUFFER: usize = 256 << 10;
/// How long the end of a stream may take after the measured window.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(20);
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

pub fn sock(op: &'static str) -> impl FnOnce(SocketError) -> AppError {
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

/// Socket options of a run's connections, on both ends: MSS and both buffers (`None`: the
/// stack's own).
pub fn options(mss: u16, buffer: Option<usize>) -> Vec<SockOpt> {
    std::iter::once(SockOpt::Mss(mss)).chain(slimtcp_perf::workload::buffer_options(buffer)).collect()
}

/// The peer's listener on `port` (accepted sockets take its options).
pub fn listen<P: SocketApi>(
    peer: &mut P,
    port: u16,
    opts: &[SockOpt],
    backlog: usize,
) -> Result<Fd, AppError> {
    let l = peer.socket(Proto::Tcp).map_err(sock("peer socket"))?;
    for &opt in opts {
        peer.setsockopt(l, opt).map_err(sock("peer setsockopt"))?;
    }
    peer.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).map_err(sock("peer bind"))?;
    peer.listen(l, backlog).map_err(sock("peer listen"))?;
    Ok(l)
}

/// One connection, `under` connecting to the peer's listener `l` (at `peer_ip`, `port`),
/// options set before the connect, both sockets non-blocking once up.
pub fn connect_one<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    l: Fd,
    to: SocketAddrV4,
    opts: &[SockOpt],
) -> Result<(Fd, Fd), AppError> {
    let c = under.socket(Proto::Tcp).map_err(sock("socket"))?;
    for opt in opts.iter().copied().chain([SockOpt::NoDelay(true)]) {
        under.setsockopt(c, opt).map_err(sock("setsockopt"))?;
    }
    // Blocking: the handshake needs only the stacks (thread B), the peer accepts from its
    // backlog afterwards.
    under.connect(c, to).map_err(sock("connect"))?;
    let (s, _) = peer.accept(l).map_err(sock("peer accept"))?;
    peer.setsockopt(s, SockOpt::NoDelay(true)).map_err(sock("peer setsockopt(TCP_NODELAY)"))?;
    under.setsockopt(c, SockOpt::NonBlocking(true)).map_err(sock("setsockopt(O_NONBLOCK)"))?;
    peer.setsockopt(s, SockOpt::NonBlocking(true)).map_err(sock("peer setsockopt(O_NONBLOCK)"))?;
    Ok((c, s))
}

/// One connection with 256 KiB buffers: (under's socket, peer's socket, peer's listener).
fn connect_pair<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    peer_ip: Ipv4Addr,
    port: u16,
    mss: u16,
) -> Result<(Fd, Fd, Fd), AppError> {
    let opts = options(mss, Some(BUFFER));
    let l = listen(peer, port, &opts, 1)?;
    let (c, s) = connect_one(under, peer, l, SocketAddrV4::new(peer_ip, port), &opts)?;
    Ok((c, s, l))
}

/// Bulk transfer over one connection for `window`, the application under test on `api`
/// (the peer on the copy API): sender and receiver alternate on this thread; then the sender
/// shuts down and the receiver reads to the end of the stream.
pub fn bulk<G: SocketApi, P: SocketApi>(
    under: &mut G,
    peer: &mut P,
    peer_ip: Ipv4Addr,
    dir: Direction,
    api: Api,
    mss: u16,
    window: Duration,
) -> Result<Bulk, AppError> {
    let (c, s, l) = connect_pair(under, peer, peer_ip, BULK_PORT, mss)?;
    let r = match dir {
        Direction::Sends => {
            pump(under, Sending::new(c, api, mss), peer, Receiving::new(s, Api::Copy), window)
        }
        Direction::Receives => {
            pump(peer, Sending::new(s, Api::Copy, mss), under, Receiving::new(c, api), window)
        }
    };
    let _ = under.close(c);
    let _ = peer.close(s);
    let _ = peer.close(l);
    r
}

fn pump<S: SocketApi, R: SocketApi>(
    tx: &mut S,
    mut sending: Sending<S::TxBuf>,
    rx: &mut R,
    mut receiving: Receiving,
    window: Duration,
) -> Result<Bulk, AppError> {
    let pat = Pattern::new();
    let mut buf = vec![0u8; CHUNK];
    let mut idle = Idle::default();
    let t0 = Instant::now();
    let end = t0 + window;
    let now = loop {
        let wrote = sending.fill(tx, &pat)?;
        let got = receiving.read(rx, &mut buf, &pat)?;
        idle.pass(wrote || got.is_some());
        let now = Instant::now();
        watchdog::beat(now);
        if now >= end {
            break now;
        }
    };
    let (bytes, secs) = (receiving.received, (now - t0).as_secs_f64());
    sending.abandon();
    tx.shutdown(sending.fd, Shutdown::Write).map_err(sock("shutdown(SHUT_WR)"))?;
    let limit = Instant::now() + DRAIN_LIMIT;
    while !receiving.ended {
        let got = receiving.read(rx, &mut buf, &pat)?;
        idle.pass(got.is_some());
        let now = Instant::now();
        watchdog::beat(now);
        if now > limit {
            return Err(AppError::Drain(DRAIN_LIMIT, receiving.received));
        }
    }
    if receiving.received != sending.sent {
        return Err(AppError::Count { sent: sending.sent, received: receiving.received });
    }
    Ok(Bulk { bytes, secs, checked: receiving.received })
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
        watchdog::beat(t0 + rtt);
        if back != msg {
            return Err(AppError::Echo(i));
        }
        if i >= warm_up {
            samples.push(rtt);
        }
    }
    Ok(samples)
}
