//! The guest-library path next to the host-native one, in one run (`make bench`).
//!
//! The same application code (bulk goodput with one connection at MSS 64 and 1460 — the
//! slimtcp-perf workload, copy API — and 64-byte round trips) runs on two providers:
//! - guest: slimtcp-guest (vhost-user transport) -> slimtcp-vhost, whose worker owns the stack;
//! - host: the host runtime (single-thread mode) owning the stack itself;
//!
//! over three links:
//! - memwire, with a SlimTCP peer (the host runtime on its own thread): three busy threads on
//!   the guest path (application, backend worker, peer), two on the host path;
//! - TAP, with the Linux kernel as the peer in a namespace made here: two busy threads on the
//!   guest path, one on the host path;
//! - DPDK `net_memif` (feature `dpdk`), with a SlimTCP peer on the other memif port of the same
//!   process (the host runtime on its own thread): busy threads as over memwire.
//!
//! `GUEST_PATH_LINKS=memwire,tap,memif` (any of them, comma-separated) chooses the links; the
//! default is every link built in. Every measurement runs `GUEST_PATH_RUNS` times (default 3),
//! guest and host alternating; the table gives medians. Writes `target/bench/guest_path.md` and `.json`. On a 2-core
//! machine the guest path over memwire and memif has more busy threads than cores: read its
//! figures with that in mind.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use slimtcp::api::{Fd, Proto, SocketApi};
use slimtcp::iface::{Interface, InterfaceConfig};
use slimtcp::nic::memwire::{self, LinkConfig};
use slimtcp::nic::tap::TapNic;
use slimtcp::nic::Nic;
use slimtcp::runtime::{self, HostSockets};
use slimtcp::sim::default_configs;
use slimtcp::time::Clock;
use slimtcp::wire::EthernetAddress;
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_perf::host::no_progress;
use slimtcp_perf::report::median;
use slimtcp_perf::workload::{self, Receiver, Settings};
use slimtcp_testkit::linux_peer;
use slimtcp_testkit::Netns;
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant_reporting, StopHandle, TenantConfig};

#[cfg(feature = "dpdk")]
#[path = "guest_path/memif.rs"]
mod memif;

const BULK_PORT: u16 = 5001;
const ECHO_PORT: u16 = 7000;
const BULK_SECONDS: u64 = 3;
const ROUND_TRIPS: usize = 20_000;
const WARM_UP: usize = 1_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Provider {
    Guest,
    Host,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    Memwire,
    Tap,
    #[cfg(feature = "dpdk")]
    Memif,
}

impl Link {
    /// Every link this build has.
    const ALL: &'static [Link] = &[
        Link::Memwire,
        Link::Tap,
        #[cfg(feature = "dpdk")]
        Link::Memif,
    ];

    fn label(self) -> &'static str {
        match self {
            Link::Memwire => "memwire, SlimTCP peer",
            Link::Tap => "TAP, Linux peer",
            #[cfg(feature = "dpdk")]
            Link::Memif => "DPDK memif, SlimTCP peer",
        }
    }

    /// The name `GUEST_PATH_LINKS` uses.
    fn name(self) -> &'static str {
        match self {
            Link::Memwire => "memwire",
            Link::Tap => "tap",
            #[cfg(feature = "dpdk")]
            Link::Memif => "memif",
        }
    }
}

/// What runs on the far side of the link for one measurement.
#[derive(Clone, Copy)]
enum Peer {
    Sink,
    Echo,
}

fn settings(mss: u16) -> Settings {
    Settings { mss, win_scale: None, buffer: Some(256 << 10), zero_copy: false }
}

/// The two measurements, over any provider.
trait App {
    fn bulk(&mut self, target: SocketAddrV4, mss: u16) -> f64;
    fn round_trips(&mut self, target: SocketAddrV4) -> Vec<Duration>;
    /// Keeps the provider running (its last FIN and ACKs) until `until` is set.
    fn settle(&mut self, until: &AtomicBool);
}

struct Runner<'a, A: SocketApi>(&'a mut A);

impl<A: SocketApi> App for Runner<'_, A> {
    fn bulk(&mut self, target: SocketAddrV4, mss: u16) -> f64 {
        let d = Duration::from_secs(BULK_SECONDS);
        let m = workload::run_sender(self.0, target, 1, settings(mss), d, &mut no_progress).expect("sender");
        m.bytes as f64 * 8.0 / m.elapsed.as_secs_f64()
    }

    fn settle(&mut self, until: &AtomicBool) {
        // An empty epoll set: waiting on it lets the provider make progress.
        let ep = self.0.epoll_create().expect("epoll");
        let mut events = [slimtcp::api::EpollEvent::default(); 1];
        while !until.load(Ordering::Acquire) {
            let _ = self.0.epoll_wait(ep, &mut events, 1);
        }
        let _ = self.0.epoll_close(ep);
    }

    fn round_trips(&mut self, target: SocketAddrV4) -> Vec<Duration> {
        let api = &mut *self.0;
        let fd = api.socket(Proto::Tcp).expect("socket");
        api.connect(fd, target).expect("connect");
        let msg = [7u8; 64];
        let mut back = [0u8; 64];
        let mut samples = Vec::with_capacity(ROUND_TRIPS);
        for i in 0..ROUND_TRIPS + WARM_UP {
            let t0 = Instant::now();
            let mut sent = 0;
            while sent < msg.len() {
                sent += api.send(fd, &msg[sent..]).expect("send");
            }
            let mut got = 0;
            while got < back.len() {
                got += api.recv(fd, &mut back[got..]).expect("recv");
            }
            if i >= WARM_UP {
                samples.push(t0.elapsed());
            }
        }
        api.close(fd).expect("close");
        samples
    }
}

/// Runs `app` on `provider` over a NIC built by `nic`, with `iface` settings.
fn on_provider<N: Nic + Send + 'static, R>(
    provider: Provider,
    nic: N,
    iface: InterfaceConfig,
    app: impl FnOnce(&mut dyn App) -> R,
) -> R {
    match provider {
        Provider::Host => {
            let mut api = runtime::single(Interface::new(nic, iface), Clock::real());
            app(&mut Runner(&mut api))
        }
        Provider::Guest => {
            let dir = std::env::temp_dir().join(format!("slimtcp-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let socket = dir.join("vhost.sock");
            let cfg = TenantConfig {
                socket: socket.clone(),
                iface,
                pairs: 1,
                core: None,
                name: "bench".into(),
                // The NIC may be DPDK's, whose worker allow-list is not derived yet: filtered as
                // slimtcp-vhost filters a DPDK tenant.
                sandbox: Sandbox::ControlOnly,
                limits: Default::default(),
            };
            let mut nic = Some(nic);
            let backend = std::thread::spawn(move || {
                let make = move || nic.take().ok_or_else(|| "the NIC is used once".to_owned());
                // The session's copy counters show whether transmit was zero-copy on this link.
                let report = |r: &slimtcp_vhost::engine::SessionReport| eprintln!("  backend session: {r}");
                serve_tenant_reporting(&cfg, make, &StopHandle::default(), Some(1), report)
            });
            while !socket.exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let mut api =
                GuestSockets::connect_vhost_user(&socket, GuestConfig::default()).expect("guest attaches");
            let r = app(&mut Runner(&mut api));
            drop(api);
            backend.join().expect("backend thread").expect("backend");
            let _ = std::fs::remove_dir_all(&dir);
            r
        }
    }
}

/// memwire: the peer is the host runtime on its own thread.
fn over_memwire<R>(provider: Provider, peer: Peer, app: impl FnOnce(&mut dyn App, SocketAddrV4) -> R) -> R {
    let (app_nic, peer_nic) =
        memwire::link(LinkConfig { capacity: slimtcp_perf::host::MEMWIRE_CAPACITY, ..LinkConfig::default() })
            .expect("memwire link");
    over_slimtcp_peer(provider, peer, app_nic, peer_nic, app)
}

/// DPDK memif: the provider on the server port, the peer (the host runtime on its own thread)
/// on the client port.
#[cfg(feature = "dpdk")]
fn over_memif<R>(provider: Provider, peer: Peer, app: impl FnOnce(&mut dyn App, SocketAddrV4) -> R) -> R {
    let (app_nic, peer_nic) = memif::link();
    over_slimtcp_peer(provider, peer, app_nic, peer_nic, app)
}

/// `app` on `provider` over `app_nic`; the peer is the host runtime on `peer_nic`, on its own
/// thread, kept alive until `app` is done.
fn over_slimtcp_peer<N: Nic + Send + 'static, R>(
    provider: Provider,
    peer: Peer,
    app_nic: N,
    peer_nic: N,
    app: impl FnOnce(&mut dyn App, SocketAddrV4) -> R,
) -> R {
    let (ca, cb) = default_configs();
    let target_ip = cb.ip;
    let mut peer_api = runtime::single(Interface::new(peer_nic, cb), Clock::real());
    let done = AtomicBool::new(false);
    let peer_done = AtomicBool::new(false);
    let listening = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (done, peer_done, listening) = (&done, &peer_done, &listening);
        s.spawn(move || {
            match peer {
                Peer::Sink => {
                    let mut rx = Receiver::open(&mut peer_api, BULK_PORT, settings(1460)).expect("receiver");
                    listening.store(true, Ordering::Release);
                    while rx.accepted() == 0 || rx.active() > 0 {
                        rx.step(&mut peer_api, 1).expect("receive");
                    }
                }
                Peer::Echo => slimtcp_echo(&mut peer_api, listening),
            }
            peer_done.store(true, Ordering::Release);
            while !done.load(Ordering::Acquire) {
                let _ = peer_api.progress();
                std::thread::sleep(Duration::from_micros(100));
            }
        });
        let port = match peer {
            Peer::Sink => BULK_PORT,
            Peer::Echo => ECHO_PORT,
        };
        // The application connects once the peer listens (a SYN before that is refused).
        while !listening.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let r = on_provider(provider, app_nic, ca, |a| {
            let r = app(a, SocketAddrV4::new(target_ip, port));
            // The link stays up until the peer has seen the end of the conversation.
            a.settle(peer_done);
            r
        });
        done.store(true, Ordering::Release);
        r
    })
}

fn slimtcp_echo(api: &mut HostSockets, listening: &AtomicBool) {
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, ECHO_PORT)).expect("bind");
    api.listen(l, 4).expect("listen");
    listening.store(true, Ordering::Release);
    let (c, _): (Fd, _) = api.accept(l).expect("accept");
    let mut buf = [0u8; 4096];
    loop {
        let n = api.recv(c, &mut buf).expect("recv");
        if n == 0 {
            break;
        }
        let mut sent = 0;
        while sent < n {
            sent += api.send(c, &buf[sent..n]).expect("send");
        }
    }
    api.close(c).expect("close");
}

const TAP_STACK_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
const TAP_LINUX_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);

/// TAP: the peer is the Linux kernel in a namespace made here.
fn over_tap<R>(provider: Provider, peer: Peer, app: impl FnOnce(&mut dyn App, SocketAddrV4) -> R) -> R {
    let ns = Netns::create("bench").expect("namespace (run as root)");
    let ifname = Netns::unique_ifname("bnch");
    let tap = ns
        .run(|| -> Result<TapNic, String> {
            let tap = TapNic::open(&ifname).map_err(|e| e.to_string())?;
            tap.set_up().map_err(|e| e.to_string())?;
            tap.set_host_address(TAP_LINUX_IP, 24).map_err(|e| e.to_string())?;
            Ok(tap)
        })
        .expect("TAP in the namespace");
    let iface = InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0x79, 2]), TAP_STACK_IP, 24);
    match peer {
        Peer::Sink => {
            let listen = SocketAddr::from((TAP_LINUX_IP, BULK_PORT));
            let (_, linux) =
                linux_peer::spawn_tcp_server_recv(&ns, listen, Duration::from_secs(60)).expect("receiver");
            let r = on_provider(provider, tap, iface, |a| app(a, SocketAddrV4::new(TAP_LINUX_IP, BULK_PORT)));
            linux.join().expect("Linux receiver");
            r
        }
        Peer::Echo => {
            let listener = ns.run(|| TcpListener::bind((TAP_LINUX_IP, ECHO_PORT))).expect("listen");
            let echo = ns
                .spawn("echo", move || {
                    let (mut s, _) = listener.accept().expect("accept");
                    s.set_nodelay(true).expect("nodelay");
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = s.read(&mut buf).expect("read");
                        if n == 0 {
                            break;
                        }
                        s.write_all(&buf[..n]).expect("write");
                    }
                })
                .expect("echo thread");
            let r = on_provider(provider, tap, iface, |a| app(a, SocketAddrV4::new(TAP_LINUX_IP, ECHO_PORT)));
            echo.join().expect("echo server");
            r
        }
    }
}

fn measure(
    link: Link,
    provider: Provider,
    peer: Peer,
    app: impl FnOnce(&mut dyn App, SocketAddrV4) -> f64,
) -> f64 {
    match link {
        Link::Memwire => over_memwire(provider, peer, app),
        Link::Tap => over_tap(provider, peer, app),
        #[cfg(feature = "dpdk")]
        Link::Memif => over_memif(provider, peer, app),
    }
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

/// Repetitions of every measurement (`GUEST_PATH_RUNS`, default 3): the tables give medians.
fn runs() -> usize {
    match std::env::var("GUEST_PATH_RUNS") {
        Ok(v) => v
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("GUEST_PATH_RUNS={v:?}: want a count > 0")),
        Err(_) => 3,
    }
}

/// Ratio of the medians, and with several runs the range of the runs' own ratios (each guest run
/// against the host run right after it).
fn ratio_cell(guest: &[f64], host: &[f64]) -> String {
    let r = median(guest) / median(host);
    if guest.len() < 2 {
        return format!("{r:.2}");
    }
    let per_run: Vec<f64> = guest.iter().zip(host).map(|(g, h)| g / h).collect();
    let lo = per_run.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per_run.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{r:.2} ({lo:.2}-{hi:.2})")
}

fn json_list(v: &[f64], decimals: usize) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x:.decimals$}")).collect();
    format!("[{}]", items.join(","))
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let _ = env_logger::builder().try_init();
    let mut rows = Vec::new();
    let mut json = Vec::new();
    let links: Vec<Link> = match std::env::var("GUEST_PATH_LINKS") {
        Ok(names) => names
            .split(',')
            .map(|n| {
                Link::ALL.iter().copied().find(|l| l.name() == n.trim()).unwrap_or_else(|| {
                    let known: Vec<&str> = Link::ALL.iter().map(|l| l.name()).collect();
                    panic!("GUEST_PATH_LINKS: unknown link {n:?} (this build has {known:?})")
                })
            })
            .collect(),
        Err(_) => Link::ALL.to_vec(),
    };
    let runs = runs();
    for link in links {
        for mss in [64u16, 1460] {
            let bulk = |p| measure(link, p, Peer::Sink, |a, t| a.bulk(t, mss));
            // Guest and host alternate, so a change in the machine's load hits both.
            let (g, h): (Vec<f64>, Vec<f64>) =
                (0..runs).map(|_| (bulk(Provider::Guest), bulk(Provider::Host))).unzip();
            let (gm, hm) = (median(&g), median(&h));
            rows.push(format!(
                "| {} | bulk, MSS {mss} | {:.2} Gb/s | {:.2} Gb/s | {} |",
                link.label(),
                gm / 1e9,
                hm / 1e9,
                ratio_cell(&g, &h)
            ));
            json.push(format!(
                "{{\"link\":\"{}\",\"test\":\"bulk\",\"mss\":{mss},\"guest_bps\":{gm:.0},\"host_bps\":{hm:.0},\"guest_bps_runs\":{},\"host_bps_runs\":{}}}",
                link.label(),
                json_list(&g, 0),
                json_list(&h, 0)
            ));
        }
        let rtt = |p| {
            let mut samples = Vec::new();
            measure(link, p, Peer::Echo, |a, t| {
                samples = a.round_trips(t);
                0.0
            });
            percentiles(samples)
        };
        let (mut g50, mut g99, mut h50, mut h99) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let (g, h) = (rtt(Provider::Guest), rtt(Provider::Host));
            g50.push(g.0);
            g99.push(g.1);
            h50.push(h.0);
            h99.push(h.1);
        }
        for (name, gs, hs) in [("p50", &g50, &h50), ("p99", &g99, &h99)] {
            rows.push(format!(
                "| {} | 64 B round trip {name} | {:.1} us | {:.1} us | {} |",
                link.label(),
                median(gs),
                median(hs),
                ratio_cell(gs, hs)
            ));
        }
        json.push(format!(
            "{{\"link\":\"{}\",\"test\":\"rtt64\",\"guest_p50_us\":{:.2},\"guest_p99_us\":{:.2},\"host_p50_us\":{:.2},\"host_p99_us\":{:.2},\"guest_p50_us_runs\":{},\"guest_p99_us_runs\":{},\"host_p50_us_runs\":{},\"host_p99_us_runs\":{}}}",
            link.label(),
            median(&g50),
            median(&g99),
            median(&h50),
            median(&h99),
            json_list(&g50, 2),
            json_list(&g99, 2),
            json_list(&h50, 2),
            json_list(&h99, 2)
        ));
    }
    #[cfg(feature = "dpdk")]
    memif::remove_runtime_dir();
    let table = format!(
        "Medians of {runs} run(s); guest/host: ratio of the medians (range of the runs' ratios).\n\n\
         | link | measurement | guest-lib -> slimtcp-vhost | host runtime | guest/host |\n| --- | --- | --- | --- | --- |\n{}\n",
        rows.join("\n")
    );
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("guest_path.md"), &table);
    let _ = std::fs::write(dir.join("guest_path.json"), format!("[{}]\n", json.join(",")));
}
