//! Live gauges of a tenant, readable from any thread while its worker runs: what the worker
//! holds right now (sockets, held send chains, guest payload the NIC still references). The
//! worker publishes them every [`PUBLISH_EVERY`] steps and when it goes idle, with relaxed
//! stores: a reader sees a recent value, never a torn one. Leak detection (the soak, a stats
//! endpoint) reads them; the data path never does.

use std::sync::atomic::{AtomicU64, Ordering};

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
}
