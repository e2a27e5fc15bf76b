//! The worker: one `poll(now)` receives a burst, filters and demultiplexes it by full 4-tuple,
//! feeds each connection its segments, then dispatches every touched connection once (so at most
//! one pure ACK per socket per burst), runs expired timers, and transmits in bursts. ARP (cache,
//! resolve with retries, answer) and ICMP echo live here too.
//!
//! The interface owns the NIC and every socket; applications call its socket operations
//! (`tcp_*`, `udp_*`, `ping`) between polls, from the same thread.

mod activity;
pub mod arp_cache;
mod cidr;
mod config;
mod counters;
mod martian;
mod neighbor;
mod rx;
mod rx_flow;
mod rx_pressure;
pub mod socket_set;
mod tcp_ops;
pub mod template;
pub mod timer_wheel;
mod tokens;
mod tx;
mod tx_backlog;
mod tx_external;
mod udp_loaned;
mod udp_ops;
mod udp_ports;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

pub use activity::Activity;
pub use cidr::Ipv4Cidr;
pub use config::{InterfaceConfig, DEFAULT_RX_MEMORY};
pub use counters::{Counters, DropReason};
pub use martian::Martian;
pub use socket_set::{FourTuple, SocketHandle, TCP_STATE_BYTES};
pub use tcp_ops::TcpInfo;
pub use tx::EXTERNAL_MIN_PAYLOAD;
pub use udp_ops::PingReply;

use arp_cache::ArpCache;
use neighbor::PendingNeighbors;
use socket_set::{Socket, SocketSet};
use timer_wheel::TimerWheel;
use tx_external::ExternalTx;

use crate::nic::{Nic, NicCapabilities, NicError, PacketBuf};
use crate::rx_memory::{RxBudget, RxReading};
use crate::tcp::{IsnGenerator, SynCookies};
use crate::time::Instant;

/// Errors of the interface itself (not of a socket).
#[derive(Debug, thiserror::Error)]
pub enum IfaceError {
    /// The NIC failed.
    #[error("NIC failure")]
    Nic(#[from] NicError),
}

/// Timer wheel resolution: fine enough for data-center RTOs, coarse enough to be cheap.
const TIMER_GRANULARITY: Duration = Duration::from_micros(100);
const TIMER_SLOTS: usize = 4096;
/// Frames kept when the device refuses them, beyond which new frames are dropped.
const TX_BACKLOG_BURSTS: usize = 8;
/// Ping replies kept for the application.
const PING_QUEUE: usize = 64;

/// The first ephemeral port: local ports picked for `connect` and for a bind to port 0 are
/// `FIRST_EPHEMERAL_PORT..=u16::MAX` (the IANA dynamic range, RFC 6335).
pub const FIRST_EPHEMERAL_PORT: u16 = 49_152;
/// How many ephemeral ports there are (16,384).
pub const EPHEMERAL_PORT_COUNT: u16 = u16::MAX - FIRST_EPHEMERAL_PORT + 1;

/// A SlimTCP interface over one NIC.
#[derive(Debug)]
pub struct Interface<N: Nic> {
    nic: N,
    caps: NicCapabilities,
    cfg: InterfaceConfig,
    sockets: SocketSet,
    /// `cfg.tcp`, shared by every connection made with it.
    tcp_cfg: std::sync::Arc<crate::tcp::TcpConfig>,
    /// Keyed (a random key per interface): the peer chooses the keys.
    connections: HashMap<FourTuple, SocketHandle, ahash::RandomState>,
    listeners: HashMap<u16, SocketHandle>,
    udp_ports: udp_ports::UdpPorts,
    arp: ArpCache,
    pending: PendingNeighbors,
    timers: TimerWheel<SocketHandle>,
    isn: IsnGenerator,
    /// SYN cookies for listeners whose backlog is full (secret per interface).
    cookies: SynCookies,
    counters: Counters,
    rx_burst: Vec<PacketBuf>,
    /// The run of segments the burst's last frame belongs to (`rx_flow.rs`).
    rx_flow: rx_flow::RxFlow,
    /// Frames built and not yet taken by the NIC.
    tx_queue: tx_backlog::TxBacklog<PacketBuf>,
    /// Frames with by-reference payloads, and their transmissions in flight.
    ext: ExternalTx,
    /// Sockets to dispatch at the end of this poll (input, timers, application calls).
    dispatch_list: Vec<SocketHandle>,
    /// Connections stopped by a full transmit backlog, oldest first; they go on one at a time
    /// once it has drained to half (`resume_held`). A connection is on it once (`tx_held`).
    tx_blocked: VecDeque<SocketHandle>,
    /// The NIC refused frames during this poll's dispatching (see `FrameSink::ring_full`).
    tx_ring_full: bool,
    /// The next frame's buffer, taken one frame ahead during a poll's dispatches (`tx.rs`).
    tx_ahead: Option<PacketBuf>,
    expired: Vec<SocketHandle>,
    ping_replies: VecDeque<PingReply>,
    next_ephemeral: u16,
    /// Retransmissions of connections already freed.
    retransmits_freed: u64,
    /// The receive storage of every socket is charged to it (`rx_memory.rs`).
    rx_budget: RxBudget,
    /// The least room the budget had since it last ran low, while it is low (`rx_pressure.rs`).
    rx_room_low: Option<usize>,
    /// Sockets with news for the application (see [`Interface::take_activity`]).
    activity: Vec<SocketHandle>,
    track_activity: bool,
    /// Scratch: sockets whose loaned payloads' transmissions completed in this poll.
    credited: Vec<SocketHandle>,
}

/// How many frames ahead of the one being processed the receive path prefetches.
const RX_PREFETCH_AHEAD: usize = 2;

impl<N: Nic> Interface<N> {
    /// An interface over `nic` with `cfg` (whose `mac` is the NIC's own when
    /// [`InterfaceConfig::mac_from_nic`] asks for it and the NIC has one).
    pub fn new(nic: N, mut cfg: InterfaceConfig) -> Self {
        if let Some(mac) = nic.mac_address().filter(|_| cfg.mac_from_nic) {
            cfg.mac = mac;
        }
        cfg.burst = cfg.burst.max(1);
        let caps = nic.capabilities();
        let isn = IsnGenerator::new();
        // Start ephemeral ports at a random-looking point of the IANA range.
        let seed = isn.isn(
            std::net::SocketAddrV4::new(cfg.ip, 0),
            std::net::SocketAddrV4::new(cfg.ip, 0),
            Instant::ZERO,
        );
        let mut arp = ArpCache::new(cfg.arp);
        for &(ip, mac) in &cfg.static_neighbors {
            arp.insert_static(ip, mac);
        }
        Interface {
            arp,
            pending: PendingNeighbors::new(cfg.arp_hold),
            timers: TimerWheel::new(TIMER_GRANULARITY, TIMER_SLOTS),
            nic,
            caps,
            sockets: SocketSet::default(),
            tcp_cfg: std::sync::Arc::new(cfg.tcp.clone()),
            connections: HashMap::with_hasher(ahash::RandomState::new()),
            listeners: HashMap::new(),
            udp_ports: udp_ports::UdpPorts::default(),
            isn,
            cookies: SynCookies::new(),
            counters: Counters::default(),
            rx_burst: Vec::with_capacity(cfg.burst),
            rx_flow: rx_flow::RxFlow::default(),
            tx_queue: tx_backlog::TxBacklog::new(cfg.burst),
            ext: ExternalTx::new(cfg.burst),
            dispatch_list: Vec::new(),
            tx_blocked: VecDeque::new(),
            tx_ring_full: false,
            tx_ahead: None,
            expired: Vec::new(),
            ping_replies: VecDeque::new(),
            next_ephemeral: FIRST_EPHEMERAL_PORT + (seed.0 % u32::from(EPHEMERAL_PORT_COUNT)) as u16,
            retransmits_freed: 0,
            activity: Vec::new(),
            track_activity: false,
            credited: Vec::new(),
            rx_budget: RxBudget::new(cfg.rx_memory),
            rx_room_low: None,
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &InterfaceConfig {
        &self.cfg
    }

    /// Sets the frames received or transmitted per burst (at least 1).
    pub fn set_burst(&mut self, burst: usize) {
        self.cfg.burst = burst.max(1);
    }

    /// The NIC.
    pub fn nic(&self) -> &N {
        &self.nic
    }

    /// The NIC, mutable (for device-specific controls).
    pub fn nic_mut(&mut self) -> &mut N {
        &mut self.nic
    }

    /// Counters, current as of now.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters.clone();
        let live: u64 = self.sockets.tcp_sockets().map(|s| s.conn.retransmits()).sum();
        c.tcp_retransmits = self.retransmits_freed + live;
        c
    }

    /// Transmissions of by-reference payloads the NIC has not reported complete yet.
    pub fn external_in_flight(&self) -> usize {
        self.ext.in_flight()
    }

    /// Addresses being resolved with frames or connections waiting for them (at most the ARP
    /// cache's capacity after a poll).
    pub fn neighbors_pending(&self) -> usize {
        self.pending.len()
    }

    /// The receive memory budget: held, peak, limit, refusals.
    pub fn rx_memory(&self) -> RxReading {
        self.rx_budget.reading()
    }

    /// TCP sockets by state, indexed by [`State::index`](crate::tcp::State::index): listeners
    /// count as LISTEN, connections by their state (a walk over the sockets, for stats).
    pub fn tcp_state_counts(&self) -> [u64; 11] {
        let mut counts = [0u64; 11];
        counts[crate::tcp::State::Listen.index()] = self.sockets.listener_count() as u64;
        for s in self.sockets.tcp_sockets() {
            counts[s.conn.state().index()] += 1;
        }
        counts
    }

    /// Live sockets of all kinds.
    pub fn socket_count(&self) -> usize {
        self.sockets.len()
    }

    /// The MAC cached for `ip`, if any.
    pub fn arp_lookup(&self, ip: std::net::Ipv4Addr, now: Instant) -> Option<crate::wire::EthernetAddress> {
        self.arp.lookup(ip, now)
    }

    /// One round of work: receive a burst, process it, run timers, transmit. Returns true when
    /// anything happened (frames in or out, timers, socket work, transmissions of loaned
    /// payloads completed), so callers can idle otherwise.
    pub fn poll(&mut self, now: Instant) -> Result<bool, IfaceError> {
        let mut credited = std::mem::take(&mut self.credited);
        let completed = self.ext.poll_completions(&mut self.nic, &mut self.sockets, &mut credited);
        for h in credited.drain(..) {
            self.note_news(h);
        }
        self.credited = credited;
        let mut burst = std::mem::take(&mut self.rx_burst);
        let received = self.nic.receive(now, &mut burst, self.cfg.burst)?;
        // The burst's headers are fetched from memory while the first frames are processed
        // (a frame received long after it was written is in no cache any more), and what the
        // receive path reads of the frame after next while this one is processed: a frame's
        // lines are scattered over the pool, where the CPU cannot guess them.
        for frame in &burst {
            frame.prefetch_headers();
        }
        for frame in burst.iter().take(RX_PREFETCH_AHEAD) {
            frame.prefetch_received();
        }
        // Processed in place: a payload the stack keeps is taken out of its frame (a small one
        // is copied), so a frame moves once, from the NIC into this burst.
        for i in 0..burst.len() {
            if let Some(ahead) = burst.get(i + RX_PREFETCH_AHEAD) {
                ahead.prefetch_received();
            }
            self.process_frame(now, &mut burst[i]);
        }
        // Applications act between polls: the run's bookkeeping is done, and the next burst's
        // first segment starts afresh.
        self.settle_run(now);
        self.rx_flow.take();
        self.nic.release(&mut burst);
        self.rx_burst = burst;

        let mut expired = std::mem::take(&mut self.expired);
        self.timers.expire(now, &mut expired);
        let timers_fired = !expired.is_empty();
        for h in expired.drain(..) {
            self.on_socket_timer(now, h);
        }
        self.expired = expired;

        self.retry_neighbors(now);
        self.reopen_windows_after_pressure();

        // Connections held back by a full backlog first: they have waited longest.
        self.resume_held(now);
        let mut list = std::mem::take(&mut self.dispatch_list);
        let dispatched = !list.is_empty();
        for h in list.drain(..) {
            self.dispatch_socket(now, h);
        }
        // A connection scheduled while others ran (one whose listener went away is aborted
        // in its dispatch's bookkeeping) runs at the next poll: it is `queued`, so dropping
        // the entry would leave it never dispatched again, never reset, never freed.
        list.append(&mut self.dispatch_list);
        self.dispatch_list = list;
        // The buffer taken for a next frame is not kept between polls: an idle interface holds
        // no transmit buffer (a DPDK pool's mbufs all come back).
        self.tx_ahead = None;

        let sent = self.flush_tx(now)?;
        Ok(received > 0 || timers_fired || dispatched || sent > 0 || completed > 0)
    }

    /// The next time `poll` has timer work, if any (callers may sleep until then, or until the
    /// NIC has a frame). `Some(now)`-like early values mean "poll again soon".
    pub fn poll_at(&self) -> Option<Instant> {
        if !self.dispatch_list.is_empty()
            || !self.tx_queue.is_empty()
            || !self.ext.queue.is_empty()
            || !self.tx_blocked.is_empty()
        {
            return Some(Instant::ZERO);
        }
        [self.timers.next_deadline(), self.arp.next_deadline()].into_iter().flatten().min()
    }

    fn schedule_dispatch(
        dispatch_list: &mut Vec<SocketHandle>,
        sock: &mut socket_set::TcpSocket,
        h: SocketHandle,
    ) {
        if !sock.queued {
            sock.queued = true;
            dispatch_list.push(h);
        }
    }

    fn queue_ping_reply(&mut self, reply: PingReply) {
        if self.ping_replies.len() >= PING_QUEUE {
            self.ping_replies.pop_front();
        }
        self.ping_replies.push_back(reply);
    }

    fn free_socket(&mut self, h: SocketHandle) {
        match self.sockets.remove(h) {
            Some(Socket::Tcp(mut t)) => {
                // Loans the NIC still reads outlive the connection until their completions.
                self.ext.adopt(t.conn.take_in_flight_loans());
                self.retransmits_freed += t.conn.retransmits();
                if self.connections.get(&t.tuple()) == Some(&h) {
                    self.connections.remove(&t.tuple());
                }
                if let Some(l) = t.listener.and_then(|l| self.sockets.listener_mut(l)) {
                    l.pending = l.pending.saturating_sub(1);
                    l.accept_queue.retain(|x| *x != h);
                }
            }
            Some(Socket::Listener(l)) => {
                self.listeners.remove(&l.port);
            }
            Some(Socket::Udp(u)) => {
                self.udp_ports.remove(u.port(), h);
            }
            None => {}
        }
    }
}
