//! The C-visible plain types and constants (all values are Linux's where Linux has one).

use std::ffi::c_int;
use std::time::Duration;

use slimtcp_api::{EpollEvent, Ready};

use crate::GuestConfig;

/// Settings of a device (`slim_open`, `slim_device_open`). Fill it with `slim_config_init`
/// (the defaults), then change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SlimConfig {
    /// Bytes of shared memory (rings and buffers of all queue pairs); a multiple of 4096, at
    /// least 4 MiB.
    pub memory_size: usize,
    /// Queue pairs to set up; 0: all the device has. `slim_open` uses pair 0 and sets up at
    /// least one.
    pub queue_pairs: usize,
    /// Size of each posted receive buffer.
    pub rx_buffer_size: usize,
    /// How long taking a pair waits for the backend's hello answer, in milliseconds.
    pub hello_timeout_ms: u32,
    /// Entries per virtqueue: a power of two in 4..=1024.
    pub queue_size: u16,
}

impl From<&GuestConfig> for SlimConfig {
    fn from(c: &GuestConfig) -> Self {
        SlimConfig {
            memory_size: c.memory_size,
            queue_pairs: c.queue_pairs,
            rx_buffer_size: c.rx_buffer_size,
            hello_timeout_ms: u32::try_from(c.hello_timeout.as_millis()).unwrap_or(u32::MAX),
            queue_size: c.queue_size,
        }
    }
}

impl From<&SlimConfig> for GuestConfig {
    fn from(c: &SlimConfig) -> Self {
        GuestConfig {
            memory_size: c.memory_size,
            queue_size: c.queue_size,
            queue_pairs: c.queue_pairs,
            rx_buffer_size: c.rx_buffer_size,
            hello_timeout: Duration::from_millis(c.hello_timeout_ms.into()),
        }
    }
}

/// What `slim_epoll_wait` reports and `slim_epoll_ctl` registers (the fields of Linux's
/// `struct epoll_event`, but not packed).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SlimEpollEvent {
    /// `SLIM_EPOLL*` flags: interest when registering, readiness when reported.
    pub events: u32,
    /// Returned unchanged with every report (often the descriptor).
    pub data: u64,
}

impl From<SlimEpollEvent> for EpollEvent {
    fn from(e: SlimEpollEvent) -> Self {
        EpollEvent { events: Ready(e.events), data: e.data }
    }
}

impl From<EpollEvent> for SlimEpollEvent {
    fn from(e: EpollEvent) -> Self {
        SlimEpollEvent { events: e.events.0, data: e.data }
    }
}

/// Readable: data, end of stream, or a connection to accept (Linux `EPOLLIN`).
pub const SLIM_EPOLLIN: u32 = 0x001;
/// Writable, or a non-blocking connect finished (`EPOLLOUT`).
pub const SLIM_EPOLLOUT: u32 = 0x004;
/// An error is pending; always reported (`EPOLLERR`).
pub const SLIM_EPOLLERR: u32 = 0x008;
/// Both directions closed; always reported (`EPOLLHUP`).
pub const SLIM_EPOLLHUP: u32 = 0x010;
/// The peer closed its sending side (`EPOLLRDHUP`).
pub const SLIM_EPOLLRDHUP: u32 = 0x2000;
/// Report once, then disarm until `SLIM_EPOLL_CTL_MOD` (`EPOLLONESHOT`).
pub const SLIM_EPOLLONESHOT: u32 = 0x4000_0000;
/// Edge-triggered (`EPOLLET`).
pub const SLIM_EPOLLET: u32 = 0x8000_0000;

/// Register a socket (`EPOLL_CTL_ADD`).
pub const SLIM_EPOLL_CTL_ADD: c_int = 1;
/// Forget a socket (`EPOLL_CTL_DEL`); the event may be NULL.
pub const SLIM_EPOLL_CTL_DEL: c_int = 2;
/// Change a registration (`EPOLL_CTL_MOD`).
pub const SLIM_EPOLL_CTL_MOD: c_int = 3;

/// `O_NONBLOCK`: 0 or 1.
pub const SLIM_OPT_NONBLOCK: c_int = 1;
/// `TCP_NODELAY`: SlimTCP never delays small segments; only 1 is accepted.
pub const SLIM_OPT_NODELAY: c_int = 2;
/// `SO_RCVBUF`: receive buffer bytes; before listen/connect.
pub const SLIM_OPT_RCVBUF: c_int = 3;
/// `SO_SNDBUF`: send buffer bytes; before listen/connect.
pub const SLIM_OPT_SNDBUF: c_int = 4;
/// `TCP_MAXSEG`: the MSS; before connect.
pub const SLIM_OPT_MSS: c_int = 5;
/// Window-scale shift to offer (RFC 7323), -1 for none; before listen/connect.
pub const SLIM_OPT_WINDOW_SCALE: c_int = 6;
/// Frames per burst of the worker (read-only).
pub const SLIM_OPT_BURST: c_int = 7;
/// `SO_ERROR`: the pending error as a positive errno, 0 for none; reading clears it (read-only).
pub const SLIM_OPT_ERROR: c_int = 8;
/// `SO_KEEPALIVE`: 0 or 1; probe the peer of an idle connection (any time).
pub const SLIM_OPT_KEEPALIVE: c_int = 9;
/// `TCP_KEEPIDLE`: seconds of silence before the first probe, 1..=32767 (any time).
pub const SLIM_OPT_KEEPIDLE: c_int = 10;
/// `TCP_KEEPINTVL`: seconds between probes, 1..=32767 (any time).
pub const SLIM_OPT_KEEPINTVL: c_int = 11;
/// `TCP_KEEPCNT`: unanswered probes before `ETIMEDOUT`, 1..=127 (any time).
pub const SLIM_OPT_KEEPCNT: c_int = 12;
/// `TCP_USER_TIMEOUT`: milliseconds data may wait for the peer before `ETIMEDOUT`; 0 off.
pub const SLIM_OPT_USER_TIMEOUT: c_int = 13;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoll_values_are_linux_values() {
        let pairs = [
            (SLIM_EPOLLIN, Ready::IN, libc::EPOLLIN),
            (SLIM_EPOLLOUT, Ready::OUT, libc::EPOLLOUT),
            (SLIM_EPOLLERR, Ready::ERR, libc::EPOLLERR),
            (SLIM_EPOLLHUP, Ready::HUP, libc::EPOLLHUP),
            (SLIM_EPOLLRDHUP, Ready::RDHUP, libc::EPOLLRDHUP),
            (SLIM_EPOLLONESHOT, Ready::ONESHOT, libc::EPOLLONESHOT),
            (SLIM_EPOLLET, Ready::ET, libc::EPOLLET),
        ];
        for (ours, api, linux) in pairs {
            assert_eq!(ours, api.0);
            assert_eq!(ours, linux as u32);
        }
        assert_eq!(
            (SLIM_EPOLL_CTL_ADD, SLIM_EPOLL_CTL_DEL, SLIM_EPOLL_CTL_MOD),
            (libc::EPOLL_CTL_ADD, libc::EPOLL_CTL_DEL, libc::EPOLL_CTL_MOD)
        );
    }

    #[test]
    fn the_config_converts_both_ways() {
        let d = GuestConfig::default();
        let back = GuestConfig::from(&SlimConfig::from(&d));
        assert_eq!(
            (back.memory_size, back.queue_size, back.queue_pairs, back.rx_buffer_size, back.hello_timeout),
            (d.memory_size, d.queue_size, d.queue_pairs, d.rx_buffer_size, d.hello_timeout)
        );
    }
}
