//! DPDK over `net_memif`: a server port and a client port of this process's one EAL.
//!
//! Specification: the two ends of a connected memif link may be closed at the same moment
//! (each end's process finishing at once is the common case: `slimtcp-perf`'s sender and
//! receiver) and neither crashes. memif handles its peer's disconnect on the EAL interrupt
//! thread; closing a port runs the same disconnect, and DPDK 22.11's memif does not lock
//! between the two: our port closes a memif port on that thread too
//! (`nic/dpdk/port.rs`, `Port::drop`).

mod dpdk_common;

use std::time::{Duration, Instant as WallClock};

use dpdk_common::*;
use slimtcp::nic::dpdk::{create_vdev, remove_vdev, DpdkNic, Eal, MempoolConfig, PortConfig};
use slimtcp::nic::{Nic, PacketBuf};
use slimtcp::time::Instant;

/// Links opened and closed (about 1 in 10 crashed before the fix).
const ROUNDS: u32 = 100;
/// Limit for a link to come up.
const LINK_LIMIT: Duration = Duration::from_secs(10);

fn eal() -> &'static Eal {
    Eal::init(eal_args(&["--file-prefix", &format!("slimt-memif-test-{}", std::process::id())]))
        .expect("EAL starts")
}

/// Opens memif port `name` in `role` on `socket`, with small rings and pool (DPDK never frees a
/// pool, and each round makes two).
fn open(eal: &Eal, name: &str, role: &str, socket: &str) -> DpdkNic {
    create_vdev(eal, name, &format!("role={role},socket={socket}")).expect("memif vdev");
    let config = PortConfig {
        rx_descriptors: 64,
        tx_descriptors: 64,
        promiscuous: true,
        mempool: Some(MempoolConfig {
            mbufs: 255,
            cache_size: 0,
            data_room: dpdk_sys::RTE_MBUF_DEFAULT_BUF_SIZE,
        }),
        ..PortConfig::new(name)
    };
    DpdkNic::open(eal, &config).expect("memif port starts").pop().expect("one queue pair")
}

/// Sends frames from `client` until one arrives at `server`: the link is up.
fn wait_until_connected(client: &mut DpdkNic, server: &mut DpdkNic) {
    let start = WallClock::now();
    let mut got = Vec::new();
    while got.is_empty() {
        assert!(start.elapsed() < LINK_LIMIT, "the memif link never came up");
        let mut frame = client.alloc_tx().expect("mbuf");
        frame.append(60).expect("room").copy_from_slice(&[0xff; 60]);
        let mut frames: Vec<PacketBuf> = vec![frame];
        // A link still down drops the frame or gives it back; either way try again.
        let _ = client.transmit(Instant::ZERO, &mut frames);
        server.receive(Instant::ZERO, &mut got, 32).expect("receive");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn both_ends_of_a_connected_link_close_at_once_without_a_crash() {
    let eal = eal();
    for round in 0..ROUNDS {
        let socket = format!("/tmp/slimt-memif-test-{}-{round}.sock", std::process::id());
        let (server_name, client_name) =
            (format!("net_memif{}", 2 * round), format!("net_memif{}", 2 * round + 1));
        let mut server = open(eal, &server_name, "server", &socket);
        let mut client = open(eal, &client_name, "client", &socket);
        assert_eq!(server.port_info().driver, "net_memif");
        wait_until_connected(&mut client, &mut server);
        // The client's close tells the server, whose interrupt thread disconnects it while the
        // server closes too.
        drop(client);
        // At a different moment of the server's handling in each round.
        let pause = Duration::from_micros(u64::from(round) * 20);
        let start = WallClock::now();
        while start.elapsed() < pause {
            std::hint::spin_loop();
        }
        drop(server);
        remove_vdev(eal, &client_name).expect("client vdev removed");
        remove_vdev(eal, &server_name).expect("server vdev removed");
    }
}
