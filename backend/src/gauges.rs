//! Live gauges and counters of a tenant, readable from any thread while its worker runs: what
//! the worker holds right now (sockets, held send chains, guest payload the NIC still
//! references), with relaxed stores (a reader sees a recent value, never a torn one), and the
//! tenant's counters ([`LiveCounters`]), behind a lock the worker only ever tries. The worker
//! publishes both every [`PUBLISH_EVERY`] steps and when it goes idle. Leak detection (the
//! soak) and the daemon's stats and metrics read them; the data path never does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use slimtcp::iface::Counters;

use crate::engine::{DeviceCounters, SessionReport};

/// Engine steps between two publications while the worker is busy.
pub const PUBLISH_EVERY: u32 = 1024;

/// The gauges (see the module documentation). Shared as `Arc<TenantGauges>`.
#[derive(Debug, Default)]
pub struct TenantGauges {
    guest_sockets: AtomicU64,
    stack_sockets: AtomicU64,
    sends_held: AtomicU64,
    external_in_flight: AtomicU64,
    pending_messages: AtomicU64,
    rx_memory: AtomicU64,
    publications: AtomicU64,
    counters: Mutex<LiveCounters>,
}

/// A tenant's counters: its stack's (since its NIC was opened), its device's (all VMM
/// connections together) and its worker's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveCounters {
    /// The stack's counters.
    pub stack: Counters,
    /// TCP sockets by state ([`slimtcp::tcp::State::ALL`] order).
    pub tcp_states: [u64; 11],
    /// The current session's report (`None`: no VMM connected).
    pub session: Option<SessionReport>,
    /// VMM connections that ended.
    pub sessions_ended: u64,
    /// Device counters of the sessions that ended.
    pub device_ended: DeviceCounters,
    /// Worker polls, all sessions.
    pub polls: u64,
    /// Worker polls that did work.
    pub busy_polls: u64,
    /// Worker polls of the sessions that ended.
    polls_ended: (u64, u64),
}

/// What the worker publishes of its session.
#[derive(Debug, Clone, Default)]
pub struct SessionReading {
    /// The stack's counters.
    pub stack: Counters,
    /// TCP sockets by state.
    pub tcp_states: [u64; 11],
    /// The session's report so far.
    pub report: SessionReport,
    /// This session's worker polls.
    pub polls: u64,
    /// This session's polls that did work.
    pub busy_polls: u64,
}

impl LiveCounters {
    /// The device's counters: the sessions that ended and the current one added up.
    pub fn device(&self) -> DeviceCounters {
        let mut d = self.device_ended.clone();
        if let Some(s) = &self.session {
            d.add(&s.device);
        }
        d
    }

    /// Stores the worker's view of the current session.
    fn session(&mut self, r: SessionReading) {
        self.stack = r.stack;
        self.tcp_states = r.tcp_states;
        self.session = Some(r.report);
        self.polls = self.polls_ended.0 + r.polls;
        self.busy_polls = self.polls_ended.1 + r.busy_polls;
    }

    /// Closes the current session (its final report published before).
    fn end_session(&mut self) {
        if let Some(report) = self.session.take() {
            self.device_ended.add(&report.device);
            self.sessions_ended += 1;
            self.polls_ended = (self.polls, self.busy_polls);
        }
    }
}

/// One reading of [`TenantGauges`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GaugeReading {
    /// Sockets the guest has open (the engine's table, closing ones included).
    pub guest_sockets: u64,
    /// Sockets of the tenant's stack (TIME-WAIT and not-yet-accepted ones included).
    pub stack_sockets: u64,
    /// Send chains held until their bytes are acknowledged.
    pub sends_held: u64,
    /// Guest payload buffers the NIC still references.
    pub external_in_flight: u64,
    /// Completions and events waiting for guest receive buffers, all pairs.
    pub pending_messages: u64,
    /// Bytes of receive storage the stack holds (its budget's `used`).
    pub rx_memory: u64,
    /// How many times the worker published (0: never served).
    pub publications: u64,
}

impl TenantGauges {
    /// Stores a reading (the worker's side).
    pub fn publish(&self, r: &GaugeReading) {
        self.guest_sockets.store(r.guest_sockets, Ordering::Relaxed);
        self.stack_sockets.store(r.stack_sockets, Ordering::Relaxed);
        self.sends_held.store(r.sends_held, Ordering::Relaxed);
        self.external_in_flight.store(r.external_in_flight, Ordering::Relaxed);
        self.pending_messages.store(r.pending_messages, Ordering::Relaxed);
        self.rx_memory.store(r.rx_memory, Ordering::Relaxed);
        self.publications.fetch_add(1, Ordering::Relaxed);
    }

    /// Stores the current session's counters (the worker's side): skipped when a reader holds
    /// the lock, so the worker never waits (the next publication brings them).
    pub fn publish_counters(&self, r: SessionReading) {
        if let Ok(mut c) = self.counters.try_lock() {
            c.session(r);
        }
    }

    /// As [`publish_counters`](Self::publish_counters), waiting for the lock, and ends the
    /// session: its last publication, which must not be lost.
    pub fn publish_final_counters(&self, r: SessionReading) {
        let mut c = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        c.session(r);
        c.end_session();
    }

    /// The tenant's counters now.
    pub fn counters(&self) -> LiveCounters {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The latest reading.
    pub fn read(&self) -> GaugeReading {
        GaugeReading {
            guest_sockets: self.guest_sockets.load(Ordering::Relaxed),
            stack_sockets: self.stack_sockets.load(Ordering::Relaxed),
            sends_held: self.sends_held.load(Ordering::Relaxed),
            external_in_flight: self.external_in_flight.load(Ordering::Relaxed),
            pending_messages: self.pending_messages.load(Ordering::Relaxed),
            rx_memory: self.rx_memory.load(Ordering::Relaxed),
            publications: self.publications.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_reading_is_read_back_and_counted() {
        let g = TenantGauges::default();
        assert_eq!(g.read(), GaugeReading::default());
        let r = GaugeReading {
            guest_sockets: 3,
            stack_sockets: 4,
            sends_held: 5,
            external_in_flight: 6,
            pending_messages: 7,
            rx_memory: 8,
            publications: 0,
        };
        g.publish(&r);
        g.publish(&r);
        assert_eq!(g.read(), GaugeReading { publications: 2, ..r });
    }

    fn reading(requests: u64, polls: u64, busy_polls: u64) -> SessionReading {
        let device = DeviceCounters { requests, ..Default::default() };
        let report = SessionReport { device, ..Default::default() };
        SessionReading { report, polls, busy_polls, ..Default::default() }
    }

    #[test]
    fn device_counters_add_up_over_sessions_and_polls_too() {
        let g = TenantGauges::default();
        g.publish_counters(reading(5, 10, 4));
        let c = g.counters();
        assert_eq!((c.device().requests, c.polls, c.busy_polls, c.session.is_some()), (5, 10, 4, true));
        g.publish_final_counters(reading(7, 20, 6));
        let c = g.counters();
        assert_eq!((c.device().requests, c.sessions_ended, c.session.is_none()), (7, 1, true), "ended");
        g.publish_counters(reading(3, 5, 5));
        let c = g.counters();
        assert_eq!((c.device().requests, c.polls, c.busy_polls), (10, 25, 11), "the second session on top");
    }
}
