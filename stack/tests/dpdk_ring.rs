//! DPDK over `net_ring`: two ports wired back to back in one process (one EAL for this binary).
//!
//! Specification:
//! - frames sent on one port arrive intact on the other, zero-copy (the receiver's mbuf data is
//!   the sender's);
//! - a link that cannot take more gives the frames back to the caller, in order, without copying
//!   a heap-backed frame more than once;
//! - frames whose payload lies in registered external memory (a memfd region, as guest memory is)
//!   arrive with the payload still in that region; the owner learns that the payload may be
//!   reused only once the receiver has freed the frame; no byte is copied;
//! - a processed burst goes back to its pools at once (`Nic::release`: one bulk free), whatever
//!   the stack did to its frames; a frame taken out of the burst stays its holder's;
//! - a thread that polls a queue is a DPDK lcore from its first call (the pools' per-lcore cache)
//!   and gives its id back when it ends, so workers may come and go without running out of ids.

mod dpdk_common;

use dpdk_common::*;
use slimtcp::nic::dpdk::{create_ring_pair, lcore, DpdkNic, Eal, ExtMemRegion, PortConfig};
use slimtcp::nic::{ExternalFrame, ExternalPayload, Nic, PacketBuf};
use slimtcp::time::Instant;

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xa];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xb];

fn eal() -> &'static Eal {
    Eal::init(eal_args(&[])).expect("EAL starts")
}

/// Two NICs, `a` and `b`, back to back over a pair of rings of `ring_size` frames.
fn wired_pair(tag: &str, ring_size: u32) -> (DpdkNic, DpdkNic) {
    let eal = eal();
    let (na, nb) = create_ring_pair(eal, &format!("slimt_{tag}_a"), &format!("slimt_{tag}_b"), ring_size)
        .expect("ring pair");
    assert_eq!(na, format!("net_ring_slimt_{tag}_a"));
    let a = DpdkNic::open(eal, &PortConfig::new(&na)).expect("port a").pop().expect("one queue");
    let b = DpdkNic::open(eal, &PortConfig::new(&nb)).expect("port b").pop().expect("one queue");
    (a, b)
}

fn fill_frame(buf: &mut PacketBuf, seq: u32, len: usize) {
    let data = buf.append(len).expect("room for the frame");
    data[0..6].copy_from_slice(&MAC_B);
    data[6..12].copy_from_slice(&MAC_A);
    data[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental ethertype
    data[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in data[18..].iter_mut().enumerate() {
        *b = (seq as usize + i) as u8;
    }
}

fn receive_all(nic: &mut DpdkNic, want: usize) -> Vec<PacketBuf> {
    let mut got = Vec::new();
    // The rings are in-process: everything sent is already there; a bounded number of polls.
    for _ in 0..want + 16 {
        if got.len() >= want {
            break;
        }
        nic.receive(Instant::ZERO, &mut got, 32).expect("receive");
    }
    got
}

#[test]
fn frames_cross_the_link_intact_and_without_copy() {
    let (mut a, mut b) = wired_pair("intact", 1024);
    assert_eq!(a.port_info().driver, "net_ring");
    let pool_in_use = a.mempool().in_use();
    let lens = [60usize, 64, 128, 1000, 1514];
    let mut frames = Vec::new();
    let mut sent_ptrs = Vec::new();
    for seq in 0..200u32 {
        let mut buf = a.alloc_tx().expect("mbuf");
        fill_frame(&mut buf, seq, lens[seq as usize % lens.len()]);
        sent_ptrs.push(buf.as_slice().as_ptr());
        frames.push(buf);
    }
    let mut sent = 0;
    while !frames.is_empty() {
        sent += a.transmit(Instant::ZERO, &mut frames).expect("transmit");
        // b drains as we go, so the 1024-frame ring never fills.
    }
    assert_eq!(sent, 200);
    let got = receive_all(&mut b, 200);
    assert_eq!(got.len(), 200);
    for (seq, buf) in got.iter().enumerate() {
        let mut expect = PacketBuf::new_tx();
        fill_frame(&mut expect, seq as u32, lens[seq % lens.len()]);
        assert_eq!(buf.as_slice(), expect.as_slice(), "frame {seq} intact");
        assert_eq!(buf.as_slice().as_ptr(), sent_ptrs[seq], "frame {seq}: receiver sees the sender's mbuf");
        assert_eq!(buf.rx_checksum_ok, None, "net_ring does not verify checksums");
    }
    assert_eq!(a.copied_bytes() + b.copied_bytes(), 0);

    // The burst goes back as the stack gives it back, after what the stack does to its frames:
    // headers stripped, payloads cut, one payload taken out and kept, one frame replaced by a
    // heap-backed one.
    let mut got = got;
    assert_eq!(a.mempool().in_use(), pool_in_use + 200);
    for frame in &mut got {
        frame.advance(14);
    }
    got[3].truncate(2);
    let kept = std::mem::take(&mut got[7]);
    got[9] = PacketBuf::from_slice(&[1; 60]);
    b.release(&mut got);
    assert!(got.is_empty(), "the burst is emptied");
    assert_eq!(a.mempool().in_use(), pool_in_use + 1, "every mbuf is back but the kept one");
    assert_eq!(seq_of_payload(&kept), 7, "the kept frame is intact");
    drop(kept);
    assert_eq!(a.mempool().in_use(), pool_in_use, "every mbuf went back to the pool");

    // A heap-backed frame is accepted too, by copying (counted).
    let mut heap = vec![PacketBuf::from_slice(&[0xab; 60])];
    assert_eq!(a.transmit(Instant::ZERO, &mut heap).expect("transmit"), 1);
    assert_eq!(a.stats().tx_copied_bytes, 60);
    let got = receive_all(&mut b, 1);
    assert_eq!(got[0].as_slice(), &[0xab; 60]);
}

/// The sequence number `fill_frame` wrote, of a frame whose Ethernet header was stripped.
fn seq_of_payload(frame: &PacketBuf) -> u32 {
    u32::from_be_bytes(frame.as_slice()[..4].try_into().expect("4 bytes"))
}

fn seq_of(frame: &PacketBuf) -> u32 {
    u32::from_be_bytes(frame.as_slice()[14..18].try_into().expect("4 bytes"))
}

/// Sends frames 0..100 from `a` over a ring of 64 (it holds 63): the first 63 go, the rest stay
/// with the caller in order (`while_full` sees `a` then) and go once `b` drained the ring.
/// Returns the 37 frames `b` got last.
fn through_a_full_ring(
    a: &mut DpdkNic,
    b: &mut DpdkNic,
    mut frames: Vec<PacketBuf>,
    while_full: impl FnOnce(&DpdkNic),
) -> Vec<PacketBuf> {
    let mut sent = 0;
    for _ in 0..10 {
        sent += a.transmit(Instant::ZERO, &mut frames).expect("transmit");
    }
    assert_eq!(sent, 63, "a ring of 64 holds 63 frames");
    assert_eq!(frames.len(), 100 - 63, "the rest stays with the caller");
    assert_eq!(seq_of(&frames[0]), 63, "in order, starting with the first one not sent");
    while_full(a);
    assert_eq!(receive_all(b, 63).len(), 63);
    while !frames.is_empty() {
        a.transmit(Instant::ZERO, &mut frames).expect("transmit");
    }
    let got = receive_all(b, 37);
    assert_eq!(got.iter().map(seq_of).collect::<Vec<_>>(), (63..100).collect::<Vec<_>>());
    got
}

#[test]
fn a_full_link_gives_frames_back() {
    let (mut a, mut b) = wired_pair("full", 64);
    let frames: Vec<PacketBuf> = (0..100u32)
        .map(|seq| {
            let mut buf = a.alloc_tx().expect("mbuf");
            fill_frame(&mut buf, seq, 64);
            buf
        })
        .collect();
    through_a_full_ring(&mut a, &mut b, frames, |_| {});
    assert_eq!(a.stats().tx_copied_bytes, 0, "mbufs from alloc_tx are sent as they are");
}

#[test]
fn heap_frames_on_a_full_link_are_copied_once_and_kept_in_order() {
    let (mut a, mut b) = wired_pair("fullheap", 64);
    let frames: Vec<PacketBuf> = (0..100u32)
        .map(|seq| {
            let mut buf = PacketBuf::new_tx();
            fill_frame(&mut buf, seq, 80);
            buf
        })
        .collect();
    let mut copied_while_full = 0;
    let got = through_a_full_ring(&mut a, &mut b, frames, |a| copied_while_full = a.stats().tx_copied_bytes);
    for (frame, seq) in got.iter().zip(63u32..) {
        let mut want = PacketBuf::new_tx();
        fill_frame(&mut want, seq, 80);
        assert_eq!(frame.as_slice(), want.as_slice(), "frame {seq} intact");
    }
    // Each heap frame was copied into an mbuf once, however often the full ring refused it.
    assert!(copied_while_full <= 100 * 80, "{copied_while_full}");
    assert_eq!(a.stats().tx_copied_bytes, 100 * 80);
    assert_eq!(a.stats().tx_frames, 100);
}

#[test]
fn external_payloads_are_sent_from_registered_memory() {
    // Declared first, dropped last: the mapping outlives the region and the NICs.
    let mut guest = MemfdRegion::new(2 << 20);
    let (mut a, mut b) = wired_pair("ext", 1024);
    // SAFETY: the mapping outlives the region and its clones (see above); payloads are left
    // untouched until their completions are polled.
    let region =
        unsafe { ExtMemRegion::register(eal(), guest.as_mut_ptr(), guest.len(), 4096) }.expect("register");
    a.attach_region(&region).expect("attach");

    const FRAMES: usize = 64;
    const PAYLOAD: usize = 1400;
    for (i, chunk) in guest.bytes_mut().chunks_mut(2048).take(FRAMES).enumerate() {
        for (j, byte) in chunk[..PAYLOAD].iter_mut().enumerate() {
            *byte = (i * 7 + j) as u8;
        }
    }
    let base = guest.as_mut_ptr();
    let mut frames = Vec::new();
    for i in 0..FRAMES {
        let mut headers = a.alloc_tx().expect("mbuf");
        // SAFETY: base + i*2048 .. + PAYLOAD is inside the 2 MiB region.
        let payload_ptr = unsafe { base.add(i * 2048) };
        // SAFETY: the memory stays mapped and unmodified until token `i` is polled back below.
        let payload_bytes = unsafe { std::slice::from_raw_parts(payload_ptr, PAYLOAD) };
        write_udp_headers(
            headers.append(UDP_HEADERS).expect("room"),
            MAC_B,
            MAC_A,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            1000,
            2000,
            payload_bytes,
            Checksums::Software,
        );
        // SAFETY: as above.
        let payload = unsafe { ExternalPayload::new(payload_ptr, PAYLOAD, i as u64) }.expect("non-null");
        frames.push(ExternalFrame { headers, payload });
    }
    let mut sent = 0;
    while !frames.is_empty() {
        sent += a.transmit_external(Instant::ZERO, &mut frames).expect("transmit_external");
    }
    assert_eq!(sent, FRAMES);
    assert_eq!(a.external_in_flight(), FRAMES);

    let mut got = Vec::new();
    while got.len() < FRAMES {
        b.receive_mbufs(&mut got, 32);
    }
    for (i, m) in got.iter().enumerate() {
        let segs: Vec<&[u8]> = m.segments().collect();
        assert_eq!(segs.len(), 2, "headers + payload segment");
        assert_eq!(segs[0].len(), UDP_HEADERS);
        assert_eq!(segs[1].len(), PAYLOAD);
        assert!(region.contains(segs[1].as_ptr(), PAYLOAD), "frame {i}: payload still in guest memory");
        // SAFETY: in bounds, as above.
        assert_eq!(segs[1].as_ptr(), unsafe { base.add(i * 2048) }.cast_const());
        assert!(
            segs[1].iter().enumerate().all(|(j, &byte)| byte == (i * 7 + j) as u8),
            "frame {i} payload intact"
        );
    }

    // The receiver still holds every frame: nothing may be reused yet.
    let mut done = Vec::new();
    assert_eq!(a.poll_tx_completions(&mut done), 0);
    // Free half, then the rest: completions follow the receiver's frees.
    let rest = got.split_off(FRAMES / 2);
    drop(got);
    assert_eq!(a.poll_tx_completions(&mut done), FRAMES / 2);
    let mut tokens = done.clone();
    tokens.sort_unstable();
    assert_eq!(tokens, (0..(FRAMES / 2) as u64).collect::<Vec<_>>());
    drop(rest);
    assert_eq!(a.poll_tx_completions(&mut done), FRAMES / 2);
    assert_eq!(a.external_in_flight(), 0);
    assert_eq!(a.copied_bytes(), 0, "not a byte copied by the sender");
    assert_eq!(b.copied_bytes(), 0, "nor by the receiver");
    assert_eq!(a.stats().tx_external_bytes, (FRAMES * PAYLOAD) as u64);

    // Through the stack's receive path, a chained frame is made contiguous (and counted).
    let mut headers = a.alloc_tx().expect("mbuf");
    headers.append(UDP_HEADERS).expect("room").fill(0x11);
    // SAFETY: inside the region, left alone until token 1000 completes.
    let payload = unsafe { ExternalPayload::new(base, 100, 1000) }.expect("non-null");
    let mut one = vec![ExternalFrame { headers, payload }];
    assert_eq!(a.transmit_external(Instant::ZERO, &mut one).expect("send"), 1);
    let got = receive_all(&mut b, 1);
    assert_eq!(got[0].len(), UDP_HEADERS + 100);
    assert_eq!(&got[0].as_slice()[..UDP_HEADERS], &[0x11; UDP_HEADERS]);
    assert_eq!(b.stats().rx_copied_bytes, (UDP_HEADERS + 100) as u64);
    // The original chain was freed by the copy: the payload is already released.
    done.clear();
    assert_eq!(a.poll_tx_completions(&mut done), 1);
    assert_eq!(done, [1000]);

    // A payload outside any registered region is copied (counted), completing once sent.
    let outside = vec![0x5au8; 300];
    let mut headers = a.alloc_tx().expect("mbuf");
    headers.append(UDP_HEADERS).expect("room").fill(0x22);
    // SAFETY: `outside` outlives the transmit and the completion below.
    let payload = unsafe { ExternalPayload::new(outside.as_ptr(), outside.len(), 2000) }.expect("non-null");
    let mut one = vec![ExternalFrame { headers, payload }];
    assert_eq!(a.transmit_external(Instant::ZERO, &mut one).expect("send"), 1);
    assert_eq!(a.stats().tx_copied_bytes, 300);
    done.clear();
    assert_eq!(a.poll_tx_completions(&mut done), 1);
    assert_eq!(done, [2000]);
    let got = receive_all(&mut b, 1);
    assert_eq!(&got[0].as_slice()[UDP_HEADERS..], &outside[..]);
}

#[test]
fn mbuf_backed_buffers_behave_like_heap_buffers() {
    let (mut a, _b) = wired_pair("semantics", 64);
    let mut m = a.alloc_tx().expect("mbuf");
    let mut h = PacketBuf::new_tx();
    assert_eq!((m.headroom(), m.len()), (h.headroom(), h.len()), "same default headroom (128)");
    for b in [&mut m, &mut h] {
        b.append(4).expect("room").copy_from_slice(b"data");
        b.prepend(2).expect("headroom").copy_from_slice(b"hd");
        assert_eq!(b.as_slice(), b"hddata");
        assert!(b.prepend(127).is_none());
        assert!(b.append(b.tailroom() + 1).is_none());
        assert!(b.advance(2));
        assert!(!b.advance(5));
        b.truncate(2);
        assert_eq!(b.as_slice(), b"da");
        b.as_mut_slice()[0] = b'D';
        b.rx_checksum_ok = Some(true);
    }
    assert_eq!(m.as_slice(), h.as_slice());
    assert_eq!(m.capacity(), 2176, "an mbuf's whole buffer (2048 + 128 headroom)");
    // A clone is an independent heap copy.
    let mut c = m.clone();
    assert_eq!(c.as_slice(), m.as_slice());
    assert_ne!(c.as_slice().as_ptr(), m.as_slice().as_ptr());
    c.as_mut_slice()[1] = b'A';
    assert_eq!(m.as_slice(), b"Da");
    for b in [&mut m, &mut h] {
        b.reset(8);
        assert!(b.is_empty());
        assert_eq!(b.headroom(), 8);
        assert_eq!(b.rx_checksum_ok, None);
    }
}

/// The two-core runtime moves buffers and the NIC to a worker thread: an mbuf-backed buffer freed
/// on another (non-EAL, unregistered) thread goes back to its pool, and a queue pair driven from a
/// thread other than the one that opened it sends and receives; each thread that polls is an
/// lcore while it runs.
#[test]
fn buffers_and_nics_move_to_other_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<PacketBuf>();
    assert_send::<DpdkNic>();
    let (mut a, mut b) = wired_pair("threads", 64);
    let pool = a.mempool();
    let in_use = pool.in_use();
    let bufs: Vec<PacketBuf> = (0..10).map(|_| a.alloc_tx().expect("mbuf")).collect();
    assert_eq!(pool.in_use(), in_use + 10);
    std::thread::spawn(move || drop(bufs)).join().expect("drop on another thread");
    assert_eq!(pool.in_use(), in_use, "freed from another thread, back in the pool");

    let worker = std::thread::spawn(move || {
        let mut frame = a.alloc_tx().expect("mbuf");
        fill_frame(&mut frame, 77, 100);
        let mut frames = vec![frame];
        a.transmit(Instant::ZERO, &mut frames).expect("transmit");
        assert!(frames.is_empty(), "the ring takes the frame");
        a
    });
    let mut a = worker.join().expect("worker thread");
    let got = receive_all(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(u32::from_be_bytes(got[0].as_slice()[14..18].try_into().expect("4 bytes")), 77);

    // More polling threads one after the other than DPDK has lcore ids (RTE_MAX_LCORE, 128):
    // each is an lcore from its first call and gives the id back at its end.
    for thread in 0..300 {
        a = std::thread::spawn(move || {
            assert_eq!(lcore::current(), None, "thread {thread}: unknown to DPDK before its first call");
            drop(a.alloc_tx().expect("mbuf"));
            assert!(lcore::current().is_some(), "thread {thread}: an lcore after its first call");
            a
        })
        .join()
        .expect("polling thread");
    }
}

/// Memory given with `Nic::attach_memory` (how the backend hands over guest memory): payloads
/// in it go out by reference; after `detach_memory` the region stays registered (and mapped)
/// while a payload from it is in flight, so registering the same range again is refused until
/// that payload completes, and then works (a reconnecting VMM may map its memory there again).
#[test]
fn attached_memory_lives_until_its_last_payload_completes() {
    use slimtcp::nic::ExternalMemory;
    use std::sync::{Arc, Weak};

    let (mut a, mut b) = wired_pair("attach", 256);
    let mut guest = MemfdRegion::new(1 << 20);
    guest.bytes_mut()[..500].fill(0x77);
    let base = guest.as_mut_ptr();
    let len = guest.len();
    let owner = Arc::new(guest);
    let watch: Weak<MemfdRegion> = Arc::downgrade(&owner);
    let attach = |nic: &mut DpdkNic, owner: Arc<MemfdRegion>| {
        // SAFETY: `owner` is the mapping of base..base+len and unmaps it only when dropped.
        let memory = unsafe { ExternalMemory::new(base, len, 4096, owner) }.expect("non-empty");
        nic.attach_memory(&memory)
    };
    attach(&mut a, Arc::clone(&owner)).expect("attach");

    let send = |a: &mut DpdkNic, token: u64| {
        let mut headers = a.alloc_tx().expect("mbuf");
        headers.append(UDP_HEADERS).expect("room").fill(0x33);
        // SAFETY: inside the attached region, which the NIC keeps mapped until completion.
        let payload = unsafe { ExternalPayload::new(base, 500, token) }.expect("non-null");
        let mut one = vec![ExternalFrame { headers, payload }];
        assert_eq!(a.transmit_external(Instant::ZERO, &mut one).expect("send"), 1);
    };
    send(&mut a, 1);
    assert_eq!(a.external_copied_bytes(), 0, "sent from attached memory by reference");
    assert_eq!(a.stats().tx_external_bytes, 500);

    // Detach with the frame still on the link (the receiver has not taken it).
    a.detach_memory(base);
    drop(owner);
    assert!(watch.upgrade().is_some(), "the NIC keeps the memory mapped while a payload is in flight");
    let refused = attach(&mut b, watch.upgrade().expect("still alive"));
    assert!(refused.is_err(), "the range is still registered: {refused:?}");

    // A payload sent after the detach is copied (the region is no longer used for new frames).
    let copy = [0x44u8; 200];
    let mut headers = a.alloc_tx().expect("mbuf");
    headers.append(UDP_HEADERS).expect("room").fill(0x55);
    // SAFETY: `copy` outlives the transmit and its completion below.
    let payload = unsafe { ExternalPayload::new(copy.as_ptr(), copy.len(), 2) }.expect("non-null");
    assert_eq!(
        a.transmit_external(Instant::ZERO, &mut vec![ExternalFrame { headers, payload }]).expect("send"),
        1
    );
    assert_eq!(a.external_copied_bytes(), 200);

    // The receiver frees the frames: the completion releases the registration and the mapping.
    let got = receive_all(&mut b, 2);
    assert_eq!(got.len(), 2);
    assert_eq!(&got[0].as_slice()[UDP_HEADERS..], &[0x77; 500][..]);
    drop(got);
    let mut done = Vec::new();
    assert_eq!(a.poll_tx_completions(&mut done), 2);
    assert!(watch.upgrade().is_none(), "registration ended and memory unmapped after the completion");

    // The same address range can be registered again once it is mapped again (fresh memory).
    let fresh = Arc::new(MemfdRegion::new(1 << 20));
    let fresh_base = fresh.as_mut_ptr();
    // SAFETY: `fresh` owns the mapping.
    let memory = unsafe { ExternalMemory::new(fresh_base, 1 << 20, 4096, fresh) }.expect("non-empty");
    a.attach_memory(&memory).expect("a new mapping registers");
}
