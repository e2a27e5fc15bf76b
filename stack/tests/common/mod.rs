//! Helpers for the TAP interop tests: a namespace with a TAP link, the SlimTCP stack running on
//! its own thread inside it, and stack-side senders/receivers of `data::pattern` streams.

pub mod scenarios;
pub mod tap_echo;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use slimtcp::api::SocketError;
use slimtcp::iface::{Counters, Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::tap::{TapConfig, TapNic};
use slimtcp::nic::Nic;
use slimtcp::tcp::State;
use slimtcp::time::Instant;
use slimtcp::wire::EthernetAddress;

use slimtcp_testkit::check::CaptureReport;
use slimtcp_testkit::data::{PatternStream, StreamHasher};
use slimtcp_testkit::linux_peer::Transfer;
use slimtcp_testkit::netns::{Netns, NsThread};

/// 100 MiB: the size of every bulk transfer.
pub const BULK: u64 = 100 * 1024 * 1024;
/// Deadline of one bulk transfer (they take seconds; this only bounds a hang).
pub const BULK_TIMEOUT: Duration = Duration::from_secs(100);
/// Longest sleep of an idle stack loop.
const IDLE_WAIT: Duration = Duration::from_millis(10);
/// How long the stack thread may take to set up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes per `tcp_send` / `tcp_recv` call.
const CHUNK: usize = 64 * 1024;

/// A namespace holding one TAP link: the kernel at `.1`, the stack at `.2` of `10.91.<subnet>.0/24`.
#[derive(Debug)]
pub struct Testbed {
    /// The namespace (deleted on drop, after everything else of the test).
    pub ns: Netns,
    /// The TAP interface name.
    pub tap: String,
    /// The stack's address.
    pub stack_ip: Ipv4Addr,
    /// The kernel's address on the TAP interface.
    pub host_ip: Ipv4Addr,
    /// Prefix length of the link.
    pub prefix_len: u8,
    /// The stack's MAC address.
    pub stack_mac: EthernetAddress,
}

impl Testbed {
    /// A fresh namespace for the test using subnet `10.91.<subnet>.0/24`.
    #[allow(dead_code)] // not in the loss suite (its stack sits behind a router namespace)
    pub fn new(name: &str, subnet: u8) -> Testbed {
        let ns = Netns::create(&format!("slimt-{name}")).expect("create the namespace");
        Testbed {
            ns,
            tap: Netns::unique_ifname("slimtap"),
            stack_ip: Ipv4Addr::new(10, 91, subnet, 2),
            host_ip: Ipv4Addr::new(10, 91, subnet, 1),
            prefix_len: 24,
            stack_mac: EthernetAddress([0x02, 0x00, 0x00, 0x91, subnet, 0x02]),
        }
    }

    /// Creates the TAP interface inside the namespace, brings it up and addresses the kernel side.
    /// Without checksum offload: the scenarios check a capture on the kernel side, which shows
    /// real checksums only when neither side leaves them to the other (the offload's own suite is
    /// `interop_tap_offload`).
    #[allow(dead_code)] // not in the DPDK suite
    pub fn open_tap(&self) -> TapNic {
        self.open_tap_with(TapConfig { checksum_offload: false })
    }

    /// [`open_tap`](Self::open_tap) with `config`.
    #[allow(dead_code)] // not in the DPDK suite
    pub fn open_tap_with(&self, config: TapConfig) -> TapNic {
        let (name, host, prefix) = (self.tap.clone(), self.host_ip, self.prefix_len);
        self.ns.run(move || {
            let tap = TapNic::open_with(&name, config).expect("create the TAP interface");
            tap.set_up().expect("bring the TAP interface up");
            tap.set_host_address(host, prefix).expect("address the kernel side");
            tap
        })
    }

    /// The kernel's MAC address of the TAP interface.
    pub fn host_mac(&self) -> EthernetAddress {
        let path = format!("/sys/class/net/{}/address", self.tap);
        let text = self.ns.exec_ok(&["cat", &path]).expect("read the TAP interface's MAC");
        text.trim().parse().expect("a MAC address in sysfs")
    }

    /// The stack's interface configuration (defaults but for the addresses).
    pub fn iface_config(&self) -> InterfaceConfig {
        InterfaceConfig::new(self.stack_mac, self.stack_ip, self.prefix_len)
    }

    /// `stack_ip:port`.
    pub fn stack_addr(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self.stack_ip, port)
    }

    /// `host_ip:port`.
    pub fn host_addr(&self, port: u16) -> SocketAddrV4 {
        SocketAddrV4::new(self.host_ip, port)
    }
}

/// What one call of a stack application did.
#[derive(Debug)]
pub enum Step<R> {
    /// Nothing to do right now.
    Idle,
    /// Some work was done (poll again at once).
    Progress,
    /// Finished with this result (the stack keeps running until stopped).
    Done(R),
}

/// A result of a stack application, or why it failed.
pub type AppResult<R> = Result<R, String>;

/// How an idle stack loop waits for its device: until a frame arrives or `timeout` passes
/// (a poll-mode device may return at once).
pub trait IdleWait {
    /// Waits at most `timeout`.
    fn idle(&self, timeout: Duration) -> Result<(), String>;
}

impl IdleWait for TapNic {
    fn idle(&self, timeout: Duration) -> Result<(), String> {
        self.wait_readable(Some(timeout)).map(drop).map_err(|e| format!("wait failed: {e:?}"))
    }
}

/// The SlimTCP stack on its own thread inside the namespace: an `Interface<N>` polled in a
/// loop that also runs one application closure. The loop ends when [`StackRunner::stop`] (or
/// drop) sets the stop flag.
#[derive(Debug)]
pub struct StackRunner<R> {
    stop: Arc<AtomicBool>,
    thread: Option<NsThread<Result<Counters, String>>>,
    results: Receiver<AppResult<R>>,
}

impl<R: Send + 'static> StackRunner<R> {
    /// Starts the stack over `tap` with `cfg`; `setup` runs first on the stack thread (listen,
    /// bind, ...) and returns the application closure, called after every poll until it is done
    /// or `timeout` passes. Returns once `setup` has run.
    pub fn spawn<N, S, A>(ns: &Netns, nic: N, cfg: InterfaceConfig, timeout: Duration, setup: S) -> Self
    where
        N: Nic + IdleWait + Send + 'static,
        S: FnOnce(&mut Interface<N>, Instant) -> AppResult<A> + Send + 'static,
        A: FnMut(&mut Interface<N>, Instant) -> AppResult<Step<R>>,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let (result_tx, results) = mpsc::channel();
        let (ready_tx, ready) = mpsc::channel();
        let flag = Arc::clone(&stop);
        let thread = ns
            .spawn("slimtcp-stack", move || {
                let start = std::time::Instant::now();
                let deadline = start + timeout;
                let mut iface = Interface::new(nic, cfg);
                let app = setup(&mut iface, Instant::from_std(start));
                let mut app = match app {
                    Ok(app) => {
                        let _ = ready_tx.send(Ok(()));
                        Some(app)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        None
                    }
                };
                while !flag.load(Ordering::Acquire) {
                    let now = Instant::from_std(start);
                    let busy = iface.poll(now).map_err(|e| format!("poll failed: {e:?}"))?;
                    let mut app_busy = false;
                    if let Some(f) = app.as_mut() {
                        let outcome = match f(&mut iface, now) {
                            Ok(Step::Idle) => None,
                            Ok(Step::Progress) => {
                                app_busy = true;
                                None
                            }
                            Ok(Step::Done(r)) => Some(Ok(r)),
                            Err(e) => Some(Err(e)),
                        };
                        let outcome = outcome.or_else(|| {
                            (std::time::Instant::now() > deadline).then(|| {
                                Err(format!("the stack application did not finish within {timeout:?}"))
                            })
                        });
                        if let Some(outcome) = outcome {
                            let _ = result_tx.send(outcome);
                            app = None;
                            app_busy = true;
                        }
                    }
                    if !busy && !app_busy {
                        let now = Instant::from_std(start);
                        let wait =
                            iface.poll_at().map_or(IDLE_WAIT, |t| t.saturating_since(now).min(IDLE_WAIT));
                        iface.nic().idle(wait)?;
                    }
                }
                Ok(iface.counters())
            })
            .expect("start the stack thread");
        let runner = StackRunner { stop, thread: Some(thread), results };
        match ready.recv_timeout(SETUP_TIMEOUT) {
            Ok(Ok(())) => runner,
            Ok(Err(e)) => panic!("stack setup failed: {e}"),
            Err(e) => panic!("stack setup did not finish within {SETUP_TIMEOUT:?}: {e}"),
        }
    }

    /// Waits (at most `timeout`) for the application's result.
    pub fn result(&self, timeout: Duration) -> AppResult<R> {
        match self.results.recv_timeout(timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(format!("no result from the stack within {timeout:?}")),
            Err(RecvTimeoutError::Disconnected) => Err("the stack thread ended without a result".to_owned()),
        }
    }

    /// Stops the loop and returns the interface's counters.
    pub fn stop(mut self) -> Counters {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.take().expect("running");
        match thread.join() {
            Ok(Ok(counters)) => counters,
            Ok(Err(e)) => panic!("the stack loop failed: {e}"),
            Err(e) => panic!("the stack thread could not enter the namespace: {e}"),
        }
    }
}

impl<R> Drop for StackRunner<R> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            // Already failing (or stopped explicitly): just make sure the thread is gone.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| thread.join()));
        }
    }
}

/// Which way the data of a [`BulkRole`] flows.
#[derive(Debug)]
enum Direction {
    /// The stack sends the first `total` bytes of a pattern stream.
    Send { source: PatternStream, total: u64, buf: Vec<u8>, off: usize, len: usize },
    /// The stack receives until end of stream.
    Receive,
}

/// How a bulk transfer over one stack connection ended.
#[derive(Debug, Clone)]
pub struct BulkOutcome {
    /// What the stack sent or received.
    pub transfer: Transfer,
    /// The connection's state when both FINs were through.
    pub final_state: State,
    /// The peer's address, as the stack saw it.
    pub remote: SocketAddrV4,
    /// From ESTABLISHED until both FINs were through (all data delivered and acknowledged).
    pub data_time: Duration,
    /// Retransmissions on the connection.
    pub retransmits: u64,
}

impl BulkOutcome {
    /// Data rate in MB/s (10^6 bytes per second).
    pub fn mb_per_s(&self) -> f64 {
        self.transfer.bytes as f64 / 1e6 / self.data_time.as_secs_f64().max(1e-9)
    }
}

/// The stack side of a bulk transfer on one connection, with a clean close: the sender
/// half-closes after the data and waits for the peer's FIN; the receiver reads to end of stream,
/// then half-closes. Done when the connection is in TIME-WAIT or CLOSED without error.
#[derive(Debug)]
pub struct BulkRole {
    h: SocketHandle,
    direction: Direction,
    hasher: StreamHasher,
    /// Bytes the peer sent us while we were the sender (must stay 0).
    stray: u64,
    rbuf: Vec<u8>,
    eof: bool,
    fin_sent: bool,
    established_at: Option<std::time::Instant>,
}

impl BulkRole {
    /// Sends the first `total` bytes of stream `seed` on `h`.
    pub fn sender(h: SocketHandle, seed: u64, total: u64) -> Self {
        let direction =
            Direction::Send { source: PatternStream::new(seed), total, buf: vec![0; CHUNK], off: 0, len: 0 };
        Self::new(h, direction)
    }

    /// Receives on `h` until end of stream.
    pub fn receiver(h: SocketHandle) -> Self {
        Self::new(h, Direction::Receive)
    }

    fn new(h: SocketHandle, direction: Direction) -> Self {
        BulkRole {
            h,
            direction,
            hasher: StreamHasher::new(),
            stray: 0,
            rbuf: vec![0; CHUNK],
            eof: false,
            fin_sent: false,
            established_at: None,
        }
    }

    /// One round of work.
    pub fn step<N: Nic>(&mut self, iface: &mut Interface<N>) -> AppResult<Step<BulkOutcome>> {
        let info = iface.tcp_info(self.h).map_err(|e| format!("tcp_info: {e}"))?;
        if let Some(e) = info.error {
            return Err(format!(
                "connection {} -> {} failed in {}: {e}",
                info.local, info.remote, info.state
            ));
        }
        if matches!(info.state, State::SynSent | State::SynReceived) {
            return Ok(Step::Idle);
        }
        self.established_at.get_or_insert_with(std::time::Instant::now);
        let mut progress = self.send_data(iface)?;
        progress |= self.receive_data(iface)?;
        let data_finished = match self.direction {
            Direction::Send { ref source, total, off, len, .. } => source.offset() >= total && off == len,
            Direction::Receive => self.eof,
        };
        if data_finished && !self.fin_sent {
            iface.tcp_shutdown(self.h).map_err(|e| format!("tcp_shutdown: {e}"))?;
            self.fin_sent = true;
            progress = true;
        }
        if self.fin_sent && self.eof {
            let state = iface.tcp_info(self.h).map_err(|e| format!("tcp_info: {e}"))?.state;
            if matches!(state, State::TimeWait | State::Closed) {
                return Ok(Step::Done(self.finish(iface, state)?));
            }
        }
        Ok(if progress { Step::Progress } else { Step::Idle })
    }

    fn finish<N: Nic>(&mut self, iface: &mut Interface<N>, final_state: State) -> AppResult<BulkOutcome> {
        let info = iface.tcp_info(self.h).map_err(|e| format!("tcp_info: {e}"))?;
        if self.stray > 0 {
            return Err(format!("the peer sent {} unexpected bytes to the sender", self.stray));
        }
        let hasher = std::mem::take(&mut self.hasher);
        let transfer = Transfer { bytes: hasher.bytes(), digest: hasher.finish() };
        let start = self.established_at.unwrap_or_else(std::time::Instant::now);
        let end = std::time::Instant::now();
        iface.tcp_close(self.h).map_err(|e| format!("tcp_close: {e}"))?;
        Ok(BulkOutcome {
            transfer,
            final_state,
            remote: info.remote,
            data_time: end.saturating_duration_since(start),
            retransmits: info.stats.retransmits,
        })
    }

    fn send_data<N: Nic>(&mut self, iface: &mut Interface<N>) -> AppResult<bool> {
        let Direction::Send { source, total, buf, off, len } = &mut self.direction else {
            return Ok(false);
        };
        let mut progress = false;
        loop {
            if *off == *len {
                let left = *total - source.offset();
                if left == 0 {
                    return Ok(progress);
                }
                let n = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
                source.fill(&mut buf[..n]);
                self.hasher.update(&buf[..n]);
                (*off, *len) = (0, n);
            }
            match iface.tcp_send(self.h, &buf[*off..*len]) {
                Ok(n) => {
                    *off += n;
                    progress = true;
                }
                Err(SocketError::WouldBlock) => return Ok(progress),
                Err(e) => return Err(format!("tcp_send: {e}")),
            }
        }
    }

    fn receive_data<N: Nic>(&mut self, iface: &mut Interface<N>) -> AppResult<bool> {
        let mut progress = false;
        while !self.eof {
            match iface.tcp_recv(self.h, &mut self.rbuf) {
                Ok(0) => {
                    self.eof = true;
                    progress = true;
                }
                Ok(n) => {
                    progress = true;
                    match self.direction {
                        Direction::Receive => self.hasher.update(&self.rbuf[..n]),
                        Direction::Send { .. } => self.stray += n as u64,
                    }
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(format!("tcp_recv: {e}")),
            }
        }
        Ok(progress)
    }
}

/// The stack as a server: accepts one connection on `listener`, then runs `role(handle)`.
pub fn serve_one<N: Nic>(
    listener: SocketHandle,
    role: impl Fn(SocketHandle) -> BulkRole,
) -> impl FnMut(&mut Interface<N>, Instant) -> AppResult<Step<BulkOutcome>> {
    let mut conn: Option<BulkRole> = None;
    move |iface, _now| match conn.as_mut() {
        Some(r) => r.step(iface),
        None => match iface.tcp_accept(listener) {
            Ok(h) => {
                // One connection only: no more SYNs are taken.
                iface.tcp_close(listener).map_err(|e| format!("closing the listener: {e}"))?;
                conn = Some(role(h));
                Ok(Step::Progress)
            }
            Err(SocketError::WouldBlock) => Ok(Step::Idle),
            Err(e) => Err(format!("tcp_accept: {e}")),
        },
    }
}

/// Where the well-formedness checks keep a capture: a unique file under the temp directory,
/// deleted when dropped unless `SLIMTCP_KEEP_PCAP` is set.
#[derive(Debug)]
pub struct PcapFile {
    path: PathBuf,
}

impl PcapFile {
    /// A fresh path for test `name`.
    pub fn new(name: &str) -> Self {
        let path = std::env::temp_dir().join(format!("slimt-{name}-{}.pcap", std::process::id()));
        PcapFile { path }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PcapFile {
    fn drop(&mut self) {
        if std::env::var_os("SLIMTCP_KEEP_PCAP").is_some() {
            eprintln!("keeping {}", self.path.display());
        } else {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `check::check_wellformed_matching`, with the TCP payload on `data_ports` dissected as plain
/// data. The bulk streams are pseudo-random bytes, in which tshark's heuristic dissectors
/// (Thrift, ...) now and then "find" a protocol and report its expert errors; those are about
/// our test data, not about the packets. (The testkit's checker takes no extra tshark options.)
pub fn check_capture(path: &Path, filter: Option<&str>, data_ports: &[u16]) -> CaptureReport {
    let extra: Vec<String> =
        data_ports.iter().flat_map(|port| ["-d".to_string(), format!("tcp.port=={port},data")]).collect();
    slimtcp_testkit::check::check_wellformed_with(path, filter, &extra).expect("run tshark")
}
