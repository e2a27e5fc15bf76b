//! The server side of the socket API: one executor of socket operations over an
//! [`Interface`], for every transport that carries them (the guest protocol's virtqueues in the
//! backend; the host runtime's rings next).
//!
//! ```text
//!  transport (requests in, messages out)          SocketServer
//!  ┌────────────────────────────────┐  open/bind/listen/connect/   ┌──────────────────────────┐
//!  │ parse its wire form, name      │  send/shutdown/close/options │ ids <-> stack handles,   │
//!  │ sockets by server id, keep its │ ───────────────────────────▶ │ phases, option rules,    │
//!  │ own queues (lanes)             │                              │ ports, loans and held    │
//!  │                                │ ◀─────────────────────────── │ sends, received segments │
//!  └────────────────────────────────┘  ServerEvents, pulled data   │ held against the window  │
//!                                                                  └────────────┬─────────────┘
//!                                                                         Interface (stack)
//! ```
//!
//! A transport names its per-socket queue with a *lane* (the guest's queue pair); events carry
//! the lane of their socket, and an accepted connection inherits its listener's. Sends are
//! loaned to the stack by reference and held until every byte is acknowledged (or, for UDP,
//! until the NIC no longer reads it); each send carries the transport's token ([`Transport::Send`])
//! and comes back in [`Event::SendDone`] with its result. Received data is pulled by the
//! transport when it has room ([`SocketServer::stream_ready`], [`SocketServer::stream_read`],
//! [`SocketServer::take_datagram`]); the bytes stay counted against the receive window until
//! the transport releases them ([`SocketServer::release`]).

mod activity;
mod control;
mod events;
mod held;
mod loans;
pub mod options;
mod receive;
mod sends;

use std::collections::VecDeque;
use std::fmt::Debug;

pub use control::Connecting;
pub use events::{Event, ServerEvent};
pub use receive::StreamReady;
pub use sends::{DatagramPayload, DatagramSent};
pub use slimtcp_api::id_map::{IdHasher, IdMap};

use crate::api::{Proto, SocketError};
use crate::iface::{Activity, IfaceError, Interface, SocketHandle};
use crate::nic::{Nic, PacketBuf};
use crate::tcp::TxPayload;
use crate::time::{Clock, Instant};
use held::{HeldSends, HeldSpares};
use options::{OptionBounds, SocketOptions};
use std::time::Duration;

/// How often the server walks the sockets holding sends ([`SocketServer::sweep_held_sends`]).
const SWEEP_EVERY: Duration = Duration::from_millis(100);

/// What a transport brings to the server: the types it names its sends and calls with.
pub trait Transport {
    /// Identifies one send until it completes (the guest's descriptor head and cookie).
    type Send: Debug;
    /// Identifies an operation whose result comes later (a connect's cookie).
    type Call: Debug + Copy + PartialEq;
    /// One piece of a send's payload, loaned to the stack and read in place.
    type Payload: TxPayload;
}

/// The operator's bounds for one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Sockets open at once (more: `EMFILE`).
    pub max_sockets: usize,
    /// Bytes in flight per socket, at most (the largest `SO_SNDBUF`).
    pub max_send_in_flight: usize,
    /// A new socket's send buffer.
    pub default_sndbuf: usize,
    /// A new socket's receive buffer.
    pub default_rcvbuf: usize,
    /// The largest listen backlog (a larger one is cut to it).
    pub max_backlog: usize,
    /// The largest datagram payload.
    pub max_datagram: usize,
}

/// Where a socket is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase<C> {
    /// Created (maybe bound), neither listening nor connected.
    Fresh,
    Listening,
    /// Connect in progress; `call` completes once established or failed.
    Connecting {
        call: C,
    },
    Connected,
    /// Closed by the transport, finishing its held sends (invisible to requests).
    Zombie,
}

/// A send held until its loans come back.
#[derive(Debug)]
struct HeldSend<S> {
    token: S,
    len: usize,
    loans_left: usize,
}

/// One socket of the server.
#[derive(Debug)]
struct ServerSocket<T: Transport> {
    lane: usize,
    proto: Proto,
    phase: Phase<T::Call>,
    handle: Option<SocketHandle>,
    port: Option<u16>,
    opts: SocketOptions,
    /// Payload bytes of held sends.
    in_flight: usize,
    next_seq: u64,
    /// Held sends by sequence number (in the order they were made).
    sends: HeldSends<T::Send>,
    /// Loans the stack did not take yet (not expected: the stack's send buffer is at least the
    /// largest send buffer).
    backlog: VecDeque<Box<dyn TxPayload>>,
    /// Bytes handed to the transport and not yet released.
    outstanding_rx: usize,
    /// The part of a segment that did not fit the transport's last buffer.
    rx_partial: Option<PacketBuf>,
    in_readable: bool,
    write_shut: bool,
    writable_wanted: bool,
    eof_sent: bool,
    reset_sent: bool,
    /// On the server's list of sockets the sweep looks at (`sweep_list`).
    on_sweep_list: bool,
}

impl<T: Transport> ServerSocket<T> {
    fn new(lane: usize, proto: Proto, opts: SocketOptions) -> Self {
        ServerSocket {
            lane,
            proto,
            phase: Phase::Fresh,
            handle: None,
            port: None,
            opts,
            in_flight: 0,
            next_seq: 0,
            sends: HeldSends::default(),
            backlog: VecDeque::new(),
            outstanding_rx: 0,
            rx_partial: None,
            in_readable: false,
            write_shut: false,
            writable_wanted: false,
            eof_sent: false,
            reset_sent: false,
            on_sweep_list: false,
        }
    }
}

/// Socket `id` as requests see it: a closed one, a zombie finishing its sends included, is
/// `BadHandle`.
fn open_in<T: Transport>(
    sockets: &mut IdMap<u32, ServerSocket<T>>,
    id: u32,
) -> Result<&mut ServerSocket<T>, SocketError> {
    sockets.get_mut(&id).filter(|s| s.phase != Phase::Zombie).ok_or(SocketError::BadHandle)
}

/// The server (see the module documentation).
#[derive(Debug)]
pub struct SocketServer<N: Nic, T: Transport> {
    iface: Interface<N>,
    clock: Clock,
    limits: ServerLimits,
    bounds: OptionBounds,
    /// By id; each socket's stack socket carries its id as its tag ([`Interface::set_tag`]), so
    /// activity finds its record without a map from handles.
    sockets: IdMap<u32, ServerSocket<T>>,
    /// Sockets that are not zombies.
    visible: usize,
    /// TCP ports held by the server's sockets (bound, listening or connected from), with how
    /// many sockets hold each.
    tcp_ports: IdMap<u16, usize>,
    next_id: u32,
    /// Listeners with connections waiting for a socket to be free.
    accept_waiting: Vec<u32>,
    /// When [`sweep_held_sends`](Self::sweep_held_sends) runs next.
    next_sweep: Instant,
    /// The sockets that held sends since the last sweep (each once: `on_sweep_list`), the
    /// only ones the sweep looks at: a walk over every socket would cost a cache miss per
    /// socket at every sweep, most of them holding nothing.
    sweep_list: Vec<u32>,
    events: VecDeque<ServerEvent<T>>,
    /// Storage of the sockets' held sends while none holds any (`held.rs`).
    held_spares: HeldSpares<T::Send>,
    activity: Vec<Activity>,
    completed: Vec<Box<dyn TxPayload>>,
}

impl<N: Nic, T: Transport> SocketServer<N, T> {
    /// A server over `iface` (which it owns from now on).
    pub fn new(iface: Interface<N>, clock: Clock, limits: ServerLimits) -> Self {
        let mtu = iface.nic().capabilities().mtu;
        let bounds = OptionBounds::new(mtu, limits.max_send_in_flight);
        SocketServer {
            iface,
            clock,
            limits,
            bounds,
            sockets: IdMap::default(),
            visible: 0,
            tcp_ports: IdMap::default(),
            next_id: 1,
            accept_waiting: Vec::new(),
            next_sweep: Instant::ZERO,
            sweep_list: Vec::new(),
            events: VecDeque::new(),
            held_spares: HeldSpares::new(),
            activity: Vec::new(),
            completed: Vec::new(),
        }
    }

    /// The interface.
    pub fn iface(&self) -> &Interface<N> {
        &self.iface
    }

    /// The interface, mutable (its NIC's controls).
    pub fn iface_mut(&mut self) -> &mut Interface<N> {
        &mut self.iface
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The limits.
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    /// The next event, oldest first.
    pub fn next_event(&mut self) -> Option<ServerEvent<T>> {
        self.events.pop_front()
    }

    /// Sockets open, zombies included.
    pub fn socket_count(&self) -> usize {
        self.sockets.len()
    }

    /// Sends held now, all sockets together.
    pub fn sends_held(&self) -> usize {
        self.sockets.values().map(|s| s.sends.len()).sum()
    }

    /// The sockets of `lane` (zombies included).
    pub fn sockets_of_lane(&self, lane: usize) -> Vec<u32> {
        self.sockets.iter().filter(|(_, s)| s.lane == lane).map(|(&id, _)| id).collect()
    }

    /// Resets every socket of `lane`, zombies included (its transport starts over): their held
    /// sends fail (`ECONNABORTED`) and connections are reset. Returns how many there were.
    pub fn abort_lane(&mut self, lane: usize) -> usize {
        let ids = self.sockets_of_lane(lane);
        for &id in &ids {
            self.fail_sends(id, SocketError::Connection(crate::tcp::ConnError::Aborted));
            self.remove(id, true);
        }
        self.retry_accepts();
        ids.len()
    }

    /// The lane of socket `id`.
    pub fn lane_of(&self, id: u32) -> Option<usize> {
        self.sockets.get(&id).map(|s| s.lane)
    }

    /// True when `id` names a socket requests may use (not closed, not a zombie) on `lane`.
    pub fn is_open_on(&self, id: u32, lane: usize) -> bool {
        self.sockets.get(&id).is_some_and(|s| s.lane == lane && s.phase != Phase::Zombie)
    }

    /// One poll of the interface (NIC, timers), then socket activity turned into events and
    /// returned loans into completed sends (the stack reports a socket with a loan to hand back
    /// as activity, so no socket is visited without news). True when anything happened.
    pub fn poll(&mut self) -> Result<bool, IfaceError> {
        let now = self.clock.now();
        let mut work = self.iface.poll(now)?;
        let mut activity = std::mem::take(&mut self.activity);
        self.iface.take_activity(&mut activity);
        for a in activity.drain(..) {
            work = true;
            self.on_activity(a.tag, a.handle, a.events);
        }
        self.activity = activity;
        self.retry_accepts();
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY;
            self.sweep_held_sends();
        }
        Ok(work)
    }

    /// Collects returned loans of every socket holding sends. Activity brings every returned
    /// loan to the server; this bounded, rare walk is the backstop that keeps a send (a guest's
    /// chain) from being held for ever should a path of the stack ever return a loan silently.
    fn sweep_held_sends(&mut self) {
        // Sockets closed meanwhile leave the list, and so does an entry whose socket was seen
        // already in this sweep (an id reused after wrapping); a socket still holding sends
        // stays on it.
        let mut list = std::mem::take(&mut self.sweep_list);
        list.retain(|&id| {
            let Some(s) = self.sockets.get_mut(&id) else { return false };
            if !std::mem::take(&mut s.on_sweep_list) {
                return false;
            }
            let before = s.sends.len();
            self.collect_completed(id);
            let late = before.saturating_sub(self.held_sends(id));
            if late > 0 {
                log::debug!("socket {id}: {late} sends completed by the sweep, not by activity");
            }
            self.held_sends(id) > 0
        });
        for &id in &list {
            if let Some(s) = self.sockets.get_mut(&id) {
                s.on_sweep_list = true;
            }
        }
        // Sockets that began holding sends during the sweep joined the new list already.
        list.append(&mut self.sweep_list);
        self.sweep_list = list;
    }

    /// Ends the server: resets every connection (the transport is gone), drops held sends
    /// without events, and hands back the interface.
    pub fn into_interface(mut self) -> Interface<N> {
        let ids: Vec<u32> = self.sockets.keys().copied().collect();
        for id in ids {
            self.remove(id, true);
        }
        // Let the stack send the resets.
        for _ in 0..4 {
            let now = self.clock.now();
            if let Err(e) = self.iface.poll(now) {
                log::warn!("poll while closing the server's sockets: {e}");
                break;
            }
        }
        self.iface
    }

    fn new_id(&mut self) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = self.next_id.checked_add(1).unwrap_or(1);
            if id != 0 && !self.sockets.contains_key(&id) {
                return id;
            }
        }
    }

    fn insert(&mut self, id: u32, s: ServerSocket<T>) {
        if let Some(h) = s.handle {
            self.tag(h, id);
        }
        if let (Proto::Tcp, Some(port)) = (s.proto, s.port) {
            *self.tcp_ports.entry(port).or_insert(0) += 1;
        }
        self.visible += 1;
        self.sockets.insert(id, s);
    }

    /// Gives socket `id` its stack handle.
    fn attach(&mut self, id: u32, h: SocketHandle) {
        self.tag(h, id);
        if let Some(s) = self.sockets.get_mut(&id) {
            s.handle = Some(h);
        }
    }

    /// Marks stack socket `h` as socket `id`'s (its activity names `id`).
    fn tag(&mut self, h: SocketHandle, id: u32) {
        if let Err(e) = self.iface.set_tag(h, id) {
            log::warn!("socket {id}: its stack socket is gone already: {e}");
        }
    }

    /// Records that socket `id` holds `port` (TCP ports are counted for `bind`).
    fn hold_port(&mut self, id: u32, port: u16) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if s.port.is_some() {
            return;
        }
        s.port = Some(port);
        if s.proto == Proto::Tcp {
            *self.tcp_ports.entry(port).or_insert(0) += 1;
        }
    }

    fn drop_port(&mut self, proto: Proto, port: Option<u16>) {
        let (Proto::Tcp, Some(port)) = (proto, port) else { return };
        if let Some(n) = self.tcp_ports.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.tcp_ports.remove(&port);
            }
        }
    }

    /// Takes socket `id` out of the server and closes its stack socket (`abort`: reset a
    /// connection instead of closing it). Held sends are dropped without events.
    fn remove(&mut self, id: u32, abort: bool) {
        let Some(s) = self.sockets.remove(&id) else { return };
        if s.phase != Phase::Zombie {
            self.visible -= 1;
        }
        self.drop_port(s.proto, s.port);
        let Some(h) = s.handle else { return };
        let r = match (s.proto, s.phase, abort) {
            (Proto::Tcp, Phase::Connected | Phase::Connecting { .. } | Phase::Zombie, true) => {
                self.iface.tcp_abort(h)
            }
            _ => self.iface.tcp_close(h),
        };
        if let Err(e) = r {
            log::debug!("socket {id}: closing its stack socket: {e}");
        }
    }

    /// Makes socket `id` a zombie: gone for requests, finishing its held sends.
    fn bury(&mut self, id: u32) {
        let Some(s) = self.sockets.get_mut(&id) else { return };
        if s.phase != Phase::Zombie {
            s.phase = Phase::Zombie;
            s.rx_partial = None;
            self.visible -= 1;
        }
    }
}
