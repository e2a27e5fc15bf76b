//! Zero-copy buffers of the host runtime.
//!
//! [`TxBuf`]: the application fills it in place; the stack sends straight from it and drops it
//! (back into its pool, for reuse) only after the peer acknowledged its bytes. [`RxBuf`]: a received packet
//! buffer trimmed to its payload, owned by the application; dropping it tells the worker the
//! bytes are consumed, which reopens the receive window (a shared queue, so it may be
//! dropped on any thread).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::SegQueue;
use slimtcp_api::{ReleaseList, ZeroCopyTx};

use crate::nic::PacketBuf;
use crate::tcp::TxPayload;

/// Buffers up to this size come from the small pool.
pub const SMALL_TX: usize = 2048;
/// Buffers up to this size come from the large pool; larger ones cannot be allocated.
pub const LARGE_TX: usize = 64 * 1024;
/// Spare buffers kept per pool.
const SPARE_SMALL: usize = 4096;
const SPARE_LARGE: usize = 64;

/// A transmit buffer (see the module documentation). Dropped anywhere (by the application, the
/// worker, the stack), it goes back to its pool.
pub struct TxBuf {
    data: Box<[u8]>,
    len: usize,
    pool: Arc<PoolShared>,
}

impl TxBuf {
    /// Bytes that will be sent.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing will be sent.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room in the buffer.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// Address of the first byte (tests use it to follow a buffer's identity).
    pub fn as_ptr(&self) -> *const u8 {
        self.data.as_ptr()
    }
}

impl std::fmt::Debug for TxBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxBuf").field("len", &self.len).field("capacity", &self.data.len()).finish()
    }
}

impl ZeroCopyTx for TxBuf {
    fn space_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    fn filled(&self) -> &[u8] {
        &self.data[..self.len]
    }

    fn set_len(&mut self, len: usize) {
        self.len = len.min(self.data.len());
    }
}

impl TxPayload for TxBuf {
    fn len(&self) -> usize {
        self.len
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        crate::tcp::copy_from_slice_at(&self.data[..self.len], offset, dst)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(&self.data[..self.len])
    }
}

impl Drop for TxBuf {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.data));
    }
}

/// The storage of one pool, shared by its buffers (they go back from whichever thread drops
/// them).
#[derive(Debug, Default)]
struct PoolShared {
    small: SegQueue<Box<[u8]>>,
    large: SegQueue<Box<[u8]>>,
    /// Buffers handed out and not yet back.
    outstanding: AtomicUsize,
}

impl PoolShared {
    fn give_back(&self, data: Box<[u8]>) {
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        let (queue, spare) =
            if data.len() == SMALL_TX { (&self.small, SPARE_SMALL) } else { (&self.large, SPARE_LARGE) };
        if queue.len() < spare {
            queue.push(data);
        }
    }
}

/// Recycled transmit buffers, in two size classes.
#[derive(Debug, Default)]
pub struct TxPool(Arc<PoolShared>);

impl TxPool {
    /// A buffer holding at least `len` bytes, with `len` set; `None` beyond [`LARGE_TX`].
    pub fn alloc(&self, len: usize) -> Option<TxBuf> {
        let data = if len <= SMALL_TX {
            self.0.small.pop().unwrap_or_else(|| vec![0; SMALL_TX].into_boxed_slice())
        } else if len <= LARGE_TX {
            self.0.large.pop().unwrap_or_else(|| vec![0; LARGE_TX].into_boxed_slice())
        } else {
            return None;
        };
        self.0.outstanding.fetch_add(1, Ordering::Relaxed);
        Some(TxBuf { data, len, pool: Arc::clone(&self.0) })
    }

    /// Buffers handed out (to the application or the stack) and not yet back.
    pub fn outstanding(&self) -> usize {
        self.0.outstanding.load(Ordering::Relaxed)
    }
}

/// Bytes of received buffers the application let go of, per socket (the server's id), for the
/// worker ([`release`]: a buffer dropped right after one of the same socket adds to its entry,
/// so an application reading a burst queues one entry, not one per buffer).
pub type ReleaseQueue = ReleaseList<(u32, usize)>;

/// Queues `bytes` released by socket `id` on `queue`.
fn release(queue: &ReleaseQueue, id: u32, bytes: usize) {
    queue.push_merged((id, bytes), |last, new| {
        let same_socket = last.0 == new.0;
        if same_socket {
            last.1 += new.1;
        }
        same_socket
    });
}

/// A received payload buffer (see the module documentation).
#[derive(Debug)]
pub struct RxBuf {
    buf: PacketBuf,
    /// The server's id of the socket.
    id: u32,
    /// Window bytes this buffer holds (its length when delivered).
    held: usize,
    releases: Arc<ReleaseQueue>,
}

impl RxBuf {
    pub(super) fn new(buf: PacketBuf, id: u32, releases: Arc<ReleaseQueue>) -> RxBuf {
        let held = buf.len();
        RxBuf { buf, id, held, releases }
    }

    /// The payload bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// Payload length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops the first `n` bytes (a partial copy-out).
    pub(super) fn consume(&mut self, n: usize) {
        self.buf.advance(n.min(self.buf.len()));
    }
}

impl slimtcp_api::app::RxPayload for RxBuf {
    fn consume(&mut self, n: usize) {
        RxBuf::consume(self, n);
    }
}

impl AsRef<[u8]> for RxBuf {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_slice()
    }
}

impl Drop for RxBuf {
    fn drop(&mut self) {
        if self.held > 0 {
            release(&self.releases, self.id, self.held);
        }
    }
}
