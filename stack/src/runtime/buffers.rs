//! Zero-copy buffers of the host runtime.
//!
//! [`TxBuf`]: the application fills it in place; the stack sends straight from it and gives it
//! back (for reuse) only after the peer acknowledged its bytes. [`RxBuf`]: a received packet
//! buffer trimmed to its payload, owned by the application; dropping it tells the worker the
//! bytes are consumed, which reopens the receive window (a lock-free queue, so it may be
//! dropped on any thread).

use std::sync::Arc;

use crossbeam_queue::SegQueue;
use slimtcp_api::{Fd, ZeroCopyTx};

use crate::nic::PacketBuf;
use crate::tcp::TxPayload;

/// Buffers up to this size come from the small pool.
pub const SMALL_TX: usize = 2048;
/// Buffers up to this size come from the large pool; larger ones cannot be allocated.
pub const LARGE_TX: usize = 64 * 1024;
/// Spare buffers kept per pool.
const SPARE_SMALL: usize = 4096;
const SPARE_LARGE: usize = 64;

/// A transmit buffer (see the module documentation).
pub struct TxBuf {
    data: Box<[u8]>,
    len: usize,
}

impl TxBuf {
    fn with_capacity(cap: usize) -> TxBuf {
        TxBuf { data: vec![0; cap].into_boxed_slice(), len: 0 }
    }

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

/// Recycled transmit buffers, in two size classes.
#[derive(Debug, Default)]
pub struct TxPool {
    small: Vec<TxBuf>,
    large: Vec<TxBuf>,
    /// Buffers handed out and not yet back.
    outstanding: usize,
}

impl TxPool {
    /// A buffer holding at least `len` bytes, with `len` set; `None` beyond [`LARGE_TX`].
    pub fn alloc(&mut self, len: usize) -> Option<TxBuf> {
        let mut buf = if len <= SMALL_TX {
            self.small.pop().unwrap_or_else(|| TxBuf::with_capacity(SMALL_TX))
        } else if len <= LARGE_TX {
            self.large.pop().unwrap_or_else(|| TxBuf::with_capacity(LARGE_TX))
        } else {
            return None;
        };
        buf.len = len;
        self.outstanding += 1;
        Some(buf)
    }

    /// Takes a buffer back.
    pub fn recycle(&mut self, mut buf: TxBuf) {
        self.outstanding = self.outstanding.saturating_sub(1);
        buf.len = 0;
        let (pool, spare) = if buf.capacity() == SMALL_TX {
            (&mut self.small, SPARE_SMALL)
        } else {
            (&mut self.large, SPARE_LARGE)
        };
        if pool.len() < spare {
            pool.push(buf);
        }
    }

    /// Buffers handed out (to the application or the stack) and not yet recycled.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }
}

/// Bytes of received buffers the application let go of, per socket, for the worker.
pub type ReleaseQueue = SegQueue<(Fd, usize)>;

/// A received payload buffer (see the module documentation).
#[derive(Debug)]
pub struct RxBuf {
    buf: PacketBuf,
    fd: Fd,
    /// Window bytes this buffer holds (its length when delivered).
    held: usize,
    releases: Arc<ReleaseQueue>,
}

impl RxBuf {
    pub(super) fn new(buf: PacketBuf, fd: Fd, releases: Arc<ReleaseQueue>) -> RxBuf {
        let held = buf.len();
        RxBuf { buf, fd, held, releases }
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
            self.releases.push((self.fd, self.held));
        }
    }
}
