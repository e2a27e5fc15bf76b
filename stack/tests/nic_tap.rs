//! The TAP NIC against the real kernel, inside a throw-away network namespace.
//!
//! A worker thread joins a namespace created for the test, opens a TAP interface there, gives the
//! kernel side 10.77.0.1/24 and asks for that address by ARP; the kernel's ARP reply proves both
//! directions work. Skipped (with a visible reason) when not root or without `/dev/net/tun`.

use std::fs::File;
use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use slimtcp::nic::tap::TapNic;
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::time::Instant;

const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const ETHERTYPE_ARP: u16 = 0x0806;

/// Prints why the test did not run, bypassing the test harness's output capture.
fn skip(reason: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
}

/// Why the test cannot run here, if it cannot.
fn missing_prerequisite() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun does not exist".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(out) if out.status.success() => None,
        _ => Some("the `ip` command (iproute2) is not available".into()),
    }
}

/// A network namespace created for this test and deleted on drop (also when the test panics).
struct Netns {
    name: String,
}

impl Netns {
    fn create() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("slimt-nic-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let status = Command::new("ip").args(["netns", "add", &name]).status().expect("run ip netns add");
        assert!(status.success(), "ip netns add {name} failed");
        Netns { name }
    }

    fn path(&self) -> String {
        format!("/var/run/netns/{}", self.name)
    }

    /// Runs `ip -n <ns> args...` and returns its standard output.
    fn ip(&self, args: &[&str]) -> String {
        let out = Command::new("ip").arg("-n").arg(&self.name).args(args).output().expect("run ip");
        assert!(out.status.success(), "ip -n {} {args:?} failed: {out:?}", self.name);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        match Command::new("ip").args(["netns", "del", &self.name]).status() {
            Ok(s) if s.success() => {}
            other => {
                let _ =
                    writeln!(std::io::stderr(), "warning: could not delete netns {}: {other:?}", self.name);
            }
        }
    }
}

/// Moves the calling thread (only) into the namespace at `path`.
fn enter_netns(path: &str) {
    let ns = File::open(path).expect("open netns file");
    // SAFETY: `ns` is an open namespace descriptor for the duration of the call; setns with
    // CLONE_NEWNET changes only the calling thread's network namespace.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

/// Runs `f` on a new thread that has joined namespace `ns` (the test thread stays where it is).
fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = ns.path();
    let worker = std::thread::spawn(move || {
        enter_netns(&path);
        f()
    });
    worker.join().expect("worker thread in the namespace")
}

/// A broadcast ARP request from us asking who has `HOST_IP`.
fn arp_request() -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0xff; 6]); // destination: broadcast
    f.extend_from_slice(&OUR_MAC); // source
    f.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    f.extend_from_slice(&1u16.to_be_bytes()); // hardware type: Ethernet
    f.extend_from_slice(&0x0800u16.to_be_bytes()); // protocol type: IPv4
    f.extend_from_slice(&[6, 4]); // address lengths
    f.extend_from_slice(&1u16.to_be_bytes()); // operation: request
    f.extend_from_slice(&OUR_MAC);
    f.extend_from_slice(&OUR_IP.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&HOST_IP.octets());
    f
}

/// The kernel's MAC if `frame` is the ARP reply to [`arp_request`].
fn arp_reply_mac(frame: &[u8]) -> Option<[u8; 6]> {
    if frame.len() < 42 || frame[12..14] != ETHERTYPE_ARP.to_be_bytes() || frame[0..6] != OUR_MAC {
        return None;
    }
    let arp = &frame[14..42];
    let is_reply = arp[0..8] == [0, 1, 0x08, 0x00, 6, 4, 0, 2];
    let answers = arp[14..18] == HOST_IP.octets() && arp[18..24] == OUR_MAC && arp[24..28] == OUR_IP.octets();
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&arp[8..14]);
    (is_reply && answers && frame[6..12] == mac).then_some(mac)
}

#[test]
fn kernel_answers_our_arp_request() {
    if let Some(reason) = missing_prerequisite() {
        skip(&reason);
        return;
    }
    let ns = Netns::create();
    let (host_mac, tap) = in_netns(&ns, || {
        let mut tap = TapNic::open("slimt0").expect("open tap");
        assert_eq!(tap.name(), "slimt0");
        assert_eq!(tap.capabilities().mtu, 1500);

        // Idle and down: nothing to read, and non-blocking reads say so.
        assert!(!tap.wait_readable(Some(Duration::ZERO)).expect("poll"));
        let mut rx = Vec::new();
        assert_eq!(tap.receive(Instant::ZERO, &mut rx, 32).expect("idle receive"), 0);

        tap.set_up().expect("set up");
        tap.set_host_address(HOST_IP, 24).expect("set address");

        let mut tx = tap.alloc_tx().expect("alloc");
        let request = arp_request();
        tx.append(request.len()).expect("room for ARP").copy_from_slice(&request);
        let mut burst = vec![tx];
        assert_eq!(tap.transmit(Instant::ZERO, &mut burst).expect("transmit"), 1);
        assert!(burst.is_empty());

        // Wait (poll, not sleep) for the reply, ignoring other kernel chatter (IPv6 etc.).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut seen = 0;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "no ARP reply within 5 s ({seen} other frames seen)");
            if !tap.wait_readable(Some(left)).expect("poll") {
                continue;
            }
            let mut rx: Vec<PacketBuf> = Vec::new();
            tap.receive(Instant::ZERO, &mut rx, 32).expect("receive");
            for frame in &rx {
                assert!(frame.headroom() > 0, "received buffers keep headroom for reuse");
                if let Some(mac) = arp_reply_mac(frame.as_slice()) {
                    return (mac, tap); // keep the tap (and so the interface) alive for the checks
                }
                seen += 1;
            }
        }
    });
    assert!(host_mac[0] & 1 == 0 && host_mac != [0; 6], "kernel MAC must be unicast: {host_mac:?}");

    // The kernel also learned our address from the request: it received what we sent.
    let neigh = ns.ip(&["neigh", "show", &OUR_IP.to_string()]);
    assert!(neigh.contains("02:00:00:00:00:02"), "kernel neighbour table: {neigh:?}");
    drop(tap); // removes the interface; the namespace is deleted by `ns`'s drop
}

#[test]
fn attaches_to_an_existing_interface() {
    if let Some(reason) = missing_prerequisite() {
        skip(&reason);
        return;
    }
    let ns = Netns::create();
    ns.ip(&["tuntap", "add", "dev", "slimt1", "mode", "tap"]);
    ns.ip(&["link", "set", "dev", "slimt1", "mtu", "9000"]);
    in_netns(&ns, || {
        let tap = TapNic::open("slimt1").expect("attach to the existing tap");
        assert_eq!(tap.name(), "slimt1");
        assert_eq!(tap.mtu(), 9000);
        assert_eq!(tap.capabilities().mtu, 9000);
        assert!(matches!(
            tap.set_host_address(HOST_IP, 33),
            Err(slimtcp::nic::tap::TapError::InvalidPrefix { prefix_len: 33 })
        ));
        tap.set_up().expect("set up");
    });
    let link = ns.ip(&["link", "show", "dev", "slimt1"]);
    assert!(link.contains("UP"), "interface should be up: {link}");
}

/// An interface taken down (by an operator, or with the Linux side's namespace) loses frames
/// like an unplugged wire; it is not a NIC failure that would end a tenant's session.
#[test]
fn a_link_taken_down_drops_frames_without_failing() {
    if let Some(reason) = missing_prerequisite() {
        skip(&reason);
        return;
    }
    let ns = Netns::create();
    in_netns(&ns, || {
        let mut tap = TapNic::open("slimt2").expect("open tap");
        tap.set_up().expect("set up");
        let frame = |tap: &mut TapNic| {
            let mut tx = tap.alloc_tx().expect("alloc");
            let request = arp_request();
            tx.append(request.len()).expect("room").copy_from_slice(&request);
            vec![tx]
        };
        let mut burst = frame(&mut tap);
        assert_eq!(tap.transmit(Instant::ZERO, &mut burst).expect("up"), 1);
        assert_eq!(tap.link_down_drops(), 0);
        std::process::Command::new("ip").args(["link", "set", "dev", "slimt2", "down"]).status().expect("ip");
        let mut burst = frame(&mut tap);
        burst.extend(frame(&mut tap));
        assert_eq!(tap.transmit(Instant::ZERO, &mut burst).expect("down is not an error"), 2);
        assert!(burst.is_empty());
        assert_eq!(tap.link_down_drops(), 2);
    });
}
