//! Receive memory is a tenant's budget, not the process's (issue 14, finding 4): a guest that
//! stops reading (its receive ring fills and it posts no more buffers) while Linux senders push
//! at it, some as 1-byte segments, cannot make its stack hold more receive storage than the
//! tenant's `rx-memory` budget. Windows close as the budget fills; what arrives past it is
//! dropped, and the senders send it again once the guest reads. Meanwhile another tenant of the
//! same process moves 20 MB exactly; afterwards the hoarding guest reads every byte, exactly.

mod e2e;

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use e2e::{Tenant, GUEST_IP, LIMIT};
use slimtcp::api::{Proto, SockOpt, SocketApi, SocketError};
use slimtcp_guest::{GuestConfig, GuestSockets};
use slimtcp_testkit::data::{pattern, pattern_mismatch};
use slimtcp_testkit::netns::{Netns, NsThread};
use slimtcp_testkit::require_netns;

/// The hoarding tenant's receive memory budget.
const BUDGET: usize = 2 << 20;
const PORT: u16 = 7000;
/// Senders writing one byte per system call (TCP_NODELAY, autocorking off: one byte per
/// segment while the window is open), and how many bytes each.
const TINY_SENDERS: u64 = 8;
const TINY_BYTES: u64 = 8 * 1024;
/// Senders writing 16 KiB at a time, and how many bytes each.
const BULK_SENDERS: u64 = 16;
const BULK_BYTES: u64 = 512 * 1024;
/// How long the guest does not read (while the other tenant transfers).
const HOARD_FOR: Duration = Duration::from_secs(3);
const VICTIM_BYTES: u64 = 20_000_000;

/// A Linux client sending `len` bytes of stream `seed` to the guest, in writes of `write` bytes,
/// once `go` says the guest accepted every connection. (Data sent earlier could fill the
/// guest's small receive ring with messages for the connections it accepted first, which it does
/// not read yet, and leave no buffer for the completions of the accepts still to come.)
fn linux_sender(ns: &Netns, seed: u64, len: u64, write: usize, go: Arc<Barrier>) -> NsThread<u64> {
    ns.spawn("sender", move || {
        let to = SocketAddr::from((GUEST_IP, PORT));
        let mut s = TcpStream::connect_timeout(&to, LIMIT).expect("connect to the guest");
        s.set_nodelay(true).expect("TCP_NODELAY");
        s.set_write_timeout(Some(LIMIT)).expect("write timeout");
        go.wait();
        let mut buf = vec![0u8; write];
        let mut off = 0u64;
        while off < len {
            let n = write.min((len - off) as usize);
            pattern(seed, off, &mut buf[..n]);
            s.write_all(&buf[..n]).expect("send");
            off += n as u64;
        }
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
        off
    })
    .expect("sender thread")
}

#[test]
fn a_guest_that_stops_reading_holds_no_more_than_its_budget() {
    require_netns!();
    let hoarder = Tenant::start_tuned(
        "rxmem",
        |c| c.iface.rx_memory = BUDGET,
        e2e::tap_nic(Netns::unique_ifname("rxm")),
    );
    let victim = Tenant::start("rxmemv", e2e::tap_nic(Netns::unique_ifname("rxv")));
    // Small segments stay small: Linux would otherwise cork writes while frames are queued.
    hoarder.ns.exec_ok(&["sysctl", "-qw", "net.ipv4.tcp_autocorking=0"]).expect("autocorking off");

    // A small receive ring: the guest absorbs little before the stack must hold the rest.
    let cfg = GuestConfig { queue_size: 64, ..GuestConfig::default() };
    let mut api = GuestSockets::connect_vhost_user(&hoarder.socket, cfg).expect("hoarder attaches");
    let l = api.socket(Proto::Tcp).expect("socket");
    api.bind(l, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT)).expect("bind");
    api.listen(l, 64).expect("listen");
    let streams: Vec<(u64, u64, usize)> = (0..TINY_SENDERS)
        .map(|i| (100 + i, TINY_BYTES, 1))
        .chain((0..BULK_SENDERS).map(|i| (200 + i, BULK_BYTES, 16 * 1024)))
        .collect();
    let go = Arc::new(Barrier::new(streams.len() + 1));
    let senders: Vec<NsThread<u64>> = streams
        .iter()
        .map(|&(seed, len, write)| linux_sender(&hoarder.ns, seed, len, write, Arc::clone(&go)))
        .collect();
    // Accepted in arrival order: the bytes of each connection say which stream it is.
    let conns: Vec<_> = streams.iter().map(|_| api.accept(l).expect("accept").0).collect();
    go.wait();
    let hoard_started = Instant::now();

    // The other tenant, meanwhile (the hoarding guest makes no call: its ring fills).
    let mut vapi = victim.guest();
    e2e::linux_to_guest(&mut vapi, &victim.ns, VICTIM_BYTES);
    if let Some(rest) = HOARD_FOR.checked_sub(hoard_started.elapsed()) {
        std::thread::sleep(rest);
    }

    // Now the guest reads every connection to its end, round-robin (a receive buffer holds one
    // connection's data until it is read: reading one to its end first could wait for buffers
    // the others hold).
    let mut buf = vec![0u8; 64 * 1024];
    let mut received: Vec<Vec<u8>> = vec![Vec::new(); conns.len()];
    let mut open: Vec<usize> = (0..conns.len()).collect();
    for &c in &conns {
        api.setsockopt(c, SockOpt::NonBlocking(true)).expect("nonblocking");
    }
    let deadline = Instant::now() + LIMIT;
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "{} connections did not end", open.len());
        let mut idle = true;
        open.retain(|&i| match api.recv(conns[i], &mut buf) {
            Ok(0) => {
                api.close(conns[i]).expect("close");
                false
            }
            Ok(n) => {
                received[i].extend_from_slice(&buf[..n]);
                idle = false;
                true
            }
            Err(SocketError::WouldBlock) => true,
            Err(e) => panic!("recv: {e}"),
        });
        if idle {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let sent: Vec<u64> = senders.into_iter().map(|s| s.join().expect("sender")).collect();
    let mut seeds: Vec<u64> = received
        .iter()
        .enumerate()
        .map(|(i, data)| {
            streams
                .iter()
                .find(|&&(seed, len, _)| {
                    data.len() as u64 == len && pattern_mismatch(seed, 0, data).is_none()
                })
                .map(|s| s.0)
                .unwrap_or_else(|| panic!("connection {i}: {} B that match no stream sent", data.len()))
        })
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), streams.len(), "every stream arrived once, whole");
    assert_eq!(sent.iter().sum::<u64>(), streams.iter().map(|s| s.1).sum::<u64>());
    api.close(l).expect("close listener");
    drop(api);
    drop(vapi);

    let report = hoarder.finish();
    let victim_report = victim.finish();
    let m = report.rx_memory;
    eprintln!(
        "rx_memory_budget: budget {BUDGET} B; peak {} B, {} segments or datagrams refused; \
         {} B sent by {} senders ({TINY_SENDERS} of them one byte per write) all received exactly; \
         the other tenant moved {VICTIM_BYTES} B exactly (its peak {} B)",
        m.peak,
        m.refused,
        sent.iter().sum::<u64>(),
        sent.len(),
        victim_report.rx_memory.peak
    );
    assert_eq!(m.limit, BUDGET);
    assert!(m.peak <= BUDGET, "receive storage peaked at {} B, over the {BUDGET} B budget", m.peak);
    assert!(m.peak > BUDGET / 2, "the attack never pressed on the budget (peak {} B)", m.peak);
    assert_eq!(m.used, 0, "receive storage left after every socket closed");
}
