//! Hostile VMMs (issue 14, findings 1-3): a VMM speaks raw vhost-user to its tenant's socket and
//! attacks the process (memory it cannot back, memory truncated under the mapping, unbounded
//! relay state, descriptors it makes the backend hold). Meanwhile tenant "good" of the same
//! process moves data to Linux and back over its TAP, exactly. The hostile VMM's connection is
//! refused or closed; its tenant lives on and serves the next VMM; nothing panics.

mod e2e;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e::Tenant;
use slimtcp::iface::InterfaceConfig;
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::wire::EthernetAddress;
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_testkit::hostile_vmm::{
    closed_within, memfd, message, negotiate, peer_closed, pipe, region, start_rings,
};
use slimtcp_testkit::netns::Netns;
use slimtcp_testkit::require_netns;
use slimtcp_vhost::relay::{MAX_DEFERRED_RINGS, MAX_MEM_REGIONS, MESSAGE_TIMEOUT};
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant, StopHandle, TenantConfig};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::VhostBackend;
use vmm_sys_util::eventfd::EventFd;

/// Bytes the good tenant moves each way during an attack.
const VICTIM_BYTES: u64 = 20_000_000;

/// The hostile VMM's tenant: a memwire NIC, served until the test ends.
struct Hostile {
    socket: PathBuf,
    stop: StopHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hostile {
    fn start(tag: &str) -> Hostile {
        let socket = std::env::temp_dir().join(format!("slimtcp-hostile-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let stop = StopHandle::default();
        let cfg = TenantConfig {
            socket: socket.clone(),
            iface: InterfaceConfig::new(
                EthernetAddress([2, 0, 0, 0, 0x66, 1]),
                "10.66.0.2".parse().expect("ip"),
                24,
            ),
            pairs: 1,
            core: None,
            name: format!("hostile-{tag}"),
            sandbox: Sandbox::default(),
            limits: Default::default(),
        };
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let make = || -> Result<MemwireNic, String> {
                Ok(link(LinkConfig::default()).map_err(|e| e.to_string())?.0)
            };
            serve_tenant(&cfg, make, &s, None).expect("the hostile VMM's tenant keeps serving");
        });
        Hostile { socket, stop, thread: Some(thread) }
    }

    fn frontend(&self) -> Frontend {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Frontend::connect(&self.socket, 3) {
                Ok(f) => return f,
                Err(e) => {
                    assert!(Instant::now() < deadline, "cannot connect: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }

    fn raw(&self) -> UnixStream {
        let deadline = Instant::now() + Duration::from_secs(10);
        let s = loop {
            match UnixStream::connect(&self.socket) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(Instant::now() < deadline, "cannot connect: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        s
    }

    /// A well-behaved guest still attaches and says hello (the tenant survived the attack).
    fn serves_a_good_guest(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match GuestSockets::connect_vhost_user(&self.socket, GuestConfig::default()) {
                Ok(g) => return drop(g),
                // The tenant may still be ending the hostile connection.
                Err(e) => assert!(Instant::now() < deadline, "a good guest cannot attach afterwards: {e}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.stop();
        // The serve loop may sit in accept: one connection lets it see the stop.
        let _ = UnixStream::connect(&self.socket);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Runs `attack` while tenant "good" (TAP in its own namespace) moves [`VICTIM_BYTES`] each way.
fn under_attack(tag: &str, attack: impl FnOnce(&Hostile) + Send) {
    let good = Tenant::start(&format!("g{tag}"), e2e::tap_nic(Netns::unique_ifname("tgv")));
    let hostile = Hostile::start(tag);
    let mut api = good.guest();
    std::thread::scope(|s| {
        let h = &hostile;
        let attacker = s.spawn(move || attack(h));
        e2e::guest_to_linux(&mut api, &good.ns, VICTIM_BYTES);
        e2e::linux_to_guest(&mut api, &good.ns, VICTIM_BYTES);
        attacker.join().expect("attack");
    });
    hostile.serves_a_good_guest();
    drop(api);
    good.finish();
}

/// Finding 1, at mapping time: a 1 GiB region over a 4 KiB memfd, rings in the unbacked part.
/// Without the size check the worker's first ring read raised SIGBUS and every tenant died.
#[test]
fn a_region_larger_than_its_file_is_refused() {
    require_netns!();
    under_attack("big", |h| {
        let mut f = h.frontend();
        negotiate(&mut f).expect("negotiate");
        let file = memfd(4096).expect("memfd");
        // The daemon would map it; the relay must not let it.
        let _ = f.set_mem_table(&[region(0, 1 << 30, &file)]);
        let events: Vec<EventFd> = (0..4).map(|_| EventFd::new(0).expect("eventfd")).collect();
        let _ = start_rings(&mut f, &events);
        assert!(closed_within(&mut f, Duration::from_secs(10)), "the connection is refused");
    });
}

/// Finding 1, after mapping: a valid table over an unsealed memfd, rings polled by the worker,
/// then the VMM shrinks the memfd to nothing. The worker's next ring read faults (SIGBUS); the
/// backend recovers, closes that connection, and the process and the other tenant live on.
#[test]
fn memory_truncated_under_the_mapping_ends_only_that_connection() {
    require_netns!();
    under_attack("trunc", |h| {
        let mut f = h.frontend();
        negotiate(&mut f).expect("negotiate");
        let file = memfd(1 << 20).expect("memfd");
        f.set_mem_table(&[region(0, 1 << 20, &file)]).expect("a valid memory table is accepted");
        let events: Vec<EventFd> = (0..4).map(|_| EventFd::new(0).expect("eventfd")).collect();
        start_rings(&mut f, &events).expect("rings");
        assert!(!closed_within(&mut f, Duration::from_millis(300)), "a valid set-up is served");
        file.set_len(0).expect("truncate");
        assert!(closed_within(&mut f, Duration::from_secs(10)), "the connection ends after the fault");
    });
}

/// Finding 3: ADD_MEM_REG past the slot limit (vhost-user-backend announces 509 and never
/// enforced it; each region is a descriptor and a mapping held by the process).
#[test]
fn memory_regions_beyond_the_limit_are_refused() {
    require_netns!();
    under_attack("slots", |h| {
        let mut f = h.frontend();
        negotiate(&mut f).expect("negotiate");
        assert_eq!(f.get_max_mem_slots().expect("slots"), MAX_MEM_REGIONS as u64, "the limit is announced");
        let file = memfd(4096).expect("memfd");
        for i in 0..MAX_MEM_REGIONS as u64 {
            f.add_mem_region(&region(i * 0x10_0000, 4096, &file)).expect("a region within the limit");
        }
        assert!(!closed_within(&mut f, Duration::from_millis(100)), "regions within the limit are served");
        let _ = f.add_mem_region(&region(1 << 40, 4096, &file));
        assert!(closed_within(&mut f, Duration::from_secs(10)), "one region too many closes the connection");
    });
}

/// Finding 2, first half: SET_VRING_ENABLE before SET_FEATURES for ever more rings (each used
/// to be kept with its payload on an unbounded list).
#[test]
fn early_enables_are_bounded() {
    require_netns!();
    under_attack("early", |h| {
        let mut s = h.raw();
        let mut sent = 0usize;
        for ring in 0..(MAX_DEFERRED_RINGS as u32 + 1000) {
            let body = [ring.to_le_bytes(), 1u32.to_le_bytes()].concat();
            if s.write_all(&message(18, 1, &body)).is_err() {
                break;
            }
            sent += 1;
        }
        assert!(sent > MAX_DEFERRED_RINGS, "the enables went out");
        assert!(peer_closed(&mut s), "the connection is closed after {MAX_DEFERRED_RINGS} rings");
    });
}

/// Finding 2, second half: a message that never completes, carrying descriptors (they used to
/// be held for as long as the VMM kept the socket open). The relay closes the connection after
/// [`MESSAGE_TIMEOUT`] and the descriptors with it: the pipe's read end sees end of file once
/// the test closes its own write end.
#[test]
fn a_partial_message_times_out_and_its_descriptors_are_closed() {
    require_netns!();
    under_attack("partial", |h| {
        let mut s = h.raw();
        let (read_end, write_end) = pipe().expect("pipe");
        // GET_FEATURES header announcing an 8-byte body; 4 bytes come, with 8 copies of the
        // pipe's write end.
        let mut m = message(1, 1, &[0u8; 8]);
        m.truncate(16);
        let fds = [write_end.as_raw_fd(); 8];
        send_with_fds(&s, &m, &fds);
        drop(write_end);
        let started = Instant::now();
        assert!(peer_closed(&mut s), "the connection is closed");
        assert!(started.elapsed() >= MESSAGE_TIMEOUT - Duration::from_millis(500), "not before the timeout");
        let mut r = File::from(read_end);
        let mut b = [0u8; 1];
        assert_eq!(r.read(&mut b).expect("read"), 0, "every copy of the write end is closed");
    });
}

fn send_with_fds(s: &UnixStream, bytes: &[u8], fds: &[RawFd]) {
    use vmm_sys_util::sock_ctrl_msg::ScmSocket;
    let n = s.send_with_fds(&[bytes], fds).expect("sendmsg");
    assert_eq!(n, bytes.len());
}
