//! The tap a tenant's worker feeds and a control thread drains (see the module above).
//!
//! The worker's fast path is [`CaptureTap::is_armed`], one relaxed load. Armed, the worker takes
//! the tap's mutex once per burst ([`CaptureTap::recorder`]): it is held by the control thread
//! only to arm and to stop, never while writing, so the worker does not wait on it in practice.
//! A capture's frames, counters and queue belong to its own session: once a session ends (under
//! that mutex) no worker can add to it, so the control thread's last drain is complete, and no
//! frame of one capture ever lands in the next.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_queue::ArrayQueue;
use slimtcp::nic::pcap::PcapWriter;
use slimtcp::time::Instant;

use super::CaptureError;

/// The default byte cap of a capture: 64 MiB of frames.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// The default number of frames queued between the worker and the control thread.
pub const DEFAULT_QUEUE_FRAMES: usize = 4096;
/// The largest queue a capture may ask for (the queue is allocated when the capture is armed).
pub const MAX_QUEUE_FRAMES: usize = 1 << 16;

/// When a capture ends. The byte cap always applies, so every capture is bounded; the control
/// thread may stop it earlier ([`Capture::stop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureLimits {
    /// Ends the capture once this many frames are captured (dropped frames do not count).
    pub max_frames: Option<u64>,
    /// Ends the capture this long after it was armed.
    pub duration: Option<Duration>,
    /// Ends the capture at the first frame that would take the captured bytes beyond this.
    pub max_bytes: u64,
    /// Frames the queue holds; while it is full, further frames are dropped and counted.
    pub queue_frames: usize,
}

impl Default for CaptureLimits {
    /// No frame count or duration, [`DEFAULT_MAX_BYTES`], [`DEFAULT_QUEUE_FRAMES`].
    fn default() -> Self {
        CaptureLimits {
            max_frames: None,
            duration: None,
            max_bytes: DEFAULT_MAX_BYTES,
            queue_frames: DEFAULT_QUEUE_FRAMES,
        }
    }
}

impl CaptureLimits {
    fn validate(&self) -> Result<(), CaptureError> {
        if self.max_frames == Some(0) {
            return Err(CaptureError::InvalidLimits("a frame limit of zero captures nothing"));
        }
        if self.duration == Some(Duration::ZERO) {
            return Err(CaptureError::InvalidLimits("a duration of zero captures nothing"));
        }
        if self.max_bytes == 0 {
            return Err(CaptureError::InvalidLimits("a byte cap of zero captures nothing"));
        }
        if self.queue_frames == 0 || self.queue_frames > MAX_QUEUE_FRAMES {
            return Err(CaptureError::InvalidLimits("the queue must hold 1 to 65536 frames"));
        }
        Ok(())
    }
}

/// Why a capture ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureEnd {
    /// [`CaptureLimits::max_frames`] frames were captured.
    FrameLimit,
    /// [`CaptureLimits::duration`] passed.
    Deadline,
    /// A frame would have taken the capture beyond [`CaptureLimits::max_bytes`].
    ByteLimit,
    /// The control thread stopped it (or dropped its handle).
    Stopped,
}

impl CaptureEnd {
    const RUNNING: u8 = 0;

    fn code(self) -> u8 {
        match self {
            CaptureEnd::FrameLimit => 1,
            CaptureEnd::Deadline => 2,
            CaptureEnd::ByteLimit => 3,
            CaptureEnd::Stopped => 4,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(CaptureEnd::FrameLimit),
            2 => Some(CaptureEnd::Deadline),
            3 => Some(CaptureEnd::ByteLimit),
            4 => Some(CaptureEnd::Stopped),
            _ => None,
        }
    }
}

/// What a capture did, as the control thread saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureReport {
    /// Frames written to the pcap stream.
    pub frames_written: u64,
    /// Frames not captured because the queue was full.
    pub frames_dropped: u64,
    /// Frame bytes written (pcap headers not included).
    pub bytes_written: u64,
    /// Why it ended; `None` while it runs.
    pub end: Option<CaptureEnd>,
}

impl std::fmt::Display for CaptureReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} frames ({} bytes) captured, {} dropped (queue full)",
            self.frames_written, self.bytes_written, self.frames_dropped
        )?;
        match self.end {
            Some(end) => write!(f, ", ended: {end:?}"),
            None => write!(f, ", running"),
        }
    }
}

/// A frame copied by the worker.
#[derive(Debug)]
struct CapturedFrame {
    /// Microseconds since the UNIX epoch.
    at_micros: u64,
    bytes: Vec<u8>,
}

/// One capture: its limits, queue and counters.
#[derive(Debug)]
struct Session {
    queue: ArrayQueue<CapturedFrame>,
    max_frames: u64,
    max_bytes: u64,
    deadline: Option<std::time::Instant>,
    /// Frames and bytes queued, frames dropped: changed only under the tap's mutex.
    queued: AtomicU64,
    queued_bytes: AtomicU64,
    dropped: AtomicU64,
    /// `CaptureEnd::RUNNING` or an end's code; set once, under the tap's mutex.
    end: AtomicU8,
}

impl Session {
    fn end(&self) -> Option<CaptureEnd> {
        CaptureEnd::from_code(self.end.load(Ordering::Acquire))
    }

    fn deadline_passed(&self) -> bool {
        self.deadline.is_some_and(|d| std::time::Instant::now() >= d)
    }
}

/// The tap's state behind its mutex.
#[derive(Debug, Default)]
struct Slot {
    /// The running capture, which the worker feeds.
    running: Option<Arc<Session>>,
    /// A [`Capture`] handle exists (running or ended, not finished): the tap is busy.
    held: bool,
}

impl Slot {
    /// Ends the running capture (if it is `session`) for `why`; the first reason sticks.
    fn end(&mut self, armed: &AtomicBool, session: &Arc<Session>, why: CaptureEnd) {
        if self.running.as_ref().is_some_and(|s| Arc::ptr_eq(s, session)) {
            self.running = None;
            armed.store(false, Ordering::Relaxed);
        }
        let _ = session.end.compare_exchange(
            CaptureEnd::RUNNING,
            why.code(),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }
}

/// A tenant's capture point (see the module documentation). Shared as `Arc<CaptureTap>`.
#[derive(Debug, Default)]
pub struct CaptureTap {
    /// A capture is running: the worker's one relaxed load when nothing is captured.
    armed: AtomicBool,
    slot: Mutex<Slot>,
}

fn lock(m: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    // Every change to the slot is a single assignment: a panic cannot leave it half-made.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wall_clock_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

impl CaptureTap {
    /// A disarmed tap.
    pub fn new() -> Self {
        CaptureTap::default()
    }

    /// True while a capture runs (one relaxed load: the worker's check when nothing is
    /// captured).
    #[inline]
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Starts a capture within `limits`; returns the control thread's handle. Fails with
    /// [`CaptureError::Busy`] while another capture's handle exists, and with
    /// [`CaptureError::InvalidLimits`] for limits that capture nothing.
    pub fn arm(self: &Arc<Self>, limits: CaptureLimits) -> Result<Capture, CaptureError> {
        limits.validate()?;
        let mut slot = lock(&self.slot);
        if slot.held {
            return Err(CaptureError::Busy);
        }
        let session = Arc::new(Session {
            queue: ArrayQueue::new(limits.queue_frames),
            max_frames: limits.max_frames.unwrap_or(u64::MAX),
            max_bytes: limits.max_bytes,
            deadline: limits.duration.map(|d| std::time::Instant::now() + d),
            queued: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            end: AtomicU8::new(CaptureEnd::RUNNING),
        });
        slot.running = Some(Arc::clone(&session));
        slot.held = true;
        self.armed.store(true, Ordering::Relaxed);
        Ok(Capture { tap: Arc::clone(self), session, frames_written: 0, bytes_written: 0 })
    }

    /// The worker's side: a recorder for the frames of one receive or transmit call, stamped
    /// with the wall clock now; `None` when no capture runs (or its deadline just passed,
    /// which ends it). Holds the tap's mutex: drop it before the next NIC call.
    pub fn recorder(&self) -> Option<Recorder<'_>> {
        if !self.is_armed() {
            return None;
        }
        let mut slot = lock(&self.slot);
        let session = Arc::clone(slot.running.as_ref()?);
        if session.deadline_passed() {
            slot.end(&self.armed, &session, CaptureEnd::Deadline);
            return None;
        }
        Some(Recorder { tap: self, slot, session, at_micros: wall_clock_micros() })
    }
}

/// Records the frames of one burst into the running capture (see [`CaptureTap::recorder`]).
#[derive(Debug)]
pub struct Recorder<'a> {
    tap: &'a CaptureTap,
    slot: MutexGuard<'a, Slot>,
    session: Arc<Session>,
    at_micros: u64,
}

impl Recorder<'_> {
    /// Captures a copy of `frame`; returns whether the capture still runs.
    pub fn record(&mut self, frame: &[u8]) -> bool {
        self.admit(frame.len(), || frame.to_vec())
    }

    /// Captures `frame` (already a copy); returns whether the capture still runs.
    pub fn record_owned(&mut self, frame: Vec<u8>) -> bool {
        self.admit(frame.len(), move || frame)
    }

    /// The limits and the queue decide on a frame of `len` bytes, made by `make` only if taken.
    fn admit(&mut self, len: usize, make: impl FnOnce() -> Vec<u8>) -> bool {
        let s = &self.session;
        if s.end().is_some() {
            return false;
        }
        let len = len as u64;
        let bytes = s.queued_bytes.load(Ordering::Relaxed);
        if bytes.saturating_add(len) > s.max_bytes {
            self.slot.end(&self.tap.armed, s, CaptureEnd::ByteLimit);
            return false;
        }
        if s.queue.is_full() {
            s.dropped.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        let frame = CapturedFrame { at_micros: self.at_micros, bytes: make() };
        if s.queue.push(frame).is_err() {
            // Only this recorder pushes (the mutex is held) and the consumer only pops: unreachable
            // in practice, counted all the same.
            s.dropped.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        s.queued_bytes.store(bytes + len, Ordering::Relaxed);
        let queued = s.queued.fetch_add(1, Ordering::Relaxed) + 1;
        if queued >= s.max_frames {
            self.slot.end(&self.tap.armed, s, CaptureEnd::FrameLimit);
            return false;
        }
        true
    }
}

/// The control thread's handle on a running (or ended) capture; the tap stays busy until it is
/// [finished](Capture::finish) or dropped. Dropping it stops the capture and discards the
/// frames not yet drained.
#[derive(Debug)]
pub struct Capture {
    tap: Arc<CaptureTap>,
    session: Arc<Session>,
    frames_written: u64,
    bytes_written: u64,
}

impl Capture {
    /// Writes every queued frame to `out` (buffered: [`PcapWriter::flush`] sends them on);
    /// returns how many. Ends the capture first if its deadline passed, so an idle tenant's
    /// capture ends on time too.
    pub fn drain<W: Write>(&mut self, out: &mut PcapWriter<W>) -> Result<u64, CaptureError> {
        self.end_if_late();
        let mut n = 0;
        while let Some(frame) = self.session.queue.pop() {
            out.write_frame(Instant::from_micros(frame.at_micros), &frame.bytes)
                .map_err(CaptureError::Write)?;
            self.frames_written += 1;
            self.bytes_written += frame.bytes.len() as u64;
            n += 1;
        }
        Ok(n)
    }

    /// True once the capture ended (a limit, the deadline, or [`stop`](Self::stop)); frames may
    /// still be queued: [`drain`](Self::drain) or [`finish`](Self::finish) writes them.
    pub fn is_finished(&self) -> bool {
        self.end().is_some()
    }

    /// Why the capture ended, or `None` while it runs (a passed deadline ends it here).
    pub fn end(&self) -> Option<CaptureEnd> {
        self.end_if_late();
        self.session.end()
    }

    /// When the capture's duration runs out, if it has one (for the control thread's waits).
    pub fn deadline(&self) -> Option<std::time::Instant> {
        self.session.deadline
    }

    /// Ends the capture now (no effect if it already ended); queued frames stay to be drained.
    pub fn stop(&self) {
        self.end_now(CaptureEnd::Stopped);
    }

    /// The counts so far.
    pub fn report(&self) -> CaptureReport {
        CaptureReport {
            frames_written: self.frames_written,
            frames_dropped: self.session.dropped.load(Ordering::Relaxed),
            bytes_written: self.bytes_written,
            end: self.end(),
        }
    }

    /// Ends the capture (stopping it if it still runs), writes the frames left in the queue,
    /// flushes `out`, frees the tap for the next capture, and reports.
    pub fn finish<W: Write>(mut self, out: &mut PcapWriter<W>) -> Result<CaptureReport, CaptureError> {
        if self.end().is_none() {
            self.end_now(CaptureEnd::Stopped);
        }
        self.drain(out)?;
        out.flush().map_err(CaptureError::Write)?;
        Ok(self.report())
    }

    /// Ends a running capture whose deadline passed (the worker does too, at its next frame).
    fn end_if_late(&self) {
        if self.session.end().is_none() && self.session.deadline_passed() {
            self.end_now(CaptureEnd::Deadline);
        }
    }

    fn end_now(&self, why: CaptureEnd) {
        lock(&self.tap.slot).end(&self.tap.armed, &self.session, why);
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let mut slot = lock(&self.tap.slot);
        slot.end(&self.tap.armed, &self.session, CaptureEnd::Stopped);
        slot.held = false;
    }
}
