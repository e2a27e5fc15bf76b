//! The virtio-net control queue, used once: `VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET`, after which the
//! VMM enables the queue pairs past the first (QEMU does so only then: a pair it has not enabled
//! is never served).

use std::time::{Duration, Instant};

use super::irq::PciNotify;
use super::PciError;
use crate::mem::DmaRegion;
use crate::ring::{Segment, SplitRing};
use crate::transport::Notify;

const VIRTIO_NET_CTRL_MQ: u8 = 4;
const VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET: u8 = 0;
const VIRTIO_NET_OK: u8 = 0;
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// The control queue and a small buffer for its commands.
#[derive(Debug)]
pub struct ControlQueue {
    /// The ring.
    pub ring: SplitRing,
    /// Its kick.
    pub kick: PciNotify,
    /// Command buffer (at least 8 bytes).
    pub buf: DmaRegion,
}

impl ControlQueue {
    /// Asks the device to serve `pairs` queue pairs.
    pub fn set_queue_pairs(&mut self, pairs: u16) -> Result<(), PciError> {
        let what = "MQ_VQ_PAIRS_SET";
        let p = self.buf.host();
        let command = [VIRTIO_NET_CTRL_MQ, VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET];
        let body = pairs.to_le_bytes();
        // SAFETY: the buffer is this queue's own (8 bytes or more); the device reads bytes 0..4
        // and writes byte 4 only while the chain is outstanding, which this function waits out.
        unsafe {
            std::ptr::copy_nonoverlapping(command.as_ptr(), p, 2);
            std::ptr::copy_nonoverlapping(body.as_ptr(), p.add(2), 2);
            p.add(4).write_volatile(0xff);
        }
        let gpa = self.buf.gpa();
        let chain = [
            Segment { gpa, len: 2, writable: false },
            Segment { gpa: gpa + 2, len: 2, writable: false },
            Segment { gpa: gpa + 4, len: 1, writable: true },
        ];
        self.ring.add(&chain).map_err(PciError::Ring)?;
        self.ring.publish();
        // The control queue is the VMM's own: always kick.
        let _ = self.kick.notify();
        let deadline = Instant::now() + ANSWER_WITHIN;
        loop {
            if self.ring.pop_used().map_err(PciError::Ring)?.is_some() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(PciError::ControlTimeout(what));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // SAFETY: the device returned the chain: byte 4 is ours to read again.
        let ack = unsafe { p.add(4).read_volatile() };
        if ack != VIRTIO_NET_OK {
            return Err(PciError::ControlRefused(what));
        }
        Ok(())
    }
}
