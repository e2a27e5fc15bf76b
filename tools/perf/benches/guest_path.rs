//! The guest-library path next to the host-native one, in one run (`make bench`):
//!
//! - guest path: an application on slimtcp-guest (vhost-user transport) -> slimtcp-vhost (its
//!   worker owns a SlimTCP stack on one end of a memwire link) -> a SlimTCP peer on the other end
//!   (the host runtime, single-thread mode, on its own thread);
//! - host-native: the same application code on the host runtime (single-thread mode) on that
//!   end of the link instead.
//!
//! Bulk goodput with one connection at MSS 64 and 1460 (the slimtcp-perf workload, copy API),
//! and 64-byte round trips (p50/p99) against an echo server on the peer. Writes
//! `target/bench/guest_path.md` and `.json`. Threads: the guest path has three busy ones (app,
//! backend worker, peer), the host-native path two (app, peer); this machine may have 2 cores.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use slimtcp::api::host::HostSockets;
use slimtcp::api::{Fd, Proto, SocketApi};
use slimtcp::iface::Interface;
use slimtcp::nic::memwire::{self, LinkConfig, MemwireNic};
use slimtcp::sim::{default_configs, B_IP};
use slimtcp::time::Clock;
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_perf::host::no_progress;
use slimtcp_perf::workload::{self, Settings};
use slimtcp_vhost::server::{serve_tenant, StopHandle, TenantConfig};

const BULK_PORT: u16 = 5001;
const ECHO_PORT: u16 = 7;
const BULK_SECONDS: u64 = 3;
const ROUND_TRIPS: usize = 20_000;

/// Where the measuring application runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Guest,
    Host,
}

impl Path {
    fn label(self) -> &'static str {
        match self {
            Path::Guest => "guest-lib -> slimtcp-vhost -> memwire -> SlimTCP",
            Path::Host => "host runtime -> memwire -> SlimTCP",
        }
    }
}

/// The application's end of a fresh link (behind the backend or the host runtime), and the
/// peer's end.
struct Bed {
    peer_nic: MemwireNic,
    app_nic: MemwireNic,
}

fn bed() -> Bed {
    let (app_nic, peer_nic) =
        memwire::link(LinkConfig { capacity: 1 << 17, ..LinkConfig::default() }).expect("memwire link");
    Bed { peer_nic, app_nic }
}

/// Runs `app` on the application side of `path` while `peer` runs on the peer's side.
fn with_app<R: Send>(
    path: Path,
    bed: Bed,
    peer: impl FnOnce(&mut HostSockets) + Send,
    app: impl FnOnce(&mut dyn AppRunner) -> R,
) -> R {
    let (ca, cb) = default_configs();
    let mut peer_api = HostSockets::single(Interface::new(bed.peer_nic, cb), Clock::real());
    std::thread::scope(|s| {
        s.spawn(move || peer(&mut peer_api));
        match path {
            Path::Host => {
                let mut api = HostSockets::single(Interface::new(bed.app_nic, ca), Clock::real());
                app(&mut Runner(&mut api))
            }
            Path::Guest => {
                let dir = std::env::temp_dir().join(format!("slimtcp-bench-{}", std::process::id()));
                std::fs::create_dir_all(&dir).expect("temp dir");
                let socket = dir.join("vhost.sock");
                let cfg = TenantConfig {
                    socket: socket.clone(),
                    iface: ca,
                    pairs: 1,
                    core: None,
                    name: "bench".into(),
                };
                let mut nic = Some(bed.app_nic);
                let backend = s.spawn(move || {
                    let make = move || nic.take().ok_or_else(|| "the link is used once".to_owned());
                    serve_tenant(&cfg, make, &StopHandle::default(), Some(1))
                });
                while !socket.exists() {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let mut api = GuestSockets::connect_vhost_user(&socket, GuestConfig::default())
                    .expect("guest attaches");
                let r = app(&mut Runner(&mut api));
                drop(api);
                backend.join().expect("backend thread").expect("backend");
                let _ = std::fs::remove_dir_all(&dir);
                r
            }
        }
    })
}

/// The two measurements, over any provider.
trait AppRunner {
    fn bulk(&mut self, mss: u16) -> f64;
    fn round_trips(&mut self) -> Vec<Duration>;
}

struct Runner<'a, A: SocketApi>(&'a mut A);

fn settings(mss: u16) -> Settings {
    Settings { mss, win_scale: None, buffer: 256 << 10, zero_copy: false }
}

impl<A: SocketApi> AppRunner for Runner<'_, A> {
    fn bulk(&mut self, mss: u16) -> f64 {
        let target = SocketAddrV4::new(B_IP, BULK_PORT);
        let m = workload::run_sender(
            self.0,
            target,
            1,
            settings(mss),
            Duration::from_secs(BULK_SECONDS),
            &mut no_progress,
        )
        .expect("sender");
        m.bytes as f64 * 8.0 / m.elapsed.as_secs_f64()
    }

    fn round_trips(&mut self) -> Vec<Duration> {
        let api = &mut *self.0;
        let fd = api.socket(Proto::Tcp).expect("socket");
        api.connect(fd, SocketAddrV4::new(B_IP, ECHO_PORT)).expect("connect");
        let msg = [7u8; 64];
        let mut back = [0u8; 64];
        let mut samples = Vec::with_capacity(ROUND_TRIPS);
        for i in 0..ROUND_TRIPS + 1000 {
            let t0 = Instant::now();
            let mut sent = 0;
            while sent < msg.len() {
                sent += api.send(fd, &msg[sent..]).expect("send");
            }
            let mut got = 0;
            while got < back.len() {
                got += api.recv(fd, &mut back[got..]).expect("recv");
            }
            if i >= 1000 {
                samples.push(t0.elapsed());
            }
        }
        api.close(fd).expect("close");
        samples
    }
}

fn bulk(path: Path, mss: u16) -> f64 {
    let peer = move |api: &mut HostSockets| {
        let s = settings(mss);
        workload::run_receiver(api, BULK_PORT, s, None, Some(1), &mut no_progress).expect("receiver");
    };
    with_app(path, bed(), peer, |app| app.bulk(mss))
}

fn echo_server(api: &mut HostSockets) {
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, ECHO_PORT)).expect("bind");
    api.listen(l, 4).expect("listen");
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

fn latency(path: Path) -> (f64, f64) {
    let mut samples = with_app(path, bed(), echo_server, |app| app.round_trips());
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

fn main() {
    // `cargo bench` passes --bench; nothing else to parse.
    let mut rows = Vec::new();
    let mut json = Vec::new();
    for mss in [64u16, 1460] {
        let g = bulk(Path::Guest, mss);
        let h = bulk(Path::Host, mss);
        rows.push(format!("| bulk, MSS {mss} | {:.2} Gb/s | {:.2} Gb/s | {:.2} |", g / 1e9, h / 1e9, g / h));
        json.push(format!(
            "{{\"test\":\"bulk\",\"mss\":{mss},\"guest_bps\":{g:.0},\"host_bps\":{h:.0},\"ratio\":{:.3}}}",
            g / h
        ));
    }
    let (g50, g99) = latency(Path::Guest);
    let (h50, h99) = latency(Path::Host);
    rows.push(format!("| 64 B round trip p50 | {g50:.1} us | {h50:.1} us | {:.2} |", g50 / h50));
    rows.push(format!("| 64 B round trip p99 | {g99:.1} us | {h99:.1} us | {:.2} |", g99 / h99));
    json.push(format!(
        "{{\"test\":\"rtt64\",\"guest_p50_us\":{g50:.2},\"guest_p99_us\":{g99:.2},\"host_p50_us\":{h50:.2},\"host_p99_us\":{h99:.2}}}"
    ));
    let table = format!(
        "| measurement | {} | {} | guest/host |\n| --- | --- | --- | --- |\n{}\n",
        Path::Guest.label(),
        Path::Host.label(),
        rows.join("\n")
    );
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("guest_path.md"), &table);
    let _ = std::fs::write(dir.join("guest_path.json"), format!("[{}]\n", json.join(",")));
}
