//! Per-tenant resource limits: what the operator sets ([`TenantLimits`], from the command line)
//! and what a guest is told in hello ([`Limits`], the operator's part plus what follows from the
//! queue size). Hitting one gives the guest the errno a kernel would, never a process-wide
//! failure.

use slimtcp::api::app::MAX_BACKLOG;

/// Bounds of the operator's settings.
pub mod bounds {
    use std::ops::RangeInclusive;

    /// Guest sockets open at once.
    pub const MAX_SOCKETS: RangeInclusive<u32> = 1..=65_000;
    /// Send payload bytes in flight per socket.
    pub const SEND_IN_FLIGHT: RangeInclusive<u32> = 1024..=64 * 1024 * 1024;
    /// Default receive window per socket (and the range of `SO_RCVBUF`).
    pub const RX_BUFFER: RangeInclusive<u32> = 2048..=64 * 1024 * 1024;
    /// A listener's backlog, at most.
    pub const BACKLOG: RangeInclusive<u32> = 1..=65_535;
    /// Datagrams queued per UDP socket.
    pub const UDP_QUEUE: RangeInclusive<u32> = 1..=65_536;
    /// Receive memory of the tenant's stack, all sockets together.
    pub const RX_MEMORY: RangeInclusive<u64> = 1 << 20..=1 << 40;
}

/// What the operator sets per tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantLimits {
    /// Guest sockets open at once (more: `EMFILE`).
    pub max_sockets: u32,
    /// Send payload bytes in flight per socket (a larger send: `EMSGSIZE`; a full socket:
    /// `EAGAIN`).
    pub send_in_flight: u32,
    /// Default receive window per socket.
    pub rx_buffer: u32,
    /// The largest backlog a listener gets (a larger `listen` backlog is cut to it).
    pub backlog: u32,
}

impl Default for TenantLimits {
    fn default() -> Self {
        TenantLimits {
            max_sockets: 4096,
            send_in_flight: 256 * 1024,
            rx_buffer: 256 * 1024,
            // The application side's own bound (4096: fits).
            backlog: MAX_BACKLOG as u32,
        }
    }
}

/// The limits announced in hello (docs/protocol.md section 11), and the backlog bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Sockets open at once, all pairs together.
    pub max_sockets: u32,
    /// Send payload bytes in flight per socket.
    pub max_send_in_flight: u32,
    /// Default receive window per socket.
    pub rx_buffer: u32,
    /// Requests outstanding per queue pair.
    pub max_requests: u32,
    /// Descriptors per chain.
    pub max_chain: u32,
    /// The largest listener backlog.
    pub max_backlog: u32,
}

impl Limits {
    /// The defaults of `slimtcp-vhost` for queues of `queue_size` entries.
    pub fn for_queue_size(queue_size: u16) -> Self {
        Self::new(queue_size, &TenantLimits::default())
    }

    /// The operator's `tenant` limits for queues of `queue_size` entries.
    pub fn new(queue_size: u16, tenant: &TenantLimits) -> Self {
        Limits {
            max_sockets: tenant.max_sockets,
            max_send_in_flight: tenant.send_in_flight,
            rx_buffer: tenant.rx_buffer,
            max_requests: u32::from(queue_size),
            max_chain: u32::from(queue_size),
            max_backlog: tenant.backlog,
        }
    }
}
