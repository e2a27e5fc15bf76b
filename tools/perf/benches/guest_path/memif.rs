//! The DPDK `net_memif` link of the guest-path bench (feature `dpdk`): two memif ports of this
//! process's one EAL, joined over a fresh socket per measurement. The server port carries the
//! provider under test (the backend's NIC, or the host runtime's); the client port the SlimTCP
//! peer. memif copies each frame once, between its shared rings and the receiver's mbufs.

use std::sync::atomic::{AtomicU32, Ordering};

use slimtcp::nic::dpdk::{create_vdev, DpdkNic, Eal, PortConfig};

/// Memif vdevs created so far (each measurement takes two numbers and a socket of its own).
static NEXT_LINK: AtomicU32 = AtomicU32::new(0);

/// The EAL's `--file-prefix`.
fn file_prefix() -> String {
    format!("slimt-bench-{}", std::process::id())
}

/// No hugepages and IOVA as VA (what registering guest memory as DPDK external memory needs),
/// main lcore 0, no PCI. DPDK never frees a mempool, and every port gets one of about 10 MB: a
/// run of the six measurements takes 12 ports, so 2 GB serve up to 15 runs (`GUEST_PATH_RUNS`).
fn eal_args() -> Vec<String> {
    let prefix = file_prefix();
    [
        "--file-prefix",
        &prefix,
        "--no-huge",
        "-m",
        "2048",
        "--no-pci",
        "--no-shconf",
        "--iova-mode=va",
        "-l",
        "0",
        "--log-level=warning",
        // No telemetry socket in the runtime directory, so the directory can be removed at the end.
        "--no-telemetry",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// The process's EAL, started on first use from a thread of its own: DPDK pins the thread that
/// starts it to the main lcore, and the bench's threads must stay free to run on either core.
fn eal() -> &'static Eal {
    std::thread::spawn(|| Eal::init(eal_args()).map_err(|e| e.to_string()))
        .join()
        .expect("EAL thread")
        .expect("the EAL starts")
}

/// A fresh memif link: (server port, client port), both started; the client connects to the
/// server in the background (a frame sent before that waits in the NIC).
pub fn link() -> (DpdkNic, DpdkNic) {
    let eal = eal();
    let n = NEXT_LINK.fetch_add(1, Ordering::Relaxed);
    // Abstract socket (memif's default): nothing is left in the file system.
    let socket = format!("/tmp/slimt-bench-memif-{}-{n}.sock", std::process::id());
    let open = |role: &str, vdev: u32| {
        let name = format!("net_memif{vdev}");
        create_vdev(eal, &name, &format!("role={role},socket={socket}")).expect("memif vdev");
        // The stack uses MAC addresses of its own.
        let config = PortConfig { promiscuous: true, ..PortConfig::new(&name) };
        DpdkNic::open(eal, &config).expect("memif port starts").pop().expect("one queue pair")
    };
    // The server first: a client port cannot start before its server listens.
    let server = open("server", 2 * n);
    let client = open("client", 2 * n + 1);
    (server, client)
}

/// Removes the (empty) runtime directory the EAL leaves behind, if it was started.
pub fn remove_runtime_dir() {
    if Eal::get().is_none() {
        return;
    }
    let mut bases = vec!["/var/run/dpdk".to_owned(), "/tmp/dpdk".to_owned()];
    if let Ok(xdg) = std::env::var("XDG_RUNTIME_DIR") {
        bases.push(format!("{xdg}/dpdk"));
    }
    for base in bases {
        let _ = std::fs::remove_dir(format!("{base}/{}", file_prefix()));
    }
}
