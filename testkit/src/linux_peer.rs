//! The Linux kernel's TCP as the peer: senders and receivers of [`crate::data`] streams on
//! threads inside a namespace, with an overall deadline.
//!
//! Protocol, for both directions: the sender writes the stream, half-closes, then waits for the
//! receiver to close (so it returns only after everything was consumed); the receiver reads to
//! end of stream, then closes. Results carry the byte count and SHA-256 of what went through.
//! UDP: an echo server answering a number of datagrams.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use crate::data::{pattern_digest, Digest256, PatternStream, StreamHasher};
use crate::netns::{Netns, NetnsError, NsThread};
use crate::wait::wait_until;

/// Size of each write and read.
const CHUNK: usize = 64 * 1024;

/// Why a Linux peer failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The namespace could not be entered.
    #[error("namespace")]
    Netns(#[from] NetnsError),
    /// `bind`/`listen` failed.
    #[error("could not listen on {addr}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// `connect` failed (refusals are retried until the deadline).
    #[error("could not connect to {addr}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// No connection arrived, or the transfer did not finish, before the deadline.
    #[error("{what} did not finish within {timeout:?}")]
    Timeout {
        /// The step that was waiting.
        what: &'static str,
        /// The overall limit.
        timeout: Duration,
    },
    /// A socket operation failed.
    #[error("{what} failed")]
    Io {
        /// The step that failed.
        what: &'static str,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// What a peer sent or received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    /// Bytes through the connection.
    pub bytes: u64,
    /// SHA-256 of those bytes.
    pub digest: Digest256,
}

impl Transfer {
    /// True if exactly the first `len` bytes of stream `seed` went through.
    pub fn matches_pattern(&self, seed: u64, len: u64) -> bool {
        self.bytes == len && self.digest == pattern_digest(seed, len)
    }
}

/// A peer running on its own thread; [`PeerThread::join`] waits for its result.
#[derive(Debug)]
pub struct PeerThread {
    thread: NsThread<Result<Transfer, PeerError>>,
}

impl PeerThread {
    /// Waits for the peer to finish; a panic in it is re-raised here.
    pub fn join(self) -> Result<Transfer, PeerError> {
        self.thread.join()?
    }

    /// True once the peer has finished.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// Listens on `listen` inside `ns` (port 0 picks one), then accepts one connection on a thread
/// and receives until end of stream. Returns the bound address once listening.
pub fn spawn_tcp_server_recv(
    ns: &Netns,
    listen: SocketAddr,
    timeout: Duration,
) -> Result<(SocketAddr, PeerThread), PeerError> {
    let deadline = Instant::now() + timeout;
    let (listener, bound) = listen_in(ns, listen)?;
    let thread = ns.spawn("linux-server-recv", move || {
        let stream = accept(&listener, deadline, timeout)?;
        receive(stream, deadline, timeout)
    })?;
    Ok((bound, PeerThread { thread }))
}

/// Listens on `listen` inside `ns`, then accepts one connection on a thread and sends the
/// first `total` bytes of stream `seed`. Returns the bound address once listening.
pub fn spawn_tcp_server_send(
    ns: &Netns,
    listen: SocketAddr,
    total: u64,
    seed: u64,
    timeout: Duration,
) -> Result<(SocketAddr, PeerThread), PeerError> {
    let deadline = Instant::now() + timeout;
    let (listener, bound) = listen_in(ns, listen)?;
    let thread = ns.spawn("linux-server-send", move || {
        let stream = accept(&listener, deadline, timeout)?;
        send(stream, total, seed, deadline, timeout)
    })?;
    Ok((bound, PeerThread { thread }))
}

/// Connects from inside `ns` to `addr` on a thread and sends the first `total` bytes of
/// stream `seed`.
pub fn spawn_tcp_client_send(
    ns: &Netns,
    addr: SocketAddr,
    total: u64,
    seed: u64,
    timeout: Duration,
) -> Result<PeerThread, PeerError> {
    let deadline = Instant::now() + timeout;
    let thread = ns.spawn("linux-client-send", move || {
        let stream = connect(addr, deadline, timeout)?;
        send(stream, total, seed, deadline, timeout)
    })?;
    Ok(PeerThread { thread })
}

/// [`spawn_tcp_client_send`] and wait: blocks until the transfer ends.
pub fn tcp_client_send(
    ns: &Netns,
    addr: SocketAddr,
    total: u64,
    seed: u64,
    timeout: Duration,
) -> Result<Transfer, PeerError> {
    spawn_tcp_client_send(ns, addr, total, seed, timeout)?.join()
}

/// Connects from inside `ns` to `addr` on a thread and receives until end of stream.
pub fn spawn_tcp_client_recv(
    ns: &Netns,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<PeerThread, PeerError> {
    let deadline = Instant::now() + timeout;
    let thread = ns.spawn("linux-client-recv", move || {
        let stream = connect(addr, deadline, timeout)?;
        receive(stream, deadline, timeout)
    })?;
    Ok(PeerThread { thread })
}

/// An echo server on its own thread; [`EchoServer::join`] gives the clients' addresses.
#[derive(Debug)]
pub struct EchoServer {
    thread: NsThread<Result<Vec<SocketAddr>, PeerError>>,
}

impl EchoServer {
    /// Waits until every connection ended; returns where each came from, in accept order.
    pub fn join(self) -> Result<Vec<SocketAddr>, PeerError> {
        self.thread.join()?
    }
}

/// Listens on `listen` inside `ns`, accepts `connections` connections and echoes each (on a
/// thread of its own) until its client half-closes, then closes it. Returns the bound address
/// once listening.
pub fn spawn_tcp_echo_server(
    ns: &Netns,
    listen: SocketAddr,
    connections: usize,
    timeout: Duration,
) -> Result<(SocketAddr, EchoServer), PeerError> {
    let deadline = Instant::now() + timeout;
    let (listener, bound) = listen_in(ns, listen)?;
    let thread = ns.spawn("linux-echo", move || {
        let mut peers = Vec::with_capacity(connections);
        let mut echoes = Vec::with_capacity(connections);
        for _ in 0..connections {
            let stream = accept(&listener, deadline, timeout)?;
            peers.push(stream.peer_addr().map_err(|source| PeerError::Io { what: "peer_addr", source })?);
            echoes.push(std::thread::spawn(move || echo(stream)));
        }
        for e in echoes {
            e.join().map_err(|_| PeerError::Timeout { what: "echo (the thread panicked)", timeout })??;
        }
        Ok(peers)
    })?;
    Ok((bound, EchoServer { thread }))
}

/// Writes back everything read until end of stream.
fn echo(mut stream: TcpStream) -> Result<(), PeerError> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = stream.read(&mut buf).map_err(|source| PeerError::Io { what: "echo read", source })?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&buf[..n]).map_err(|source| PeerError::Io { what: "echo write", source })?;
    }
}

fn listen_in(ns: &Netns, listen: SocketAddr) -> Result<(TcpListener, SocketAddr), PeerError> {
    ns.try_run(|| {
        let listener =
            TcpListener::bind(listen).map_err(|source| PeerError::Listen { addr: listen, source })?;
        let bound = listener.local_addr().map_err(|source| PeerError::Io { what: "local_addr", source })?;
        listener.set_nonblocking(true).map_err(|source| PeerError::Io { what: "set_nonblocking", source })?;
        Ok((listener, bound))
    })?
}

fn accept(listener: &TcpListener, deadline: Instant, timeout: Duration) -> Result<TcpStream, PeerError> {
    let mut result = None;
    wait_until(deadline, || match listener.accept() {
        Ok((stream, _)) => {
            result = Some(Ok(stream));
            true
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => false,
        Err(source) => {
            result = Some(Err(PeerError::Io { what: "accept", source }));
            true
        }
    });
    let stream = result.unwrap_or(Err(PeerError::Timeout { what: "accept", timeout }))?;
    stream.set_nonblocking(false).map_err(|source| PeerError::Io { what: "set_nonblocking", source })?;
    Ok(stream)
}

fn connect(addr: SocketAddr, deadline: Instant, timeout: Duration) -> Result<TcpStream, PeerError> {
    let mut result = None;
    wait_until(deadline, || {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        match TcpStream::connect_timeout(&addr, left) {
            Ok(stream) => {
                result = Some(Ok(stream));
                true
            }
            // The listener may not be up yet: retry until the deadline.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => false,
            Err(source) => {
                result = Some(Err(PeerError::Connect { addr, source }));
                true
            }
        }
    });
    result.unwrap_or(Err(PeerError::Timeout { what: "connect", timeout }))
}

/// The time left before `deadline`, or a timeout error for step `what`.
fn left(deadline: Instant, what: &'static str, timeout: Duration) -> Result<Duration, PeerError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(PeerError::Timeout { what, timeout });
    }
    Ok(left)
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

fn send(
    mut stream: TcpStream,
    total: u64,
    seed: u64,
    deadline: Instant,
    timeout: Duration,
) -> Result<Transfer, PeerError> {
    let mut source = PatternStream::new(seed);
    let mut hasher = StreamHasher::new();
    let mut buf = vec![0u8; CHUNK];
    while source.offset() < total {
        let n = usize::try_from(total - source.offset()).map_or(CHUNK, |rest| rest.min(CHUNK));
        source.fill(&mut buf[..n]);
        stream
            .set_write_timeout(Some(left(deadline, "send", timeout)?))
            .map_err(|source| PeerError::Io { what: "set_write_timeout", source })?;
        stream.write_all(&buf[..n]).map_err(|source| {
            if is_timeout(&source) {
                PeerError::Timeout { what: "send", timeout }
            } else {
                PeerError::Io { what: "send", source }
            }
        })?;
        hasher.update(&buf[..n]);
    }
    stream.shutdown(Shutdown::Write).map_err(|source| PeerError::Io { what: "shutdown", source })?;
    // Wait for the receiver's close, discarding anything it sends.
    drain(&mut stream, &mut StreamHasher::new(), deadline, "waiting for the receiver to close", timeout)?;
    Ok(Transfer { bytes: hasher.bytes(), digest: hasher.finish() })
}

fn receive(mut stream: TcpStream, deadline: Instant, timeout: Duration) -> Result<Transfer, PeerError> {
    let mut hasher = StreamHasher::new();
    drain(&mut stream, &mut hasher, deadline, "receive", timeout)?;
    Ok(Transfer { bytes: hasher.bytes(), digest: hasher.finish() })
}

/// Reads until end of stream, hashing everything.
fn drain(
    stream: &mut TcpStream,
    hasher: &mut StreamHasher,
    deadline: Instant,
    what: &'static str,
    timeout: Duration,
) -> Result<(), PeerError> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        stream
            .set_read_timeout(Some(left(deadline, what, timeout)?))
            .map_err(|source| PeerError::Io { what: "set_read_timeout", source })?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Err(PeerError::Timeout { what, timeout }),
            Err(source) => return Err(PeerError::Io { what, source }),
        }
    }
}

/// Binds `listen` (UDP) inside `ns` and echoes every datagram back to its sender until
/// `datagrams` were answered or `timeout` passed. The thread returns how many it answered.
pub fn spawn_udp_echo_server(
    ns: &Netns,
    listen: SocketAddr,
    datagrams: usize,
    timeout: Duration,
) -> Result<(SocketAddr, NsThread<usize>), PeerError> {
    let deadline = Instant::now() + timeout;
    let (sock, bound) = ns.try_run(|| {
        let sock = UdpSocket::bind(listen).map_err(|source| PeerError::Listen { addr: listen, source })?;
        let bound = sock.local_addr().map_err(|source| PeerError::Io { what: "local_addr", source })?;
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|source| PeerError::Io { what: "set_read_timeout", source })?;
        Ok::<_, PeerError>((sock, bound))
    })??;
    let thread = ns.spawn("udp-echo", move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut answered = 0;
        while answered < datagrams && Instant::now() < deadline {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                if sock.send_to(&buf[..n], from).is_ok() {
                    answered += 1;
                }
            }
        }
        answered
    })?;
    Ok((bound, thread))
}
