//! Harness of the host-runtime tests: two SlimTCP stacks over memwire, each behind the host runtime in
//! either mode, so the same application code runs over both.

#![allow(dead_code, unused_imports)]

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use slimtcp::api::{Fd, Proto, SocketApi};
use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::memwire::{self, LinkConfig, MemwireNic};
use slimtcp::nic::{Nic, NicCapabilities, NicError, PacketBuf};
use slimtcp::runtime::{self, HostSockets, IdlePolicy, RuntimeConfig, WorkerThread};
use slimtcp::sim::default_configs;
use slimtcp::time::{Clock, Instant};

pub use slimtcp::sim::{A_IP, B_IP};

/// How the runtime runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The application thread steps the workers.
    Single,
    /// The application thread steps the workers and never sleeps while it waits (a pinned
    /// core's busy poll).
    SingleBusyPoll,
    /// One worker thread serves both stacks.
    TwoCore,
}

/// Switches a NIC's receive path off (frames are dropped) or makes the NIC fail.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    closed: Arc<AtomicBool>,
    broken: Arc<AtomicBool>,
}

impl Gate {
    /// Drop everything received from now on.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
    /// Deliver again.
    pub fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
    }
    /// Make the NIC fail (the worker stops).
    pub fn break_nic(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }
}

/// A memwire end behind a [`Gate`].
#[derive(Debug)]
pub struct GatedNic {
    inner: MemwireNic,
    gate: Gate,
}

impl Nic for GatedNic {
    fn capabilities(&self) -> NicCapabilities {
        self.inner.capabilities()
    }

    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        if self.gate.broken.load(Ordering::SeqCst) {
            return Err(NicError::LinkDown);
        }
        let start = out.len();
        let n = self.inner.receive(now, out, max)?;
        if self.gate.closed.load(Ordering::SeqCst) {
            out.truncate(start);
            return Ok(0);
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        self.inner.alloc_tx()
    }

    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        self.inner.transmit(now, frames)
    }
}

/// Two stacks (A = client side at 10.0.0.1, B = server side at 10.0.0.2) and their gates.
#[derive(Debug)]
pub struct Pair {
    pub client: HostSockets,
    pub server: HostSockets,
    pub client_gate: Gate,
    pub server_gate: Gate,
    pub worker: Option<WorkerThread>,
}

/// Settings for a [`Pair`].
#[derive(Debug, Clone)]
pub struct PairConfig {
    pub link: LinkConfig,
    pub a: InterfaceConfig,
    pub b: InterfaceConfig,
    pub ring_capacity: usize,
}

impl Default for PairConfig {
    fn default() -> Self {
        let (mut a, mut b) = default_configs();
        // Short timers, so failure paths finish in a test's time.
        for cfg in [&mut a, &mut b] {
            cfg.tcp.rto_initial = Duration::from_millis(20);
            cfg.tcp.rto_min = Duration::from_millis(20);
            cfg.tcp.max_retries = 4;
            cfg.tcp.max_syn_retries = 3;
        }
        PairConfig { link: LinkConfig::default(), a, b, ring_capacity: 1024 }
    }
}

impl PairConfig {
    /// The default's short timers, but a connection gives up only after 12 unanswered
    /// retransmissions instead of 4: for tests that move data, where a thread starved on a
    /// loaded 2-core machine for half a second must not look like a dead peer (with 4 retries
    /// at a 20 ms RTO, 620 ms of silence reset bulk transfers when all tests ran at once).
    pub fn for_data() -> Self {
        let mut cfg = Self::default();
        for c in [&mut cfg.a, &mut cfg.b] {
            c.tcp.max_retries = 12;
        }
        cfg
    }
}

/// Builds a pair in `mode`.
pub fn pair(mode: Mode, cfg: PairConfig) -> Pair {
    let _ = env_logger::builder().is_test(true).try_init();
    let (na, nb) = memwire::link(cfg.link).expect("memwire link");
    let (client_gate, server_gate) = (Gate::default(), Gate::default());
    let ifaces = vec![
        Interface::new(GatedNic { inner: na, gate: client_gate.clone() }, cfg.a),
        Interface::new(GatedNic { inner: nb, gate: server_gate.clone() }, cfg.b),
    ];
    let clock = Clock::real();
    let (mut apps, worker) = match mode {
        Mode::Single => (runtime::single_group(ifaces, clock), None),
        Mode::SingleBusyPoll => (runtime::single_group_with(ifaces, clock, IdlePolicy::BusyPoll), None),
        Mode::TwoCore => {
            let rc = RuntimeConfig {
                ring_capacity: cfg.ring_capacity,
                name: "test-worker".into(),
                idle: IdlePolicy::Backoff,
                ..RuntimeConfig::default()
            };
            let (apps, thread) = runtime::two_core_group(ifaces, clock, &rc).expect("worker thread");
            (apps, Some(thread))
        }
    };
    let server = apps.pop().expect("server side");
    let client = apps.pop().expect("client side");
    Pair { client, server, client_gate, server_gate, worker }
}

impl Pair {
    /// A connected pair of sockets (client side, server side) on `port`, with `listener_opts`
    /// set on the server's listener (and so on the accepted connection).
    pub fn connected(&mut self, port: u16, listener_opts: &[slimtcp::api::SockOpt]) -> (Fd, Fd) {
        let l = self.server.socket(Proto::Tcp).expect("socket");
        for o in listener_opts {
            self.server.setsockopt(l, *o).expect("listener option");
        }
        self.server.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port)).expect("bind");
        self.server.listen(l, 4).expect("listen");
        let c = self.client.socket(Proto::Tcp).expect("socket");
        let conn = std::thread::scope(|s| {
            let server = &mut self.server;
            let h = s.spawn(move || server.accept(l).expect("accept").0);
            self.client.connect(c, SocketAddrV4::new(B_IP, port)).expect("connect");
            h.join().expect("accept thread")
        });
        (c, conn)
    }
}

/// Runs `test` once per mode, naming the mode on failure.
#[macro_export]
macro_rules! both_modes {
    ($($name:ident => $body:ident;)*) => {
        mod single {
            $(#[test] fn $name() { super::$body($crate::runtime_pair::Mode::Single) })*
        }
        mod two_core {
            $(#[test] fn $name() { super::$body($crate::runtime_pair::Mode::TwoCore) })*
        }
    };
}
