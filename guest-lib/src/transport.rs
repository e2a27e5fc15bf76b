//! What the protocol client needs from a device, whichever way it is reached.
//!
//! A [`Transport`] is a set-up device: it hands out [`QueuePair`]s, each with its receive and
//! transmit [`Virtqueue`] (a [`SplitRing`] plus a way to notify the device and to wait for its
//! interrupts) and a [`DmaRegion`] of buffer memory private to that pair. A queue pair is
//! `Send` and is then driven by one thread without locks.
//!
//! - `vhost-user` ([`crate::vhost_user`]): the process plays the VMM; memory is a memfd shared
//!   with the backend; notifications are eventfds.
//! - `pci` ([`crate::pci`]): the virtio-net PCI function bound to uio_pci_generic inside a VM;
//!   memory is hugepages addressed by guest-physical address; notifications are MMIO writes to
//!   the notify BAR; interrupts are legacy INTx through `/dev/uioN`.

use std::fmt;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::mem::DmaRegion;
use crate::ring::SplitRing;
use crate::GuestError;

/// Device notification ("kick") for one queue.
pub trait Notify: Send + fmt::Debug {
    /// Tells the device the avail ring moved.
    fn notify(&self) -> std::io::Result<()>;
}

/// Waiting for the device's used-ring interrupts ("calls").
pub trait Interrupt: Send + fmt::Debug {
    /// Sleeps until the device signals or `timeout` passes (a spurious early return is fine).
    fn wait(&self, timeout: Duration) -> std::io::Result<()>;

    /// A descriptor that turns readable when the device signals, for a caller that sleeps on
    /// it together with descriptors of its own (`poll`, `epoll`: the preload library); `None`
    /// when the transport has none. Call [`prepare`](Self::prepare) before such a sleep and
    /// [`acknowledge`](Self::acknowledge) after it.
    fn wait_fd(&self) -> Option<RawFd> {
        None
    }

    /// Gets the interrupt ready to be waited for on [`wait_fd`](Self::wait_fd).
    fn prepare(&self) -> std::io::Result<()> {
        Ok(())
    }

    /// Clears a signal seen on [`wait_fd`](Self::wait_fd) without blocking.
    fn acknowledge(&self) {}
}

/// Whether the device is still there.
pub trait Link: Send + Sync + fmt::Debug {
    /// False once the device went away (backend disconnected, device reset): nothing on the
    /// rings will progress any more.
    fn alive(&self) -> bool;
}

/// One virtqueue as the driver sees it.
#[derive(Debug)]
pub struct Virtqueue {
    /// The ring.
    pub ring: SplitRing,
    /// Its notifier.
    pub kick: Box<dyn Notify>,
    /// Its interrupt, when the transport has one.
    pub call: Option<Box<dyn Interrupt>>,
}

impl Virtqueue {
    /// Publishes added chains and notifies the device if it asked for it.
    pub fn flush(&mut self) -> Result<(), GuestError> {
        if self.ring.publish() {
            self.kick.notify().map_err(GuestError::Notify)?;
        }
        Ok(())
    }
}

/// A queue pair: receive queue `2k`, transmit queue `2k + 1`, and its buffer memory.
#[derive(Debug)]
pub struct QueuePair {
    /// Which pair (k).
    pub index: usize,
    /// The receive queue (device -> driver messages into posted buffers).
    pub rx: Virtqueue,
    /// The transmit queue (requests).
    pub tx: Virtqueue,
    /// Buffer memory for this pair alone.
    pub memory: DmaRegion,
    /// The device's liveness.
    pub link: std::sync::Arc<dyn Link>,
}

/// A set-up device that hands out queue pairs. Whatever the device needs to stay up (the
/// connection, the memory) is shared with each [`QueuePair`] (`link`, `memory`), so pairs keep
/// working after the transport itself is dropped.
pub trait Transport: fmt::Debug {
    /// How many queue pairs the device serves (and the transport enabled).
    fn queue_pairs(&self) -> usize;
    /// Whether the device is still there (the same probe each pair's [`Link`] answers).
    fn alive(&self) -> bool;
    /// Takes queue pair `index` (each once).
    fn take_queue_pair(&mut self, index: usize) -> Result<QueuePair, GuestError>;
}
