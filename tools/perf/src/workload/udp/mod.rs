//! The UDP workload (`--udp`): [`UdpSender`] sends datagrams of `--mss` payload bytes over N
//! connected sockets as fast as the provider takes them; [`UdpReceiver`] counts what arrives on
//! one bound socket. UDP has no end of stream: the sender stops after its duration; a receiver
//! measures its duration, or until data stopped for [`IDLE_END`], then reads on until the link
//! is quiet so late datagrams are counted. Loss shows as `datagrams_sent` against the
//! receiver's `total_datagrams`.

mod receiver;
mod sender;

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use slimtcp::api::SocketApi;

pub use receiver::UdpReceiver;
pub use sender::UdpSender;

use super::drive::{timeout_for, ACCEPT_LIMIT, LINGER_LIMIT};
use super::{Measurement, Progress, Settings, UdpCounts, WorkloadError};
use crate::meter::Meter;

/// A lone receiver ends its window once no datagram came for this long.
pub const IDLE_END: Duration = Duration::from_secs(1);
/// After the window, reading stops once the link was quiet for this long.
const QUIET: Duration = Duration::from_millis(200);
/// After the window, a lone sender lets the provider work this long so queued datagrams leave.
const FLUSH: Duration = Duration::from_millis(100);

/// Whether nothing arrived at `rx` for `quiet` (measured from `since` if nothing ever came).
fn quiet_for(rx: &UdpReceiver, since: Instant, now: Instant, quiet: Duration) -> bool {
    now.saturating_duration_since(rx.last_arrival().map_or(since, |t| t.max(since))) >= quiet
}

/// Steps `rx` (and lets `tx` progress without sending, if given) until it was quiet for
/// [`QUIET`]; false when [`LINGER_LIMIT`] passed first.
fn read_until_quiet<A: SocketApi>(
    rx_api: &mut A,
    rx: &mut UdpReceiver,
    mut tx: Option<(&mut A, &mut UdpSender)>,
) -> Result<bool, WorkloadError> {
    let since = Instant::now();
    let limit = since + LINGER_LIMIT;
    let mut busy = true;
    loop {
        if let Some((api, tx)) = tx.as_mut() {
            tx.step(&mut **api, 0, false)?;
        }
        busy = rx.step(rx_api, if tx.is_some() { 0 } else { timeout_for(busy) })?;
        let now = Instant::now();
        if quiet_for(rx, since, now, QUIET) {
            return Ok(true);
        }
        if now >= limit {
            return Ok(false);
        }
    }
}

/// Sender and receiver driven by this thread over two providers (memwire: both stacks here).
pub fn run_both<A: SocketApi>(
    tx_api: &mut A,
    rx_api: &mut A,
    target: SocketAddrV4,
    sockets: usize,
    settings: Settings,
    duration: Duration,
    progress: Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let mut rx = UdpReceiver::open(rx_api, target.port(), settings)?;
    let mut tx = UdpSender::open(tx_api, target, sockets, settings)?;
    let mut meter = Meter::start(Instant::now(), rx.bytes());
    let first = rx.datagrams();
    let end = meter.started() + duration;
    loop {
        tx.step(tx_api, 0, true)?;
        rx.step(rx_api, 0)?;
        let now = Instant::now();
        if let Some(i) = meter.tick(now, rx.bytes(), tx.sockets()) {
            progress(&i);
        }
        if now >= end {
            break;
        }
    }
    let (bytes, elapsed) = meter.finish(Instant::now(), rx.bytes());
    let run_queue_wait = meter.run_queue_wait();
    let datagrams = rx.datagrams() - first;
    let drained = read_until_quiet(rx_api, &mut rx, Some((&mut *tx_api, &mut tx)))?;
    let udp =
        UdpCounts { datagrams, total_datagrams: rx.datagrams(), datagrams_sent: Some(tx.datagrams_sent()) };
    let total_bytes = rx.bytes();
    tx.close(tx_api);
    rx.close(rx_api);
    Ok(Measurement {
        bytes,
        total_bytes,
        elapsed,
        connections: sockets,
        drained,
        udp: Some(udp),
        run_queue_wait,
    })
}

/// A lone sender: counts what the provider took during `duration`, then stops.
pub fn run_sender<A: SocketApi>(
    api: &mut A,
    target: SocketAddrV4,
    sockets: usize,
    settings: Settings,
    duration: Duration,
    progress: Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let mut tx = UdpSender::open(api, target, sockets, settings)?;
    let mut meter = Meter::start(Instant::now(), tx.bytes_sent());
    let end = meter.started() + duration;
    let mut busy = true;
    loop {
        busy = tx.step(api, timeout_for(busy), true)?;
        let now = Instant::now();
        if let Some(i) = meter.tick(now, tx.bytes_sent(), tx.sockets()) {
            progress(&i);
        }
        if now >= end {
            break;
        }
    }
    let (bytes, elapsed) = meter.finish(Instant::now(), tx.bytes_sent());
    let run_queue_wait = meter.run_queue_wait();
    let datagrams = tx.datagrams_sent();
    let flush = Instant::now() + FLUSH;
    while Instant::now() < flush {
        tx.step(api, timeout_for(false), false)?;
    }
    let sent = tx.datagrams_sent();
    let udp = UdpCounts { datagrams, total_datagrams: sent, datagrams_sent: Some(sent) };
    let total_bytes = tx.bytes_sent();
    tx.close(api);
    Ok(Measurement {
        bytes,
        total_bytes,
        elapsed,
        connections: sockets,
        drained: true,
        udp: Some(udp),
        run_queue_wait,
    })
}

/// A lone receiver: waits for the first datagram, then measures until `duration` passed or no
/// datagram came for [`IDLE_END`] (the window then ends at the last arrival), and reads on until
/// the link is quiet.
pub fn run_receiver<A: SocketApi>(
    api: &mut A,
    port: u16,
    settings: Settings,
    duration: Option<Duration>,
    progress: Progress<'_>,
) -> Result<Measurement, WorkloadError> {
    let mut rx = UdpReceiver::open(api, port, settings)?;
    let t0 = Instant::now();
    let mut busy = false;
    while rx.datagrams() == 0 {
        busy = rx.step(api, timeout_for(busy))?;
        if t0.elapsed() > ACCEPT_LIMIT {
            return Err(WorkloadError::NoDatagram { seconds: ACCEPT_LIMIT.as_secs() });
        }
    }
    let mut meter = Meter::start(Instant::now(), rx.bytes());
    let first = rx.datagrams();
    let end = duration.map(|d| meter.started() + d);
    let stop = loop {
        busy = rx.step(api, timeout_for(busy))?;
        let now = Instant::now();
        if let Some(i) = meter.tick(now, rx.bytes(), rx.peers()) {
            progress(&i);
        }
        if end.is_some_and(|e| now >= e) {
            break now;
        }
        if quiet_for(&rx, meter.started(), now, IDLE_END) {
            break rx.last_arrival().unwrap_or(now).max(meter.started());
        }
    };
    let (bytes, elapsed) = meter.finish(stop, rx.bytes());
    let run_queue_wait = meter.run_queue_wait();
    let datagrams = rx.datagrams() - first;
    let drained = read_until_quiet(api, &mut rx, None)?;
    let udp = UdpCounts { datagrams, total_datagrams: rx.datagrams(), datagrams_sent: None };
    let measurement = Measurement {
        bytes,
        total_bytes: rx.bytes(),
        elapsed,
        connections: rx.peers(),
        drained,
        udp: Some(udp),
        run_queue_wait,
    };
    rx.close(api);
    Ok(measurement)
}
