//! Loaned payloads sent by reference (zero copy) over a NIC that reports completions late.
//!
//! Specification (two stacks over memwire on a virtual clock; side A's NIC holds back its
//! transmit completions until the test releases them, as a real NIC's TX ring or a `net_ring`
//! receiver does):
//! - a loan whose bytes may be sent by reference goes out as headers + external payload: the
//!   stack copies no payload byte (its counter stays 0);
//! - the loan is handed back only when the peer ACKed all its bytes AND every NIC transmission
//!   referencing it, retransmissions included, has completed;
//! - a connection freed while transmissions are in flight keeps its loans alive (not dropped)
//!   until their last completion;
//! - a UDP datagram's loaned payload goes out the same way (its checksum computed over the
//!   payload in place; a datagram waiting for ARP keeps its loan) and comes back once its
//!   transmission completed; a datagram whose next hop cannot be resolved gives its loan back
//!   at once; a socket closed meanwhile releases the payload only after the completion;
//! - a datagram shorter than `EXTERNAL_MIN_PAYLOAD` is copied (counted as short) and its loan
//!   handed back at once, as a short TCP segment is.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use slimtcp::iface::DropReason;
use slimtcp::iface::{Interface, SocketHandle, EXTERNAL_MIN_PAYLOAD};
use slimtcp::nic::memwire::{self, LinkConfig, MemwireNic};
use slimtcp::nic::{ExternalFrame, Nic, NicCapabilities, NicError, PacketBuf};
use slimtcp::sim::{default_configs, B_IP};
use slimtcp::tcp::{TcpConfig, TxPayload};
use slimtcp::time::{Instant, VirtualClock};

const PORT: u16 = 7001;

/// A memwire end whose external-payload completions wait for [`LateNic::release`].
#[derive(Debug)]
struct LateNic {
    inner: MemwireNic,
    held: Vec<u64>,
    released: Vec<u64>,
}

impl LateNic {
    /// Lets the oldest `n` held completions through.
    fn release(&mut self, n: usize) {
        let n = n.min(self.held.len());
        self.released.extend(self.held.drain(..n));
    }

    fn held(&self) -> usize {
        self.held.len()
    }
}

impl Nic for LateNic {
    fn capabilities(&self) -> NicCapabilities {
        self.inner.capabilities()
    }
    fn receive(&mut self, now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        self.inner.receive(now, out, max)
    }
    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        self.inner.alloc_tx()
    }
    fn transmit(&mut self, now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        self.inner.transmit(now, frames)
    }
    fn supports_external(&self) -> bool {
        true
    }
    fn transmit_external(
        &mut self,
        now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        self.inner.transmit_external(now, frames)
    }
    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        self.inner.poll_tx_completions(&mut self.held);
        let n = self.released.len();
        out.append(&mut self.released);
        n
    }
}

/// Application memory the NIC may read in place; counts how often such buffers were dropped.
#[derive(Debug)]
struct InPlace {
    data: Vec<u8>,
    dropped: Arc<AtomicUsize>,
}

impl TxPayload for InPlace {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        slimtcp::tcp::copy_from_slice_at(&self.data, offset, dst)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(&self.data)
    }
    fn external_addr(&self) -> Option<std::ptr::NonNull<u8>> {
        // A Vec's heap bytes stay put and unmodified while the stack owns the box.
        std::ptr::NonNull::new(self.data.as_ptr().cast_mut())
    }
}

impl Drop for InPlace {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

struct Sim {
    clock: VirtualClock,
    a: Interface<LateNic>,
    b: Interface<MemwireNic>,
}

impl Sim {
    fn new() -> Sim {
        Sim::over(LinkConfig::default())
    }

    fn over(link: LinkConfig) -> Sim {
        let (na, nb) = memwire::link(link).expect("link");
        let (ca, cb) = default_configs();
        let late = LateNic { inner: na, held: Vec::new(), released: Vec::new() };
        Sim { clock: VirtualClock::new(), a: Interface::new(late, ca), b: Interface::new(nb, cb) }
    }

    /// Polls both sides (or only A when `b_silent`); jumps the clock when idle.
    fn step(&mut self, b_silent: bool) {
        let now = self.clock.now();
        let busy_a = self.a.poll(now).expect("poll a");
        let busy_b = !b_silent && self.b.poll(now).expect("poll b");
        if busy_a || busy_b {
            return;
        }
        let tick = now + Duration::from_micros(100);
        let mut next: Vec<Instant> = vec![tick + Duration::from_millis(10)];
        next.extend(self.a.poll_at().map(|t| if t <= now { tick } else { t }));
        if !b_silent {
            next.extend(self.b.poll_at().map(|t| if t <= now { tick } else { t }));
            next.extend(self.b.nic().next_delivery());
        }
        next.extend(self.a.nic().inner.next_delivery());
        let t = next.into_iter().min().unwrap_or(tick);
        self.clock.advance_to(t.max(now));
    }

    fn run_until(&mut self, what: &str, mut done: impl FnMut(&mut Sim) -> bool) {
        for _ in 0..100_000 {
            if done(self) {
                return;
            }
            self.step(false);
        }
        panic!("{what}: did not happen");
    }

    /// A connection from A to a listener on B, established; returns (a side, b side).
    fn connect(&mut self) -> (SocketHandle, SocketHandle) {
        self.connect_to_mss(None)
    }

    /// [`connect`](Self::connect) to a listener that advertises `mss` (its default when `None`).
    fn connect_to_mss(&mut self, mss: Option<u16>) -> (SocketHandle, SocketHandle) {
        let config = mss.map(|mss| TcpConfig { mss, ..TcpConfig::default() });
        let listener = self.b.tcp_listen_with(PORT, 4, config).expect("listen");
        let a = self.a.tcp_connect(self.clock.now(), SocketAddrV4::new(B_IP, PORT)).expect("connect");
        let mut b = None;
        self.run_until("handshake", |s| {
            b = b.or_else(|| s.b.tcp_accept(listener).ok());
            b.is_some()
        });
        (a, b.expect("accepted"))
    }

    fn returned(&mut self, h: SocketHandle) -> usize {
        let mut out = Vec::new();
        self.a.tcp_take_completed(h, &mut out).expect("take completed");
        out.len()
    }
}

fn loan(len: usize, seed: u8, dropped: &Arc<AtomicUsize>) -> Box<dyn TxPayload> {
    let data = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
    Box::new(InPlace { data, dropped: Arc::clone(dropped) })
}

fn read_all(sim: &mut Sim, h: SocketHandle, want: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    sim.run_until("the data arrives", |s| {
        while let Ok(n) = s.b.tcp_recv(h, &mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        got.len() >= want
    });
    got
}

/// A link whose NIC fills and verifies every checksum (a PS225 port's offloads).
fn offload() -> LinkConfig {
    let mut link = LinkConfig::default();
    link.caps.checksum = slimtcp::wire::ChecksumCapabilities::all();
    link
}

/// A 20,000-byte loan sent (14 segments) and acknowledged over `link`; its transmissions'
/// completions released in three groups (5, 8, then the last): the loan comes back only after
/// the last.
fn a_loan_returns_after_its_last_completion_over(link: LinkConfig) {
    let mut sim = Sim::over(link);
    let (a, b) = sim.connect();
    let dropped = Arc::new(AtomicUsize::new(0));
    let payload = loan(20_000, 7, &dropped);
    let expect = payload.as_slice().expect("plain memory").to_vec();
    sim.a.tcp_send_loaned(a, payload).expect("open").expect("fits");
    let got = read_all(&mut sim, b, expect.len());
    assert_eq!(got, expect, "the bytes arrive intact");
    sim.run_until("everything is acknowledged", |s| s.a.tcp_info(a).expect("info").send_queued == 0);

    let counters = sim.a.counters();
    assert_eq!(counters.tx_payload_copied_bytes, 0, "the stack copied no payload byte");
    assert_eq!(counters.tx_external_bytes, 20_000);
    let segments = sim.a.nic().held();
    assert_eq!(segments, 20_000usize.div_ceil(1460), "one external frame per segment");
    assert_eq!(sim.returned(a), 0, "acknowledged, but the NIC still holds every transmission");

    for (release, left) in [(5, "eight and one"), (segments - 6, "one")] {
        sim.a.nic_mut().release(release);
        sim.step(false);
        assert_eq!(sim.returned(a), 0, "{left} transmissions still in flight");
    }
    sim.a.nic_mut().release(1);
    sim.step(false);
    assert_eq!(sim.returned(a), 1, "acknowledged and all completed: handed back");
    assert_eq!(sim.a.external_in_flight(), 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the application got it back (then dropped it)");
}

#[test]
fn a_loan_returns_only_after_ack_and_every_completion() {
    // Software checksums: each segment's transmission counted on the loan on its own.
    a_loan_returns_after_its_last_completion_over(LinkConfig::default());
}

#[test]
fn a_loan_sent_as_a_run_returns_only_after_ack_and_every_completion() {
    // The NIC fills the checksums: the run's transmissions are counted on the loan at once,
    // and consecutive completions of it too.
    a_loan_returns_after_its_last_completion_over(offload());
}

#[test]
fn a_short_segment_is_copied_and_a_long_one_sent_by_reference() {
    let mut sim = Sim::new();
    let (a, b) = sim.connect();
    let dropped = Arc::new(AtomicUsize::new(0));
    let short = EXTERNAL_MIN_PAYLOAD - 1;
    let payload = loan(short, 5, &dropped);
    let mut expect = payload.as_slice().expect("plain memory").to_vec();
    sim.a.tcp_send_loaned(a, payload).expect("open").expect("fits");
    let got = read_all(&mut sim, b, short);
    assert_eq!(got, expect, "the short segment arrives intact");
    sim.run_until("acknowledged", |s| s.a.tcp_info(a).expect("info").send_queued == 0);
    sim.step(false);
    let counters = sim.a.counters();
    assert_eq!(counters.tx_payload_copied_bytes, short as u64, "copied behind its headers");
    assert_eq!(counters.tx_short_payload_copied_bytes, short as u64, "because it was short");
    assert_eq!(counters.tx_external_bytes, 0);
    assert_eq!(sim.a.nic().held(), 0, "no transmission by reference to wait for");
    assert_eq!(sim.returned(a), 1, "acknowledged: handed back at once");

    let payload = loan(EXTERNAL_MIN_PAYLOAD, 6, &dropped);
    let long = payload.as_slice().expect("plain memory").to_vec();
    sim.a.tcp_send_loaned(a, payload).expect("open").expect("fits");
    expect = long;
    let got = read_all(&mut sim, b, expect.len());
    assert_eq!(got, expect, "the long segment arrives intact");
    sim.run_until("acknowledged", |s| s.a.tcp_info(a).expect("info").send_queued == 0);
    sim.step(false);
    let counters = sim.a.counters();
    assert_eq!(counters.tx_payload_copied_bytes, short as u64, "nothing more copied");
    assert_eq!(counters.tx_short_payload_copied_bytes, short as u64);
    assert_eq!(counters.tx_external_bytes, EXTERNAL_MIN_PAYLOAD as u64, "sent by reference");
    assert_eq!(sim.a.nic().held(), 1, "its transmission is held");
    assert_eq!(sim.returned(a), 0, "so the loan waits for it");
}

/// A 20,000-byte loan sent over `link` to a peer whose MSS keeps every segment shorter than
/// [`EXTERNAL_MIN_PAYLOAD`]: each segment is copied (and counted short), none is sent by
/// reference, and the loan comes back once acknowledged, with nothing to wait for.
fn short_segments_of_a_loan_are_copied_over(link: LinkConfig) {
    let mut sim = Sim::over(link);
    let mss = EXTERNAL_MIN_PAYLOAD - 56;
    let (a, b) = sim.connect_to_mss(Some(mss as u16));
    let dropped = Arc::new(AtomicUsize::new(0));
    let payload = loan(20_000, 9, &dropped);
    let expect = payload.as_slice().expect("plain memory").to_vec();
    sim.a.tcp_send_loaned(a, payload).expect("open").expect("fits");
    assert_eq!(read_all(&mut sim, b, expect.len()), expect, "the bytes arrive intact");
    sim.run_until("acknowledged", |s| s.a.tcp_info(a).expect("info").send_queued == 0);
    sim.step(false);
    let counters = sim.a.counters();
    assert!(counters.tcp_segs_out >= 20_000u64.div_ceil(mss as u64), "segments of at most {mss} bytes");
    assert_eq!(counters.tx_payload_copied_bytes, 20_000, "every byte copied behind its headers");
    assert_eq!(counters.tx_short_payload_copied_bytes, 20_000, "because every segment was short");
    assert_eq!(counters.tx_external_bytes, 0);
    assert_eq!(sim.a.nic().held(), 0, "no transmission by reference to wait for");
    assert_eq!(sim.returned(a), 1, "acknowledged: handed back at once");
}

#[test]
fn short_segments_of_a_loan_are_copied() {
    // Software checksums, and the NIC filling them (where longer segments would go by
    // reference as one run).
    short_segments_of_a_loan_are_copied_over(LinkConfig::default());
    short_segments_of_a_loan_are_copied_over(offload());
}

#[test]
fn retransmissions_are_waited_for_too() {
    let mut sim = Sim::new();
    let (a, b) = sim.connect();
    let dropped = Arc::new(AtomicUsize::new(0));
    sim.a.tcp_send_loaned(a, loan(1000, 3, &dropped)).expect("open").expect("fits");
    // B is silent: A's segment times out and is sent again.
    let start = sim.clock.now();
    while sim.a.tcp_info(a).expect("info").stats.retransmits == 0 {
        sim.step(true);
        assert!(sim.clock.now() < start + Duration::from_secs(10), "no retransmission");
    }
    // Both copies reach B (the first was only not processed yet); the second is a duplicate.
    let got = read_all(&mut sim, b, 1000);
    assert_eq!(got.len(), 1000);
    sim.run_until("acknowledged", |s| s.a.tcp_info(a).expect("info").send_queued == 0);
    assert_eq!(sim.a.nic().held(), 2, "first send and retransmission");
    sim.a.nic_mut().release(1);
    sim.step(false);
    assert_eq!(sim.returned(a), 0, "the retransmission is still in flight");
    sim.a.nic_mut().release(1);
    sim.step(false);
    assert_eq!(sim.returned(a), 1);
}

#[test]
fn a_freed_connection_keeps_loans_until_their_completions() {
    a_freed_connection_keeps_loans_until_their_completions_over(LinkConfig::default());
    a_freed_connection_keeps_loans_until_their_completions_over(offload());
}

fn a_freed_connection_keeps_loans_until_their_completions_over(link: LinkConfig) {
    let mut sim = Sim::over(link);
    let (a, _b) = sim.connect();
    let dropped = Arc::new(AtomicUsize::new(0));
    sim.a.tcp_send_loaned(a, loan(6000, 9, &dropped)).expect("open").expect("fits");
    // One poll sends, the next collects the (held) completions.
    sim.step(true);
    sim.step(true);
    assert_eq!(sim.a.nic().held(), 4, "sent by reference (the 160-byte rest copied), completions held");
    sim.a.tcp_abort(a).expect("abort");
    for _ in 0..10 {
        sim.step(false);
    }
    assert_eq!(sim.a.socket_count(), 0, "A's connection is freed");
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "not released while the NIC may read it");
    let held = sim.a.nic().held();
    sim.a.nic_mut().release(held - 1);
    sim.step(false);
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "one transmission still in flight");
    sim.a.nic_mut().release(1);
    sim.step(false);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "released after the last completion");
    assert_eq!(sim.a.external_in_flight(), 0);
}

impl Sim {
    fn udp_returned(&mut self, h: SocketHandle) -> usize {
        let mut out = Vec::new();
        self.a.udp_take_returned(h, &mut out).expect("take returned");
        out.len()
    }

    /// Two stacks over `link` with a UDP socket each: A's on an ephemeral port, B's on `PORT`.
    fn udp_pair(link: LinkConfig) -> (Sim, SocketHandle, SocketHandle) {
        let mut sim = Sim::over(link);
        let a = sim.a.udp_bind(0).expect("bind a");
        let b = sim.b.udp_bind(PORT).expect("bind b");
        (sim, a, b)
    }

    /// Sends one loaned datagram of each size (the loan's bytes: the size, as a byte) from A's
    /// socket `a` to B's port; returns their bytes.
    fn send_loaned_datagrams(
        &mut self,
        a: SocketHandle,
        sizes: &[usize],
        dropped: &Arc<AtomicUsize>,
    ) -> Vec<Vec<u8>> {
        let now = self.clock.now();
        let mut sent = Vec::new();
        for &n in sizes {
            let p = loan(n, n as u8, dropped);
            sent.push(p.as_slice().expect("plain memory").to_vec());
            self.a.udp_send_loaned(now, a, p, Some(SocketAddrV4::new(B_IP, PORT))).expect("send");
        }
        sent
    }

    /// Runs until B's socket `b` received `n` datagrams; returns them in order.
    fn receive_datagrams(&mut self, b: SocketHandle, n: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 2048];
        self.run_until("the datagrams arrive", |s| {
            while let Ok((len, _)) = s.b.udp_recv_from(b, &mut buf) {
                got.push(buf[..len].to_vec());
            }
            got.len() == n
        });
        got
    }
}

#[test]
fn a_datagram_loan_returns_after_its_completion() {
    let (mut sim, a, b) = Sim::udp_pair(LinkConfig::default());
    let dropped = Arc::new(AtomicUsize::new(0));
    // The first datagrams wait for ARP (B is not resolved yet), holding their loans.
    let sent = sim.send_loaned_datagrams(a, &[256, 300, 999, 1472], &dropped);
    let got = sim.receive_datagrams(b, sent.len());
    assert_eq!(got, sent, "every datagram arrives intact (B checks UDP checksums)");
    let counters = sim.a.counters();
    assert_eq!(counters.tx_payload_copied_bytes, 0, "the stack copied no payload byte");
    assert_eq!(counters.tx_external_bytes, 256 + 300 + 999 + 1472);
    assert_eq!(sim.b.counters().udp_in, 4);
    // A's next poll collects the completions (which the NIC holds back).
    sim.step(false);
    assert_eq!(sim.a.nic().held(), 4, "one transmission each, completions held");
    assert_eq!(sim.udp_returned(a), 0, "the NIC still reads them");
    sim.a.nic_mut().release(3);
    sim.step(false);
    assert_eq!(sim.udp_returned(a), 3);
    sim.a.nic_mut().release(1);
    sim.step(false);
    assert_eq!(sim.udp_returned(a), 1);
    assert_eq!(sim.a.external_in_flight(), 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 4, "all handed back (then dropped)");
}

#[test]
fn a_short_datagram_loan_is_copied_and_handed_back_at_once() {
    let (mut sim, a, b) = Sim::udp_pair(LinkConfig::default());
    let dropped = Arc::new(AtomicUsize::new(0));
    let sizes = [1, 2, EXTERNAL_MIN_PAYLOAD - 1];
    let sent = sim.send_loaned_datagrams(a, &sizes, &dropped);
    assert_eq!(sim.udp_returned(a), 3, "copied: the loans come back before anything is sent");
    let got = sim.receive_datagrams(b, sent.len());
    assert_eq!(got, sent, "every datagram arrives intact");
    let copied: usize = sizes.iter().sum();
    let counters = sim.a.counters();
    assert_eq!(counters.tx_payload_copied_bytes, copied as u64);
    assert_eq!(counters.tx_short_payload_copied_bytes, copied as u64, "because they were short");
    assert_eq!(counters.tx_external_bytes, 0);
    assert_eq!(sim.a.nic().held(), 0, "no completion to wait for");
    assert_eq!(sim.a.external_in_flight(), 0);
}

#[test]
fn an_unresolvable_datagram_gives_its_loan_back() {
    let mut sim = Sim::new();
    let a = sim.a.udp_bind(0).expect("bind a");
    let dropped = Arc::new(AtomicUsize::new(0));
    let nobody = SocketAddrV4::new(std::net::Ipv4Addr::new(10, 0, 0, 77), PORT);
    let now = sim.clock.now();
    sim.a.udp_send_loaned(now, a, loan(500, 1, &dropped), Some(nobody)).expect("held for ARP");
    sim.run_until("ARP gives up", |s| s.a.counters().dropped(DropReason::Unresolved) > 0);
    assert_eq!(sim.udp_returned(a), 1, "dropped: the loan is back");
    assert_eq!(sim.a.external_in_flight(), 0);
}

#[test]
fn a_closed_udp_socket_releases_its_loan_after_the_completion() {
    let (mut sim, a, b) = Sim::udp_pair(LinkConfig::default());
    let dropped = Arc::new(AtomicUsize::new(0));
    let dst = Some(SocketAddrV4::new(B_IP, PORT));
    sim.a.udp_send_loaned(sim.clock.now(), a, loan(500, 4, &dropped), dst).expect("send");
    sim.run_until("it arrives", |s| s.b.udp_can_recv(b));
    sim.step(false);
    assert_eq!(sim.a.nic().held(), 1);
    sim.a.tcp_close(a).expect("close");
    sim.step(false);
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "not released while the NIC may read it");
    sim.a.nic_mut().release(1);
    sim.step(false);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "released after the completion");
    assert_eq!(sim.a.external_in_flight(), 0);
}

/// A payload that counts the stack's reads of its bytes through `copy_to` (it offers no plain
/// slice; the stack's summing copy into a frame reads from its address instead).
#[derive(Debug)]
struct Counted {
    data: Vec<u8>,
    reads: Arc<AtomicUsize>,
}

impl TxPayload for Counted {
    fn len(&self) -> usize {
        self.data.len()
    }
    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        self.reads.fetch_add(1, Ordering::SeqCst);
        slimtcp::tcp::copy_from_slice_at(&self.data, offset, dst)
    }
    fn external_addr(&self) -> Option<std::ptr::NonNull<u8>> {
        // A Vec's heap bytes stay put and unmodified while the stack owns the box.
        std::ptr::NonNull::new(self.data.as_ptr().cast_mut())
    }
}

/// Sends 20,000 counted bytes as a by-reference loan from A to B over `link`; returns the reads
/// of the payload the stack made and the payload bytes it copied into frames.
fn reads_of_a_loan_over(link: LinkConfig) -> (usize, u64) {
    let mut sim = Sim::over(link);
    let (a, b) = sim.connect();
    let reads = Arc::new(AtomicUsize::new(0));
    let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let payload = Box::new(Counted { data: data.clone(), reads: Arc::clone(&reads) });
    sim.a.tcp_send_loaned(a, payload).expect("open").expect("fits");
    assert_eq!(read_all(&mut sim, b, data.len()), data, "the bytes arrive intact");
    assert_eq!(sim.a.counters().tx_short_payload_copied_bytes, 0, "full segments, none short");
    (reads.load(Ordering::SeqCst), sim.a.counters().tx_payload_copied_bytes)
}

/// Sends a datagram of 1,400 counted bytes by reference from A to B over `link`; returns the
/// reads of the payload the stack made.
fn reads_of_a_datagram_loan_over(link: LinkConfig) -> usize {
    let (mut sim, a, b) = Sim::udp_pair(link);
    let reads = Arc::new(AtomicUsize::new(0));
    let data: Vec<u8> = (0..1400u32).map(|i| (i % 251) as u8).collect();
    let payload = Box::new(Counted { data: data.clone(), reads: Arc::clone(&reads) });
    let now = sim.clock.now();
    sim.a.udp_send_loaned(now, a, payload, Some(SocketAddrV4::new(B_IP, PORT))).expect("send");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 2048];
    sim.run_until("the datagram arrives", |s| {
        if let Ok((n, _)) = s.b.udp_recv_from(b, &mut buf) {
            got = buf[..n].to_vec();
        }
        !got.is_empty()
    });
    assert_eq!(got, data, "the datagram arrives intact");
    assert_eq!(sim.a.counters().tx_payload_copied_bytes, 0, "sent by reference");
    reads.load(Ordering::SeqCst)
}

#[test]
fn a_loan_is_sent_by_reference_only_where_that_saves_reading_it() {
    let offload = offload();
    assert_eq!(reads_of_a_loan_over(offload.clone()), (0, 0), "by reference; the NIC fills the checksums");
    // Without a slice, summing the bytes where they are would read them twice: the stack copies
    // them into the frames from their address instead and sums them as it copies, each byte
    // read once (and not through `copy_to`'s pieces).
    let (reads, copied) = reads_of_a_loan_over(LinkConfig::default());
    assert_eq!(copied, 20_000, "software checksums: each byte copied into a frame once");
    assert_eq!(reads, 0, "copied from its address, summed on the way");
    assert_eq!(reads_of_a_datagram_loan_over(offload), 0, "the NIC fills the UDP checksum");
    assert!(reads_of_a_datagram_loan_over(LinkConfig::default()) > 0, "software: read for its sum");
}
