//! The receive queue: in-order payload waiting for the application, kept in the very packet
//! buffers it arrived in (no copy on the stack's side).

use std::collections::VecDeque;

use crate::nic::PacketBuf;

/// In-order received bytes, as a queue of packet buffers trimmed to their payload.
#[derive(Debug)]
pub struct RecvBuffer {
    segments: VecDeque<PacketBuf>,
    len: usize,
    /// Bytes handed out with [`pop_held`](Self::pop_held) and not yet released: they still
    /// occupy the window, so an application that holds buffers slows the sender down.
    held: usize,
    capacity: usize,
}

impl RecvBuffer {
    /// An empty queue that accepts at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        RecvBuffer { segments: VecDeque::new(), len: 0, held: 0, capacity }
    }

    /// Queued bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes that still fit (the receive window).
    pub fn free(&self) -> usize {
        self.capacity.saturating_sub(self.len + self.held)
    }

    /// Bytes handed out and still held by the application.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The configured capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Appends a payload buffer. The caller has trimmed it to fit `free()`.
    pub fn push(&mut self, payload: PacketBuf) {
        if payload.is_empty() {
            return;
        }
        self.len += payload.len();
        self.segments.push_back(payload);
    }

    /// Copies up to `dst.len()` bytes out, consuming them; returns how many.
    pub fn read(&mut self, dst: &mut [u8]) -> usize {
        let mut written = 0;
        while written < dst.len() {
            let Some(front) = self.segments.front_mut() else { break };
            let n = front.len().min(dst.len() - written);
            dst[written..written + n].copy_from_slice(&front.as_slice()[..n]);
            written += n;
            if n == front.len() {
                self.segments.pop_front();
            } else {
                front.advance(n);
            }
        }
        self.len -= written;
        written
    }

    /// Hands the oldest payload buffer to the caller (zero-copy receive).
    pub fn pop_segment(&mut self) -> Option<PacketBuf> {
        let seg = self.segments.pop_front()?;
        self.len -= seg.len();
        Some(seg)
    }

    /// Like [`pop_segment`](Self::pop_segment), but its bytes keep occupying the window until
    /// [`release`](Self::release)d.
    pub fn pop_held(&mut self) -> Option<PacketBuf> {
        let seg = self.pop_segment()?;
        self.held += seg.len();
        Some(seg)
    }

    /// Gives back `n` bytes taken with [`pop_held`](Self::pop_held) (more than held is clamped).
    pub fn release(&mut self, n: usize) {
        self.held = self.held.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_segments_keep_the_window_closed_until_released() {
        let mut q = RecvBuffer::new(100);
        q.push(PacketBuf::from_slice(&[1; 30]));
        q.push(PacketBuf::from_slice(&[2; 20]));
        let seg = q.pop_held().expect("a segment is queued");
        assert_eq!(seg.len(), 30);
        assert_eq!((q.len(), q.held(), q.free()), (20, 30, 50));
        q.release(30);
        assert_eq!((q.held(), q.free()), (0, 80));
        q.release(1000);
        assert_eq!(q.free(), 80, "over-release is clamped");
    }

    #[test]
    fn reads_cross_buffers_without_repeating_data() {
        let mut q = RecvBuffer::new(100);
        q.push(PacketBuf::from_slice(b"abcd"));
        q.push(PacketBuf::from_slice(b"efgh"));
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

    #[test]
    fn zero_copy_pop_keeps_accounting() {
        let mut q = RecvBuffer::new(100);
        q.push(PacketBuf::from_slice(b"abcd"));
        q.push(PacketBuf::from_slice(b""));
        q.push(PacketBuf::from_slice(b"ef"));
        let first = q.pop_segment().expect("segment");
        assert_eq!(first.as_slice(), b"abcd");
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop_segment().expect("segment").as_slice(), b"ef");
        assert!(q.pop_segment().is_none());
    }
}
