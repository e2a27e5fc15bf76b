//! Device registers: a [`Window`] is one virtio structure inside a mapped BAR, accessed with
//! single little-endian volatile loads and stores, bounds-checked (an access outside the window
//! reads all ones and writes nothing, as a missing PCI device would).

use std::sync::Arc;

use super::caps::CapRegion;
use super::sysfs::BarMapping;
use super::PciError;

/// A bounds-checked register window (see the module documentation).
#[derive(Debug, Clone)]
pub struct Window {
    map: Arc<BarMapping>,
    offset: usize,
    len: usize,
}

impl Window {
    /// The structure `region` inside `map`, which must hold all of it and at least `min_len`.
    pub fn new(
        map: Arc<BarMapping>,
        region: CapRegion,
        min_len: usize,
        what: &'static str,
    ) -> Result<Window, PciError> {
        let offset = region.offset as usize;
        let len = region.length as usize;
        let fits = offset.checked_add(len).is_some_and(|end| end <= map.len());
        if !fits || len < min_len {
            return Err(PciError::CapabilityOutsideBar { what, bar: region.bar, len: map.len() });
        }
        Ok(Window { map, offset, len })
    }

    /// The sub-window `at..at + len` (clamped to this window).
    pub fn sub(&self, at: usize, len: usize) -> Window {
        let at = at.min(self.len);
        Window { map: self.map.clone(), offset: self.offset + at, len: len.min(self.len - at) }
    }

    fn ptr<T>(&self, at: usize) -> Option<*mut T> {
        let size = std::mem::size_of::<T>();
        if at.checked_add(size)? > self.len || (self.offset + at) % size != 0 {
            return None;
        }
        // SAFETY: offset + at + size <= offset + len <= the BAR's length (checked in `new`).
        Some(unsafe { self.map.base().add(self.offset + at) }.cast())
    }

    /// Reads a byte.
    pub fn read8(&self, at: usize) -> u8 {
        // SAFETY: `ptr` checked bounds and alignment; device memory is read with one load.
        self.ptr::<u8>(at).map_or(u8::MAX, |p| unsafe { p.read_volatile() })
    }

    /// Reads a little-endian u16.
    pub fn read16(&self, at: usize) -> u16 {
        // SAFETY: as in `read8`.
        self.ptr::<u16>(at).map_or(u16::MAX, |p| u16::from_le(unsafe { p.read_volatile() }))
    }

    /// Reads a little-endian u32.
    pub fn read32(&self, at: usize) -> u32 {
        // SAFETY: as in `read8`.
        self.ptr::<u32>(at).map_or(u32::MAX, |p| u32::from_le(unsafe { p.read_volatile() }))
    }

    /// Writes a byte.
    pub fn write8(&self, at: usize, v: u8) {
        if let Some(p) = self.ptr::<u8>(at) {
            // SAFETY: `ptr` checked bounds and alignment; one store to device memory.
            unsafe { p.write_volatile(v) }
        }
    }

    /// Writes a little-endian u16.
    pub fn write16(&self, at: usize, v: u16) {
        if let Some(p) = self.ptr::<u16>(at) {
            // SAFETY: as in `write8`.
            unsafe { p.write_volatile(v.to_le()) }
        }
    }

    /// Writes a little-endian u32.
    pub fn write32(&self, at: usize, v: u32) {
        if let Some(p) = self.ptr::<u32>(at) {
            // SAFETY: as in `write8`.
            unsafe { p.write_volatile(v.to_le()) }
        }
    }

    /// Writes a 64-bit field as two 32-bit stores, low half first (virtio 1.2, 4.1.3.1).
    pub fn write64(&self, at: usize, v: u64) {
        self.write32(at, v as u32);
        self.write32(at + 4, (v >> 32) as u32);
    }
}

/// Offsets in `struct virtio_pci_common_cfg` (virtio 1.2, 4.1.4.3).
pub mod common {
    /// Selects which 32 feature bits `DEVICE_FEATURE` shows.
    pub const DEVICE_FEATURE_SELECT: usize = 0x00;
    /// The device's features (32 bits of them).
    pub const DEVICE_FEATURE: usize = 0x04;
    /// Selects which 32 feature bits `DRIVER_FEATURE` takes.
    pub const DRIVER_FEATURE_SELECT: usize = 0x08;
    /// The driver's features.
    pub const DRIVER_FEATURE: usize = 0x0c;
    /// MSI-X vector for configuration changes.
    pub const CONFIG_MSIX_VECTOR: usize = 0x10;
    /// Queues the device has.
    pub const NUM_QUEUES: usize = 0x12;
    /// Device status.
    pub const DEVICE_STATUS: usize = 0x14;
    /// Changes whenever the device configuration changes (QEMU: the link status).
    pub const CONFIG_GENERATION: usize = 0x15;
    /// Selects the queue the following fields describe.
    pub const QUEUE_SELECT: usize = 0x16;
    /// Its size (the device's maximum on read).
    pub const QUEUE_SIZE: usize = 0x18;
    /// Its MSI-X vector.
    pub const QUEUE_MSIX_VECTOR: usize = 0x1a;
    /// 1: the queue is live.
    pub const QUEUE_ENABLE: usize = 0x1c;
    /// Its notification offset (times the multiplier).
    pub const QUEUE_NOTIFY_OFF: usize = 0x1e;
    /// Descriptor table address.
    pub const QUEUE_DESC: usize = 0x20;
    /// Avail ring address.
    pub const QUEUE_DRIVER: usize = 0x28;
    /// Used ring address.
    pub const QUEUE_DEVICE: usize = 0x30;
    /// Length of the structure up to here.
    pub const LEN: usize = 0x38;
    /// "No MSI-X vector".
    pub const NO_VECTOR: u16 = 0xffff;
}

/// Device status bits (virtio 1.2, 2.1).
pub mod status {
    /// The guest noticed the device.
    pub const ACKNOWLEDGE: u8 = 1;
    /// The guest knows how to drive it.
    pub const DRIVER: u8 = 2;
    /// The driver is ready.
    pub const DRIVER_OK: u8 = 4;
    /// Feature negotiation is complete.
    pub const FEATURES_OK: u8 = 8;
    /// The device hit an error it cannot recover from.
    pub const DEVICE_NEEDS_RESET: u8 = 0x40;
    /// The driver gave up.
    pub const FAILED: u8 = 0x80;
}

/// Offsets in `struct virtio_net_config` (virtio 1.2, 5.1.4).
pub mod net {
    /// `status`: bit 0 VIRTIO_NET_S_LINK_UP (with VIRTIO_NET_F_STATUS).
    pub const STATUS: usize = 6;
    /// `max_virtqueue_pairs` (with VIRTIO_NET_F_MQ).
    pub const MAX_VIRTQUEUE_PAIRS: usize = 8;
    /// Link up.
    pub const S_LINK_UP: u16 = 1;
}
