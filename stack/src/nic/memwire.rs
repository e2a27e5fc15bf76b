//! An in-memory Ethernet link between two [`MemwireNic`] ends, with seeded fault injection.
//!
//! [`link`] returns the two ends. Each direction has its own [`FaultInjector`] and in-flight queue
//! behind one mutex, locked once per burst, so the ends can be driven from two threads. Frames
//! move without copying: the receiver gets the very `PacketBuf` the sender transmitted (bytes are
//! copied only for duplicates and for the optional pcap capture).
//!
//! Time is whatever the caller passes as `now`: a frame sent at `now` becomes receivable when the
//! receiver's `now` reaches its delivery time. [`MemwireNic::next_delivery`] tells a simulation
//! where to advance a virtual clock to. Delivery order is FIFO unless the direction's
//! [`FaultConfig::reorder`] is set, in which case frames leave in `(deliver_at, send order)` order.

use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::nic::buf::{DEFAULT_BUF_SIZE, DEFAULT_HEADROOM};
use crate::nic::burst_queue::BurstQueue;
use crate::nic::fault::{Fate, FaultConfig, FaultError, FaultInjector, FaultStats, Rng};
use crate::nic::offload;
use crate::nic::pcap::{PcapError, PcapWriter};
use crate::nic::pool::PoolOwner;
use crate::nic::{ExternalFrame, Nic, NicCapabilities, NicError, PacketBuf};
use crate::time::Instant;

/// Default number of frames in flight per direction before frames are dropped.
pub const DEFAULT_CAPACITY: usize = 4096;
/// Most free transmit buffers a link keeps (both ends share them), at least ...
const POOL_KEEP: usize = 1024;
/// ... or this share of the link's capacity (a deep link's in-flight count swings by more than
/// `POOL_KEEP` frames as bursts drain and refill: buffers freed beyond the pool's room were
/// allocated and zeroed again; 4096 connections' windows showed it), ...
const POOL_KEEP_SHARE: usize = 4;
/// ... but never more than this (64 MiB of 2 KiB buffers held by an idle link).
const POOL_KEEP_MAX: usize = 32 * 1024;

/// Errors setting up a link.
#[derive(Debug, thiserror::Error)]
pub enum MemwireError {
    /// A direction's fault configuration is invalid.
    #[error("invalid fault configuration for direction {direction}")]
    InvalidFaults {
        /// `"a_to_b"` or `"b_to_a"`.
        direction: &'static str,
        /// What is wrong with it.
        #[source]
        source: FaultError,
    },
    /// A capacity of zero frames would drop everything.
    #[error("link capacity must be at least one frame")]
    ZeroCapacity,
    /// The capture file could not be created.
    #[error("cannot start the link capture")]
    Capture(#[source] PcapError),
}

/// How to build a link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Faults on frames sent by end A to end B.
    pub a_to_b: FaultConfig,
    /// Faults on frames sent by end B to end A.
    pub b_to_a: FaultConfig,
    /// Seed of both directions' fault decisions.
    pub seed: u64,
    /// Frames in flight per direction; frames beyond it are dropped and counted.
    pub capacity: usize,
    /// Capture both directions, as delivered, into this pcap file.
    pub pcap: Option<PathBuf>,
    /// Capabilities reported by both ends.
    pub caps: NicCapabilities,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            a_to_b: FaultConfig::default(),
            b_to_a: FaultConfig::default(),
            seed: 0,
            capacity: DEFAULT_CAPACITY,
            pcap: None,
            caps: NicCapabilities::default(),
        }
    }
}

/// Counters of one direction of a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Frames handed to `transmit`.
    pub sent: u64,
    /// Frames returned by `receive`.
    pub received: u64,
    /// Frames dropped because `capacity` frames were already in flight.
    pub dropped_full: u64,
    /// Faults the direction's injector applied.
    pub faults: FaultStats,
}

/// Counters of a link as seen from one end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemwireStats {
    /// The direction this end transmits on.
    pub tx: DirectionStats,
    /// The direction this end receives from.
    pub rx: DirectionStats,
    /// Writing the capture failed; capturing stopped (the error was logged).
    pub capture_failed: bool,
}

/// Builds a link and returns its two ends, A and B.
pub fn link(config: LinkConfig) -> Result<(MemwireNic, MemwireNic), MemwireError> {
    config.a_to_b.validate().map_err(|source| MemwireError::InvalidFaults { direction: "a_to_b", source })?;
    config.b_to_a.validate().map_err(|source| MemwireError::InvalidFaults { direction: "b_to_a", source })?;
    if config.capacity == 0 {
        return Err(MemwireError::ZeroCapacity);
    }
    let capture = match &config.pcap {
        Some(path) => Some(Mutex::new(Capture {
            writer: Some(PcapWriter::create(path).map_err(MemwireError::Capture)?),
            failed: false,
        })),
        None => None,
    };
    let mut seeds = Rng::new(config.seed);
    let direction = |faults: FaultConfig, seed: u64| {
        Mutex::new(Direction {
            injector: FaultInjector::new(faults, seed),
            queue: if faults.may_reorder() {
                Queue::Ordered(BinaryHeap::new())
            } else if faults.is_none() && capture.is_none() {
                Queue::Plain { frames: BurstQueue::default(), last_at: Instant::ZERO }
            } else {
                Queue::Fifo(VecDeque::new())
            },
            next_seq: 0,
            stats: DirectionStats::default(),
            timed: faults.may_reorder() || !faults.delay.is_zero() || !faults.jitter.is_zero(),
        })
    };
    let a_to_b = direction(config.a_to_b, seeds.next_u64());
    let b_to_a = direction(config.b_to_a, seeds.next_u64());
    let shared = Arc::new(Shared {
        dirs: [a_to_b, b_to_a],
        alive: [AtomicBool::new(true), AtomicBool::new(true)],
        capacity: config.capacity,
        capture,
        pool: PoolOwner::new(
            (config.capacity / POOL_KEEP_SHARE).clamp(POOL_KEEP, POOL_KEEP_MAX),
            DEFAULT_BUF_SIZE,
        ),
    });
    let end = |side| MemwireNic {
        shared: Arc::clone(&shared),
        side,
        caps: config.caps,
        completed: Vec::new(),
        scratch: Vec::new(),
        external_copied_bytes: 0,
    };
    Ok((end(0), end(1)))
}

/// One end of an in-memory link. `Send`: each end may be driven by its own thread.
#[derive(Debug)]
pub struct MemwireNic {
    shared: Arc<Shared>,
    /// 0 for end A, 1 for end B; also the index of the direction this end transmits on.
    side: usize,
    caps: NicCapabilities,
    /// Tokens of external payloads copied onto the link, not yet polled.
    completed: Vec<u64>,
    /// The flattened burst `transmit_external` hands to `transmit` (kept to reuse).
    scratch: Vec<PacketBuf>,
    /// External payload bytes this end copied (memwire has no zero-copy path).
    external_copied_bytes: u64,
}

#[derive(Debug)]
struct Shared {
    /// `[a_to_b, b_to_a]`.
    dirs: [Mutex<Direction>; 2],
    /// Whether end A / end B still exists.
    alive: [AtomicBool; 2],
    capacity: usize,
    capture: Option<Mutex<Capture>>,
    /// Both ends' transmit buffers: a frame's buffer comes back when the receiver drops it.
    pool: PoolOwner,
}

#[derive(Debug)]
struct Capture {
    writer: Option<PcapWriter>,
    failed: bool,
}

#[derive(Debug)]
struct Direction {
    injector: FaultInjector,
    queue: Queue,
    next_seq: u64,
    stats: DirectionStats,
    /// Frames may be held back (delay, jitter, reorder). Without that, a frame is deliverable
    /// as soon as it is sent: the two ends may then read different clocks (real clocks started
    /// at different moments), and no frame waits for the receiver's clock to catch up.
    timed: bool,
}

/// A frame in flight.
#[derive(Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    frame: PacketBuf,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest `(at, seq)` first.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// In-flight frames of one direction. The injector keeps in-order frames' delivery times
/// non-decreasing, so a FIFO suffices unless the direction reorders; a direction without
/// faults or delays whose frames nobody captures keeps the frames alone (`Plain`): each is
/// receivable as soon as it is sent, so neither a time nor a sequence number is kept per frame,
/// and bursts move in and out whole ([`BurstQueue`]).
#[derive(Debug)]
enum Queue {
    Plain {
        frames: BurstQueue,
        /// When the latest frame was sent (the earliest is receivable no later).
        last_at: Instant,
    },
    Fifo(VecDeque<Entry>),
    Ordered(BinaryHeap<Entry>),
}

impl Queue {
    fn len(&self) -> usize {
        match self {
            Queue::Plain { frames, .. } => frames.len(),
            Queue::Fifo(q) => q.len(),
            Queue::Ordered(h) => h.len(),
        }
    }

    fn push(&mut self, entry: Entry) {
        match self {
            Queue::Plain { frames, last_at } => {
                *last_at = entry.at;
                frames.push(entry.frame);
            }
            Queue::Fifo(q) => {
                debug_assert!(q.back().is_none_or(|last| last.at <= entry.at));
                q.push_back(entry);
            }
            Queue::Ordered(h) => h.push(entry),
        }
    }

    fn next_at(&self) -> Option<Instant> {
        match self {
            Queue::Plain { frames, last_at } => (!frames.is_empty()).then_some(*last_at),
            Queue::Fifo(q) => q.front().map(|e| e.at),
            Queue::Ordered(h) => h.peek().map(|e| e.at),
        }
    }

    fn pop_due(&mut self, now: Instant) -> Option<Entry> {
        if self.next_at()? > now {
            return None;
        }
        match self {
            Queue::Plain { frames, last_at } => {
                frames.pop_front().map(|frame| Entry { at: *last_at, seq: 0, frame })
            }
            Queue::Fifo(q) => q.pop_front(),
            Queue::Ordered(h) => h.pop(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the queue half-updated in a harmful way.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MemwireNic {
    fn tx_index(&self) -> usize {
        self.side
    }

    fn rx_index(&self) -> usize {
        1 - self.side
    }

    /// True for end A, false for end B.
    /// External payload bytes this end copied into frames (`transmit_external` copies).
    pub fn external_copied_bytes(&self) -> u64 {
        self.external_copied_bytes
    }

    pub fn is_a(&self) -> bool {
        self.side == 0
    }

    /// When the earliest frame in flight towards this end becomes receivable.
    pub fn next_delivery(&self) -> Option<Instant> {
        lock(&self.shared.dirs[self.rx_index()]).queue.next_at()
    }

    /// Counters of both directions, from this end's point of view.
    pub fn stats(&self) -> MemwireStats {
        let tx = lock(&self.shared.dirs[self.tx_index()]).stats_snapshot();
        let rx = lock(&self.shared.dirs[self.rx_index()]).stats_snapshot();
        let capture_failed = self.shared.capture.as_ref().is_some_and(|c| lock(c).failed);
        MemwireStats { tx, rx, capture_failed }
    }

    /// Frames in flight in both directions; zero means the link is quiet.
    pub fn in_flight(&self) -> usize {
        self.shared.dirs.iter().map(|d| lock(d).queue.len()).sum()
    }

    /// Frames in flight towards this end (due or not).
    pub fn rx_pending(&self) -> usize {
        lock(&self.shared.dirs[self.rx_index()]).queue.len()
    }

    /// Whether this end verifies received checksums for the stack (receive offload of every
    /// protocol in its capabilities).
    fn verifies_rx(&self) -> bool {
        let c = self.caps.checksum;
        c.ipv4.rx && c.tcp.rx && c.udp.rx
    }

    /// Writes the capture's buffered frames to its file (no-op without a capture).
    pub fn flush_capture(&self) -> Result<(), PcapError> {
        let Some(capture) = &self.shared.capture else { return Ok(()) };
        match lock(capture).writer.as_mut() {
            Some(writer) => writer.flush(),
            None => Ok(()),
        }
    }
}

impl Direction {
    fn stats_snapshot(&self) -> DirectionStats {
        DirectionStats { faults: self.injector.stats(), ..self.stats }
    }

    #[inline]
    fn enqueue(&mut self, at: Instant, frame: PacketBuf) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.push(Entry { at, seq, frame });
    }
}

impl Drop for MemwireNic {
    fn drop(&mut self) {
        self.shared.alive[self.side].store(false, Ordering::Release);
    }
}

impl Nic for MemwireNic {
    fn capabilities(&self) -> NicCapabilities {
        self.caps
    }

    /// Returns up to `min(max, max_burst)` frames whose delivery time is `<= now`.
    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        let max = max.min(self.caps.max_burst);
        let shared = &*self.shared;
        let mut dir = lock(&shared.dirs[self.rx_index()]);
        if let Queue::Plain { frames, .. } = &mut dir.queue {
            // The whole burst at once: nothing to decide per frame but the device's verdict.
            let start = out.len();
            let n = frames.take(out, max);
            if self.verifies_rx() {
                // A faultless link corrupts nothing: every frame arrives as sent.
                out[start..].iter_mut().for_each(|frame| frame.rx_checksum_ok = Some(true));
            }
            dir.stats.received += n as u64;
            return Ok(n);
        }
        let mut capture = shared.capture.as_ref().map(lock);
        let mut n = 0;
        while n < max {
            let due = if dir.timed { now } else { Instant::from_micros(u64::MAX) };
            let Some(entry) = dir.queue.pop_due(due) else { break };
            if let Some(cap) = capture.as_deref_mut() {
                cap.record(entry.at, entry.frame.as_slice());
            }
            let mut frame = entry.frame;
            if self.verifies_rx() {
                // The device's verdict; a link that may corrupt frames checks for real.
                let intact = dir.injector.config().corrupt == 0.0 || offload::verify(frame.as_slice());
                frame.rx_checksum_ok = Some(intact);
            }
            out.push(frame);
            n += 1;
        }
        dir.stats.received += n as u64;
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        Ok(self.shared.pool.take(DEFAULT_HEADROOM))
    }

    /// Takes frames from the front while the link has room; the rest stay in `frames` for a
    /// later call (back-pressure, like a NIC's full TX ring). Frames lost by fault injection
    /// (and duplicates beyond the capacity) are dropped and counted. Fails with `LinkDown`
    /// (taking nothing) when the other end is gone.
    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        if !self.shared.alive[self.rx_index()].load(Ordering::Acquire) {
            return Err(NicError::LinkDown);
        }
        if frames.is_empty() {
            return Ok(0);
        }
        let capacity = self.shared.capacity;
        let mut dir = lock(&self.shared.dirs[self.tx_index()]);
        // Like a NIC's TX ring: when the link is full, the rest of the burst stays with the
        // caller (back-pressure), it is not lost.
        let count = frames.len().min(capacity.saturating_sub(dir.queue.len()));
        // Checksums left to the device are filled here only when something needs them real.
        let fill =
            self.shared.capture.is_some() || dir.injector.config().corrupt > 0.0 || !self.verifies_rx();
        if fill {
            for frame in &mut frames[..count] {
                if offload::pending(&frame.offload) {
                    offload::fill(frame);
                }
            }
        }
        let dir = &mut *dir;
        if let Queue::Plain { frames: queue, last_at } = &mut dir.queue {
            // The whole burst at once, each frame receivable from now.
            if let Some(at) = dir.injector.pass_faultless_burst(now, count) {
                *last_at = at;
                queue.push_burst(frames, count);
                dir.stats.sent += count as u64;
                return Ok(count);
            }
        }
        for frame in frames.drain(..count) {
            dir.stats.sent += 1;
            if let Some(at) = dir.injector.pass_faultless(now) {
                dir.enqueue(at, frame);
                continue;
            }
            match dir.injector.apply(now, frame) {
                // Its buffer goes back to the pool.
                Fate::Dropped(frame) => drop(frame),
                Fate::Deliver { frame, at, duplicate } => {
                    dir.enqueue(at, frame);
                    if let Some(copy) = duplicate {
                        if dir.queue.len() >= capacity {
                            dir.stats.dropped_full += 1;
                        } else {
                            dir.enqueue(at, copy);
                        }
                    }
                }
            }
        }
        Ok(count)
    }

    fn supports_external(&self) -> bool {
        true
    }

    /// Copies each payload behind its headers (counted in
    /// [`external_copied_bytes`](MemwireNic::external_copied_bytes)) and transmits the frame;
    /// the payload is complete once copied. Frames the link cannot take stay in `frames`.
    fn external_copied_bytes(&self) -> u64 {
        self.external_copied_bytes
    }

    fn transmit_external(
        &mut self,
        now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        // Flatten only what the link has room for, then hand the burst over in one transmit (the
        // link is locked twice per burst, not once per frame): frames it cannot take stay with
        // the caller, uncopied.
        let room = {
            let dir = lock(&self.shared.dirs[self.tx_index()]);
            self.shared.capacity.saturating_sub(dir.queue.len())
        };
        let mut flat_frames = std::mem::take(&mut self.scratch);
        for frame in frames.iter_mut().take(room) {
            let (head_len, len) = (frame.headers.len(), frame.headers.len() + frame.payload.len());
            // Behind the headers in their own buffer where it has room (the link's buffers
            // do: one copy, the payload's), else both copied into a buffer of the frame's size.
            let mut flat = if frame.headers.tailroom() >= frame.payload.len() {
                std::mem::take(&mut frame.headers)
            } else {
                let mut flat = if len <= self.shared.pool.buf_size() {
                    self.shared.pool.take(0)
                } else {
                    PacketBuf::with_headroom(len, 0)
                };
                if let Some(head) = flat.append(head_len) {
                    head.copy_from_slice(frame.headers.as_slice());
                }
                flat.offload = frame.headers.offload;
                flat
            };
            if let Some(tail) = flat.append(frame.payload.len()) {
                // Readable until its completion is reported below, after this copy.
                frame.payload.copy_to(tail);
            }
            flat_frames.push(flat);
        }
        let sent = self.transmit(now, &mut flat_frames);
        // Frames the link did not take (left in `flat_frames`, in order, after the `sent` it
        // took) stay with the caller as they came: their headers back where they were taken
        // from (the payload appended behind them cut off again); their payloads were only read.
        let taken = *sent.as_ref().unwrap_or(&0);
        for (frame, mut flat) in frames.iter_mut().skip(taken).zip(flat_frames.drain(..)) {
            if frame.headers.is_empty() {
                let head_len = flat.len().saturating_sub(frame.payload.len());
                flat.truncate(head_len);
                frame.headers = flat;
            }
        }
        self.scratch = flat_frames;
        let sent = sent?;
        for frame in frames.drain(..sent) {
            self.external_copied_bytes += frame.payload.len() as u64;
            self.completed.push(frame.payload.token());
        }
        Ok(sent)
    }

    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        let n = self.completed.len();
        out.append(&mut self.completed);
        n
    }
}

impl Capture {
    /// Writes one delivered frame; on the first failure logs it and stops capturing.
    fn record(&mut self, at: Instant, frame: &[u8]) {
        let Some(writer) = self.writer.as_mut() else { return };
        if let Err(e) = writer.write_frame(at, frame) {
            log::error!("memwire capture stopped: {e} ({:?})", std::error::Error::source(&e));
            self.failed = true;
            self.writer = None;
        }
    }
}
