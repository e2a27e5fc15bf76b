//! The guest path's cost per segment on one thread, for callgrind: a minimal guest driver (the
//! guest library's own split rings, `slimtcp_guest::ring`, over guest memory it reaches by
//! pointer as the library reaches its DMA memory; messages read in place) moves
//! `ENGINE_COST_BYTES` (default 32 MiB) over one TCP connection between the tenant engine and
//! a SlimTCP peer on the in-memory wire; the peer's listener sets MSS `ENGINE_COST_MSS`
//! (default 1460) for both directions. Everything is stepped from this thread on a virtual
//! clock (2 us a step), so an instruction count is the work of the driver, the engine and both
//! stacks, the same on every run, with no polling of idle threads in it.
//!
//! `ENGINE_COST_DIRECTION=send` (the default): the guest sends, quiet sends of 16 KiB, 16 in
//! flight (the socket's send credit), as the guest library sends; the peer reads. `receive`:
//! the peer sends and the guest receives into posted 8 KiB buffers (the guest library's size),
//! copies each data message's payload out of guest memory into the application's buffer (the
//! library's one receive copy) and credits the bytes back half its receive buffer at a time,
//! as the guest library does. Prints the data segments the receiving side got.
//!
//! ```sh
//! cargo bench -p slimtcp-vhost --bench engine_cost --no-run   # then, for each size:
//! ENGINE_COST_MSS=64 ENGINE_COST_BYTES=4000000 valgrind --tool=callgrind TARGET/engine_cost-HASH
//! ```
//! Instructions per segment: the difference of two runs' totals over the difference of their
//! segments (so set-up does not count). `ENGINE_COST_OFFLOAD=1`: the link offers checksum
//! offload (both stacks use it). `docs/benchmarks.md` has the figures.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use slimtcp::iface::{Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::server::IdMap;
use slimtcp::tcp::TcpConfig;
use slimtcp::time::{Clock, VirtualClock};
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{HelloInfo, Request, RequestBody, RequestFlags, RxMessage, SocketId, SocketKind, Version};
use slimtcp_guest::mem::{DmaRegion, KeepAlive};
use slimtcp_guest::ring::{ring_sizes, Segment, SplitRing};
use slimtcp_vhost::engine::{Engine, EngineConfig, TenantLimits};
use slimtcp_vhost::guest_mem::GuestMem;
use slimtcp_vhost::queues::LocalRings;
use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryBackend};

const GUEST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5001;
const SIZE: u16 = 256;
const SEND: u32 = 16 * 1024;
/// Sends in flight: 256 KiB, the socket's default send credit.
const SLOTS: u64 = 16;
const SLOT_BASE: u64 = 1 << 20;
/// Receive buffers posted: 512 KiB, twice the socket's default receive window.
const RX_BUFFERS: u64 = 64;
/// The guest library's default receive buffer size.
const RX_LEN: u32 = 8192;
const RX_BASE: u64 = 3 << 20;
/// Guest memory: the rings, the send slots, then the receive buffers.
const GUEST_MEMORY: u64 = RX_BASE + RX_BUFFERS * RX_LEN as u64;
/// Where requests without payload are written, one 64-byte slot each, reused round the ring
/// (the engine has consumed a request long before its slot comes round again).
const SCRATCH_BASE: u64 = 0x8_0000;
/// Bytes the peer offers its socket per call in the receive direction.
const PEER_CHUNK: usize = 64 * 1024;
const STEP: Duration = Duration::from_micros(2);

/// The guest side of one queue: the guest library's own split ring (`slimtcp_guest::ring`),
/// laid out at `base`: descriptors, then the available ring at +4 KiB, then the used ring at
/// +8 KiB, in the guest memory it reaches by pointer as the library reaches its DMA memory.
struct Ring {
    base: u64,
    ring: SplitRing,
}

impl Ring {
    fn new(memory: &DmaRegion, base: u64) -> Self {
        let (d, a, u) = ring_sizes(SIZE);
        let part =
            |offset: u64, len: usize| memory.slice((base + offset) as usize, len).expect("ring memory");
        let ring = SplitRing::new(SIZE, part(0, d), part(0x1000, a), part(0x2000, u), false).expect("ring");
        Ring { base, ring }
    }

    fn queue(&self) -> Queue {
        let mut q = Queue::new(SIZE).expect("queue");
        let split = |a: u64| (Some(a as u32), Some((a >> 32) as u32));
        let (lo, hi) = split(self.base);
        q.set_desc_table_address(lo, hi);
        let (lo, hi) = split(self.base + 0x1000);
        q.set_avail_ring_address(lo, hi);
        let (lo, hi) = split(self.base + 0x2000);
        q.set_used_ring_address(lo, hi);
        q.set_ready(true);
        q
    }

    /// Publishes a chain of buffers; returns its head.
    fn publish(&mut self, segs: &[Segment]) -> u16 {
        let head = self.ring.add(segs).expect("a free descriptor");
        self.ring.publish();
        head
    }

    /// The next used entry: (head, length).
    fn next_used(&mut self) -> Option<(u16, u32)> {
        self.ring.pop_used().expect("a well-behaved device")
    }
}

/// A device-readable buffer of a chain.
fn readable(gpa: u64, len: u32) -> Segment {
    Segment { gpa, len, writable: false }
}

/// A receive buffer (device-writable).
fn writable(gpa: u64) -> Segment {
    Segment { gpa, len: RX_LEN, writable: true }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Driver {
    mem: Arc<GuestMem>,
    /// All of guest memory as the guest sees its own (by pointer, at guest-physical address 0).
    memory: DmaRegion,
    rx: Ring,
    tx: Ring,
    rx_addr: IdMap<u16, u64>,
    /// Requests without payload written so far (their scratch slot).
    calls: u64,
    /// The application's buffer: a data message's payload is copied into it (the guest
    /// library's one receive copy, `recv`).
    app: Vec<u8>,
    /// Receive buffers read in this pass, posted again after it (the ring hands a freed head
    /// out again at once).
    returned: Vec<u64>,
}

/// The `len` bytes of guest memory at `gpa`, as the guest reaches them (by pointer).
fn guest_bytes(memory: &mut DmaRegion, gpa: u64, len: usize) -> &mut [u8] {
    let at = memory.slice(gpa as usize, len).expect("inside guest memory");
    // SAFETY: the range is inside the mapping `memory` keeps alive, and the one reference to it
    // while `memory` is borrowed; the engine does not touch it meanwhile (a request the guest
    // writes before publishing it, a receive buffer the device returned and that is posted again
    // only after it is read: the engine and this driver run in turn on this thread).
    unsafe { std::slice::from_raw_parts_mut(at.host(), len) }
}

impl Driver {
    /// The `len` bytes of guest memory at `gpa`.
    fn guest_bytes(&mut self, gpa: u64, len: usize) -> &mut [u8] {
        guest_bytes(&mut self.memory, gpa, len)
    }

    /// Sends a request with no payload, after taking back the descriptors of the requests the
    /// device returned (the ring hands them out again).
    fn call(&mut self, req: &Request) {
        while self.tx.next_used().is_some() {}
        let a = SCRATCH_BASE + 64 * (self.calls % u64::from(SIZE));
        self.calls += 1;
        let n = req.emit(self.guest_bytes(a, 64)).expect("emit");
        self.tx.publish(&[readable(a, n as u32)]);
    }

    /// Reads the device's messages in place into `out`, a data message's payload copied into
    /// the application's buffer; each receive buffer goes back to the ring.
    fn messages(&mut self, out: &mut Vec<RxMessage>) {
        out.clear();
        while let Some((head, len)) = self.rx.next_used() {
            let a = self.rx_addr.remove(&head).expect("a posted buffer");
            let frame = guest_bytes(&mut self.memory, a, len as usize);
            if let Ok(msg) = RxMessage::parse(frame) {
                let bytes = &frame[msg.payload_range()];
                self.app[..bytes.len()].copy_from_slice(bytes);
                out.push(msg);
            }
            self.returned.push(a);
        }
        for a in self.returned.drain(..) {
            self.rx_addr.insert(self.rx.publish(&[writable(a)]), a);
        }
    }
}

/// The tenant engine, its guest driver and the peer, stepped together from this thread.
struct Bench {
    d: Driver,
    engine: Engine<MemwireNic>,
    peer: Interface<MemwireNic>,
    rings: LocalRings,
    vclock: VirtualClock,
    clock: Clock,
}

impl Bench {
    fn step(&mut self) {
        self.engine.step(&self.rings, &self.d.mem).expect("engine step");
        self.peer.poll(self.clock.now()).expect("peer poll");
        self.vclock.advance(STEP);
    }

    /// Steps until the call with `cookie` completes; its socket (hello: none) and, for hello,
    /// the guest's parameters.
    fn completion(&mut self, cookie: u64) -> (SocketId, Option<HelloInfo>) {
        let mut msgs = Vec::new();
        loop {
            self.step();
            self.d.messages(&mut msgs);
            for m in msgs.drain(..) {
                match m {
                    RxMessage::Complete { cookie: c, socket, result, .. } if c == cookie => {
                        result.expect("the call succeeds");
                        return (socket, None);
                    }
                    RxMessage::HelloDone { cookie: c, result, .. } if c == cookie => {
                        return (SocketId::NONE, Some(result.expect("hello accepted")));
                    }
                    _ => {}
                }
            }
        }
    }
}

fn main() {
    let mss = u16::try_from(env("ENGINE_COST_MSS", 1460)).expect("an MSS");
    let total = env("ENGINE_COST_BYTES", 32 << 20);
    let receive = match std::env::var("ENGINE_COST_DIRECTION").as_deref() {
        Err(_) | Ok("send") => false,
        Ok("receive") => true,
        Ok(other) => panic!("ENGINE_COST_DIRECTION is send or receive, not {other}"),
    };
    let mem =
        Arc::new(GuestMem::from_ranges(&[(GuestAddress(0), GUEST_MEMORY as usize)]).expect("guest memory"));
    let vclock = VirtualClock::new();
    let clock = Clock::Virtual(vclock.clone());
    let mut wire = LinkConfig::default();
    if env("ENGINE_COST_OFFLOAD", 0) != 0 {
        // The link fills and verifies checksums, as a PS225 port does: the tenant's stack then
        // never reads guest payload for a checksum.
        wire.caps.checksum = slimtcp::wire::ChecksumCapabilities::all();
    }
    let (a, b) = link(wire).expect("link");
    let guest = Interface::new(a, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), GUEST_IP, 24));
    let mut peer = Interface::new(b, InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 2]), PEER_IP, 24));
    let cfg = EngineConfig::with_limits(&guest, 1, SIZE, &TenantLimits::default());
    let engine = Engine::new(guest, clock.clone(), cfg);
    let tcp = TcpConfig { mss, ..peer.config().tcp.clone() };
    let listener = peer.tcp_listen_with(PORT, 4, Some(tcp)).expect("peer listen");

    let host = mem.get_host_address(GuestAddress(0)).expect("guest memory's start");
    // SAFETY: `mem` maps GUEST_MEMORY bytes at guest-physical 0 contiguously (one range) from
    // `host`, kept mapped by the clone of `mem` the region holds.
    let memory =
        unsafe { DmaRegion::new(host, 0, GUEST_MEMORY as usize, Arc::new(mem.clone()) as KeepAlive) };
    let d = Driver {
        mem: mem.clone(),
        rx: Ring::new(&memory, 0x1_0000),
        tx: Ring::new(&memory, 0x2_0000),
        memory,
        rx_addr: IdMap::default(),
        calls: 0,
        app: vec![0; RX_LEN as usize],
        returned: Vec::new(),
    };
    let rings = LocalRings::new(vec![d.rx.queue(), d.tx.queue()]);
    let mut bench = Bench { d, engine, peer, rings, vclock, clock };
    for i in 0..RX_BUFFERS {
        let a = RX_BASE + i * u64::from(RX_LEN);
        let head = bench.d.rx.publish(&[writable(a)]);
        bench.d.rx_addr.insert(head, a);
    }
    bench.d.call(&Request::new(1, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT }));
    let (_, info) = bench.completion(1);
    let info = info.expect("hello answered");
    bench.d.call(&Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp }));
    let (sock, _) = bench.completion(2);
    let remote = SocketAddrV4::new(PEER_IP, PORT);
    bench.d.call(&Request::new(3, sock, RequestBody::Connect { remote }));
    bench.completion(3);
    let conn = bench.peer.tcp_accept(listener).expect("peer accepted");

    if receive {
        guest_receives(&mut bench, sock, conn, total, &info);
        let stats = bench.peer.tcp_info(conn).expect("peer connection").stats;
        println!("mss {mss} bytes {total} segments {} (retransmits {})", stats.segs_out, stats.retransmits);
    } else {
        let (received, refused) = guest_sends(&mut bench, sock, conn, total);
        let stats = bench.peer.tcp_info(conn).expect("peer connection").stats;
        println!(
            "mss {mss} bytes {received} segments {} (duplicates {}), sends refused {refused}",
            stats.segs_in, stats.out_of_window
        );
    }
}

/// The guest sends `total` bytes (quiet 16 KiB sends) and the peer reads them; returns the
/// bytes the peer read and the sends refused for lack of credit.
fn guest_sends(bench: &mut Bench, sock: SocketId, conn: SocketHandle, total: usize) -> (usize, u32) {
    // Each slot: a send's fixed part at its start, its payload 4 KiB later.
    let slot_addr = |i: u64| SLOT_BASE + i * (u64::from(SEND) + 4096);
    for i in 0..SLOTS {
        bench.d.guest_bytes(slot_addr(i) + 4096, SEND as usize).fill(0x5a);
    }
    let mut free: Vec<u64> = (0..SLOTS).collect();
    let mut slot_of_head = IdMap::default();
    let (mut queued, mut received, mut refused, mut blocked) = (0usize, 0usize, 0u32, false);
    let mut buf = vec![0u8; 64 * 1024];
    let mut cookie = 10u64;
    let mut msgs = Vec::new();
    while received < total {
        while queued < total && !blocked {
            let Some(i) = free.pop() else { break };
            let req = Request {
                flags: RequestFlags::QUIET,
                ..Request::new(cookie, sock, RequestBody::Send { len: SEND })
            };
            cookie += 1;
            let n = req.emit(bench.d.guest_bytes(slot_addr(i), 64)).expect("emit");
            let head =
                bench.d.tx.publish(&[readable(slot_addr(i), n as u32), readable(slot_addr(i) + 4096, SEND)]);
            slot_of_head.insert(head, i);
            queued += SEND as usize;
        }
        bench.step();
        bench.d.messages(&mut msgs);
        for m in msgs.drain(..) {
            // Past the socket's send credit a send is refused (EAGAIN); like the guest library,
            // wait for the socket to be writable again.
            match m {
                RxMessage::Complete { result: Err(_), .. } => {
                    refused += 1;
                    queued -= SEND as usize;
                    blocked = true;
                }
                RxMessage::Writable { .. } => blocked = false,
                _ => {}
            }
        }
        while let Some((head, _)) = bench.d.tx.next_used() {
            if let Some(i) = slot_of_head.remove(&head) {
                free.push(i);
            }
        }
        while let Ok(n) = bench.peer.tcp_recv(conn, &mut buf) {
            if n == 0 {
                break;
            }
            received += n;
        }
    }
    (received, refused)
}

/// The peer sends `total` bytes and the guest receives them: each data message read out of
/// guest memory, its buffer posted again, the bytes credited back in batches of half the
/// receive buffer (the guest library's rule, `CREDIT_BATCH_DIVISOR` in `client/rings.rs`).
fn guest_receives(bench: &mut Bench, sock: SocketId, conn: SocketHandle, total: usize, info: &HelloInfo) {
    let chunk = vec![0xa5_u8; PEER_CHUNK];
    let batch = (info.rx_buffer / 2).max(1);
    let (mut offered, mut received, mut credit) = (0usize, 0usize, 0u32);
    let mut cookie = 10u64;
    let mut msgs = Vec::new();
    while received < total {
        while offered < total {
            let want = (total - offered).min(PEER_CHUNK);
            match bench.peer.tcp_send(conn, &chunk[..want]) {
                Ok(n) if n > 0 => offered += n,
                _ => break,
            }
        }
        bench.step();
        bench.d.messages(&mut msgs);
        for m in msgs.drain(..) {
            if let RxMessage::Data { len, .. } = m {
                received += len as usize;
                credit += len;
            }
        }
        if credit >= batch {
            let req = Request::new(cookie, sock, RequestBody::Credit { bytes: credit }).quiet();
            cookie += 1;
            bench.d.call(&req);
            credit = 0;
        }
    }
}
