//! The churning workload of one tenant, on one `GuestSockets` (non-blocking sockets, epoll):
//! keeps `conns` connections to the peer's echo server, and all the while starts transfers on
//! idle ones (at most `active` at once) of seeded data (testkit's `pattern`) of varying sizes,
//! checks every echoed byte, and churns: after a transfer a connection may be closed gracefully
//! (half-close, the echo server's end of stream, close) or at once, and a few transfers are
//! abandoned halfway (closed with data unread: a reset); each closed connection is replaced by a
//! new one. A mismatch or a connection without progress for [`STALL`] ends the workload with a
//! finding.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use slimtcp::api::{
    EpollEvent, EpollFd, EpollOp, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName, SocketApi, SocketError,
};
use slimtcp::nic::fault::Rng;
use slimtcp_guest::GuestSockets;
use slimtcp_testkit::data::{pattern, pattern_mismatch};

/// A connection that moves nothing for this long while it should is a stall (a hang, not slowness:
/// the slowest retransmission backoff of the faulty link stays far below it).
pub const STALL: Duration = Duration::from_secs(60);
/// Connections being opened at once, at most.
const MAX_CONNECTING: usize = 256;
/// Bytes generated or read per call.
const CHUNK: usize = 64 * 1024;
/// Socket errors whose text is kept for the summary.
const ERRORS_KEPT: usize = 8;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadConfig {
    /// Connections held open.
    pub conns: usize,
    /// Transfers running at once, at most.
    pub active: usize,
    /// Seed of every random choice and of the data.
    pub seed: u64,
    /// The peer's echo server.
    pub server: SocketAddrV4,
}

/// Counters of a workload, readable while it runs.
#[derive(Debug, Default)]
pub struct WorkloadStats {
    /// Connections established.
    pub opened: AtomicU64,
    /// Connections closed gracefully (end of stream seen).
    pub closed: AtomicU64,
    /// Connections closed at once after a transfer.
    pub closed_at_once: AtomicU64,
    /// Transfers abandoned halfway (closed with data unread).
    pub aborted: AtomicU64,
    /// Transfers completed and verified.
    pub transfers: AtomicU64,
    /// Bytes sent.
    pub bytes_sent: AtomicU64,
    /// Echoed bytes received and checked.
    pub bytes_verified: AtomicU64,
    /// Connections open now (as the workload sees them).
    pub open_now: AtomicU64,
    /// Connects that failed.
    pub connect_errors: AtomicU64,
    /// Other socket errors (resets, unexpected end of stream).
    pub socket_errors: AtomicU64,
    /// The first socket errors, as text.
    pub error_texts: Mutex<Vec<String>>,
    /// What ended the workload early (mismatch, stall), if anything.
    pub fatal: Mutex<Option<String>>,
}

impl WorkloadStats {
    fn error(&self, counter: &AtomicU64, text: String) {
        counter.fetch_add(1, Ordering::Relaxed);
        let mut kept = self.error_texts.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < ERRORS_KEPT {
            kept.push(text);
        }
    }

    /// The fatal finding, if any.
    pub fn fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The kept error texts.
    pub fn errors(&self) -> Vec<String> {
        self.error_texts.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting,
    Idle,
    Transfer,
    Draining,
}

/// What happens when a transfer is done (or abandoned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    KeepOpen,
    CloseGracefully,
    CloseAtOnce,
    /// Close once this many bytes came back (before the end: data is left unread).
    AbandonAt(u64),
}

#[derive(Debug)]
struct Conn {
    fd: Fd,
    phase: Phase,
    interest: Ready,
    seed: u64,
    size: u64,
    sent: u64,
    got: u64,
    after: After,
    progress: Instant,
    /// Counted in `opened` and `open_now`.
    established: bool,
}

/// What one event did to a connection.
enum Outcome {
    Keep,
    Close,
    Fatal(String),
}

struct Workload<'a> {
    api: GuestSockets,
    ep: EpollFd,
    cfg: WorkloadConfig,
    rng: Rng,
    slots: Vec<Option<Conn>>,
    free: Vec<usize>,
    idle: Vec<usize>,
    connecting: usize,
    active: usize,
    buf: Vec<u8>,
    stats: &'a WorkloadStats,
    tag: &'static str,
}

/// Runs the workload until `stop`, then closes every connection; returns the guest library
/// (still attached) so the caller decides when it detaches.
pub fn run(
    tag: &'static str,
    api: GuestSockets,
    cfg: WorkloadConfig,
    stop: &AtomicBool,
    stats: &Arc<WorkloadStats>,
) -> GuestSockets {
    let mut api = api;
    let ep = match api.epoll_create() {
        Ok(ep) => ep,
        Err(e) => {
            *stats.fatal.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(format!("{tag}: epoll_create: {e}"));
            return api;
        }
    };
    let mut w = Workload {
        api,
        ep,
        cfg,
        rng: Rng::new(cfg.seed),
        slots: (0..cfg.conns).map(|_| None).collect(),
        free: (0..cfg.conns).rev().collect(),
        idle: Vec::new(),
        connecting: 0,
        active: 0,
        buf: vec![0; CHUNK],
        stats,
        tag,
    };
    if let Err(f) = w.main_loop(stop) {
        *stats.fatal.lock().unwrap_or_else(PoisonError::into_inner) = Some(f);
    }
    w.close_all();
    let _ = w.api.epoll_close(w.ep);
    w.api
}

impl Workload<'_> {
    fn main_loop(&mut self, stop: &AtomicBool) -> Result<(), String> {
        let mut events = vec![EpollEvent::default(); 512];
        let mut last_stall_check = Instant::now();
        while !stop.load(Ordering::Acquire) {
            self.open_more();
            self.start_transfers();
            if self.stats.fatal().is_some() {
                return Ok(());
            }
            let n = self
                .api
                .epoll_wait(self.ep, &mut events, 10)
                .map_err(|e| format!("{}: epoll_wait: {e}", self.tag))?;
            for ev in &events[..n] {
                let slot = ev.data as usize;
                match self.handle(slot, ev.events) {
                    Outcome::Keep => {}
                    Outcome::Close => self.close(slot),
                    Outcome::Fatal(f) => return Err(format!("{}: {f}", self.tag)),
                }
            }
            if last_stall_check.elapsed() >= Duration::from_secs(1) {
                last_stall_check = Instant::now();
                self.check_stalls()?;
            }
        }
        Ok(())
    }

    fn open_more(&mut self) {
        while self.connecting < MAX_CONNECTING {
            let Some(slot) = self.free.pop() else { return };
            match self.open(slot) {
                Ok(conn) => {
                    self.slots[slot] = Some(conn);
                    self.connecting += 1;
                }
                Err(e) => {
                    self.stats.error(
                        &self.stats.connect_errors,
                        format!("{}: opening a connection: {e}", self.tag),
                    );
                    self.free.push(slot);
                    return;
                }
            }
        }
    }

    fn open(&mut self, slot: usize) -> Result<Conn, SocketError> {
        let fd = self.api.socket(Proto::Tcp)?;
        let r = (|| {
            self.api.setsockopt(fd, SockOpt::NonBlocking(true))?;
            match self.api.connect(fd, self.cfg.server) {
                Ok(()) | Err(SocketError::InProgress) => {}
                Err(e) => return Err(e),
            }
            self.api.epoll_ctl(
                self.ep,
                EpollOp::Add,
                fd,
                EpollEvent { events: Ready::OUT, data: slot as u64 },
            )
        })();
        if let Err(e) = r {
            let _ = self.api.close(fd);
            return Err(e);
        }
        Ok(Conn {
            fd,
            phase: Phase::Connecting,
            interest: Ready::OUT,
            seed: 0,
            size: 0,
            sent: 0,
            got: 0,
            after: After::KeepOpen,
            progress: Instant::now(),
            established: false,
        })
    }

    /// Sizes: mostly small messages, some of tens of KiB, a few of MiBs.
    fn pick_size(&mut self) -> u64 {
        match self.rng.gen_range(0..100) {
            0..=69 => 1 + self.rng.gen_range(0..4096),
            70..=94 => 4096 + self.rng.gen_range(0..256 * 1024),
            _ => 256 * 1024 + self.rng.gen_range(0..2 * 1024 * 1024),
        }
    }

    fn pick_after(&mut self, size: u64) -> After {
        match self.rng.gen_range(0..100) {
            0..=4 if size > 2 => After::AbandonAt(1 + self.rng.gen_range(0..size - 1)),
            0..=34 => After::CloseGracefully,
            35..=39 => After::CloseAtOnce,
            _ => After::KeepOpen,
        }
    }

    fn start_transfers(&mut self) {
        while self.active < self.cfg.active && !self.idle.is_empty() {
            let i = self.rng.gen_range(0..self.idle.len() as u64) as usize;
            let slot = self.idle.swap_remove(i);
            let size = self.pick_size();
            let after = self.pick_after(size);
            let seed = self.rng.next_u64();
            let Some(c) = self.slots[slot].as_mut() else { continue };
            c.phase = Phase::Transfer;
            c.seed = seed;
            c.size = size;
            c.sent = 0;
            c.got = 0;
            c.after = after;
            c.progress = Instant::now();
            self.active += 1;
            match self.handle(slot, Ready::OUT) {
                Outcome::Keep => {}
                Outcome::Close => self.close(slot),
                Outcome::Fatal(f) => {
                    // Reported by the next event on it as well; keep the first.
                    let mut fatal = self.stats.fatal.lock().unwrap_or_else(PoisonError::into_inner);
                    fatal.get_or_insert(format!("{}: {f}", self.tag));
                }
            }
        }
    }

    fn handle(&mut self, slot: usize, ready: Ready) -> Outcome {
        let Some(phase) = self.slots[slot].as_ref().map(|c| c.phase) else { return Outcome::Keep };
        match phase {
            Phase::Connecting => self.connected(slot, ready),
            Phase::Idle => self.idle_event(slot),
            Phase::Transfer => self.pump(slot),
            Phase::Draining => self.drain(slot),
        }
    }

    fn connected(&mut self, slot: usize, ready: Ready) -> Outcome {
        if !ready.intersects(Ready::OUT | Ready::ERR | Ready::HUP) {
            return Outcome::Keep;
        }
        let Some(c) = self.slots[slot].as_mut() else { return Outcome::Keep };
        self.connecting -= 1;
        let fd = c.fd;
        match self.api.getsockopt(fd, SockOptName::Error) {
            Ok(SockOpt::Error(None)) => {}
            Ok(SockOpt::Error(Some(e))) => {
                c.phase = Phase::Idle;
                self.stats.error(&self.stats.connect_errors, format!("connect: {e}"));
                return Outcome::Close;
            }
            other => {
                c.phase = Phase::Idle;
                self.stats.error(&self.stats.connect_errors, format!("SO_ERROR: {other:?}"));
                return Outcome::Close;
            }
        }
        c.phase = Phase::Idle;
        c.established = true;
        self.stats.opened.fetch_add(1, Ordering::Relaxed);
        self.stats.open_now.fetch_add(1, Ordering::Relaxed);
        self.idle.push(slot);
        self.set_interest(slot, Ready::IN)
    }

    fn set_interest(&mut self, slot: usize, interest: Ready) -> Outcome {
        let Some(c) = self.slots[slot].as_mut() else { return Outcome::Keep };
        if c.interest == interest {
            return Outcome::Keep;
        }
        c.interest = interest;
        match self.api.epoll_ctl(
            self.ep,
            EpollOp::Modify,
            c.fd,
            EpollEvent { events: interest, data: slot as u64 },
        ) {
            Ok(()) => Outcome::Keep,
            Err(e) => Outcome::Fatal(format!("epoll_ctl modify: {e}")),
        }
    }

    /// An idle connection is readable: the peer never speaks first, so only an error or an end
    /// of stream can be there.
    fn idle_event(&mut self, slot: usize) -> Outcome {
        let Some(c) = self.slots[slot].as_ref() else { return Outcome::Keep };
        match self.api.recv(c.fd, &mut self.buf[..1]) {
            Err(SocketError::WouldBlock) => Outcome::Keep,
            Ok(0) => self.fail(slot, "an idle connection saw end of stream".into()),
            Ok(n) => Outcome::Fatal(format!("{n} unsolicited bytes on an idle connection")),
            Err(e) => self.fail(slot, format!("idle connection: {e}")),
        }
    }

    fn fail(&mut self, slot: usize, text: String) -> Outcome {
        self.stats.error(&self.stats.socket_errors, text);
        if let Some(c) = self.slots[slot].as_mut() {
            if c.phase == Phase::Idle {
                // Not in a transfer: take it off the idle list.
                self.idle.retain(|&s| s != slot);
            }
            // Treated like an idle one by `close` (no transfer is counted twice).
            if c.phase == Phase::Transfer {
                self.active -= 1;
            }
            c.phase = Phase::Draining;
        }
        Outcome::Close
    }

    fn pump(&mut self, slot: usize) -> Outcome {
        let Some(c) = self.slots[slot].as_mut() else { return Outcome::Keep };
        let fd = c.fd;
        // Send what the window takes.
        while c.sent < c.size {
            let n = ((c.size - c.sent) as usize).min(CHUNK);
            pattern(c.seed, c.sent, &mut self.buf[..n]);
            match self.api.send(fd, &self.buf[..n]) {
                Ok(k) => {
                    c.sent += k as u64;
                    c.progress = Instant::now();
                    self.stats.bytes_sent.fetch_add(k as u64, Ordering::Relaxed);
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return self.fail(slot, format!("send: {e}")),
            }
        }
        // Check what came back.
        loop {
            let Some(c) = self.slots[slot].as_mut() else { return Outcome::Keep };
            if c.got >= c.size {
                break;
            }
            let want = ((c.size - c.got) as usize).min(CHUNK);
            match self.api.recv(fd, &mut self.buf[..want]) {
                Ok(0) => {
                    let text = format!("end of stream after {} of {} bytes", c.got, c.size);
                    return self.fail(slot, text);
                }
                Ok(n) => {
                    if let Some(at) = pattern_mismatch(c.seed, c.got, &self.buf[..n]) {
                        return Outcome::Fatal(format!(
                            "data mismatch at byte {} of a {}-byte transfer (stream seed {:#x})",
                            c.got + at as u64,
                            c.size,
                            c.seed
                        ));
                    }
                    c.got += n as u64;
                    c.progress = Instant::now();
                    self.stats.bytes_verified.fetch_add(n as u64, Ordering::Relaxed);
                    if let After::AbandonAt(at) = c.after {
                        if c.got >= at && c.got < c.size {
                            self.stats.aborted.fetch_add(1, Ordering::Relaxed);
                            self.active -= 1;
                            c.phase = Phase::Draining;
                            return Outcome::Close;
                        }
                    }
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return self.fail(slot, format!("recv: {e}")),
            }
        }
        let Some(c) = self.slots[slot].as_mut() else { return Outcome::Keep };
        if c.got < c.size {
            let interest = if c.sent < c.size { Ready::IN | Ready::OUT } else { Ready::IN };
            return self.set_interest(slot, interest);
        }
        // Done and verified.
        self.active -= 1;
        self.stats.transfers.fetch_add(1, Ordering::Relaxed);
        match c.after {
            After::KeepOpen | After::AbandonAt(_) => {
                c.phase = Phase::Idle;
                self.idle.push(slot);
                self.set_interest(slot, Ready::IN)
            }
            After::CloseAtOnce => {
                c.phase = Phase::Draining;
                self.stats.closed_at_once.fetch_add(1, Ordering::Relaxed);
                Outcome::Close
            }
            After::CloseGracefully => {
                c.phase = Phase::Draining;
                c.progress = Instant::now();
                if let Err(e) = self.api.shutdown(fd, Shutdown::Write) {
                    return self.fail(slot, format!("shutdown: {e}"));
                }
                c.got = 0;
                c.size = 0;
                // The end of stream is not counted as a graceful close until it is seen.
                c.after = After::CloseGracefully;
                self.set_interest(slot, Ready::IN)
            }
        }
    }

    /// Half-closed: waits for the echo server's end of stream.
    fn drain(&mut self, slot: usize) -> Outcome {
        let Some(c) = self.slots[slot].as_ref() else { return Outcome::Keep };
        match self.api.recv(c.fd, &mut self.buf[..1]) {
            Ok(0) => {
                self.stats.closed.fetch_add(1, Ordering::Relaxed);
                Outcome::Close
            }
            Ok(n) => Outcome::Fatal(format!("{n} bytes after the echo was complete")),
            Err(SocketError::WouldBlock) => Outcome::Keep,
            Err(e) => {
                self.stats.error(&self.stats.socket_errors, format!("waiting for end of stream: {e}"));
                Outcome::Close
            }
        }
    }

    /// Closes slot `slot`'s connection and frees the slot (a new one is opened in its place).
    fn close(&mut self, slot: usize) {
        let Some(c) = self.slots[slot].take() else { return };
        match c.phase {
            Phase::Connecting => self.connecting -= 1,
            Phase::Idle => self.idle.retain(|&s| s != slot),
            Phase::Transfer => self.active -= 1,
            Phase::Draining => {}
        }
        if c.established {
            self.stats.open_now.fetch_sub(1, Ordering::Relaxed);
        }
        let _ = self.api.epoll_ctl(self.ep, EpollOp::Delete, c.fd, EpollEvent::default());
        if let Err(e) = self.api.close(c.fd) {
            self.stats.error(&self.stats.socket_errors, format!("close: {e}"));
        }
        self.free.push(slot);
    }

    fn check_stalls(&self) -> Result<(), String> {
        for c in self.slots.iter().flatten() {
            let waiting = match c.phase {
                Phase::Idle => continue,
                Phase::Connecting => "connecting",
                Phase::Transfer => "in a transfer",
                Phase::Draining => "waiting for the end of stream",
            };
            if c.progress.elapsed() > STALL {
                let port = self.api.local_addr(c.fd).map(|a| a.port()).unwrap_or(0);
                return Err(format!(
                    "{}: connection {} (port {port}) stalled {waiting} for {:?} (sent {} of {}, got {}); left open for the release check to describe",
                    self.tag, c.fd, STALL, c.sent, c.size, c.got
                ));
            }
        }
        Ok(())
    }

    /// Closes every connection but a stalled one: that stays open, so the release check fails
    /// and both stacks describe it (`Interface::tcp_describe`).
    fn close_all(&mut self) {
        for slot in 0..self.slots.len() {
            if let Some(c) = self.slots[slot].as_mut() {
                if c.phase != Phase::Idle && c.progress.elapsed() > STALL {
                    continue;
                }
                if c.phase == Phase::Transfer {
                    // Its bytes were checked as far as they came.
                    c.phase = Phase::Draining;
                    self.active -= 1;
                }
                self.close(slot);
            }
        }
    }
}
