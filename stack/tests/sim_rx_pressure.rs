//! The receive budget recovers, and the windows it had narrowed open again at once: one
//! connection hoards the interface's receive memory, a connection opened meanwhile is offered
//! only half the room left (through no fault of its own), the hoard is read, and the other
//! connection's peer learns its window reopened from a window update, not from a zero-window
//! probe backed off to seconds.

use std::net::SocketAddrV4;
use std::time::Duration;

use slimtcp::nic::memwire::LinkConfig;
use slimtcp::sim::{default_configs, SimPair, B_IP};

const PORT: u16 = 7000;
const BUDGET: usize = 256 * 1024;
const HOARD: usize = 400 * 1024;
const OTHER: usize = 64 * 1024;

fn send_all(sim: &mut SimPair, h: slimtcp::iface::SocketHandle, data: &[u8], sent: &mut usize) {
    while *sent < data.len() {
        match sim.a.tcp_send(h, &data[*sent..]) {
            Ok(n) if n > 0 => *sent += n,
            _ => break,
        }
    }
}

/// Keeps `h` sending `data` for `steps` steps of the simulation.
fn send_for(sim: &mut SimPair, h: slimtcp::iface::SocketHandle, data: &[u8], sent: &mut usize, steps: u32) {
    for _ in 0..steps {
        send_all(sim, h, data, sent);
        sim.step().expect("step");
    }
}

fn accept_one(sim: &mut SimPair, listener: slimtcp::iface::SocketHandle) -> slimtcp::iface::SocketHandle {
    let mut got = None;
    assert!(sim
        .run_until(10_000, |s| {
            got = got.or_else(|| s.b.tcp_accept(listener).ok());
            got.is_some()
        })
        .expect("run"));
    got.expect("accepted")
}

#[test]
fn windows_shut_by_a_hoard_reopen_when_it_is_read() {
    let (a_cfg, mut b_cfg) = default_configs();
    b_cfg.rx_memory = BUDGET;
    let mut sim = SimPair::new(LinkConfig::default(), a_cfg, b_cfg).expect("sim");
    let listener = sim.b.tcp_listen(PORT, 8).expect("listen");
    let to = SocketAddrV4::new(B_IP, PORT);
    let hoard_a = sim.a.tcp_connect(sim.now(), to).expect("connect");
    let hoard_b = accept_one(&mut sim, listener);

    // The hoard: sent, never read, until the budget is nearly gone.
    let hoard = vec![1u8; HOARD];
    send_for(&mut sim, hoard_a, &hoard, &mut 0, 2_000);
    let used = sim.b.rx_memory().used;
    assert!(used > BUDGET * 3 / 4, "the hoard holds {used} of {BUDGET} B");

    // A connection opened now is offered half the room left: little.
    let other_a = sim.a.tcp_connect(sim.now(), to).expect("connect");
    let other_b = accept_one(&mut sim, listener);
    // The other connection sends; its window is what the room left allows, and it stalls.
    let other = vec![2u8; OTHER];
    let mut other_sent = 0;
    send_for(&mut sim, other_a, &other, &mut other_sent, 2_000);
    let stalled = sim.b.tcp_info(other_b).expect("info").recv_queued;
    assert!(stalled < OTHER, "the other connection is held back ({stalled} of {OTHER} B)");

    // Right after one of the other peer's zero-window probes was answered, so that the next is
    // far off (they back off):
    let probes = |s: &SimPair| s.a.tcp_info(other_a).expect("info").stats.window_probes;
    let before = probes(&sim);
    assert!(sim.run_until(100_000, |s| probes(s) > before).expect("run"), "the other peer probes");
    sim.step().expect("step");
    // From now on the hoard is read as it comes (the other connection is not): the other
    // connection's peer must hear at once that its window reopened.
    let read_at = sim.now();
    let mut buf = vec![0u8; 64 * 1024];
    let done = sim
        .run_until(200_000, |s| {
            while s.b.tcp_recv(hoard_b, &mut buf).is_ok_and(|n| n > 0) {}
            send_all(s, other_a, &other, &mut other_sent);
            s.b.tcp_info(other_b).is_ok_and(|i| i.recv_queued == OTHER)
        })
        .expect("run");
    assert!(
        done,
        "the other connection's data arrived: {:?}, sent {other_sent}; {:?}; B: {:#?}; A: {:#?}",
        sim.b.tcp_info(other_b).map(|i| i.recv_queued),
        sim.b.rx_memory(),
        sim.b.tcp_describe(sim.now()),
        sim.a.tcp_describe(sim.now())
    );
    let waited = sim.now().saturating_since(read_at);
    assert!(
        waited < Duration::from_millis(50),
        "the reopened window was learned from an update, not a probe: {waited:?} of virtual time"
    );
    assert!(sim.b.counters().rx_memory_window_updates > 0, "waited {waited:?}; {:?}", sim.b.counters());
}
