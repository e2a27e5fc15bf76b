//! A pool of heap packet buffers for NICs without one of their own (memwire, TAP): a buffer
//! taken from it goes back when its [`PacketBuf`] is dropped, wherever that is (the stack that
//! received it, a queue, another thread), so a steady flow allocates and zeroes nothing. The
//! free list is a bounded lock-free queue: a buffer that finds it full is freed; an empty one
//! makes a new buffer. Buffers come back holding old frame bytes (never uninitialised memory):
//! a [`PacketBuf`] shows only what was written into it.

use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::buf::PacketBuf;

/// The pool (see the module documentation). Shared as `Arc<BufferPool>`.
#[derive(Debug)]
pub struct BufferPool {
    free: ArrayQueue<Box<[u8]>>,
    buf_size: usize,
}

impl BufferPool {
    /// A pool keeping up to `keep` free buffers of `buf_size` bytes.
    pub fn new(keep: usize, buf_size: usize) -> Arc<Self> {
        Arc::new(BufferPool { free: ArrayQueue::new(keep.max(1)), buf_size })
    }

    /// An empty buffer from the pool (or a new one) whose data starts after `headroom` bytes.
    #[inline]
    pub fn take(self: &Arc<Self>, headroom: usize) -> PacketBuf {
        let bytes = self.free.pop().unwrap_or_else(|| vec![0u8; self.buf_size].into_boxed_slice());
        PacketBuf::pooled(PooledBytes { bytes, pool: Arc::clone(self) }, headroom)
    }

    /// Free buffers held now.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Size of its buffers.
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }
}

/// A pooled buffer's bytes, returned to the pool on drop.
#[derive(Debug)]
pub(crate) struct PooledBytes {
    /// Empty (an empty boxed slice allocates nothing) only while being dropped.
    bytes: Box<[u8]>,
    pool: Arc<BufferPool>,
}

impl PooledBytes {
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }
}

impl Drop for PooledBytes {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        // Full: the buffer is freed instead.
        let _ = self.pool.free.push(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_goes_back_and_is_taken_again() {
        let pool = BufferPool::new(4, 256);
        let mut b = pool.take(16);
        assert_eq!((b.capacity(), b.headroom(), b.len()), (256, 16, 0));
        b.append(3).expect("room").copy_from_slice(b"abc");
        drop(b);
        assert_eq!(pool.free_count(), 1);
        let again = pool.take(32);
        assert_eq!((again.headroom(), again.len()), (32, 0), "reset: no old data shows");
        assert_eq!(pool.free_count(), 0);
    }

    #[test]
    fn a_full_pool_frees_and_an_empty_one_makes_buffers() {
        let pool = BufferPool::new(2, 64);
        let bufs: Vec<PacketBuf> = (0..5).map(|_| pool.take(0)).collect();
        drop(bufs);
        assert_eq!(pool.free_count(), 2, "kept up to its bound");
        let moved = pool.take(0);
        let t = std::thread::spawn(move || drop(moved));
        t.join().expect("thread");
        assert_eq!(pool.free_count(), 2, "back from another thread");
    }
}
