//! `tap_echo`: SlimTCP serving echo and discard over a Linux TAP interface.
//!
//! ```text
//! cargo run --release -p slimtcp --example tap_echo -- \
//!     --tap IFNAME --ip ADDR/PREFIX [--host-ip ADDR/PREFIX] [--mac MAC]
//! cargo run --release -p slimtcp --features dpdk --example tap_echo -- \
//!     --dpdk 'EAL ARGS' --ip ADDR/PREFIX [--host-ip ADDR/PREFIX] [--mac MAC]
//! ```
//!
//! - `--tap`: creates TAP interface `IFNAME` in the current network namespace (or attaches to an
//!   existing one), brings it up and, with `--host-ip`, gives the kernel's side of the link that
//!   address. TCP/UDP checksums are left to the kernel (virtio-net header) unless
//!   `--no-checksum-offload` is given.
//! - `--dpdk` (build with `--features dpdk`): starts DPDK's EAL with `EAL ARGS` (split at
//!   whitespace) and serves on DPDK port 0 (promiscuous: the stack uses its own MAC), e.g.
//!   `--dpdk '--no-huge --no-pci --no-shconf --vdev=net_tap0,iface=slimB'`. With a `net_tap`
//!   vdev, `--host-ip` addresses its kernel interface (the `iface=` argument).
//! - The stack uses `--ip` and `--mac` (default `02:00:00:00:00:01`, a locally administered
//!   unicast address; pass a different one when several instances share a link).
//! - Services: TCP echo on port 7 (everything is echoed back; when the peer half-closes and all
//!   of it has been echoed, the connection is closed), TCP discard on port 9 (read and dropped,
//!   closed at end of stream), UDP echo on port 7. The interface itself answers ARP and ping.
//! - Logs each TCP connection's byte counts when it closes (`RUST_LOG`, default `info`, on
//!   stderr); prints `tap_echo: ready on ...` on stdout once serving.
//! - Runs until SIGINT or SIGTERM, then exits 0. Bad arguments: one error line, exit code 2;
//!   a failure to set up or run the device: one error line, exit code 1.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use slimtcp::api::SocketError;
use slimtcp::iface::{Activity, Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::tap::{TapConfig, TapNic};
use slimtcp::nic::Nic;
use slimtcp::report::{error_chain, usage_error_line};
use slimtcp::time::Instant;
use slimtcp::wire::EthernetAddress;

/// TCP and UDP echo port.
const ECHO_PORT: u16 = 7;
/// TCP discard port.
const DISCARD_PORT: u16 = 9;
/// Connections waiting in each listener's accept queue, at most.
const BACKLOG: usize = 128;
/// Bytes read per `tcp_recv` call.
const READ_CHUNK: usize = 64 * 1024;
/// An echo connection stops reading while this much is waiting to be sent back.
const MAX_PENDING: usize = 256 * 1024;
/// Largest UDP datagram echoed.
const MAX_DATAGRAM: usize = 65_535;
/// Longest sleep of an idle loop (bounds how late a signal is noticed).
const IDLE_WAIT: Duration = Duration::from_millis(10);
/// Exit code for bad command-line arguments.
const EXIT_USAGE: u8 = 2;
/// Exit code for runtime failures.
const EXIT_FAILURE: u8 = 1;

/// Set by the SIGINT/SIGTERM handler; the main loop exits when it is true.
static STOP: AtomicBool = AtomicBool::new(false);

/// An IPv4 address with a prefix length, as `10.0.0.2/24`.
type Cidr = slimtcp::iface::Ipv4Cidr;

/// SlimTCP echo (TCP and UDP port 7) and discard (TCP port 9) over a TAP interface or DPDK.
#[derive(Debug, Parser)]
#[command(name = "tap_echo")]
#[command(group(clap::ArgGroup::new("device").required(true).args(["tap", "dpdk"])))]
struct Args {
    /// TAP interface to create (or attach to) in the current network namespace.
    #[arg(long, value_name = "IFNAME")]
    tap: Option<String>,
    /// Serve on DPDK port 0, starting the EAL with these arguments (needs `--features dpdk`).
    #[arg(long, value_name = "EAL ARGS", allow_hyphen_values = true)]
    dpdk: Option<String>,
    /// The stack's address and prefix length.
    #[arg(long, value_name = "ADDR/PREFIX")]
    ip: Cidr,
    /// The kernel side's address on the TAP link (left unconfigured when absent).
    #[arg(long, value_name = "ADDR/PREFIX")]
    host_ip: Option<Cidr>,
    /// The stack's MAC address.
    #[arg(
        long,
        value_name = "MAC",
        default_value = "02:00:00:00:00:01",
        value_parser = EthernetAddress::parse_unicast
    )]
    mac: EthernetAddress,
    /// TAP: no virtio-net header, every checksum in software (by default the kernel fills and
    /// verifies TCP/UDP checksums; a capture on its side then shows them partial).
    #[arg(long)]
    no_checksum_offload: bool,
}

impl Args {
    /// Checks what clap cannot: the two ends of the link must be different addresses.
    fn validate(&self) -> Result<(), String> {
        if cfg!(not(feature = "dpdk")) && self.dpdk.is_some() {
            return Err("--dpdk needs DPDK support: rebuild with `--features dpdk` (cargo build --release \
                        -p slimtcp --features dpdk --example tap_echo)"
                .to_owned());
        }
        match self.host_ip {
            Some(host) if host.addr == self.ip.addr => {
                Err(format!("--host-ip {host} is the stack's own address (--ip {})", self.ip))
            }
            _ => Ok(()),
        }
    }
}

/// What a TCP connection does with what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Service {
    Echo,
    Discard,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::Echo => "echo",
            Service::Discard => "discard",
        }
    }
}

/// Whether a connection is still being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Open,
    Done,
}

/// One accepted TCP connection.
#[derive(Debug)]
struct Session {
    service: Service,
    peer: SocketAddrV4,
    /// Received bytes not yet queued back (echo only); `pending[sent_off..]` is outstanding.
    pending: Vec<u8>,
    pending_off: usize,
    received: u64,
    sent: u64,
    /// The peer half-closed.
    eof: bool,
    /// What ended the connection abnormally, if anything.
    error: Option<SocketError>,
}

impl Session {
    fn new(service: Service, peer: SocketAddrV4) -> Self {
        Session {
            service,
            peer,
            pending: Vec::new(),
            pending_off: 0,
            received: 0,
            sent: 0,
            eof: false,
            error: None,
        }
    }

    fn outstanding(&self) -> &[u8] {
        &self.pending[self.pending_off..]
    }

    /// Moves as many bytes as possible; returns whether to close.
    fn serve<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut Interface<N>,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Fate {
        match self.pump(iface, h, buf) {
            Ok(()) if self.eof && self.outstanding().is_empty() => Fate::Done,
            Ok(()) => Fate::Open,
            Err(e) => {
                self.error = Some(e);
                Fate::Done
            }
        }
    }

    /// Sends what waits, then reads (and, for echo, queues back) what arrived.
    fn pump<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut Interface<N>,
        h: SocketHandle,
        buf: &mut [u8],
    ) -> Result<(), SocketError> {
        self.flush(iface, h)?;
        while !self.eof && self.outstanding().len() < MAX_PENDING {
            let n = match iface.tcp_recv(h, buf) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => n,
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(e),
            };
            self.received += n as u64;
            if self.service == Service::Echo {
                self.pending.extend_from_slice(&buf[..n]);
                self.flush(iface, h)?;
            }
        }
        Ok(())
    }

    /// Queues outstanding echo bytes until the send buffer is full.
    fn flush<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut Interface<N>,
        h: SocketHandle,
    ) -> Result<(), SocketError> {
        while !self.outstanding().is_empty() {
            match iface.tcp_send(h, self.outstanding()) {
                Ok(n) => {
                    self.pending_off += n;
                    self.sent += n as u64;
                }
                Err(SocketError::WouldBlock) => break,
                Err(e) => return Err(e),
            }
        }
        if self.outstanding().is_empty() {
            self.pending.clear();
            self.pending_off = 0;
        } else if self.pending_off >= MAX_PENDING {
            self.pending.drain(..self.pending_off);
            self.pending_off = 0;
        }
        Ok(())
    }

    fn log_close(&self) {
        let what = self.service.name();
        match self.error {
            None => log::info!(
                "{what} connection from {} closed: received {} bytes, sent {} bytes",
                self.peer,
                self.received,
                self.sent
            ),
            Some(e) => log::warn!(
                "{what} connection from {} failed ({} {e}): received {} bytes, sent {} bytes",
                self.peer,
                e.name(),
                self.received,
                self.sent
            ),
        }
    }
}

/// The application: listeners, the UDP socket and every open connection. Event-driven: after
/// each poll it serves only the sockets the stack reports activity on ([`Interface::take_activity`]),
/// so idle connections cost nothing however many there are.
#[derive(Debug)]
struct EchoServer {
    listeners: [(SocketHandle, Service); 2],
    udp: SocketHandle,
    sessions: HashMap<SocketHandle, Session>,
    buf: Vec<u8>,
    activity: Vec<Activity>,
}

impl EchoServer {
    fn new<N: slimtcp::nic::Nic>(iface: &mut Interface<N>) -> Result<Self, SocketError> {
        let echo = iface.tcp_listen(ECHO_PORT, BACKLOG)?;
        let discard = iface.tcp_listen(DISCARD_PORT, BACKLOG)?;
        let udp = iface.udp_bind(ECHO_PORT)?;
        // From now on the stack keeps the list of sockets with news.
        let mut activity = Vec::new();
        iface.take_activity(&mut activity);
        Ok(EchoServer {
            listeners: [(echo, Service::Echo), (discard, Service::Discard)],
            udp,
            sessions: HashMap::new(),
            buf: vec![0; READ_CHUNK.max(MAX_DATAGRAM)],
            activity,
        })
    }

    /// Serves the sockets with news; returns whether there were any.
    fn service<N: slimtcp::nic::Nic>(&mut self, iface: &mut Interface<N>, now: Instant) -> bool {
        let mut activity = std::mem::take(&mut self.activity);
        iface.take_activity(&mut activity);
        let any = !activity.is_empty();
        for a in activity.drain(..) {
            if a.handle == self.udp {
                self.echo_datagrams(iface, now);
            } else if let Some(&(listener, service)) = self.listeners.iter().find(|(l, _)| *l == a.handle) {
                self.accept_all(iface, listener, service);
            } else {
                self.serve_session(iface, a.handle);
            }
        }
        self.activity = activity;
        any
    }

    /// Accepts every queued connection of `listener` and serves each once (data may have
    /// arrived before the accept, which no later event reports).
    fn accept_all<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut Interface<N>,
        listener: SocketHandle,
        service: Service,
    ) {
        while let Ok(h) = iface.tcp_accept(listener) {
            match iface.tcp_info(h) {
                Ok(info) => {
                    log::debug!("{} connection from {}", service.name(), info.remote);
                    self.sessions.insert(h, Session::new(service, info.remote));
                    self.serve_session(iface, h);
                }
                Err(e) => log::warn!("accepted connection vanished: {e}"),
            }
        }
    }

    /// Moves what session `h` can move now; closes it when it is done.
    fn serve_session<N: slimtcp::nic::Nic>(&mut self, iface: &mut Interface<N>, h: SocketHandle) {
        let Some(session) = self.sessions.get_mut(&h) else { return };
        if session.serve(iface, h, &mut self.buf) == Fate::Done {
            if let Some(session) = self.sessions.remove(&h) {
                session.log_close();
                // The stack sends the FIN after the queued echo bytes and finishes on its own.
                if let Err(e) = iface.tcp_close(h) {
                    log::warn!("closing the connection from {} failed: {e}", session.peer);
                }
            }
        }
    }

    fn echo_datagrams<N: slimtcp::nic::Nic>(&mut self, iface: &mut Interface<N>, now: Instant) {
        while let Ok((n, from)) = iface.udp_recv_from(self.udp, &mut self.buf) {
            if let Err(e) = iface.udp_send_to(now, self.udp, &self.buf[..n], Some(from)) {
                log::warn!("UDP echo of {n} bytes to {from} dropped: {e}");
            }
        }
    }
}

extern "C" fn on_stop_signal(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to [`on_stop_signal`] (without SA_RESTART, so a sleeping `poll`
/// returns at once).
fn install_signal_handlers() -> std::io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: an all-zero `sigaction` is a valid value (empty mask, no flags) to fill in.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        let handler: extern "C" fn(libc::c_int) = on_stop_signal;
        action.sa_sigaction = handler as libc::sighandler_t;
        // SAFETY: `action.sa_mask` is a valid, exclusively borrowed signal set.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialised and outlives the call; the handler only performs
        // an atomic store, which is async-signal-safe; a null old-action pointer is allowed.
        let rc = unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Creates and configures the TAP device.
fn open_tap(args: &Args, name: &str) -> Result<TapNic, String> {
    let config = TapConfig { checksum_offload: !args.no_checksum_offload };
    let tap = TapNic::open_with(name, config).map_err(|e| error_chain(&e))?;
    tap.set_up().map_err(|e| error_chain(&e))?;
    if let Some(host) = args.host_ip {
        tap.set_host_address(host.addr, host.prefix_len).map_err(|e| error_chain(&e))?;
    }
    Ok(tap)
}

/// How long an idle loop may sleep: until the stack's next timer, at most [`IDLE_WAIT`].
fn idle_timeout(poll_at: Option<Instant>, now: Instant) -> Duration {
    match poll_at {
        Some(t) => t.saturating_since(now).min(IDLE_WAIT),
        None => IDLE_WAIT,
    }
}

/// How an idle loop waits for its device.
trait IdleWait {
    /// Waits at most `timeout` for a frame.
    fn idle(&self, timeout: Duration) -> Result<(), String>;
}

impl IdleWait for TapNic {
    fn idle(&self, timeout: Duration) -> Result<(), String> {
        self.wait_readable(Some(timeout)).map(drop).map_err(|e| error_chain(&e))
    }
}

/// Polls the stack and serves the applications until a stop signal arrives.
fn run<N: Nic + IdleWait>(iface: &mut Interface<N>, server: &mut EchoServer) -> Result<(), String> {
    let start = std::time::Instant::now();
    while !STOP.load(Ordering::SeqCst) {
        let now = Instant::from_std(start);
        let stack_busy = iface.poll(now).map_err(|e| error_chain(&e))?;
        let app_busy = server.service(iface, now);
        if !stack_busy && !app_busy {
            let timeout = idle_timeout(iface.poll_at(), Instant::from_std(start));
            iface.nic().idle(timeout)?;
        }
    }
    Ok(())
}

/// Serving on DPDK port 0 (feature `dpdk`).
#[cfg(feature = "dpdk")]
mod dpdk {
    use super::*;
    use slimtcp::nic::dpdk::{DpdkNic, Eal, PortConfig};

    /// A poll-mode device has nothing to sleep on: an idle loop pauses briefly so other threads
    /// (e.g. the kernel peer on a shared core) can run; a busy loop never waits.
    const DPDK_IDLE_PAUSE: Duration = Duration::from_micros(50);

    impl IdleWait for DpdkNic {
        fn idle(&self, timeout: Duration) -> Result<(), String> {
            std::thread::sleep(timeout.min(DPDK_IDLE_PAUSE));
            Ok(())
        }
    }

    /// The kernel interface of a `net_tap` vdev in the EAL arguments (`iface=NAME`).
    fn net_tap_iface(eal_args: &[&str]) -> Option<String> {
        let mut vdevs = Vec::new();
        let mut it = eal_args.iter();
        while let Some(a) = it.next() {
            if let Some(v) = a.strip_prefix("--vdev=") {
                vdevs.push(v.to_string());
            } else if *a == "--vdev" {
                vdevs.extend(it.next().map(|v| v.to_string()));
            }
        }
        vdevs
            .iter()
            .filter(|v| v.starts_with("net_tap"))
            .find_map(|v| v.split(',').find_map(|kv| kv.strip_prefix("iface=")).map(str::to_string))
    }

    pub(super) fn serve_dpdk(args: &Args, eal_args: &str) -> Result<(), String> {
        let eal_args: Vec<&str> = eal_args.split_whitespace().collect();
        let host_iface = match (args.host_ip, net_tap_iface(&eal_args)) {
            (Some(_), None) => {
                return Err("--host-ip needs a net_tap vdev with iface=NAME in the --dpdk arguments".into())
            }
            (host, iface) => host.zip(iface),
        };
        let eal = Eal::init(&eal_args).map_err(|e| error_chain(&e))?;
        let mut config = PortConfig::new("0");
        config.promiscuous = true;
        let nic = DpdkNic::open(eal, &config)
            .map_err(|e| error_chain(&e))?
            .pop()
            .ok_or("DPDK port 0 has no queue")?;
        if let Some((host, iface)) = &host_iface {
            slimtcp::nic::tap::configure_host_side(iface, host.addr, host.prefix_len)
                .map_err(|e| error_chain(&e))?;
        }
        let info = nic.port_info().clone();
        let where_ = match &host_iface {
            Some((_, iface)) => format!("{} ({}, kernel interface {iface})", info.name, info.driver),
            None => format!("{} ({})", info.name, info.driver),
        };
        serve_on(args, nic, &where_)
    }
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => {
            // --help or --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("tap_echo: error: {} (see --help)", usage_error_line(&e.to_string()));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    if let Err(e) = args.validate() {
        eprintln!("tap_echo: error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match serve(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tap_echo: error: {e}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

fn serve(args: &Args) -> Result<(), String> {
    install_signal_handlers().map_err(|e| format!("cannot install signal handlers: {e}"))?;
    match (&args.tap, &args.dpdk) {
        (Some(name), _) => {
            let tap = open_tap(args, name)?;
            let name = tap.name().to_string();
            serve_on(args, tap, &name)
        }
        #[cfg(feature = "dpdk")]
        (None, Some(eal_args)) => dpdk::serve_dpdk(args, eal_args),
        _ => Err("one of --tap or --dpdk is required".to_owned()),
    }
}

/// Serves on `nic` (described as `device` in the ready line) until a stop signal.
fn serve_on<N: Nic + IdleWait>(args: &Args, nic: N, device: &str) -> Result<(), String> {
    let cfg = InterfaceConfig::new(args.mac, args.ip.addr, args.ip.prefix_len);
    let mut iface = Interface::new(nic, cfg);
    let mut server = EchoServer::new(&mut iface).map_err(|e| format!("cannot open the services: {e}"))?;
    println!(
        "tap_echo: ready on {} ip {} mac {}{} (tcp echo {ECHO_PORT}, tcp discard {DISCARD_PORT}, udp echo {ECHO_PORT})",
        device,
        args.ip,
        args.mac,
        args.host_ip.map(|h| format!(" host-ip {h}")).unwrap_or_default(),
    );
    run(&mut iface, &mut server)?;
    log::info!("stopping: {} connections still open", server.sessions.len());
    Ok(())
}
