//! The PCI transport (being written).
use crate::spec::PciAddress;
use crate::{GuestConfig, GuestError};

/// A virtio-net PCI function driven from user space.
#[derive(Debug)]
pub struct PciTransport;

impl PciTransport {
    /// Opens the device.
    pub fn open(_addr: Option<PciAddress>, _cfg: &GuestConfig) -> Result<PciTransport, GuestError> {
        Err(GuestError::Config("the pci transport is not built yet"))
    }
}

impl crate::transport::Transport for PciTransport {
    fn queue_pairs(&self) -> usize {
        0
    }
    fn alive(&self) -> bool {
        false
    }
    fn take_queue_pair(&mut self, index: usize) -> Result<crate::transport::QueuePair, GuestError> {
        Err(GuestError::NoSuchQueuePair(index))
    }
}
