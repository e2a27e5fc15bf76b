//! The receive queue: in-order payload waiting for the application, kept in the very packet
//! buffers it arrived in (no copy on the stack's side).

use std::collections::VecDeque;

use crate::nic::PacketBuf;

/// In-order received bytes, as a queue of packet buffers trimmed to their payload.
#[derive(Debug)]
pub struct RecvBuffer {
    segments: VecDeque<PacketBuf>,
    len: usize,
    capacity: usize,
}

impl RecvBuffer {
    /// An empty queue that accepts at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        RecvBuffer { segments: VecDeque::new(), len: 0, capacity }
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
        self.capacity.saturating_sub(self.len)
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
