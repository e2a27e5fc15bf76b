//! The data path of one tenant: takes requests from the transmit queues, executes them on the
//! tenant's SlimTCP [`Interface`], and writes completions, events and received data into the
//! buffers the guest posted on the receive queues. Single-threaded: the tenant's worker owns it.
//!
//! Nothing here trusts guest memory: every chain is walked and translated with range checks
//! ([`chain`]), the fixed request bytes are copied once and parsed by `slimtcp-abi`, and a bad
//! request gets its error completion while every other queue and socket keeps going.

mod chain;
mod deliver;
mod drain;
mod events;
mod limits;
mod options;
mod requests;
mod restart;
mod send_payload;
mod stop;

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Arc;

use slimtcp::iface::{IfaceError, Interface};
use slimtcp::nic::Nic;
use slimtcp::server::{ServerLimits, SocketServer, Transport};
use slimtcp::time::Clock;
use slimtcp_abi::{HelloInfo, RxMessage, SocketId};

use crate::guest_dma::GuestDma;
use crate::guest_mem::GuestMem;
use crate::queues::{self, Vrings};

pub use chain::{walk, ChainFault, Walked};
pub use drain::DrainReport;
pub use limits::{bounds, Limits, TenantLimits};
pub use send_payload::SendPayload;

/// Requests taken per transmit queue per step, so no queue or the NIC is starved.
const REQUESTS_PER_STEP: usize = 64;
/// Receive buffers filled per receive queue per step.
const RX_PER_STEP: usize = 64;
/// Control-queue requests answered per step (a guest refilling it forever still lets the rest
/// of the step run).
pub const CONTROL_PER_STEP: usize = 64;
/// Unusable receive buffers (too small, faulty) returned per search for a usable one; past
/// that, the message waits for the next step.
pub const BAD_RX_BUFFERS_PER_SEARCH: usize = 64;
/// Bytes of `COPY` sends a tenant's engine holds as copies at most (docs/protocol.md section
/// 11); past it such sends are held by reference like any other, and still acknowledged by
/// `acked` events. Bounds the host memory a guest can make the backend spend on its sends.
pub const SEND_COPY_BUDGET: usize = 64 << 20;
/// Connections still open at the end of a session listed at info level (the rest at debug).
const LISTED_AT_END: usize = 8;
/// Counters of the device (the stack's own are in [`Interface::counters`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceCounters {
    /// Requests taken from transmit queues.
    pub requests: u64,
    /// `socket` requests refused because the tenant's socket limit was reached (`EMFILE`).
    pub socket_limit_refusals: u64,
    /// Error completions written (or queued).
    pub error_completions: u64,
    /// Transmit chains returned without an answer (no magic, shorter than 32 bytes).
    pub unanswerable_chains: u64,
    /// Posted receive buffers returned unused (too small, wrong direction, outside memory).
    pub bad_rx_buffers: u64,
    /// Messages written into receive buffers.
    pub rx_messages: u64,
    /// Stream payload bytes sent by reference from guest memory.
    pub tx_payload_by_reference: u64,
    /// Payload bytes the backend copied on transmit (TCP: never; a UDP datagram spread over
    /// several descriptors is gathered once before the stack copies it into its frame).
    pub tx_payload_copied: u64,
    /// Bytes of `COPY` sends copied into host memory, their chains returned at once (the
    /// guest's sockets whose peers do not read would otherwise hold the transmit queue).
    pub tx_sends_copied: u64,
    /// `COPY` sends held by reference because the copies reached [`SEND_COPY_BUDGET`].
    pub tx_copies_over_budget: u64,
    /// Payload bytes copied into guest receive buffers (the one receive copy).
    pub rx_payload_copied: u64,
    /// Send chains held until their bytes are acknowledged, now.
    pub sends_held: u64,
    /// Control-queue requests answered.
    pub ctrl_requests: u64,
    /// UDP datagrams dropped because the guest's buffer was too small for them whole.
    pub datagrams_truncated: u64,
    /// Unacknowledged send payload copied into host memory because the VMM stopped a
    /// transmit queue (its chains had to come back before the ACK).
    pub tx_payload_copied_at_stop: u64,
    /// Transmit chains given back because the VMM stopped their queue.
    pub chains_returned_at_stop: u64,
}

impl DeviceCounters {
    /// Adds `o`'s counts to these (`sends_held`, a gauge, becomes `o`'s).
    pub fn add(&mut self, o: &DeviceCounters) {
        self.requests += o.requests;
        self.socket_limit_refusals += o.socket_limit_refusals;
        self.error_completions += o.error_completions;
        self.unanswerable_chains += o.unanswerable_chains;
        self.bad_rx_buffers += o.bad_rx_buffers;
        self.rx_messages += o.rx_messages;
        self.tx_payload_by_reference += o.tx_payload_by_reference;
        self.tx_payload_copied += o.tx_payload_copied;
        self.tx_sends_copied += o.tx_sends_copied;
        self.tx_copies_over_budget += o.tx_copies_over_budget;
        self.rx_payload_copied += o.rx_payload_copied;
        self.sends_held = o.sends_held;
        self.ctrl_requests += o.ctrl_requests;
        self.datagrams_truncated += o.datagrams_truncated;
        self.tx_payload_copied_at_stop += o.tx_payload_copied_at_stop;
        self.chains_returned_at_stop += o.chains_returned_at_stop;
    }
}

/// What one connection's session did: the device's counters and the copy counters of the stack
/// and the NIC, which together show whether transmit was zero-copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionReport {
    /// The device's counters.
    pub device: DeviceCounters,
    /// Payload bytes the stack copied into frames it built (since the interface was made).
    pub stack_tx_payload_copied: u64,
    /// The part of `stack_tx_payload_copied` that was guest memory the NIC could have sent in
    /// place, copied because its segment was short (`slimtcp::iface::EXTERNAL_MIN_PAYLOAD`).
    pub stack_tx_short_payload_copied: u64,
    /// External (guest-memory) payload bytes the NIC copied instead of sending them in place
    /// (since the NIC was opened).
    pub nic_external_copied: u64,
    /// Guest memory regions attached to the NIC for zero-copy transmit at the end.
    pub regions_attached: usize,
    /// The stack's receive memory budget: held, peak, limit, refusals (since the interface was
    /// made).
    pub rx_memory: slimtcp::rx_memory::RxReading,
}

impl std::fmt::Display for SessionReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.device;
        write!(
            f,
            "requests {}, unanswerable chains {}, errors {}, rx messages {}, tx by reference {} B, \
             tx copied by backend {} B, tx sends copied {} B ({} over budget), \
             stack tx payload copied {} B, stack tx short payload copied {} B, \
             NIC copied guest payload {} B, guest regions attached {}, \
             rx copied {} B, copied at ring stops {} B, chains returned at ring stops {}, \
             socket limit refusals {}, rx memory {} B (peak {} B of {} B, {} refused)",
            c.requests,
            c.unanswerable_chains,
            c.error_completions,
            c.rx_messages,
            c.tx_payload_by_reference,
            c.tx_payload_copied,
            c.tx_sends_copied,
            c.tx_copies_over_budget,
            self.stack_tx_payload_copied,
            self.stack_tx_short_payload_copied,
            self.nic_external_copied,
            self.regions_attached,
            c.rx_payload_copied,
            c.tx_payload_copied_at_stop,
            c.chains_returned_at_stop,
            c.socket_limit_refusals,
            self.rx_memory.used,
            self.rx_memory.peak,
            self.rx_memory.limit,
            self.rx_memory.refused
        )
    }
}

/// How a tenant's engine is set up.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Queue pairs (the control queue is ring `2 * pairs`).
    pub pairs: usize,
    /// Limits announced in hello.
    pub limits: Limits,
    /// The guest's network parameters, announced in hello.
    pub hello: HelloInfo,
    /// Bytes of `COPY` sends held as copies at most ([`SEND_COPY_BUDGET`]).
    pub copy_budget: usize,
}

impl EngineConfig {
    /// A configuration for `pairs` queue pairs of `queue_size` entries over `iface`'s addresses,
    /// with the default limits.
    pub fn new<N: Nic>(iface: &Interface<N>, pairs: usize, queue_size: u16) -> Self {
        Self::with_limits(iface, pairs, queue_size, &TenantLimits::default())
    }

    /// [`EngineConfig::new`] with the operator's `tenant` limits.
    pub fn with_limits<N: Nic>(
        iface: &Interface<N>,
        pairs: usize,
        queue_size: u16,
        tenant: &TenantLimits,
    ) -> Self {
        let cfg = iface.config();
        let limits = Limits::new(queue_size, tenant);
        let mtu = iface.nic().capabilities().mtu;
        let hello = HelloInfo {
            addr: cfg.ip,
            prefix_len: cfg.prefix_len,
            mac: cfg.mac.0,
            gateway: cfg.gateway.unwrap_or(Ipv4Addr::UNSPECIFIED),
            mss: cfg.tcp.mss,
            max_datagram: u16::try_from(mtu.saturating_sub(28)).unwrap_or(u16::MAX),
            max_sockets: limits.max_sockets,
            max_send_in_flight: limits.max_send_in_flight,
            rx_buffer: limits.rx_buffer,
            max_requests: limits.max_requests,
        };
        EngineConfig { pairs, limits, hello, copy_budget: SEND_COPY_BUDGET }
    }
}

/// Something for a receive queue, or a transmit chain to return once what precedes it is out.
#[derive(Debug)]
enum Out {
    Msg(RxMessage),
    Return(u16),
    /// An `acked` message for this socket: its bytes are summed in [`Pair::acked`] until it is
    /// written (one pending per socket).
    Acked(u32),
}

#[derive(Debug, Default)]
struct Pair {
    hello: bool,
    /// The negotiated version has `COPY` sends and `acked` events (1.2).
    copy_sends: bool,
    /// Acknowledged bytes of `COPY` sends per socket, not yet written in an `acked` message.
    acked: HashMap<u32, u64>,
    /// Completions, events and chain returns in the order they must reach the guest.
    pending: VecDeque<Out>,
    /// Messages in `pending`.
    pending_msgs: usize,
    /// Transmit chains taken and not yet returned.
    taken: usize,
    /// Sockets with data (or EOF, errors, datagrams) to deliver.
    readable: VecDeque<u32>,
}

/// What the guest protocol brings to the socket server: a send is its chain (returned after
/// its completion), a connect its cookie; payload is read in place from guest memory.
#[derive(Debug)]
struct GuestTransport;

/// A send request, until the server completes it.
#[derive(Debug)]
struct HeldSend {
    /// Its chain, held until then; `None` when it went back at once (a copied `COPY` send).
    head: Option<u16>,
    cookie: u64,
    quiet: bool,
    /// A `COPY` send: its success is an `acked` message, not a completion.
    by_acked: bool,
    /// Bytes of it held as a copy (counted against [`SEND_COPY_BUDGET`]).
    copied: usize,
}

/// A connect request, answered once the handshake ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ConnectCall {
    cookie: u64,
    quiet: bool,
}

impl Transport for GuestTransport {
    type Send = HeldSend;
    type Call = ConnectCall;
    type Payload = SendPayload;
}

/// The data path of one tenant (see the module documentation).
#[derive(Debug)]
pub struct Engine<N: Nic> {
    server: SocketServer<N, GuestTransport>,
    cfg: EngineConfig,
    pairs: Vec<Pair>,
    counters: DeviceCounters,
    walked: Walked,
    /// Message headers being emitted, and datagrams copied (so at most `max_datagram` bytes).
    scratch: Vec<u8>,
    dma: GuestDma,
    /// Bytes of `COPY` sends held as copies now.
    copies_held: usize,
}

impl<N: Nic> Engine<N> {
    /// An engine over `iface` (which it owns from now on).
    pub fn new(iface: Interface<N>, clock: Clock, cfg: EngineConfig) -> Self {
        let pairs = (0..cfg.pairs).map(|_| Pair::default()).collect();
        let l = &cfg.limits;
        let limits = ServerLimits {
            max_sockets: l.max_sockets as usize,
            max_send_in_flight: l.max_send_in_flight as usize,
            default_sndbuf: l.max_send_in_flight as usize,
            default_rcvbuf: l.rx_buffer as usize,
            max_backlog: l.max_backlog as usize,
            max_datagram: usize::from(cfg.hello.max_datagram),
        };
        Engine {
            server: SocketServer::new(iface, clock, limits),
            pairs,
            cfg,
            counters: DeviceCounters::default(),
            walked: Walked::default(),
            scratch: Vec::new(),
            dma: GuestDma::default(),
            copies_held: 0,
        }
    }

    /// The device counters.
    pub fn counters(&self) -> DeviceCounters {
        let mut c = self.counters.clone();
        c.sends_held = self.server.sends_held() as u64;
        c
    }

    /// What the engine holds right now ([`crate::gauges`]); costs a walk over the sockets.
    pub fn gauges(&self) -> crate::gauges::GaugeReading {
        let iface = self.server.iface();
        crate::gauges::GaugeReading {
            guest_sockets: self.server.socket_count() as u64,
            stack_sockets: iface.socket_count() as u64,
            sends_held: self.server.sends_held() as u64,
            external_in_flight: iface.external_in_flight() as u64,
            pending_messages: self.pairs.iter().map(|p| p.pending_msgs as u64).sum(),
            rx_memory: iface.rx_memory().used as u64,
            publications: 0,
        }
    }

    /// The session's report so far.
    pub fn report(&self) -> SessionReport {
        let iface = self.server.iface();
        SessionReport {
            device: self.counters(),
            stack_tx_payload_copied: iface.counters().tx_payload_copied_bytes,
            stack_tx_short_payload_copied: iface.counters().tx_short_payload_copied_bytes,
            nic_external_copied: iface.nic().external_copied_bytes(),
            regions_attached: self.dma.attached(),
            rx_memory: iface.rx_memory(),
        }
    }

    /// The tenant's interface (its counters, its NIC).
    pub fn iface(&self) -> &Interface<N> {
        self.server.iface()
    }

    /// Sets up the calling thread to drive the tenant's NIC ([`Nic::prepare_thread`]): the
    /// worker calls it before it confines itself.
    pub fn prepare_thread(&mut self) {
        self.server.iface_mut().nic_mut().prepare_thread();
    }

    /// Guest sockets open now (including closed ones still finishing their sends).
    pub fn socket_count(&self) -> usize {
        self.server.socket_count()
    }

    /// One round: requests from every transmit queue, the control queue, the stack's poll,
    /// socket activity, then completions, events and data into the receive queues. Returns
    /// true when anything happened.
    pub fn step<V: Vrings + ?Sized>(&mut self, rings: &V, mem: &Arc<GuestMem>) -> Result<bool, IfaceError> {
        self.dma.sync(self.server.iface_mut().nic_mut(), mem);
        let mut work = false;
        for p in 0..self.pairs.len() {
            work |= self.take_requests(p, rings, mem);
        }
        work |= self.serve_ctrl(rings, mem);
        work |= self.server.poll()?;
        self.drain_events();
        for p in 0..self.pairs.len() {
            work |= self.deliver(p, rings, mem);
        }
        Ok(work)
    }

    /// Ends the tenant's session: aborts every connection (the guest is gone), drops its held
    /// chains, and hands back the interface for the next connection.
    pub fn into_interface(self) -> Interface<N> {
        self.log_open_connections();
        let mut dma = self.dma;
        let mut iface = self.server.into_interface();
        dma.detach_all(iface.nic_mut());
        iface
    }

    /// Lists the stack's connections still open as the session ends (the first few at info,
    /// the rest at debug): a connection the guest closed long ago that is still here says why
    /// in its line.
    fn log_open_connections(&self) {
        let open = self.server.iface().tcp_describe(self.server.clock().now());
        if open.is_empty() {
            return;
        }
        log::info!("{} stack connections open as the session ends; they are reset now", open.len());
        for (i, line) in open.iter().enumerate() {
            if i < LISTED_AT_END {
                log::info!("  {line}");
            } else {
                log::debug!("  {line}");
            }
        }
    }

    fn push(&mut self, pair: usize, out: Out) {
        let Some(p) = self.pairs.get_mut(pair) else { return };
        if !matches!(out, Out::Return(_)) {
            p.pending_msgs += 1;
        }
        p.pending.push_back(out);
    }

    /// Answers the virtio-net control queue: every well-formed command gets VIRTIO_NET_OK (the
    /// device has no filters to program; MQ_VQ_PAIRS_SET is accepted for any count), anything
    /// else is returned with nothing written.
    fn serve_ctrl<V: Vrings + ?Sized>(&mut self, rings: &V, mem: &Arc<GuestMem>) -> bool {
        let idx = 2 * self.pairs.len();
        if idx >= rings.count() {
            return false;
        }
        let max = self.cfg.limits.max_chain as usize;
        let walked = &mut self.walked;
        let counters = &mut self.counters;
        let done = rings.with(idx, |q| {
            let mut n = 0;
            while n < CONTROL_PER_STEP {
                let Some(c) = queues::pop_head(q, mem) else { break };
                let head = c.head_index();
                // A control request: [R] class, command, data... [W] ack (1 byte).
                let mut len = 0;
                let mut readable = Vec::new();
                let mut ack = None;
                for d in c {
                    if readable.len() + 1 > max {
                        break;
                    }
                    if d.is_write_only() {
                        ack = Some(d);
                    } else {
                        readable.push(d);
                    }
                }
                walked.slices.clear();
                if let Some(ack) = ack {
                    if ack.len() >= 1
                        && crate::guest_mem::translate(mem, ack.addr().0, 1, &mut walked.slices).is_ok()
                    {
                        let ok = u8::from(!readable.is_empty()); // 0 = VIRTIO_NET_OK, 1 = ERR
                        let mut w = crate::guest_mem::GuestWriter::new(&walked.slices);
                        len = w.write(&[1 - ok]);
                    }
                }
                queues::add_used(q, mem, head, len as u32);
                counters.ctrl_requests += 1;
                n += 1;
            }
            n
        });
        match done {
            Some(n) if n > 0 => {
                rings.notify(idx, mem);
                true
            }
            _ => false,
        }
    }
}

/// The stack error of an operation, as the protocol's errno.
fn errno_of(e: slimtcp::api::SocketError) -> slimtcp_abi::Errno {
    slimtcp_abi::Errno::from_errno(e.errno()).unwrap_or(slimtcp_abi::Errno::EINVAL)
}

fn sock_id(id: u32) -> SocketId {
    SocketId(id)
}
