//! The DPDK path from the command line: the real `slimtcp-vhost` (built with `--features dpdk`)
//! runs in a network namespace with a `net_tap` vdev as its DPDK port 0, whose kernel side is
//! the Linux peer; a guest-library instance attaches to the backend's vhost-user socket.
//!
//! - The single-tenant flags (`--dpdk '...' --socket --ip --host-ip`): 100 MB each way between
//!   the kernel's TCP and the guest, checked by SHA-256; with no `mac` the stack uses the port's
//!   own, and the port is not promiscuous.
//! - The same tenant from a config file (`[daemon] eal`, `[[tenant]] port = 0`), here with a MAC
//!   of its own and `promiscuous = true`: an echo, and that MAC as the kernel's neighbour.
//!
//! The vdev is given its MAC (`mac=` devarg), so the test knows the port's address. `net_tap`
//! gives the kernel interface the same one; the kernel takes frames from its own address.

#![cfg(feature = "dpdk")]

mod e2e;

use std::path::{Path, PathBuf};
use std::time::Instant;

use e2e::{GUEST_IP, LINUX_IP};
use slimtcp::wire::EthernetAddress;
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_system_tests::slimtcp_vhost_bin;
use slimtcp_testkit::netns::{ChildGuard, Netns};

/// The `net_tap` port's MAC (its `mac=` devarg).
const PORT_MAC: EthernetAddress = EthernetAddress([0x02, 0x5e, 0, 0, 0x61, 0x01]);
/// A MAC of the tenant's own, other than the port's.
const TENANT_MAC: EthernetAddress = EthernetAddress([0x02, 0x5e, 0, 0, 0x61, 0x0f]);
/// Bytes sent each way in the bulk test.
const BULK: u64 = 100_000_000;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A `slimtcp-vhost` process serving one DPDK tenant on a fresh `net_tap` port, in a namespace
/// of its own. Dropping it kills the process (the port's kernel interface goes with it), then
/// deletes the namespace and the directory.
struct Backend {
    // Dropped in this order: the process first.
    process: ChildGuard,
    ns: Netns,
    /// The kernel side of the port.
    iface: String,
    socket: PathBuf,
    _dir: TempDir,
}

impl Backend {
    /// Starts the backend with the arguments `args` makes from the EAL's arguments and the
    /// socket path (and the test's directory).
    fn start(tag: &str, args: impl FnOnce(&str, &Path, &Path) -> Vec<String>) -> Backend {
        let ns = Netns::create(tag).expect("namespace");
        let dir = TempDir(std::env::temp_dir().join(format!("slimtcp-{tag}-{}", std::process::id())));
        std::fs::create_dir_all(&dir.0).expect("temp dir");
        let iface = Netns::unique_ifname("cdp");
        let eal = format!(
            "--no-huge -m 256 --no-pci --no-shconf -l 0 --log-level=warning --vdev=net_tap0,iface={iface},mac={PORT_MAC}"
        );
        let socket = dir.0.join("t.sock");
        let mut argv = vec![slimtcp_vhost_bin().to_str().expect("utf-8 path").to_owned()];
        argv.extend(args(&eal, &socket, &dir.0));
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let process = ns.spawn_cmd(&argv).expect("backend process");
        Backend { process, ns, iface, socket, _dir: dir }
    }

    /// A guest attached to the backend's socket, once the tenant is ready (its NIC open).
    fn guest(&mut self) -> GuestSockets {
        let (socket, process) = (&self.socket, &mut self.process);
        let mut exited = None;
        let up = slimtcp_testkit::wait::wait_for(e2e::LIMIT, || {
            exited = process.child().try_wait().ok().flatten();
            socket.exists() || exited.is_some()
        });
        assert!(exited.is_none(), "the backend exited ({exited:?}; its error is on stderr)");
        assert!(up, "the backend did not create {}", self.socket.display());
        GuestSockets::connect_vhost_user(&self.socket, GuestConfig::default()).expect("guest attaches")
    }

    /// The MAC the kernel has for the guest's address (its neighbour entry).
    fn kernel_neighbour_mac(&self) -> Option<String> {
        let out = self
            .ns
            .exec_ok(&["ip", "neigh", "show", "to", &GUEST_IP.to_string(), "dev", &self.iface])
            .expect("ip neigh");
        let mut words = out.split_whitespace();
        words.by_ref().find(|w| *w == "lladdr")?;
        words.next().map(str::to_owned)
    }

    /// Whether the port's kernel interface is promiscuous (`net_tap` puts it there when the port
    /// is).
    fn port_is_promiscuous(&self) -> bool {
        let out = self.ns.exec_ok(&["ip", "link", "show", "dev", &self.iface]).expect("ip link");
        out.contains("PROMISC")
    }
}

/// Runs `f`, printing how long it took to move `bytes`.
fn timed(what: &str, bytes: u64, f: impl FnOnce()) {
    let start = Instant::now();
    f();
    let secs = start.elapsed().as_secs_f64();
    eprintln!("{what}: {bytes} bytes in {secs:.2} s ({:.0} Mbit/s)", bytes as f64 * 8.0 / secs / 1e6);
}

#[test]
fn the_single_tenant_flags_serve_a_guest_on_dpdk_port_0_with_the_ports_mac() {
    slimtcp_testkit::require_netns!();
    let mut backend = Backend::start("clidpdk", |eal, socket, _| {
        let socket = socket.to_str().expect("utf-8 path");
        let (ip, host_ip) = (format!("{GUEST_IP}/24"), format!("{LINUX_IP}/24"));
        ["--dpdk", eal, "--socket", socket, "--ip", &ip, "--host-ip", &host_ip].map(str::to_owned).to_vec()
    });
    let mut api = backend.guest();
    assert_eq!(api.hello_info().mac, PORT_MAC.0, "no mac given: the guest is told the port's");

    timed("guest -> Linux", BULK, || e2e::guest_to_linux(&mut api, &backend.ns, BULK));
    timed("Linux -> guest", BULK, || e2e::linux_to_guest(&mut api, &backend.ns, BULK));

    assert_eq!(
        backend.kernel_neighbour_mac(),
        Some(PORT_MAC.to_string()),
        "the kernel reached the stack at the port's MAC"
    );
    assert!(!backend.port_is_promiscuous(), "promiscuous only when asked");
}

#[test]
fn a_config_file_tenant_on_dpdk_port_0_uses_its_own_mac_promiscuously() {
    slimtcp_testkit::require_netns!();
    let mut backend = Backend::start("clidpdkfile", |eal, socket, dir| {
        let file = dir.join("slimtcp.toml");
        let text = format!(
            "[daemon]\neal = \"{eal}\"\n\n[[tenant]]\nname = \"filed\"\nsocket = \"{}\"\nport = 0\n\
             ip = \"{GUEST_IP}/24\"\nhost-ip = \"{LINUX_IP}/24\"\nmac = \"{TENANT_MAC}\"\npromiscuous = true\n",
            socket.display()
        );
        std::fs::write(&file, text).expect("config file");
        vec!["--config".to_owned(), file.to_str().expect("utf-8 path").to_owned()]
    });
    let mut api = backend.guest();
    assert_eq!(api.hello_info().mac, TENANT_MAC.0, "a configured mac wins over the port's");
    e2e::echo(&mut api, &backend.ns);
    assert_eq!(backend.kernel_neighbour_mac(), Some(TENANT_MAC.to_string()));
    assert!(backend.port_is_promiscuous(), "promiscuous = true");
}
