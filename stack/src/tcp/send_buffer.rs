//! The send queue: bytes the application handed over, from the first unacknowledged byte on.
//!
//! Data arrives two ways: copied (`push_copy`, into stack-owned chunks) or loaned
//! (`push_loaned`, zero-copy: the stack holds the application's buffer until every byte of it is
//! acknowledged, then hands it back through `take_completed`). Segments are cut at any byte offset
//! and may span chunks, so the MSS never depends on how the application wrote; only a loaned
//! buffer sent by reference ([`TxPayload::external_addr`]) has its edges respected, so that each
//! segment's payload is one piece of it. Loaned bytes are read only through the payload's own
//! copies (guest memory is no slice: see [`super::tx_payload`]).
//!
//! A loaned buffer sent by reference is also referenced by the NIC transmissions of its bytes
//! (first sends and retransmissions) until the NIC reports them complete: each loan counts its
//! transmissions in flight, and is handed back only once every byte is acknowledged AND that
//! count is zero.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use slimtcp_api::spares::{release_when_empty, storage_for, LocalSpares};

use super::config::MAX_TCP_BUFFER;
use super::tx_payload::{copy_all, payload_sum, TxPayload};
use crate::wire::checksum;

/// Size of the chunks copied data is gathered into.
const COPY_CHUNK: usize = 16 * 1024;
/// Copy chunks kept for reuse after being acknowledged.
const SPARE_CHUNKS: usize = 4;

/// Identifies a loaned buffer among all of the process's send buffers (never reused).
pub type LoanId = u64;

static NEXT_LOAN: AtomicU64 = AtomicU64::new(1);

/// A loaned buffer held by the stack.
#[derive(Debug)]
pub struct Loan {
    payload: Box<dyn TxPayload>,
    /// `payload.len()`, which never changes: read on every segment, without a dynamic call.
    len: u32,
    id: LoanId,
    by_reference: bool,
    /// NIC transmissions referencing the bytes that have not completed yet.
    in_flight: u32,
}

impl Loan {
    /// The loan's identity.
    pub fn id(&self) -> LoanId {
        self.id
    }

    /// NIC transmissions still referencing the bytes.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// `n` transmissions completed; true when none is left.
    pub fn complete(&mut self, n: u32) -> bool {
        self.in_flight = self.in_flight.saturating_sub(n);
        self.in_flight == 0
    }
}

#[derive(Debug)]
enum Chunk {
    Copied(Vec<u8>),
    Loaned(Loan),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Copied(v) => v.len(),
            Chunk::Loaned(l) => l.len as usize,
        }
    }

    /// Copies bytes `from..` into `dst`; returns how many.
    fn copy_to(&self, from: usize, dst: &mut [u8]) -> usize {
        match self {
            Chunk::Copied(v) => super::tx_payload::copy_from_slice_at(v, from, dst),
            Chunk::Loaned(l) => l.payload.copy_to(from, dst),
        }
    }

    /// [`copy_to`](Self::copy_to), also returning the sum of the bytes copied
    /// ([`TxPayload::copy_to_summed`]).
    #[inline]
    fn copy_to_summed(&self, from: usize, dst: &mut [u8]) -> (usize, u16) {
        match self {
            Chunk::Copied(v) => v.copy_to_summed(from, dst),
            Chunk::Loaned(l) => l.payload.copy_to_summed(from, dst),
        }
    }

    fn by_reference(&self) -> bool {
        matches!(self, Chunk::Loaned(l) if l.by_reference)
    }
}

/// Part of a by-reference loan, for a NIC to transmit in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoanedSlice {
    /// The first byte.
    pub addr: NonNull<u8>,
    /// Bytes.
    pub len: usize,
    /// The ones-complement sum of the bytes (`checksum::data`), for the segment's checksum;
    /// `None` when not asked for (the NIC fills the checksum: the bytes are not read).
    pub sum: Option<u16>,
    /// The loan they belong to.
    pub loan: LoanId,
    /// Where that loan sits in the queue (its chunk's number, counted from the buffer's first
    /// chunk, so acknowledgements do not move it), so that
    /// [`transmissions_started`](SendBuffer::transmissions_started) and
    /// [`transmissions_completed`](SendBuffer::transmissions_completed) find it without a search.
    pub at: u64,
}

impl LoanedSlice {
    /// Bytes `at..at + len` of this piece, as a piece of the same loan without a sum (for a NIC
    /// that fills the checksum); `None` past its end.
    pub fn piece(&self, at: usize, len: usize) -> Option<LoanedSlice> {
        if at.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: `at + len <= self.len` (checked above), so the result points into the bytes
        // this piece covers, which lie in one mapped loan.
        let addr = unsafe { NonNull::new_unchecked(self.addr.as_ptr().add(at)) };
        Some(LoanedSlice { addr, len, sum: None, loan: self.loan, at: self.at })
    }
}

thread_local! {
    /// The storage of emptied chunk queues and loan indexes, for the next buffer to queue
    /// bytes (see [`SendBuffer`]).
    static CHUNK_STORAGE: RefCell<LocalSpares<Chunk>> = const { RefCell::new(LocalSpares::new()) };
    static INDEX_STORAGE: RefCell<LocalSpares<(LoanId, u64)>> = const { RefCell::new(LocalSpares::new()) };
}

/// Bytes queued for sending and not yet acknowledged, in sequence order.
///
/// Once all acknowledged, its queues give their storage to the thread's spares, and its next
/// bytes take the spares given last (`slimtcp_api::spares`): with thousands of connections a
/// buffer's own storage would be cold at every turn of its connection.
///
/// Its byte counts, offsets and chunk indexes are kept in 32 bits (a connection's state stays
/// small): all of them are bounded by the capacity, at most [`MAX_TCP_BUFFER`]; the methods
/// take and give `usize`.
#[derive(Debug)]
pub struct SendBuffer {
    chunks: VecDeque<Chunk>,
    /// Bytes of the front chunk already acknowledged.
    head_offset: u32,
    /// Queued bytes (unacknowledged + unsent).
    len: u32,
    capacity: u32,
    /// Scan cursor: (chunk index, offset of that chunk's first byte relative to the queue start).
    cursor: (u32, u32),
    spare: Vec<Vec<u8>>,
    /// The zero-copy API's bookkeeping, from the first loan on (a connection that only copies
    /// never carries it). Every `Chunk::Loaned` in `chunks` implies it is there.
    loans: Option<Box<Loans>>,
}

/// Where a send buffer's loans are, besides its chunks.
#[derive(Debug, Default)]
struct Loans {
    /// Fully acknowledged loans, to hand back.
    completed: Vec<Box<dyn TxPayload>>,
    /// Fully acknowledged loans still referenced by NIC transmissions.
    lingering: Vec<Loan>,
    /// The queued loans in queue order, as (id, absolute chunk number): ids only grow, so a
    /// loan is found by binary search instead of a scan of every chunk (a guest may hold
    /// thousands of sends).
    index: VecDeque<(LoanId, u64)>,
    /// Of the queued loans, those sent by reference (only they make a segment's piece worth
    /// looking up).
    by_reference: usize,
    /// Chunks popped off the front since this record exists: chunk `i` of `chunks` has
    /// absolute number `popped + i`.
    popped: u64,
}

impl Loans {
    /// A loan no longer queued: handed back now, or when its last transmission completes.
    fn retire(&mut self, l: Loan) {
        if l.in_flight > 0 {
            self.lingering.push(l);
        } else {
            self.completed.push(l.payload);
        }
    }
}

/// A count, offset or chunk index of a send buffer, kept in 32 bits: each is bounded by the
/// buffer's capacity, at most [`MAX_TCP_BUFFER`], so nothing is lost (checked in debug builds).
fn narrow(n: usize) -> u32 {
    debug_assert!(u32::try_from(n).is_ok(), "{n} exceeds a send buffer's 32-bit bound");
    n as u32
}

impl SendBuffer {
    /// An empty queue holding at most `capacity` bytes ([`MAX_TCP_BUFFER`] when larger).
    pub fn new(capacity: usize) -> Self {
        SendBuffer {
            chunks: VecDeque::new(),
            head_offset: 0,
            len: 0,
            capacity: narrow(capacity.min(MAX_TCP_BUFFER)),
            cursor: (0, 0),
            spare: Vec::new(),
            loans: None,
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

    /// Room left, in bytes.
    pub fn free(&self) -> usize {
        (self.capacity - self.len) as usize
    }

    /// The configured capacity.
    pub fn capacity(&self) -> usize {
        self.capacity as usize
    }

    /// Copies as much of `data` as fits; returns the number of bytes taken.
    pub fn push_copy(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.free());
        let mut rest = &data[..n];
        while !rest.is_empty() {
            let tail_has_room =
                matches!(self.chunks.back(), Some(Chunk::Copied(v)) if v.len() < v.capacity());
            if !tail_has_room {
                let mut v = self.spare.pop().unwrap_or_default();
                v.clear();
                v.reserve_exact(COPY_CHUNK);
                storage_for(&CHUNK_STORAGE, &mut self.chunks);
                self.chunks.push_back(Chunk::Copied(v));
            }
            if let Some(Chunk::Copied(v)) = self.chunks.back_mut() {
                let take = rest.len().min(v.capacity() - v.len());
                v.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
            }
        }
        self.len += narrow(n);
        n
    }

    /// Takes ownership of `payload` if all of it fits; otherwise gives it back.
    pub fn push_loaned(&mut self, payload: Box<dyn TxPayload>) -> Result<(), Box<dyn TxPayload>> {
        let n = payload.len();
        if n > self.free() {
            return Err(payload);
        }
        let loans = self.loans.get_or_insert_with(Box::default);
        if n == 0 {
            loans.completed.push(payload);
            return Ok(());
        }
        let id = NEXT_LOAN.fetch_add(1, Ordering::Relaxed);
        let by_reference = payload.external_addr().is_some();
        storage_for(&INDEX_STORAGE, &mut loans.index);
        loans.index.push_back((id, loans.popped + self.chunks.len() as u64));
        loans.by_reference += usize::from(by_reference);
        storage_for(&CHUNK_STORAGE, &mut self.chunks);
        self.chunks.push_back(Chunk::Loaned(Loan {
            payload,
            len: narrow(n),
            id,
            by_reference,
            in_flight: 0,
        }));
        self.len += narrow(n);
        Ok(())
    }

    /// Releases the first `n` bytes (they were acknowledged). Loaned buffers that are now fully
    /// acknowledged move to the completed list.
    pub fn ack(&mut self, n: usize) {
        let mut n = narrow(n.min(self.len()));
        self.len -= n;
        while n > 0 {
            let Some(front) = self.chunks.front() else { break };
            let remaining = narrow(front.len()) - self.head_offset;
            if n < remaining {
                self.head_offset += n;
                // The queue start moved by n: later chunks start n bytes earlier.
                if self.cursor.0 > 0 {
                    self.cursor.1 -= n;
                }
                break;
            }
            n -= remaining;
            self.pop_front_chunk();
        }
        // A fully drained copy chunk at the front can be dropped too.
        if self.len == 0 {
            while !self.chunks.is_empty() {
                self.pop_front_chunk();
            }
            release_when_empty(&CHUNK_STORAGE, &mut self.chunks);
            if let Some(loans) = self.loans.as_deref_mut() {
                release_when_empty(&INDEX_STORAGE, &mut loans.index);
            }
        }
    }

    fn pop_front_chunk(&mut self) {
        let Some(chunk) = self.chunks.pop_front() else { return };
        let consumed = narrow(chunk.len());
        if let Some(loans) = self.loans.as_deref_mut() {
            loans.popped += 1;
        }
        match chunk {
            Chunk::Copied(v) => {
                if self.spare.len() < SPARE_CHUNKS {
                    self.spare.push(v);
                }
            }
            Chunk::Loaned(l) => {
                if let Some(loans) = self.loans.as_deref_mut() {
                    loans.index.pop_front();
                    loans.by_reference -= usize::from(l.by_reference);
                    loans.retire(l);
                }
            }
        }
        let chunk_start = self.head_offset;
        self.head_offset = 0;
        // Keep the cursor relative to the new queue start.
        let (idx, start) = self.cursor;
        if idx == 0 {
            self.cursor = (0, 0);
        } else {
            self.cursor = (idx - 1, start.saturating_sub(consumed - chunk_start));
        }
    }

    /// Loaned buffers whose bytes are all acknowledged, handed back to their owner.
    pub fn take_completed(&mut self) -> impl Iterator<Item = Box<dyn TxPayload>> + '_ {
        self.loans.iter_mut().flat_map(|l| l.completed.drain(..))
    }

    /// True when acknowledged loaned buffers wait to be taken.
    pub fn has_completed(&self) -> bool {
        self.loans.as_ref().is_some_and(|l| !l.completed.is_empty())
    }

    /// The scan cursor: (chunk index, queue offset of that chunk's first live byte).
    fn cursor(&self) -> (usize, usize) {
        (self.cursor.0 as usize, self.cursor.1 as usize)
    }

    fn set_cursor(&mut self, idx: usize, start: usize) {
        self.cursor = (narrow(idx), narrow(start));
    }

    /// Bytes of chunk `idx` already acknowledged (only the front chunk has any).
    fn skip(&self, idx: usize) -> usize {
        if idx == 0 {
            self.head_offset as usize
        } else {
            0
        }
    }

    /// The chunk holding queue-relative byte `offset`: (index, queue offset of its first live
    /// byte). Moves the scan cursor there.
    fn chunk_at(&mut self, offset: usize) -> Option<(usize, usize)> {
        if offset >= self.len() {
            return None;
        }
        let (mut idx, mut start) = self.cursor();
        if offset < start || idx >= self.chunks.len() {
            (idx, start) = (0, 0);
        }
        loop {
            let chunk = self.chunks.get(idx)?;
            let skip = self.skip(idx);
            let end = start + chunk.len() - skip;
            if offset < end {
                self.set_cursor(idx, start);
                return Some((idx, start));
            }
            idx += 1;
            start = end;
        }
    }

    /// Chunks (by reference), the front chunk's acknowledged bytes, lingering loans: for
    /// `Connection::describe`.
    pub(super) fn describe(&self) -> String {
        let by_ref = self.chunks.iter().filter(|c| c.by_reference()).count();
        let lens: Vec<usize> = self.chunks.iter().take(4).map(Chunk::len).collect();
        format!(
            "chunks {} (by-ref {by_ref}, first lens {lens:?}) head_offset {} cursor {:?} lingering {}",
            self.chunks.len(),
            self.head_offset,
            self.cursor,
            self.loans.as_ref().map_or(0, |l| l.lingering.len())
        )
    }

    /// How far a segment starting at `offset` may reach so that a by-reference loan's edge is
    /// never crossed: bytes to the end of the chunk holding `offset` when that chunk or the next
    /// one is sent by reference; `None` when any length is fine.
    pub fn segment_limit(&mut self, offset: usize) -> Option<usize> {
        if !self.holds_by_reference_loans() {
            return None;
        }
        let (idx, start) = self.chunk_at(offset)?;
        let chunk = self.chunks.get(idx)?;
        let end = start + chunk.len() - self.skip(idx);
        let next_by_ref = self.chunks.get(idx + 1).is_some_and(Chunk::by_reference);
        (chunk.by_reference() || next_by_ref).then_some(end - offset)
    }

    /// Bytes `offset..offset+len` as one piece of a by-reference loan, with their sum (when
    /// `with_sum`) and the loan's id; `None` when they are copied data, span chunks, or are
    /// empty, and when their sum is wanted but the loan is no plain slice (guest memory):
    /// summing those bytes copies them, so copying them into the frame instead costs the same
    /// and saves the reference.
    pub fn by_reference_slice(&mut self, offset: usize, len: usize, with_sum: bool) -> Option<LoanedSlice> {
        let (idx, from) = self.by_reference_piece(offset, len)?;
        let Chunk::Loaned(l) = self.chunks.get(idx)? else { return None };
        if with_sum && l.payload.as_slice().is_none() {
            return None;
        }
        let base = l.payload.external_addr()?;
        // SAFETY: `from + len <= l.len == l.payload.len()` (checked by `by_reference_piece`) and the
        // payload promised `len()` mapped bytes from `base`, so the sum stays inside them.
        let addr = unsafe { NonNull::new_unchecked(base.as_ptr().add(from)) };
        let sum = with_sum.then(|| payload_sum(l.payload.as_ref(), from, len));
        let at = self.loans.as_deref()?.popped + idx as u64;
        Some(LoanedSlice { addr, len, sum, loan: l.id, at })
    }

    /// (chunk index, offset inside the loan) of bytes `offset..offset+len` when they lie in one
    /// by-reference loan.
    fn by_reference_piece(&mut self, offset: usize, len: usize) -> Option<(usize, usize)> {
        if len == 0 || offset + len > self.len() || !self.holds_by_reference_loans() {
            return None;
        }
        let (idx, start) = self.chunk_at(offset)?;
        let skip = self.skip(idx);
        match self.chunks.get(idx)? {
            Chunk::Loaned(l) if l.by_reference => {
                let from = skip + offset - start;
                (from + len <= l.len as usize).then_some((idx, from))
            }
            _ => None,
        }
    }

    /// True while a loan to be sent by reference is queued (only then can a segment's piece be
    /// one): copied data, and loans the NIC must copy, skip the chunk walk of the by-reference
    /// checks.
    #[inline]
    pub fn holds_by_reference_loans(&self) -> bool {
        self.loans.as_ref().is_some_and(|l| l.by_reference > 0)
    }

    fn loan_mut(&mut self, id: LoanId) -> Option<&mut Loan> {
        // Transmissions start on the newest loan and complete on the oldest, mostly: those two
        // first, then a search.
        let loans = self.loans.as_deref_mut()?;
        let found = match (loans.index.front(), loans.index.back()) {
            (Some(&(first, _)), _) if first == id => Ok(0),
            (_, Some(&(last, _))) if last == id => Ok(loans.index.len() - 1),
            _ => loans.index.binary_search_by_key(&id, |&(id, _)| id),
        };
        if let Ok(i) = found {
            let index = usize::try_from(loans.index[i].1 - loans.popped).ok()?;
            match self.chunks.get_mut(index) {
                Some(Chunk::Loaned(l)) if l.id == id => return Some(l),
                _ => debug_assert!(false, "loan index out of step with the queue"),
            }
        }
        loans.lingering.iter_mut().find(|l| l.id == id)
    }

    /// Loan `id`, looked for at queue position `at` ([`LoanedSlice::at`]) first, then by id
    /// (a stale or wrong position only costs the search).
    fn loan_at(&mut self, id: LoanId, at: u64) -> Option<&mut Loan> {
        let popped = self.loans.as_deref()?.popped;
        let idx = at.checked_sub(popped).and_then(|i| usize::try_from(i).ok());
        let hit = idx.filter(|&i| matches!(self.chunks.get(i), Some(Chunk::Loaned(l)) if l.id == id));
        match hit {
            Some(i) => match self.chunks.get_mut(i) {
                Some(Chunk::Loaned(l)) => Some(l),
                _ => None,
            },
            None => self.loan_mut(id),
        }
    }

    /// `n` NIC transmissions referencing loan `id` (at queue position `at`, see
    /// [`LoanedSlice::at`]) were queued (a run's segments inside the loan count at once). False
    /// when no such loan is held.
    pub fn transmissions_started(&mut self, id: LoanId, at: u64, n: u32) -> bool {
        match self.loan_at(id, at) {
            Some(l) => {
                l.in_flight = l.in_flight.saturating_add(n);
                true
            }
            None => false,
        }
    }

    /// `n` NIC transmissions referencing loan `id` (at queue position `at` when they started)
    /// completed (consecutive completions of one loan count at once); a fully acknowledged loan
    /// with no transmission left moves to the completed list. False when no such loan is held.
    pub fn transmissions_completed(&mut self, id: LoanId, at: u64, n: u32) -> bool {
        let Some(l) = self.loan_at(id, at) else { return false };
        if l.complete(n) {
            if let Some(loans) = self.loans.as_deref_mut() {
                if let Some(i) = loans.lingering.iter().position(|l| l.id == id) {
                    let l = loans.lingering.swap_remove(i);
                    loans.completed.push(l.payload);
                }
            }
        }
        true
    }

    /// Replaces every queued loan with a copy of its bytes, so its owner can have its memory
    /// back before the peer acknowledged it (a guest's buffers at a device stop). The loans are
    /// handed back like acknowledged ones: at once, or when their last NIC transmission
    /// completes. Offsets, the stream and its segmentation state are unchanged. Returns the
    /// bytes copied.
    pub fn unloan_all(&mut self) -> usize {
        let mut copied = 0;
        let Some(loans) = self.loans.as_deref_mut() else { return 0 };
        loans.index.clear();
        loans.by_reference = 0;
        for chunk in self.chunks.iter_mut() {
            let Chunk::Loaned(l) = chunk else { continue };
            let bytes = copy_all(l.payload.as_ref());
            copied += bytes.len();
            let copy = Chunk::Copied(bytes);
            if let Chunk::Loaned(l) = std::mem::replace(chunk, copy) {
                loans.retire(l);
            }
        }
        copied
    }

    /// Loans (queued or acknowledged) still referenced by NIC transmissions, taken out of the
    /// buffer: when a connection is freed, they must outlive it until their completions.
    pub fn take_in_flight_loans(&mut self) -> Vec<Loan> {
        let Some(loans) = self.loans.as_deref_mut() else { return Vec::new() };
        let mut out = std::mem::take(&mut loans.lingering);
        // The queue is torn down with its connection: its loan index goes first.
        loans.index.clear();
        for chunk in self.chunks.iter_mut() {
            if let Chunk::Loaned(l) = chunk {
                if l.in_flight > 0 {
                    // Leave an empty stand-in: the queue is torn down with its connection.
                    let stand_in = Loan {
                        payload: Box::new(Vec::new()),
                        len: 0,
                        id: 0,
                        by_reference: false,
                        in_flight: 0,
                    };
                    loans.by_reference -= usize::from(l.by_reference);
                    out.push(std::mem::replace(l, stand_in));
                }
            }
        }
        out
    }

    /// Copies bytes `offset..offset+dst.len()` (relative to the first unacknowledged byte) into
    /// `dst`; returns how many were copied (the range is clamped to what is queued).
    #[inline]
    pub fn copy_out(&mut self, offset: usize, dst: &mut [u8]) -> usize {
        self.copy_pieces(offset, dst, &mut |chunk, from, piece| chunk.copy_to(from, piece))
    }

    /// [`copy_out`](Self::copy_out), also returning the ones-complement sum
    /// ([`checksum::data`](crate::wire::checksum::data)) of the bytes copied, taken as they are
    /// copied (a segment's checksum without reading its payload a second time).
    #[inline]
    pub fn copy_out_summed(&mut self, offset: usize, dst: &mut [u8]) -> (usize, u16) {
        let mut sum = PieceSums::default();
        let n = self.copy_pieces(offset, dst, &mut |chunk, from, piece| {
            let (n, piece_sum) = chunk.copy_to_summed(from, piece);
            sum.add(piece_sum, n);
            n
        });
        (n, sum.total())
    }

    /// Copies bytes `offset..offset+dst.len()` (clamped to what is queued) into `dst`, a chunk's
    /// piece at a time through `copy` (chunk, offset in it, where its bytes go; returns how many
    /// it copied); returns how many were copied.
    #[inline]
    fn copy_pieces(
        &mut self,
        offset: usize,
        dst: &mut [u8],
        copy: &mut impl FnMut(&Chunk, usize, &mut [u8]) -> usize,
    ) -> usize {
        match self.copy_out_at_cursor(offset, dst, copy) {
            Some(n) => n,
            None => self.copy_out_walk(offset, dst, copy),
        }
    }

    /// [`copy_out`](Self::copy_out) by walking the chunks from the cursor (or the front), moving
    /// the cursor to the last chunk read; out of line, so that the usual case inlines into its
    /// callers without this loop's register saves.
    #[inline(never)]
    fn copy_out_walk(
        &mut self,
        offset: usize,
        dst: &mut [u8],
        copy: &mut impl FnMut(&Chunk, usize, &mut [u8]) -> usize,
    ) -> usize {
        let end = (offset + dst.len()).min(self.len());
        if offset >= end {
            return 0;
        }
        // Queue-relative offsets: the front chunk's first live byte is at 0.
        let (mut idx, mut start) = self.cursor();
        if offset < start || idx >= self.chunks.len() {
            idx = 0;
            start = 0;
        }
        let mut pos = offset;
        while pos < end {
            let Some(chunk) = self.chunks.get(idx) else { break };
            let skip = self.skip(idx);
            let chunk_end = start + chunk.len() - skip;
            if pos < chunk_end {
                self.cursor = (narrow(idx), narrow(start));
                let want = end.min(chunk_end) - pos;
                let got = copy(chunk, skip + pos - start, &mut dst[pos - offset..pos - offset + want]);
                pos += got;
                if got < want {
                    break;
                }
            }
            if pos >= chunk_end {
                idx += 1;
                start = chunk_end;
            }
        }
        pos - offset
    }

    /// [`copy_out`](Self::copy_out)'s usual case in one step: the whole range lies in the chunk
    /// the scan cursor is on (a segment of a chunk the application wrote or lent). `None`
    /// otherwise (the general walk handles it).
    #[inline]
    fn copy_out_at_cursor(
        &self,
        offset: usize,
        dst: &mut [u8],
        copy: &mut impl FnMut(&Chunk, usize, &mut [u8]) -> usize,
    ) -> Option<usize> {
        let (idx, start) = self.cursor();
        let from = offset.checked_sub(start)? + self.skip(idx);
        let chunk = self.chunks.get(idx)?;
        (from + dst.len() <= chunk.len()).then(|| copy(chunk, from, dst))
    }
}

/// The sum of pieces copied one after another: a piece that starts at an odd byte of the whole
/// has its words' bytes the other way round, so its sum goes in byte-swapped (RFC 1071 section
/// 2(B)).
#[derive(Debug, Default)]
struct PieceSums {
    sum: u16,
    odd: bool,
}

impl PieceSums {
    fn add(&mut self, piece_sum: u16, len: usize) {
        let aligned = if self.odd { piece_sum.swap_bytes() } else { piece_sum };
        self.sum = checksum::combine(&[self.sum, aligned]);
        self.odd ^= len % 2 == 1;
    }

    fn total(&self) -> u16 {
        self.sum
    }
}

#[cfg(test)]
#[path = "send_buffer_tests.rs"]
mod tests;
