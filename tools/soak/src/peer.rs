//! The far end of a tenant's link: a SlimTCP [`Interface`] on its own thread serving TCP echo on
//! [`ECHO_PORT`], event-driven as `stack/examples/tap_echo.rs` ([`Interface::take_activity`]:
//! only sockets with news are served, however many are idle). Each connection is echoed back
//! byte for byte and closed once its client half-closed and everything was echoed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use slimtcp::api::{ConnError, SocketError};
use slimtcp::iface::{Activity, Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::memwire::{MemwireNic, MemwireStats};
use slimtcp::tcp::KeepAlive;

use crate::clock_nic::ClockNic;
use crate::error::SoakError;
use crate::tenant::Addresses;

/// The echo port.
pub const ECHO_PORT: u16 = 7;
/// Connections waiting to be accepted, at most.
const BACKLOG: usize = 4096;
/// Bytes read per call.
const READ_CHUNK: usize = 64 * 1024;
/// A connection stops reading while this much waits to be echoed.
const MAX_PENDING: usize = 256 * 1024;
/// Longest nap of an idle loop.
const IDLE_NAP: Duration = Duration::from_micros(100);
/// Keepalive of every echo session: half-open sessions end within about 14 s of going quiet.
/// Nine probes, as Linux's default: on the faulty link a probe or its answer is lost about
/// once in 50, and with three probes, a live idle session was given up (and its client reset)
/// about once per 90-second run.
const KEEPALIVE: KeepAlive =
    KeepAlive { idle: Duration::from_secs(5), interval: Duration::from_secs(1), count: 9 };
/// Loop turns between two publications of the gauges.
const PUBLISH_EVERY: u32 = 256;

/// What the peer holds and did, published for the sampler.
#[derive(Debug, Default)]
pub struct PeerGauges {
    /// Sockets of the peer's stack (listener, connections, TIME-WAIT).
    pub stack_sockets: AtomicU64,
    /// Echo sessions being served.
    pub sessions: AtomicU64,
    /// Connections accepted in all.
    pub accepted: AtomicU64,
    /// Bytes echoed in all.
    pub echoed: AtomicU64,
    /// Connections that ended with an error (reset by the client, for one).
    pub failed: AtomicU64,
    /// Of those, the ones this end gave up on (keepalive or retransmission timeout), resetting
    /// the client: on a live client, a finding.
    pub timed_out: AtomicU64,
    /// Frames in flight on the link, both directions.
    pub link_in_flight: AtomicU64,
    /// The link's counters as seen from the peer's end.
    pub link: Mutex<MemwireStats>,
    /// Set to ask the peer for a description of its connections (`described`).
    pub describe_wanted: AtomicBool,
    /// The peer's answer: one line per connection of its stack (`Interface::tcp_describe`).
    pub described: Mutex<Option<Vec<String>>>,
}

impl PeerGauges {
    /// The link's counters.
    pub fn link_stats(&self) -> MemwireStats {
        *self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks the running peer to describe its connections; waits up to `wait` for the answer.
    pub fn describe(&self, wait: Duration) -> Option<Vec<String>> {
        *self.described.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.describe_wanted.store(true, Ordering::Release);
        let answered = || self.described.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        slimtcp_testkit::wait::wait_for(wait, answered);
        self.described.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// One echo connection.
#[derive(Debug, Default)]
struct Session {
    pending: Vec<u8>,
    off: usize,
    eof: bool,
}

/// Whether a session goes on.
enum Fate {
    Open,
    Done,
    Failed(SocketError),
}

impl Session {
    fn outstanding(&self) -> &[u8] {
        &self.pending[self.off..]
    }

    fn serve<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut Interface<N>,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> (Fate, u64) {
        let mut echoed = 0u64;
        let r = (|| -> Result<(), SocketError> {
            echoed += self.flush(iface, h)?;
            while !self.eof && self.outstanding().len() < MAX_PENDING {
                match iface.tcp_recv(h, buf) {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        self.pending.extend_from_slice(&buf[..n]);
                        echoed += self.flush(iface, h)?;
                    }
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) if self.eof && self.outstanding().is_empty() => (Fate::Done, echoed),
            Ok(()) => (Fate::Open, echoed),
            Err(e) => (Fate::Failed(e), echoed),
        }
    }

    fn flush<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut Interface<N>,
        h: SocketHandle,
    ) -> Result<u64, SocketError> {
        let mut sent = 0u64;
        while !self.outstanding().is_empty() {
            match iface.tcp_send(h, self.outstanding()) {
                Ok(n) => {
                    self.off += n;
                    sent += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(e),
            }
        }
        if self.outstanding().is_empty() {
            self.pending.clear();
            self.off = 0;
        } else if self.off >= MAX_PENDING {
            self.pending.drain(..self.off);
            self.off = 0;
        }
        Ok(sent)
    }
}

/// The echo server's state.
struct EchoServer {
    listener: SocketHandle,
    sessions: HashMap<SocketHandle, Session>,
    buf: Vec<u8>,
    activity: Vec<Activity>,
}

impl EchoServer {
    fn service<N: slimtcp::nic::Nic>(&mut self, iface: &mut Interface<N>, g: &PeerGauges) -> bool {
        let mut activity = std::mem::take(&mut self.activity);
        iface.take_activity(&mut activity);
        let any = !activity.is_empty();
        for a in activity.drain(..) {
            if a.handle == self.listener {
                while let Ok(h) = iface.tcp_accept(self.listener) {
                    g.accepted.fetch_add(1, Ordering::Relaxed);
                    self.sessions.insert(h, Session::default());
                    // Data may have arrived before the accept; no later event reports it.
                    self.serve(iface, h, g);
                }
            } else {
                self.serve(iface, a.handle, g);
            }
        }
        self.activity = activity;
        any
    }

    fn serve<N: slimtcp::nic::Nic>(&mut self, iface: &mut Interface<N>, h: SocketHandle, g: &PeerGauges) {
        let Some(s) = self.sessions.get_mut(&h) else { return };
        let (fate, echoed) = s.serve(iface, h, &mut self.buf);
        g.echoed.fetch_add(echoed, Ordering::Relaxed);
        match fate {
            Fate::Open => {}
            Fate::Done => {
                self.sessions.remove(&h);
                let _ = iface.tcp_close(h);
            }
            Fate::Failed(e) => {
                self.sessions.remove(&h);
                g.failed.fetch_add(1, Ordering::Relaxed);
                if e == SocketError::Connection(ConnError::TimedOut) {
                    g.timed_out.fetch_add(1, Ordering::Relaxed);
                    match iface.tcp_info(h) {
                        Ok(i) => log::warn!(
                            "soak: the peer timed out its echo session {} -> {} ({:?}, {:?})",
                            i.local,
                            i.remote,
                            i.state,
                            i.stats
                        ),
                        Err(_) => log::warn!("soak: the peer timed out an echo session"),
                    }
                }
                let _ = iface.tcp_abort(h);
            }
        }
    }
}

/// A running peer.
#[derive(Debug)]
pub struct Peer {
    /// Its gauges.
    pub gauges: Arc<PeerGauges>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Peer {
    /// Starts the peer on `nic` (its end of the link) at `addrs.peer_ip()`.
    pub fn start(name: &str, nic: ClockNic<MemwireNic>, addrs: Addresses) -> Result<Peer, SoakError> {
        let gauges = Arc::new(PeerGauges::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread_name = format!("soak-{name}-peer");
        let thread = {
            let (g, stop) = (Arc::clone(&gauges), Arc::clone(&stop));
            std::thread::Builder::new()
                .name(thread_name.clone())
                .spawn(move || run(nic, addrs, &g, &stop))
                .map_err(|source| SoakError::Spawn { name: thread_name, source })?
        };
        Ok(Peer { gauges, stop, thread: Some(thread) })
    }

    /// Whether its thread is still running.
    pub fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops it; returns why it failed, if it did.
    pub fn stop(mut self) -> Option<String> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take()?.join() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some("the peer thread panicked".into()),
        }
    }
}

fn run(nic: ClockNic<MemwireNic>, addrs: Addresses, g: &PeerGauges, stop: &AtomicBool) -> Result<(), String> {
    let mut cfg = InterfaceConfig::new(addrs.peer_mac(), addrs.peer_ip(), 24);
    cfg.max_sockets = 65_536;
    let mut iface = Interface::new(nic, cfg);
    // A closed session waits 5 s, not 60, in FIN-WAIT-2 for a FIN the faulty link may have
    // lost (an operator's tcp_fin_timeout), so the drain check sees what leaks, not what
    // lingers.
    let mut tcp = iface.config().tcp.clone();
    tcp.fin_wait2_timeout = Duration::from_secs(5);
    // A reset the faulty link lost (or whose challenge ACK the RFC 5961 rate limit held back)
    // leaves a session that waits for data from a connection the client no longer has, as it
    // would on Linux: like a real server, the echo server finds those with keepalive.
    tcp.keepalive = Some(KEEPALIVE);
    let listener =
        iface.tcp_listen_with(ECHO_PORT, BACKLOG, Some(tcp)).map_err(|e| format!("listen: {e}"))?;
    let mut server =
        EchoServer { listener, sessions: HashMap::new(), buf: vec![0; READ_CHUNK], activity: Vec::new() };
    // From now on the stack keeps the list of sockets with news.
    iface.take_activity(&mut server.activity);
    let mut turns = 0u32;
    while !stop.load(Ordering::Acquire) {
        let now = iface.nic().now();
        let busy = iface.poll(now).map_err(|e| format!("poll: {e}"))?;
        let app = server.service(&mut iface, g);
        turns += 1;
        if g.describe_wanted.swap(false, Ordering::AcqRel) {
            let lines = iface.tcp_describe(now);
            *g.described.lock().unwrap_or_else(PoisonError::into_inner) = Some(lines);
        }
        if turns >= PUBLISH_EVERY {
            turns = 0;
            publish(&iface, &server, g);
        }
        if !busy && !app {
            let nap = iface.poll_at().map_or(IDLE_NAP, |t| t.saturating_since(now).min(IDLE_NAP));
            std::thread::sleep(nap);
        }
    }
    publish(&iface, &server, g);
    Ok(())
}

fn publish(iface: &Interface<ClockNic<MemwireNic>>, server: &EchoServer, g: &PeerGauges) {
    g.stack_sockets.store(iface.socket_count() as u64, Ordering::Relaxed);
    g.sessions.store(server.sessions.len() as u64, Ordering::Relaxed);
    let nic = iface.nic().inner();
    g.link_in_flight.store(nic.in_flight() as u64, Ordering::Relaxed);
    *g.link.lock().unwrap_or_else(PoisonError::into_inner) = nic.stats();
}
