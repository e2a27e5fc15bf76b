//! The receive queue: in-order payload waiting for the application, kept in the very packet
//! buffers it arrived in (no copy on the stack's side), except small payloads.
//!
//! The window counts payload bytes, but a segment pins its whole NIC buffer (2 KiB on TAP, an
//! mbuf on DPDK): a peer sending 1-byte segments into a 256 KiB window would pin 0.5 GiB per
//! socket, and drain a DPDK mempool. A payload that fills less than half of its buffer is
//! therefore copied into compact chunks ([`COMPACT_CHUNK`] bytes, filled back to back; reused
//! from the budget's free chunks) and its buffer freed at once, so the memory a queue holds
//! stays within twice its window plus one chunk ([`RecvBuffer::memory`]). That memory is charged to the interface's receive budget
//! (`rx_memory.rs`): a payload whose storage would not fit is refused, and the window offers
//! at most half the budget's room.

use std::cell::RefCell;
use std::collections::VecDeque;

use slimtcp_api::spares::{release_when_empty, storage_for, LocalSpares};

use super::config::MAX_TCP_BUFFER;
use crate::nic::buf::move_all;
use crate::nic::PacketBuf;
pub use crate::rx_memory::COMPACT_CHUNK;
use crate::rx_memory::{RxBudget, RxCharge};

thread_local! {
    /// The storage of emptied queues, for the next queue to get a first segment (see
    /// [`RecvBuffer`]).
    static QUEUE_STORAGE: RefCell<LocalSpares<PacketBuf>> = const { RefCell::new(LocalSpares::new()) };
}

/// In-order received bytes, as a queue of packet buffers trimmed to their payload.
///
/// An empty queue holds no storage: emptied, it gives its storage to the thread's spares, and
/// its next first segment takes the spare given last (`slimtcp_api::spares`). With thousands
/// of connections a queue's own storage would be cold at every turn of its connection, and
/// each segment queued would wait for its line.
///
/// Its byte counts are kept in 32 bits (a connection's state stays small): they are bounded by
/// the capacity, at most [`MAX_TCP_BUFFER`] (the window never promises more than it holds,
/// but for the rounding of a scaled window); the methods take and give `usize`.
#[derive(Debug)]
pub struct RecvBuffer {
    segments: VecDeque<PacketBuf>,
    /// The last segment is a compact chunk of ours with room left (small payloads go there).
    compact_tail: bool,
    /// Buffer storage held (capacities, not payload), charged to the receive budget.
    memory: RxCharge,
    len: u32,
    /// Bytes handed out with [`pop_held`](Self::pop_held) and not yet released: they still
    /// occupy the window, so an application that holds buffers slows the sender down.
    held: u32,
    capacity: u32,
}

/// A byte count of a receive queue, kept in 32 bits: bounded by the queue's capacity, at most
/// [`MAX_TCP_BUFFER`], so nothing is lost (checked in debug builds).
fn narrow(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok(), "{n} exceeds a receive queue's 32-bit bound");
    n as u32
}

impl RecvBuffer {
    /// An empty queue that accepts at most `capacity` bytes ([`MAX_TCP_BUFFER`] when larger).
    pub fn new(capacity: usize) -> Self {
        RecvBuffer {
            segments: VecDeque::new(),
            compact_tail: false,
            memory: RxCharge::default(),
            len: 0,
            held: 0,
            capacity: narrow(capacity.min(MAX_TCP_BUFFER)),
        }
    }

    /// Queued bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Charges the queue's memory to `budget` from now on.
    pub fn bind(&mut self, budget: &RxBudget) {
        self.memory.bind(budget);
    }

    /// The budget the queue's memory is charged to, if any (its reorder queue's goes there too).
    pub fn budget(&self) -> Option<&RxBudget> {
        self.memory.budget()
    }

    /// Bytes that still fit (the receive window): the free part of the capacity, and at most
    /// half the room left in the receive budget (a byte may cost two in storage).
    pub fn free(&self) -> usize {
        (self.capacity.saturating_sub(self.len + self.held) as usize).min(self.memory.room() / 2)
    }

    /// Bytes handed out and still held by the application.
    pub fn held(&self) -> usize {
        self.held as usize
    }

    /// The configured capacity.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Bytes of buffer storage the queue holds (what it costs in memory, at least `len`).
    pub fn memory(&self) -> usize {
        self.memory.bytes()
    }

    /// Appends a payload (the caller has trimmed it to fit `free()`): its buffer is taken (left
    /// empty in `payload`), or its bytes are copied behind earlier small payloads. False when
    /// the storage it needs does not fit the receive budget: then `payload` is left as it was,
    /// and the refusal counted.
    #[inline]
    pub fn push(&mut self, payload: &mut PacketBuf) -> bool {
        if payload.is_empty() {
            return true;
        }
        if !self.memory.admit(self.cost(payload)) {
            return false;
        }
        self.push_admitted(payload);
        true
    }

    /// Appends a payload whose bytes were admitted already (they come from the reorder queue,
    /// whose storage was charged when they arrived), as [`push`](Self::push) does.
    #[inline]
    pub fn push_admitted(&mut self, payload: &mut PacketBuf) {
        if payload.is_empty() {
            return;
        }
        self.len += narrow(payload.len());
        if !Self::compacts(payload) {
            self.memory.add(payload.capacity());
            self.make_room();
            self.segments.push_back(std::mem::take(payload));
            self.compact_tail = false;
            return;
        }
        // A small payload in a big buffer: copy it behind the previous small ones, most often
        // into the current chunk in one piece.
        let bytes = payload.as_slice();
        if self.compact_tail {
            if let Some(dst) = self.segments.back_mut().and_then(|back| back.append(bytes.len())) {
                dst.copy_from_slice(bytes);
                return;
            }
        }
        self.copy_into_new_chunks(bytes);
    }

    /// Copies `bytes` behind the compacted ones, into new chunks where the current one is full;
    /// out of line, so that the usual cases of `push_admitted` inline into their callers without
    /// this loop's register saves.
    #[inline(never)]
    fn copy_into_new_chunks(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let tail = match self.segments.back_mut() {
                Some(back) if self.compact_tail && back.tailroom() > 0 => back,
                _ => {
                    let chunk = self.memory.compact_chunk();
                    self.memory.add(chunk.capacity());
                    self.make_room();
                    self.segments.push_back(chunk);
                    self.compact_tail = true;
                    match self.segments.back_mut() {
                        Some(back) => back,
                        None => return,
                    }
                }
            };
            let n = bytes.len().min(tail.tailroom());
            if let Some(dst) = tail.append(n) {
                dst.copy_from_slice(&bytes[..n]);
            }
            bytes = &bytes[n..];
        }
    }

    /// Before an entry is pushed: a full queue grows (as `push_back` would), and a queue with
    /// no storage takes the spare given last on this thread, if any. The test is the one
    /// `push_back` makes; the rest is out of line.
    #[inline]
    fn make_room(&mut self) {
        if self.segments.len() == self.segments.capacity() {
            self.grow();
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        storage_for(&QUEUE_STORAGE, &mut self.segments);
        self.segments.reserve(1);
    }

    /// An emptied queue gives its storage to the thread's spares (checked where a read or a
    /// release ends, not at every segment popped).
    #[inline]
    fn give_storage_when_empty(&mut self) {
        release_when_empty(&QUEUE_STORAGE, &mut self.segments);
    }

    /// True when `payload` fills less than half of its buffer (it is copied into chunks).
    fn compacts(payload: &PacketBuf) -> bool {
        payload.len() * 2 < payload.capacity()
    }

    /// The storage `push` would add for `payload`.
    fn cost(&self, payload: &PacketBuf) -> usize {
        if !Self::compacts(payload) {
            return payload.capacity();
        }
        let tailroom = match self.segments.back() {
            Some(back) if self.compact_tail => back.tailroom(),
            _ => 0,
        };
        payload.len().saturating_sub(tailroom).div_ceil(COMPACT_CHUNK) * COMPACT_CHUNK
    }

    /// Removes the front segment (fully consumed or handed out).
    fn pop_front(&mut self) -> Option<PacketBuf> {
        let seg = self.segments.pop_front()?;
        self.memory.sub(seg.capacity());
        if self.segments.is_empty() {
            self.compact_tail = false;
        }
        Some(seg)
    }

    /// Copies up to `dst.len()` bytes out, consuming them; returns how many.
    ///
    /// The buffers read whole leave the queue together after the copies (their storage given
    /// back at once, each dropped where it lies), not one move and one charge at a time.
    pub fn read(&mut self, dst: &mut [u8]) -> usize {
        let mut written = 0;
        let mut whole = 0;
        let mut storage = 0;
        let (older, newer) = self.segments.as_mut_slices();
        for seg in older.iter_mut().chain(newer) {
            let bytes = seg.as_slice();
            let Some(to) = dst.get_mut(written..written + bytes.len()) else {
                let n = dst.len() - written;
                dst[written..].copy_from_slice(&bytes[..n]);
                written += n;
                seg.advance(n);
                break;
            };
            to.copy_from_slice(bytes);
            written += bytes.len();
            storage += seg.capacity();
            whole += 1;
        }
        if whole > 0 {
            self.memory.sub(storage);
            self.segments.drain(..whole);
            if self.segments.is_empty() {
                self.compact_tail = false;
            }
        }
        self.give_storage_when_empty();
        self.len -= narrow(written);
        written
    }

    /// Hands the oldest payload buffer to the caller (zero-copy receive).
    pub fn pop_segment(&mut self) -> Option<PacketBuf> {
        let seg = self.take_front()?;
        self.give_storage_when_empty();
        Some(seg)
    }

    /// The oldest payload buffer, out of the queue and its byte count.
    #[inline(always)]
    fn take_front(&mut self) -> Option<PacketBuf> {
        let seg = self.pop_front()?;
        self.len -= narrow(seg.len());
        Some(seg)
    }

    /// Like [`pop_segment`](Self::pop_segment), but its bytes keep occupying the window until
    /// [`release`](Self::release)d.
    pub fn pop_held(&mut self) -> Option<PacketBuf> {
        let seg = self.take_front()?;
        self.held += narrow(seg.len());
        Some(seg)
    }

    /// Every queued buffer at once, appended to `out` oldest first, held like
    /// [`pop_held`](Self::pop_held)'s (the queue's accounting updated once, not per buffer).
    /// Returns their bytes.
    pub fn pop_all_held(&mut self, out: &mut Vec<PacketBuf>) -> usize {
        let bytes = self.len;
        let storage: usize = self.segments.iter().map(PacketBuf::capacity).sum();
        self.memory.sub(storage);
        // In bulk, not a buffer at a time: the queue's storage becomes `out` when that is empty
        // (`out`'s own, emptied, goes to the thread's spares), else it is appended in one move.
        let mut taken = Vec::from(std::mem::take(&mut self.segments));
        move_all(&mut taken, out);
        self.segments = VecDeque::from(taken);
        self.compact_tail = false;
        self.give_storage_when_empty();
        self.len = 0;
        self.held += bytes;
        bytes as usize
    }

    /// Gives back `n` bytes taken with [`pop_held`](Self::pop_held) (more than held is clamped).
    pub fn release(&mut self, n: usize) {
        self.held = narrow(self.held().saturating_sub(n));
        // Buffers handed out one by one (`pop_held`) are given back in batches: an emptied
        // queue's storage goes to the spares here.
        self.give_storage_when_empty();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A received frame as a NIC hands it over: a 2 KiB buffer holding `payload`.
    fn nic_frame(payload: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::with_headroom(2048, 54);
        b.append(payload.len()).expect("room").copy_from_slice(payload);
        b
    }

    /// A buffer exactly as large as its payload (kept as it is: no compaction).
    fn whole(payload: &[u8]) -> PacketBuf {
        let mut b = PacketBuf::with_headroom(payload.len(), 0);
        b.append(payload.len()).expect("room").copy_from_slice(payload);
        b
    }

    #[test]
    fn one_byte_segments_cost_chunks_not_nic_buffers() {
        let mut q = RecvBuffer::new(256 * 1024);
        for i in 0..100_000u32 {
            assert!(q.push(&mut nic_frame(&[i as u8])), "no budget");
        }
        assert_eq!(q.len(), 100_000);
        assert!(q.memory() <= 100_000 + COMPACT_CHUNK, "{} bytes held for 100,000 payload bytes", q.memory());
        let chunks = 100_000usize.div_ceil(COMPACT_CHUNK);
        assert_eq!(q.memory(), chunks * COMPACT_CHUNK, "every byte copied into chunks, back to back");
        let mut out = vec![0u8; 100_000];
        assert_eq!(q.read(&mut out), 100_000);
        assert!(out.iter().enumerate().all(|(i, b)| *b == i as u8), "bytes kept in order");
        assert_eq!(q.memory(), 0);
    }

    #[test]
    fn capacity_is_bounded_by_the_largest_tcp_buffer() {
        assert_eq!(RecvBuffer::new(usize::MAX).capacity(), MAX_TCP_BUFFER);
        assert_eq!(RecvBuffer::new(MAX_TCP_BUFFER).free(), MAX_TCP_BUFFER);
    }

    #[test]
    fn full_segments_stay_in_their_buffers_and_small_ones_between_them_keep_order() {
        let mut q = RecvBuffer::new(1 << 20);
        assert!(q.push(&mut nic_frame(&[1; 1460])), "no budget");
        assert!(q.push(&mut nic_frame(b"ab")), "no budget");
        assert!(q.push(&mut nic_frame(b"cd")), "no budget");
        assert!(q.push(&mut nic_frame(&[2; 1200])), "no budget");
        assert!(q.push(&mut nic_frame(b"e")), "no budget");
        assert_eq!(q.memory(), 2048 + COMPACT_CHUNK + 2048 + COMPACT_CHUNK);
        // Only the small payloads were copied: the big ones come back in their NIC buffers.
        let first = q.pop_segment().expect("segment");
        assert_eq!((first.as_slice(), first.capacity()), (&[1; 1460][..], 2048));
        let chunk = q.pop_segment().expect("chunk");
        assert_eq!((chunk.as_slice(), chunk.capacity()), (&b"abcd"[..], COMPACT_CHUNK));
        let second = q.pop_segment().expect("segment");
        assert_eq!((second.len(), second.capacity()), (1200, 2048));
        let chunk = q.pop_segment().expect("chunk");
        assert_eq!((chunk.as_slice(), chunk.capacity()), (&b"e"[..], COMPACT_CHUNK));
        assert_eq!((q.len(), q.memory()), (0, 0));
    }

    #[test]
    fn memory_stays_within_twice_the_window_plus_a_chunk() {
        let window = 64 * 1024;
        for size in [1usize, 100, 600, 1023, 1024, 1460] {
            let mut q = RecvBuffer::new(window);
            while q.free() >= size {
                assert!(q.push(&mut nic_frame(&vec![7; size])), "no budget");
            }
            assert!(q.memory() <= 2 * window + COMPACT_CHUNK, "{size} B payloads: {} bytes held", q.memory());
        }
    }

    #[test]
    fn held_segments_keep_the_window_closed_until_released() {
        let mut q = RecvBuffer::new(100);
        assert!(q.push(&mut whole(&[1; 30])), "no budget");
        assert!(q.push(&mut whole(&[2; 20])), "no budget");
        let seg = q.pop_held().expect("a segment is queued");
        assert_eq!(seg.len(), 30);
        assert_eq!((q.len(), q.held(), q.free()), (20, 30, 50));
        q.release(30);
        assert_eq!((q.held(), q.free()), (0, 80));
        q.release(1000);
        assert_eq!(q.free(), 80, "over-release is clamped");
    }

    /// Taking every buffer at once leaves the queue as taking them one by one does: the same
    /// buffers in the same order, the same bytes held, window and memory.
    #[test]
    fn taking_all_held_equals_taking_them_one_by_one() {
        let fill = |q: &mut RecvBuffer| {
            for (i, size) in [1460usize, 30, 20, 1460, 700, 5].into_iter().enumerate() {
                assert!(q.push(&mut nic_frame(&vec![i as u8; size])), "no budget");
            }
        };
        let (mut one, mut all) = (RecvBuffer::new(64 * 1024), RecvBuffer::new(64 * 1024));
        fill(&mut one);
        fill(&mut all);
        let mut singly = Vec::new();
        while let Some(seg) = one.pop_held() {
            singly.push(seg);
        }
        let mut at_once = vec![PacketBuf::from_slice(b"already there")];
        let bytes = all.pop_all_held(&mut at_once);
        assert_eq!(at_once.remove(0).as_slice(), b"already there", "appended, not replaced");
        let contents = |v: &[PacketBuf]| v.iter().map(|b| b.as_slice().to_vec()).collect::<Vec<_>>();
        assert_eq!(contents(&at_once), contents(&singly));
        assert_eq!(bytes, singly.iter().map(PacketBuf::len).sum::<usize>());
        let state = |q: &RecvBuffer| (q.len(), q.held(), q.free(), q.memory());
        assert_eq!(state(&all), state(&one));
        assert_eq!(all.memory(), 0, "the buffers left the queue's charge");
        // Both take small payloads again the same way (a fresh compact chunk).
        assert!(one.push(&mut nic_frame(&[9; 10])) && all.push(&mut nic_frame(&[9; 10])));
        assert_eq!(state(&all), state(&one));
        // Into an empty vector (it takes the queue's storage), after the queue's front moved
        // (its storage no longer starts at its first buffer), and again once refilled.
        let mut read = [0u8; 4];
        for q in [&mut one, &mut all] {
            fill(q);
            assert_eq!(q.read(&mut read), 4, "part of the first compact chunk");
            assert!(q.pop_held().is_some(), "the chunk's rest");
        }
        for _ in 0..2 {
            let mut singly = Vec::new();
            while let Some(seg) = one.pop_held() {
                singly.push(seg);
            }
            let mut at_once = Vec::new();
            let bytes = all.pop_all_held(&mut at_once);
            assert_eq!(contents(&at_once), contents(&singly));
            assert_eq!(bytes, singly.iter().map(PacketBuf::len).sum::<usize>());
            assert_eq!(state(&all), state(&one));
            fill(&mut one);
            fill(&mut all);
        }
    }

    #[test]
    fn reads_cross_buffers_without_repeating_data() {
        let mut q = RecvBuffer::new(100);
        assert!(q.push(&mut whole(b"abcd")), "no budget");
        assert!(q.push(&mut whole(b"efgh")), "no budget");
        assert_eq!(q.free(), 92);
        let mut out = [0u8; 4];
        // A read ending exactly on a buffer boundary must not return those bytes again.
        assert_eq!(q.read(&mut out), 4);
        assert_eq!(&out, b"abcd");
        let mut out = [0u8; 3];
        assert_eq!(q.read(&mut out), 3);
        assert_eq!(&out, b"efg");
        let mut out = [0u8; 10];
        assert_eq!(q.read(&mut out), 1);
        assert_eq!(out[0], b'h');
        assert_eq!(q.read(&mut out), 0);
        assert!(q.is_empty());
    }

    /// Reads of every size, over queues whose storage has wrapped around, against the stream
    /// pushed: each byte once and in order, and the storage charged is always that of the
    /// buffers still queued (whole ones given back, a partly read one kept).
    #[test]
    fn reads_of_any_size_return_the_stream_and_give_back_what_they_consumed() {
        let budget = RxBudget::new(1 << 24);
        let mut q = RecvBuffer::new(1 << 20);
        q.bind(&budget);
        let mut rng = crate::nic::fault::Rng::new(12);
        let (mut pushed, mut read) = (0u64, 0u64);
        let byte = |at: u64| (at % 251) as u8;
        for _ in 0..2_000 {
            for _ in 0..rng.gen_range(0..4) {
                let len = rng.gen_range(1..1500) as usize;
                let payload: Vec<u8> = (0..len as u64).map(|i| byte(pushed + i)).collect();
                let mut frame = if rng.gen_bool(0.8) { nic_frame(&payload) } else { whole(&payload) };
                assert!(q.push(&mut frame), "within the budget");
                pushed += len as u64;
            }
            let mut out = vec![0u8; rng.gen_range(0..6000) as usize];
            let n = q.read(&mut out);
            assert_eq!(n as u64, (pushed - read).min(out.len() as u64), "as much as asked or queued");
            assert!(out[..n].iter().enumerate().all(|(i, b)| *b == byte(read + i as u64)), "in order, once");
            read += n as u64;
            assert_eq!(q.len() as u64, pushed - read);
            let queued: usize = q.segments.iter().map(PacketBuf::capacity).sum();
            assert_eq!((q.memory(), budget.reading().used), (queued, queued), "storage of what is queued");
        }
        let mut rest = vec![0u8; q.len()];
        assert_eq!(q.read(&mut rest), rest.len());
        assert_eq!((q.memory(), budget.reading().used, q.segments.len()), (0, 0, 0));
    }

    #[test]
    fn zero_copy_pop_keeps_accounting() {
        let mut q = RecvBuffer::new(100);
        assert!(q.push(&mut whole(b"abcd")), "no budget");
        assert!(q.push(&mut whole(b"")), "no budget");
        assert!(q.push(&mut whole(b"ef")), "no budget");
        let first = q.pop_segment().expect("segment");
        assert_eq!(first.as_slice(), b"abcd");
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop_segment().expect("segment").as_slice(), b"ef");
        assert!(q.pop_segment().is_none());
    }

    #[test]
    fn the_budget_refuses_what_would_not_fit_and_narrows_the_window() {
        let budget = RxBudget::new(2 * 2048 + COMPACT_CHUNK);
        let mut q = RecvBuffer::new(256 * 1024);
        q.bind(&budget);
        assert_eq!(q.free(), budget.room() / 2, "the window offers half the room");
        assert!(q.push(&mut nic_frame(&[1; 1460])), "fits");
        assert!(q.push(&mut nic_frame(&[2; 1460])), "fits");
        let mut small = nic_frame(b"x");
        assert!(q.push(&mut small), "a compact chunk fits");
        assert_eq!(small.len(), 1, "copied: the frame keeps its bytes");
        assert!(q.push(&mut nic_frame(b"y")), "the chunk has room: costs nothing");
        assert_eq!(q.free(), 0);
        let mut refused = nic_frame(&[3; 1460]);
        assert!(!q.push(&mut refused), "no room for another buffer");
        assert_eq!(refused.len(), 1460, "a refused payload is left as it was");
        assert_eq!(budget.reading().refused, 1);
        assert_eq!(q.len(), 2 * 1460 + 2);
        let mut out = vec![0; 1460];
        assert_eq!(q.read(&mut out), 1460);
        assert_eq!(budget.reading().used, 2048 + COMPACT_CHUNK);
        assert!(q.push(&mut refused), "room again");
        assert_eq!((refused.len(), refused.capacity()), (0, 0), "taken: an empty buffer is left");
        drop(q);
        assert_eq!(budget.reading().used, 0, "a dropped queue gives its memory back");
    }

    #[test]
    fn an_emptied_queue_holds_no_storage_and_the_next_takes_the_spare() {
        let mut a = RecvBuffer::new(64 * 1024);
        let mut b = RecvBuffer::new(64 * 1024);
        for _ in 0..3 {
            assert!(a.push(&mut whole(&[1; 1400])));
        }
        assert!(a.segments.capacity() > 0);
        let storage = a.segments.as_slices().0.as_ptr();
        let mut out = Vec::new();
        assert_eq!(a.pop_all_held(&mut out), 3 * 1400);
        assert_eq!(a.segments.capacity(), 0, "emptied: its storage went to the spares");
        // `out` took the queue's storage, and `out`'s own (none) went nowhere; read out whole,
        // a queue gives its storage back too.
        assert!(b.push(&mut whole(&[2; 1400])));
        let mut dst = [0u8; 1400];
        assert_eq!(b.read(&mut dst), 1400);
        assert_eq!(b.segments.capacity(), 0);
        let spare = QUEUE_STORAGE.with(|s| s.borrow().len());
        assert!(spare >= 1, "the emptied storage is kept");
        // The next first segment of any queue takes the spare given last.
        let mut c = RecvBuffer::new(64 * 1024);
        assert!(c.push(&mut whole(&[3; 1400])));
        assert_eq!(QUEUE_STORAGE.with(|s| s.borrow().len()), spare - 1);
        assert_ne!(c.segments.as_slices().0.as_ptr(), storage, "`a`'s storage left with `out`");
        let mut dst = [0u8; 1400];
        assert_eq!(c.read(&mut dst), 1400);
        assert_eq!(dst, [3; 1400]);
        // A zero-copy pop gives it back once the last segment is out.
        assert!(c.push(&mut whole(&[4; 1400])));
        assert!(c.push(&mut whole(&[5; 1400])));
        assert!(c.pop_segment().is_some());
        assert!(c.segments.capacity() > 0, "a segment is left");
        assert!(c.pop_segment().is_some());
        assert_eq!(c.segments.capacity(), 0);
        // Buffers handed out one at a time and held give it back with their release.
        assert!(c.push(&mut whole(&[6; 1400])));
        assert!(c.pop_held().is_some());
        assert!(c.segments.capacity() > 0, "checked at the release, not at every pop");
        c.release(1400);
        assert_eq!(c.segments.capacity(), 0);
        drop(out);
    }
}
