//! A hostile guest at one tenant engine's receive, transmit and control queues. The input is a
//! small program for the guest: queue sizes (powers of two up to 256), then operations that
//! write descriptors anywhere in a guest memory of several regions with gaps between them
//! (descriptors that span a region boundary, point into a gap, or past 4 GiB), publish heads or
//! move the avail index far ahead or back, write well-formed requests and control commands,
//! post receive buffers, poke raw bytes over rings, requests and held send payloads between
//! engine steps (a guest that changes memory while the engine reads it), stop the transmit
//! queue as a VMM does, advance the virtual clock, and drive an echo peer on the other end of
//! the link (so connects succeed, sends are acknowledged and data comes back).
//!
//! Checked after every engine call: no panic; every used entry names a head that was in the
//! avail ring the device read (and is inside the queue); no queue returns more chains than it
//! took; receive lengths fit the buffer the device was given, transmit lengths are 0, control
//! lengths at most the 1-byte ack.
//!
//! Speed: the guest memory, the link, the tenant's interface (recovered with
//! [`Engine::into_interface`]) and the peer are kept across inputs. Memory is zeroed for each
//! input; the interfaces are kept only when the previous input left no socket and no frame
//! behind, so what one input does cannot change what the next one sees in any way that matters.
//! The bounds of the chains the device may write are computed once per descriptor and head for
//! each look at the rings ([`chain_bound`]): walked naively, one input could spend seconds there.
//! A step at the same time right after an idle one is skipped ([`Run::step`]).
#![no_main]

#[path = "descriptor_chain/chain_bound.rs"]
mod chain_bound;

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use slimtcp::iface::{Interface, InterfaceConfig, SocketHandle};
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::time::{Clock, VirtualClock};
use slimtcp::wire::EthernetAddress;
use slimtcp_abi::{Request, RequestBody, ShutdownHow, SockOpt, SocketId, SocketKind, Version};
use slimtcp_vhost::config::MAX_QUEUE_SIZE;
use slimtcp_vhost::engine::{Engine, EngineConfig};
use slimtcp_vhost::guest_mem::GuestMem;
use slimtcp_vhost::queues::LocalRings;
use virtio_queue::{Queue, QueueT};
use vm_memory::{Bytes, GuestAddress, GuestMemoryBackend};

use chain_bound::ChainBounds;

/// Guest memory: R0 (rings, receive buffers) and R1 are adjacent; a gap; R2; R3 across 4 GiB.
const REGIONS: [(u64, usize); 4] =
    [(0x0, 0x1_0000), (0x1_0000, 0x4000), (0x2_0000, 0x4000), (0xffff_e000, 0x4000)];
/// Rings in R0: queue q (0 receive, 1 transmit, 2 control) at `q * RING_STRIDE`.
const RING_STRIDE: u64 = 0x2000;
/// The end of the three queues' rings.
const RINGS_END: u64 = 3 * RING_STRIDE;
const AVAIL: u64 = 0x1000;
const USED: u64 = 0x1400;
/// The harness's receive buffers and hello.
const RX_BUFS: u64 = 0x6000;
const RX_BUF_LEN: u32 = 512;
const HELLO: u64 = 0xa000;
/// Where the fuzzer's addresses start from (the last one takes a raw 64-bit address).
const ANCHORS: [u64; 7] = [0x0, 0xa100, 0xff00, 0x1_0000, 0x1_3f00, 0x2_0000, 0xffff_f000];
const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;
const F_INDIRECT: u16 = 4;
const RX: usize = 0;
const TX: usize = 1;
const CTRL: usize = 2;
/// Operations per input, and peer connections kept.
const MAX_OPS: usize = 64;
const MAX_PEER_CONNS: usize = 8;

const TENANT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const TENANT_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const ECHO_PORT: u16 = 7;

/// A cursor over the fuzz input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.bytes(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.bytes(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    /// A guest address: an anchor plus an offset, or a raw address.
    fn addr(&mut self) -> Option<u64> {
        let sel = usize::from(self.u8()?);
        match ANCHORS.get(sel % 8) {
            Some(base) => Some(base.wrapping_add(u64::from(self.u16()?))),
            None => self.u64(),
        }
    }
}

/// What the harness knows of one queue: where it is, the guest's avail index, and for the
/// invariants, the heads inside the queue the device could have read (with an upper bound of
/// each chain's length; a head outside is never a valid used entry) and how many chains it took
/// and returned.
struct Track {
    base: u64,
    size: u16,
    avail_idx: u16,
    seen: Vec<Option<u64>>,
    bounds: ChainBounds,
    taken: i64,
    returned: i64,
}

impl Track {
    fn new(q: usize, size: u16) -> Self {
        Track {
            base: q as u64 * RING_STRIDE,
            size,
            avail_idx: 0,
            seen: vec![None; usize::from(size)],
            bounds: ChainBounds::default(),
            taken: 0,
            returned: 0,
        }
    }

    fn queue(&self, event_idx: bool) -> Queue {
        let mut q = Queue::new(self.size).expect("power-of-two queue size");
        let split = |a: u64| (Some(a as u32), Some((a >> 32) as u32));
        let (lo, hi) = split(self.base);
        q.set_desc_table_address(lo, hi);
        let (lo, hi) = split(self.base + AVAIL);
        q.set_avail_ring_address(lo, hi);
        let (lo, hi) = split(self.base + USED);
        q.set_used_ring_address(lo, hi);
        q.set_event_idx(event_idx);
        q.set_ready(true);
        q
    }

    fn write_desc(&self, mem: &GuestMem, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        let at = self.base + u64::from(i % self.size) * 16;
        mem.write_slice(&d, GuestAddress(at)).expect("descriptor table in R0");
    }

    /// Publishes `head` in the next avail slot and moves the avail index past it.
    fn publish(&mut self, mem: &GuestMem, head: u16) {
        let slot = u64::from(self.avail_idx % self.size);
        mem.write_obj(head, GuestAddress(self.base + AVAIL + 4 + 2 * slot)).expect("avail slot");
        self.set_avail_idx(mem, self.avail_idx.wrapping_add(1));
    }

    fn set_avail_idx(&mut self, mem: &GuestMem, idx: u16) {
        self.avail_idx = idx;
        mem.write_obj(idx, GuestAddress(self.base + AVAIL + 2)).expect("avail idx");
    }

    /// Records the heads of avail entries `from..from + n` as they are in memory now, and
    /// whether any of those chains lets the device write over the rings.
    fn see(&mut self, g: &Host, from: u16, n: u16, writes: bool) -> bool {
        let mut over_rings = false;
        self.bounds.start(self.base, self.size);
        for k in 0..n {
            let slot = u64::from(from.wrapping_add(k) % self.size);
            let head = g.u16(self.base + AVAIL + 4 + 2 * slot).unwrap_or(u16::MAX);
            let (bound, rings) = if writes { self.bounds.of(g, head) } else { (0, false) };
            over_rings |= rings;
            if let Some(e) = self.seen.get_mut(usize::from(head)) {
                *e = Some(e.unwrap_or(0).max(bound));
            }
        }
        over_rings
    }
}

/// Fast reads of guest memory for the checks (vm-memory's generic path dominated the run
/// time): the host mapping of each region.
struct Host([(u64, u64, *const u8); 4]);

impl Host {
    fn new(mem: &GuestMem) -> Self {
        Host(REGIONS.map(|(start, len)| {
            let host = mem.get_host_address(GuestAddress(start)).expect("region start");
            (start, len as u64, host.cast_const())
        }))
    }

    fn read<const N: usize>(&self, addr: u64) -> Option<[u8; N]> {
        let &(start, _, host) =
            // `checked_add`: an address near 2^64 must not wrap round into the region.
            self.0.iter().find(|&&(start, len, _)| {
                addr >= start && (addr - start).checked_add(N as u64).is_some_and(|end| end <= len)
            })?;
        let mut out = [0u8; N];
        // SAFETY: `addr..addr + N` lies inside the region mapped at `host` (checked above), the
        // mapping lives as long as the world's memory, and only this thread touches it.
        unsafe { std::ptr::copy_nonoverlapping(host.add((addr - start) as usize), out.as_mut_ptr(), N) };
        Some(out)
    }
    fn u16(&self, addr: u64) -> Option<u16> {
        self.read(addr).map(u16::from_le_bytes)
    }
    fn u32(&self, addr: u64) -> Option<u32> {
        self.read(addr).map(u32::from_le_bytes)
    }
    fn u64(&self, addr: u64) -> Option<u64> {
        self.read(addr).map(u64::from_le_bytes)
    }
}

/// The other end of the link: echoes TCP on port 7 and UDP datagrams to port 7, and lets the
/// fuzzer push data, close, reset, and connect to the guest.
struct Peer {
    iface: Interface<MemwireNic>,
    listener: SocketHandle,
    udp: SocketHandle,
    conns: Vec<SocketHandle>,
}

impl Peer {
    /// Polls, accepts and echoes; returns false only when nothing at all happened.
    fn serve(&mut self, now: slimtcp::time::Instant) -> bool {
        let mut busy = self.iface.poll(now).unwrap_or(true);
        while let Ok(h) = self.iface.tcp_accept(self.listener) {
            busy = true;
            if self.conns.len() < MAX_PEER_CONNS {
                self.conns.push(h);
            } else {
                let _ = self.iface.tcp_abort(h);
            }
        }
        let mut buf = [0u8; 2048];
        let iface = &mut self.iface;
        self.conns.retain(|&h| match iface.tcp_recv(h, &mut buf) {
            Ok(n) => {
                busy = true;
                let _ = iface.tcp_send(h, &buf[..n]);
                true
            }
            Err(slimtcp::api::SocketError::WouldBlock) => true,
            Err(_) => {
                busy = true;
                let _ = iface.tcp_close(h);
                false
            }
        });
        while let Ok((n, from)) = self.iface.udp_recv_from(self.udp, &mut buf) {
            busy = true;
            let _ = self.iface.udp_send_to(now, self.udp, &buf[..n], Some(from));
        }
        busy |= self.iface.poll(now).unwrap_or(true);
        busy
    }
}

/// What is kept across inputs.
struct World {
    mem: Arc<GuestMem>,
    clock: VirtualClock,
    host: Host,
    tenant: Option<Interface<MemwireNic>>,
    peer: Option<Peer>,
}

impl World {
    fn new() -> Self {
        let ranges: Vec<(GuestAddress, usize)> = REGIONS.iter().map(|&(a, n)| (GuestAddress(a), n)).collect();
        let mem = Arc::new(GuestMem::from_ranges(&ranges).expect("guest memory"));
        let host = Host::new(&mem);
        World { mem, host, clock: VirtualClock::new(), tenant: None, peer: None }
    }

    /// A fresh link, tenant interface and peer (when the last input left something behind).
    fn network(&mut self) -> (Interface<MemwireNic>, Peer) {
        if let (Some(t), Some(p)) = (self.tenant.take(), self.peer.take()) {
            return (t, p);
        }
        let (a, b) = link(LinkConfig::default()).expect("memwire link");
        let mut tcfg = InterfaceConfig::new(TENANT_MAC, TENANT_IP, 24);
        tcfg.static_neighbors.push((PEER_IP, PEER_MAC));
        let mut pcfg = InterfaceConfig::new(PEER_MAC, PEER_IP, 24);
        pcfg.static_neighbors.push((TENANT_IP, TENANT_MAC));
        let mut piface = Interface::new(b, pcfg);
        let listener = piface.tcp_listen(ECHO_PORT, 16).expect("peer listener");
        let udp = piface.udp_bind(ECHO_PORT).expect("peer udp");
        (Interface::new(a, tcfg), Peer { iface: piface, listener, udp, conns: Vec::new() })
    }

    fn zero_memory(&self) {
        for &(start, len) in &REGIONS {
            let host = self.mem.get_host_address(GuestAddress(start)).expect("region start");
            // SAFETY: `host` is the start of a mapped region of `len` bytes that this harness
            // owns; no slice or reference into it is alive between inputs.
            unsafe { std::ptr::write_bytes(host, 0, len) };
        }
    }
}

/// `DESCRIPTOR_CHAIN_TRACE=1`: print the engine's counters after each input (to check seeds).
static TRACE: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var_os("DESCRIPTOR_CHAIN_TRACE").is_some());

thread_local! {
    static WORLD: RefCell<World> = RefCell::new(World::new());
}

/// One input's guest and device.
struct Run<'w> {
    mem: &'w Arc<GuestMem>,
    clock: &'w VirtualClock,
    engine: Engine<MemwireNic>,
    peer: Peer,
    rings: LocalRings,
    tracks: Vec<Track>,
    cookie: u64,
    host: &'w Host,
    tainted: bool,
    /// The last step changed nothing (the engine had no work, no ring moved, the peer was
    /// quiet) and no other operation came since: a step at the same time would change nothing.
    idle: bool,
}

impl Run<'_> {
    /// Runs `f` on the engine, checking the used rings afterwards (see the module docs).
    ///
    /// A guest may post receive buffers or control acks over its own rings; the device then
    /// rightly writes messages over used entries and avail slots, and what the harness reads
    /// back no longer says what the device did. From the first step where a chain it could
    /// write reaches into the rings, only the counts are checked for the rest of the input.
    ///
    /// Returns whether any queue's avail or used index moved.
    fn device(&mut self, f: impl FnOnce(&mut Engine<MemwireNic>, &LocalRings, &Arc<GuestMem>)) -> bool {
        let mut moved = false;
        let g = self.host;
        let mut before = [(0u16, 0u16); 3];
        for (q, t) in self.tracks.iter_mut().enumerate() {
            let (next_avail, next_used) = self.rings.queue_mut(q, |q| (q.next_avail(), q.next_used()));
            let pending = g.u16(t.base + AVAIL + 2).unwrap_or(0).wrapping_sub(next_avail);
            if pending <= t.size {
                self.tainted |= t.see(g, next_avail, pending, q != TX);
            }
            before[q] = (next_avail, next_used);
        }
        f(&mut self.engine, &self.rings, self.mem);
        for (q, t) in self.tracks.iter_mut().enumerate() {
            let (next_avail, next_used) = self.rings.queue_mut(q, |q| (q.next_avail(), q.next_used()));
            let (avail0, used0) = before[q];
            moved |= (next_avail, next_used) != (avail0, used0);
            let took = next_avail.wrapping_sub(avail0) as i16;
            if took > 0 {
                // The entries the device consumed, as they are now.
                self.tainted |= t.see(g, avail0, took as u16, q != TX);
            }
            t.taken += i64::from(took);
            let added = next_used.wrapping_sub(used0);
            t.returned += i64::from(added);
            assert!(
                t.returned <= t.taken,
                "queue {q}: {} chains returned but only {} taken",
                t.returned,
                t.taken
            );
            if self.tainted {
                continue;
            }
            for k in added.saturating_sub(t.size)..added {
                let slot = u64::from(used0.wrapping_add(k) % t.size);
                let at = t.base + USED + 4 + 8 * slot;
                let id = g.u32(at).expect("used id");
                let len = g.u32(at + 4).expect("used len");
                assert!(id < u32::from(t.size), "queue {q}: used head {id} outside a queue of {}", t.size);
                let Some(bound) = t.seen.get(id as usize).copied().flatten() else {
                    panic!("queue {q}: the device returned head {id}, which was never available")
                };
                match q {
                    RX => assert!(
                        u64::from(len) <= bound,
                        "receive buffer {id}: {len} bytes in at most {bound}"
                    ),
                    TX => assert_eq!(len, 0, "transmit chain {id} returned with a length"),
                    _ => assert!(len <= 1, "control request {id} returned with {len} bytes"),
                }
            }
        }
        moved
    }

    /// Advances the clock, steps the engine and serves the peer. A step at the same time right
    /// after an idle one is skipped: the world is deterministic, so it would change nothing and
    /// reach no new code (runs of zero bytes in an input are such steps: about a fifth of all).
    fn step(&mut self, advance: Duration) {
        if advance.is_zero() && self.idle {
            return;
        }
        self.clock.advance(advance);
        let mut busy = true;
        let moved = self.device(|e, rings, mem| {
            // A failing link is an error result, never a panic.
            busy = e.step(rings, mem).unwrap_or(true);
        });
        let peer_busy = self.peer.serve(self.clock.now());
        self.idle = !busy && !moved && !peer_busy;
    }

    fn request(&mut self, input: &mut Input<'_>) -> Option<()> {
        let kind = input.u8()?;
        let sock = input.u8()?;
        let socket = if sock % 6 == 0 { SocketId::NONE } else { SocketId(u32::from(sock % 6)) };
        let port = |p: u16, sel: u8| -> u16 {
            match sel % 4 {
                0 => ECHO_PORT,
                1 => 49_152 + p % 8,
                _ => p,
            }
        };
        let remote = |sel: u8, p: u16| -> SocketAddrV4 {
            let ip = match sel / 4 % 4 {
                0 | 1 => PEER_IP,
                2 => Ipv4Addr::new(10, 0, 0, 9),  // on link, never answers ARP
                _ => Ipv4Addr::new(192, 0, 2, 1), // no route
            };
            SocketAddrV4::new(ip, port(p, sel))
        };
        let body = match kind % 12 {
            0 => RequestBody::Hello { version: Version { major: 1, minor: u16::from(input.u8()? % 3) } },
            1 => RequestBody::Socket {
                kind: if input.u8()? & 1 == 0 { SocketKind::Tcp } else { SocketKind::Udp },
            },
            2 => {
                let (sel, p) = (input.u8()?, input.u16()?);
                let ip = if sel & 0x10 != 0 { TENANT_IP } else { Ipv4Addr::UNSPECIFIED };
                RequestBody::Bind { local: SocketAddrV4::new(ip, if sel & 1 == 0 { 0 } else { p }) }
            }
            3 => RequestBody::Listen { backlog: u32::from(input.u8()?) },
            4 => {
                let (sel, p) = (input.u8()?, input.u16()?);
                RequestBody::Connect { remote: remote(sel, p) }
            }
            5 => RequestBody::Send { len: u32::from(input.u16()? % 4096) },
            6 => {
                let (sel, p, len) = (input.u8()?, input.u16()?, input.u16()?);
                RequestBody::SendTo { remote: remote(sel, p), len: u32::from(len % 2048) }
            }
            7 => RequestBody::Shutdown {
                how: [ShutdownHow::Read, ShutdownHow::Write, ShutdownHow::Both][usize::from(input.u8()? % 3)],
            },
            8 => RequestBody::Close { abort: input.u8()? & 1 == 1 },
            9 => {
                let option =
                    SockOpt::from_code(1 + u32::from(input.u8()? % 11)).expect("option codes 1..=11");
                RequestBody::SetSockOpt { option, value: input.u64()? }
            }
            10 => RequestBody::GetSockOpt {
                option: SockOpt::from_code(1 + u32::from(input.u8()? % 11)).expect("option codes 1..=11"),
            },
            _ => RequestBody::Credit { bytes: u32::from(input.u16()?) },
        };
        self.cookie += 1;
        let mut req = Request::new(self.cookie, socket, body);
        let layout = input.u8()?;
        if layout & 1 != 0 {
            req = req.quiet();
        }
        let plen = match body {
            RequestBody::Send { len } | RequestBody::SendTo { len, .. } => len,
            _ => 0,
        };
        let mut fixed = [0u8; 64];
        let n = req.emit(&mut fixed).ok()?;
        let (head, at) = (input.u16()?, input.addr()?);
        let _ = self.mem.write_slice(&fixed[..n], GuestAddress(at));
        let t = &self.tracks[TX];
        if plen == 0 {
            t.write_desc(self.mem, head, at, n as u32, 0, 0);
        } else {
            // The payload: after the fixed bytes, or elsewhere; in one or two descriptors; its
            // length a little off when the fuzzer says so.
            let pat = if layout & 2 != 0 { input.addr()? } else { at + n as u64 };
            let plen = if layout & 4 != 0 { plen.wrapping_add(u32::from(input.u8()?)) } else { plen };
            let bytes: Vec<u8> = (0..plen.min(4096)).map(|i| i as u8).collect();
            let _ = self.mem.write_slice(&bytes, GuestAddress(pat));
            let (d1, d2) = (head.wrapping_add(1), head.wrapping_add(2));
            t.write_desc(self.mem, head, at, n as u32, F_NEXT, d1);
            if layout & 8 != 0 {
                let half = plen / 2;
                t.write_desc(self.mem, d1, pat, half, F_NEXT, d2);
                t.write_desc(self.mem, d2, pat + u64::from(half), plen - half, 0, 0);
            } else {
                t.write_desc(self.mem, d1, pat, plen, 0, 0);
            }
        }
        let size = self.tracks[TX].size;
        self.tracks[TX].publish(self.mem, head % size);
        Some(())
    }

    fn op(&mut self, input: &mut Input<'_>) -> Option<()> {
        let kind = input.u8()? % 14;
        if kind > 1 {
            // Anything but a step may change what the next step sees.
            self.idle = false;
        }
        match kind {
            0 | 1 => {
                let advance = match input.u8()? % 5 {
                    0 => Duration::ZERO,
                    1 => Duration::from_millis(1),
                    2 => Duration::from_millis(50),
                    3 => Duration::from_secs(1),
                    _ => Duration::from_secs(10),
                };
                self.step(advance);
            }
            2 => {
                // Any descriptor of any queue.
                let q = usize::from(input.u8()?) % self.tracks.len();
                let (i, addr, len, flags, next) =
                    (input.u16()?, input.addr()?, input.u32()?, input.u8()?, input.u16()?);
                let len = if flags & 0x80 != 0 { len } else { len % 4096 };
                self.tracks[q].write_desc(self.mem, i, addr, len, u16::from(flags & 7), next);
            }
            3 => {
                let q = usize::from(input.u8()?) % self.tracks.len();
                let head = input.u16()?;
                let size = self.tracks[q].size;
                // Mostly inside the queue, sometimes not.
                let head = if head & 0x8000 != 0 { head } else { head % size };
                self.tracks[q].publish(self.mem, head);
            }
            4 => {
                // The avail index jumps: ahead, far ahead, back, or anywhere.
                let q = usize::from(input.u8()?) % self.tracks.len();
                let (how, v) = (input.u8()?, input.u16()?);
                let t = &mut self.tracks[q];
                let idx = match how % 4 {
                    0 => t.avail_idx.wrapping_add(v % (2 * t.size)),
                    1 => t.avail_idx.wrapping_add(t.size).wrapping_add(v % 4),
                    2 => t.avail_idx.wrapping_sub(1 + v % t.size),
                    _ => v,
                };
                t.set_avail_idx(self.mem, idx);
            }
            5 | 6 => self.request(input)?,
            7 => {
                // Raw bytes anywhere: descriptors, avail and used rings, requests, payloads.
                let at = input.addr()?;
                let n = usize::from(input.u8()? % 32) + 1;
                let bytes = input.bytes(n)?.to_vec();
                let _ = self.mem.write_slice(&bytes, GuestAddress(at));
            }
            8 => {
                // A receive buffer of one to three descriptors.
                let (head, n) = (input.u16()?, input.u8()?);
                let t = &self.tracks[RX];
                let count = u16::from(n % 3) + 1;
                for k in 0..count {
                    let (addr, len) = (input.addr()?, input.u16()?);
                    let flags = if k + 1 < count { F_WRITE | F_NEXT } else { F_WRITE };
                    let flags = if n & 0x80 != 0 { flags ^ F_WRITE } else { flags };
                    t.write_desc(
                        self.mem,
                        head.wrapping_add(k),
                        addr,
                        u32::from(len),
                        flags,
                        head.wrapping_add(k + 1),
                    );
                }
                let size = t.size;
                self.tracks[RX].publish(self.mem, head % size);
            }
            9 => {
                // A virtio-net control command: [R] class, command, data; [W] ack.
                let (head, class, cmd, dlen, at, ack) =
                    (input.u16()?, input.u8()?, input.u8()?, input.u8()? % 16, input.addr()?, input.addr()?);
                let mut cmdbuf = vec![class, cmd];
                cmdbuf.extend(input.bytes(usize::from(dlen))?);
                if self.tracks.len() <= CTRL {
                    return Some(());
                }
                let _ = self.mem.write_slice(&cmdbuf, GuestAddress(at));
                let t = &self.tracks[CTRL];
                let ack_len = if class & 0x80 != 0 { 0 } else { 1 };
                t.write_desc(self.mem, head, at, cmdbuf.len() as u32, F_NEXT, head.wrapping_add(1));
                t.write_desc(self.mem, head.wrapping_add(1), ack, ack_len, F_WRITE, 0);
                let size = t.size;
                self.tracks[CTRL].publish(self.mem, head % size);
            }
            10 => {
                // The VMM stops the transmit queue (GET_VRING_BASE); the engine gives back all.
                self.device(|e, rings, mem| {
                    e.stop_transmit_queue(0, rings, mem);
                });
            }
            11 => {
                let (k, n) = (usize::from(input.u8()?), usize::from(input.u16()? % 4096));
                if let Some(&h) = self.peer.conns.get(k % MAX_PEER_CONNS) {
                    let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
                    let _ = self.peer.iface.tcp_send(h, &data);
                }
            }
            12 => {
                let k = input.u8()?;
                if let Some(&h) = self.peer.conns.get(usize::from(k) % MAX_PEER_CONNS) {
                    let _ = if k & 0x80 != 0 {
                        self.peer.iface.tcp_abort(h)
                    } else {
                        self.peer.iface.tcp_shutdown(h)
                    };
                }
            }
            _ => {
                let (sel, p, n) = (input.u8()?, input.u16()?, input.u16()?);
                let port = if sel & 1 == 0 { 49_152 + p % 8 } else { p };
                let to = SocketAddrV4::new(TENANT_IP, port);
                let now = self.clock.now();
                if sel & 2 == 0 {
                    let data = vec![sel; usize::from(n % 1500)];
                    let _ = self.peer.iface.udp_send_to(now, self.peer.udp, &data, Some(to));
                } else if let Ok(h) = self.peer.iface.tcp_connect(now, to) {
                    // The guest's listener (if any) announces it; the peer then echoes on it.
                    if self.peer.conns.len() < MAX_PEER_CONNS {
                        self.peer.conns.push(h);
                    } else {
                        let _ = self.peer.iface.tcp_abort(h);
                    }
                }
            }
        }
        Some(())
    }
}

/// Queue size 2^(b % 9): 1 to 256.
fn queue_size(b: u8) -> u16 {
    1 << (b % 9)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let (Some(rx), Some(tx), Some(ctrl), Some(flags)) = (input.u8(), input.u8(), input.u8(), input.u8())
    else {
        return;
    };
    WORLD.with(|w| {
        let mut w = w.borrow_mut();
        w.zero_memory();
        let (iface, peer) = w.network();
        let w = &mut *w;
        let mem = &w.mem;
        let mut tracks = vec![Track::new(RX, queue_size(rx)), Track::new(TX, queue_size(tx))];
        let with_ctrl = flags & 1 != 0;
        if with_ctrl {
            tracks.push(Track::new(CTRL, queue_size(ctrl)));
        }
        let event_idx = flags & 2 != 0;
        let rings = LocalRings::new(tracks.iter().map(|t| t.queue(event_idx)).collect());
        // As the daemon does, or limits that match the transmit queue.
        let limits = if flags & 4 != 0 { queue_size(tx) } else { MAX_QUEUE_SIZE as u16 };
        let cfg = EngineConfig::new(&iface, 1, limits);
        let engine = Engine::new(iface, Clock::Virtual(w.clock.clone()), cfg);
        let mut run = Run {
            mem,
            clock: &w.clock,
            engine,
            peer,
            rings,
            tracks,
            cookie: 0,
            host: &w.host,
            tainted: false,
            idle: false,
        };

        // Receive buffers, and the harness's hello, so requests get past the version check.
        if flags & 8 == 0 {
            let t = &mut run.tracks[RX];
            for i in 0..t.size.min(8) {
                t.write_desc(mem, i, RX_BUFS + u64::from(i) * 512, RX_BUF_LEN, F_WRITE, 0);
                t.publish(mem, i);
            }
        }
        if flags & 16 == 0 {
            let mut hello = [0u8; 64];
            let n = Request::new(0, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT })
                .emit(&mut hello)
                .expect("hello fits");
            mem.write_slice(&hello[..n], GuestAddress(HELLO)).expect("hello");
            let t = &mut run.tracks[TX];
            let last = t.size - 1;
            t.write_desc(mem, last, HELLO, n as u32, 0, 0);
            t.publish(mem, last);
        }
        for _ in 0..MAX_OPS {
            if run.op(&mut input).is_none() {
                break;
            }
        }
        for _ in 0..4 {
            run.step(Duration::from_millis(1));
        }

        if *TRACE {
            eprintln!(
                "descriptor_chain: {:?}, peer connections {}",
                run.engine.counters(),
                run.peer.conns.len()
            );
        }
        // Hand the interface back; keep it and the peer only if nothing is left behind.
        let Run { engine, mut peer, .. } = run;
        let mut tenant = engine.into_interface();
        let clean = |tenant: &Interface<MemwireNic>, peer: &Peer| {
            tenant.socket_count() == 0
                && peer.conns.is_empty()
                && peer.iface.socket_count() == 2
                && tenant.nic().in_flight() == 0
                && tenant.nic().rx_pending() == 0
                && peer.iface.nic().rx_pending() == 0
        };
        // Up to 8 ms for the resets to cross; nothing can appear once all is clean.
        for _ in 0..8 {
            if clean(&tenant, &peer) {
                break;
            }
            w.clock.advance(Duration::from_millis(1));
            let _ = tenant.poll(w.clock.now());
            peer.serve(w.clock.now());
        }
        if clean(&tenant, &peer) {
            w.tenant = Some(tenant);
            w.peer = Some(peer);
        }
    });
});
