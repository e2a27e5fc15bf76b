//! The phases of a run: connect everything, measure for the duration, then drain (senders
//! half-close, receivers read to end of stream and close) so every byte sent was delivered.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use slimtcp::api::SocketApi;

use super::{Receiver, Sender, Settings, WorkloadError};
use crate::meter::{Interval, Meter};

/// How long the connections may take to come up.
const CONNECT_LIMIT: Duration = Duration::from_secs(60);
/// How long a lone receiver waits for its first connection.
pub(super) const ACCEPT_LIMIT: Duration = Duration::from_secs(60);
/// How long the drain after the measurement may take.
pub(super) const LINGER_LIMIT: Duration = Duration::from_secs(20);
/// epoll timeout (ms) of a lone role with nothing to do (a pair busy-polls with 0).
pub(super) const IDLE_WAIT_MS: i32 = 1;

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// Bytes counted in the measured window (read by the receiver, or accepted by a lone sender).
    pub bytes: u64,
    /// Bytes counted over the whole run, setup and drain included.
    pub total_bytes: u64,
    /// Length of the measured window.
    pub elapsed: Duration,
    /// Connections that took part.
    pub connections: usize,
    /// True when every connection drained and closed cleanly in time.
    pub drained: bool,
    /// Datagram counts of a UDP run (`None` for TCP).
    pub udp: Option<UdpCounts>,
    /// How long the measuring thread waited for a CPU during the measured window (`None`
    /// where the kernel does not say). More than a sliver means another task shared its core.
    pub run_queue_wait: Option<Duration>,
}

/// What a UDP run counted besides bytes, so loss is visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpCounts {
    /// Datagrams counted in the measured window (received, or sent by a lone sender), like
    /// [`Measurement::bytes`].
    pub datagrams: u64,
    /// Datagrams counted over the whole run, like [`Measurement::total_bytes`].
    pub total_datagrams: u64,
    /// Datagrams the sender handed to the stack over the whole run (`None` for a lone receiver).
    pub datagrams_sent: Option<u64>,
}

/// Receives each progress interval.
pub type Progress<'a> = &'a mut dyn FnMut(&Interval);

pub(super) fn timeout_for(busy: bool) -> i32 {
    if busy {
        0
    } else {
        IDLE_WAIT_MS
    }
}

/// Fails once the connections have taken longer than [`CONNECT_LIMIT`] to come up.
fn connect_deadline(t0: Instant, established: usize, wanted: usize) -> Result<(), WorkloadError> {
    if t0.elapsed() > CONNECT_LIMIT {
        return Err(WorkloadError::ConnectTimeout { established, wanted, seconds: CONNECT_LIMIT.as_secs() });
    }
    Ok(())
}

/// Sender and receiver driven by this thread over two providers (memwire: both stacks here).
#[allow(clippy::too_many_arguments)]
pub fn run_both<A: SocketApi>(
    tx_api: &mut A,
    rx_api: &mut A,
    target: SocketAddrV4,
    connections: usize,
    settings: Settings,
    duration: Duration,
    progress: Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let mut rx = Receiver::open(rx_api, target.port(), settings)?;
    let mut tx = Sender::open(tx_api, target, connections, settings)?;
    let t0 = Instant::now();
    while tx.established() < connections {
        tx.step(tx_api, 0)?;
        rx.step(rx_api, 0)?;
        connect_deadline(t0, tx.established(), connections)?;
    }
    tx.start_sending(tx_api)?;
    let mut meter = Meter::start(Instant::now(), rx.bytes());
    let end = meter.started() + duration;
    loop {
        tx.step(tx_api, 0)?;
        rx.step(rx_api, 0)?;
        let now = Instant::now();
        if let Some(i) = meter.tick(now, rx.bytes(), rx.active()) {
            progress(&i);
        }
        if now >= end {
            break;
        }
    }
    let (bytes, elapsed) = meter.finish(Instant::now(), rx.bytes());
    let run_queue_wait = meter.run_queue_wait();
    tx.stop_sending(tx_api)?;
    let linger = Instant::now() + LINGER_LIMIT;
    while !(tx.is_done() && rx.active() == 0) && Instant::now() < linger {
        tx.step(tx_api, 0)?;
        rx.step(rx_api, 0)?;
    }
    let drained = tx.is_done() && rx.active() == 0;
    if !drained {
        log::warn!(
            "drain incomplete after {} s: {} sending and {} receiving connections still open",
            LINGER_LIMIT.as_secs(),
            tx.open_connections(),
            rx.active()
        );
    }
    let total_bytes = rx.bytes();
    tx.abandon(tx_api);
    rx.shut(rx_api);
    Ok(Measurement { bytes, total_bytes, elapsed, connections, drained, udp: None, run_queue_wait })
}

/// A lone sender: counts bytes the stack accepted, then drains (the peer reads to end of
/// stream and closes).
pub fn run_sender<A: SocketApi>(
    api: &mut A,
    target: SocketAddrV4,
    connections: usize,
    settings: Settings,
    duration: Duration,
    progress: Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let mut tx = Sender::open(api, target, connections, settings)?;
    let t0 = Instant::now();
    let mut busy = true;
    while tx.established() < connections {
        busy = tx.step(api, timeout_for(busy))?;
        connect_deadline(t0, tx.established(), connections)?;
    }
    tx.start_sending(api)?;
    let mut meter = Meter::start(Instant::now(), tx.bytes_sent());
    let end = meter.started() + duration;
    loop {
        busy = tx.step(api, timeout_for(busy))?;
        let now = Instant::now();
        if let Some(i) = meter.tick(now, tx.bytes_sent(), tx.open_connections()) {
            progress(&i);
        }
        if now >= end {
            break;
        }
    }
    let (bytes, elapsed) = meter.finish(Instant::now(), tx.bytes_sent());
    let run_queue_wait = meter.run_queue_wait();
    tx.stop_sending(api)?;
    let linger = Instant::now() + LINGER_LIMIT;
    while !tx.is_done() && Instant::now() < linger {
        busy = tx.step(api, timeout_for(busy))?;
    }
    let drained = tx.is_done();
    if !drained {
        log::warn!("drain incomplete: {} connections still open", tx.open_connections());
    }
    let total_bytes = tx.bytes_sent();
    tx.abandon(api);
    Ok(Measurement { bytes, total_bytes, elapsed, connections, drained, udp: None, run_queue_wait })
}

/// A lone receiver: waits for the first connection (and, with `expect`, for that many), then
/// measures until `duration` passes or every connection ended; after a timed window it keeps
/// reading until the senders close, so they can drain.
pub fn run_receiver<A: SocketApi>(
    api: &mut A,
    port: u16,
    settings: Settings,
    duration: Option<Duration>,
    expect: Option<usize>,
    progress: Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let mut rx = Receiver::open(api, port, settings)?;
    let t0 = Instant::now();
    let mut busy = false;
    while rx.accepted() == 0 {
        busy = rx.step(api, timeout_for(busy))?;
        if t0.elapsed() > ACCEPT_LIMIT {
            return Err(WorkloadError::NoConnection { seconds: ACCEPT_LIMIT.as_secs() });
        }
    }
    let wanted = expect.unwrap_or(1);
    let t1 = Instant::now();
    while rx.accepted() < wanted && rx.active() > 0 {
        busy = rx.step(api, timeout_for(busy))?;
        if t1.elapsed() > CONNECT_LIMIT {
            return Err(WorkloadError::ConnectTimeout {
                established: rx.accepted(),
                wanted,
                seconds: CONNECT_LIMIT.as_secs(),
            });
        }
    }
    let mut meter = Meter::start(Instant::now(), rx.bytes());
    let end = duration.map(|d| meter.started() + d);
    let all_ended = |rx: &Receiver| rx.accepted() >= wanted && rx.active() == 0;
    loop {
        busy = rx.step(api, timeout_for(busy))?;
        let now = Instant::now();
        if let Some(i) = meter.tick(now, rx.bytes(), rx.active()) {
            progress(&i);
        }
        if end.is_some_and(|e| now >= e) || all_ended(&rx) {
            break;
        }
    }
    let (bytes, elapsed) = meter.finish(Instant::now(), rx.bytes());
    let run_queue_wait = meter.run_queue_wait();
    let linger = Instant::now() + LINGER_LIMIT;
    while !all_ended(&rx) && Instant::now() < linger {
        busy = rx.step(api, timeout_for(busy))?;
    }
    let drained = rx.active() == 0;
    let connections = rx.accepted();
    let total_bytes = rx.bytes();
    rx.shut(api);
    Ok(Measurement { bytes, total_bytes, elapsed, connections, drained, udp: None, run_queue_wait })
}
