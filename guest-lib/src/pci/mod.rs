//! The `pci` transport: inside a VM, the guest library drives the virtio-net PCI function of a
//! `slimtcp-vhost` device from user space, as DPDK's virtio PMD does.
//!
//! ```text
//!  sysfs: find 1af4:1041, take it from virtio-pci, bind uio_pci_generic, bus master on
//!  config space -> virtio capabilities -> BAR windows (common, notify, ISR, device config)
//!  reset -> ACKNOWLEDGE|DRIVER -> features -> FEATURES_OK -> hugepage memory -> queues
//!  -> DRIVER_OK -> control queue: MQ_VQ_PAIRS_SET(n) -> one QueuePair per pair
//! ```
//!
//! - Memory: 2 MiB hugepages, guest-physical addresses from `/proc/self/pagemap`
//!   ([`hugemem`]); the device is reset before any is allocated, so a previous run's rings
//!   (an application killed without reset) are stopped before their pages can be reused.
//! - Notifications: kicks are stores to the notify BAR; interrupts are legacy INTx through
//!   `/dev/uioN` ([`irq`]); the library polls and only sleeps on them in long waits.
//! - Liveness: the device status (DRIVER_OK, not NEEDS_RESET) and, with
//!   `VIRTIO_NET_F_STATUS`, the link bit, which QEMU clears when its backend goes away.
//! - Teardown: when the last queue pair (and buffer) is dropped, the device is reset and only
//!   then the memory unmapped.

mod caps;
mod ctrl;
mod error;
mod hugemem;
mod irq;
mod regs;
mod sysfs;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use error::PciError;

use self::caps::VirtioCaps;
use self::ctrl::ControlQueue;
use self::hugemem::HugeMemory;
use self::irq::{PciNotify, QueueInterrupt, UioInterrupt};
use self::regs::{common, net, status, Window};
use self::sysfs::BarMapping;
use crate::features;
use crate::mem::{BumpAllocator, DmaRegion};
use crate::ring::{alloc_ring, SplitRing};
use crate::spec::PciAddress;
use crate::transport::{Link, QueuePair, Transport, Virtqueue};
use crate::{GuestConfig, GuestError};

const RESET_WITHIN: Duration = Duration::from_secs(1);
/// Entries of the control queue's ring (it carries one command at a time).
const CTRL_QUEUE_SIZE: u16 = 16;

/// The set-up function: register windows and the DMA memory. Shared (`Arc`) by every queue
/// pair as its [`Link`] and by every buffer region as their keep-alive: dropping the last one
/// resets the device, then unmaps the memory.
#[derive(Debug)]
pub struct PciDevice {
    addr: PciAddress,
    common: Window,
    device_cfg: Window,
    /// `VIRTIO_NET_F_STATUS` was negotiated: the link bit means something.
    link_status: bool,
    /// The configuration generation once set up: QEMU changes the configuration (the link
    /// status) only when its vhost-user backend goes away or comes back, and a backend that
    /// came back has none of this session, even if the link is up again by now.
    generation: u8,
    memory: Option<HugeMemory>,
}

impl PciDevice {
    fn status(&self) -> u8 {
        self.common.read8(common::DEVICE_STATUS)
    }

    fn set_status(&self, bits: u8) {
        self.common.write8(common::DEVICE_STATUS, self.status() | bits);
    }

    /// Writes 0 to the status and waits for the device to read back 0 (the VMM stops the
    /// vhost-user rings before that).
    fn reset(&self) -> Result<(), PciError> {
        self.common.write8(common::DEVICE_STATUS, 0);
        let deadline = Instant::now() + RESET_WITHIN;
        while self.status() != 0 {
            if Instant::now() >= deadline {
                return Err(PciError::ResetTimeout);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// Resets the device and negotiates features (virtio 1.2, 3.1.1 steps 1-6); returns the
    /// features agreed.
    fn negotiate(&mut self) -> Result<u64, PciError> {
        self.reset()?;
        self.set_status(status::ACKNOWLEDGE | status::DRIVER);
        self.common.write16(common::CONFIG_MSIX_VECTOR, common::NO_VECTOR);
        let offered = self.features();
        if offered & features::PCI_REQUIRED != features::PCI_REQUIRED {
            return Err(PciError::MissingFeatures { offered, missing: features::PCI_REQUIRED & !offered });
        }
        let mut agreed = offered & features::PCI_WANTED;
        if agreed & features::CTRL_VQ == 0 {
            agreed &= !features::MQ; // MQ needs the control queue (virtio 1.2, 5.1.3.1)
        }
        self.set_features(agreed);
        self.set_status(status::FEATURES_OK);
        if self.status() & status::FEATURES_OK == 0 {
            return Err(PciError::FeaturesRefused(agreed));
        }
        self.link_status = agreed & features::STATUS != 0;
        Ok(agreed)
    }

    fn features(&self) -> u64 {
        let mut f = 0u64;
        for half in 0..2u32 {
            self.common.write32(common::DEVICE_FEATURE_SELECT, half);
            f |= u64::from(self.common.read32(common::DEVICE_FEATURE)) << (32 * half);
        }
        f
    }

    fn set_features(&self, f: u64) {
        for half in 0..2u32 {
            self.common.write32(common::DRIVER_FEATURE_SELECT, half);
            self.common.write32(common::DRIVER_FEATURE, (f >> (32 * half)) as u32);
        }
    }

    /// Selects queue `q` and returns its maximum size (0: no such queue).
    fn queue_max(&self, q: u16) -> u16 {
        self.common.write16(common::QUEUE_SELECT, q);
        self.common.read16(common::QUEUE_SIZE)
    }

    /// Programs queue `q` with `ring` and enables it; returns its notify offset.
    fn setup_queue(&self, q: u16, ring: &SplitRing) -> u16 {
        let a = ring.addrs();
        self.common.write16(common::QUEUE_SELECT, q);
        self.common.write16(common::QUEUE_SIZE, ring.size());
        self.common.write16(common::QUEUE_MSIX_VECTOR, common::NO_VECTOR);
        self.common.write64(common::QUEUE_DESC, a.desc);
        self.common.write64(common::QUEUE_DRIVER, a.avail);
        self.common.write64(common::QUEUE_DEVICE, a.used);
        self.common.write16(common::QUEUE_ENABLE, 1);
        self.common.read16(common::QUEUE_NOTIFY_OFF)
    }
}

impl Link for PciDevice {
    fn alive(&self) -> bool {
        let s = self.status();
        let running = s & status::DRIVER_OK != 0 && s & (status::DEVICE_NEEDS_RESET | status::FAILED) == 0;
        running
            && (!self.link_status
                || (self.device_cfg.read16(net::STATUS) & net::S_LINK_UP != 0
                    && self.common.read8(common::CONFIG_GENERATION) == self.generation))
    }
}

impl Drop for PciDevice {
    fn drop(&mut self) {
        // The device must stop using the memory before it is unmapped (the field drops after
        // this body).
        if let Err(e) = self.reset() {
            log::warn!("{}: {e}; the memory stays mapped until exit", self.addr);
            std::mem::forget(self.memory.take());
        }
    }
}

/// A virtio-net PCI function set up for the SlimTCP protocol (see the module documentation).
#[derive(Debug)]
pub struct PciTransport {
    device: Arc<PciDevice>,
    pairs: Vec<Option<QueuePair>>,
    /// Features agreed with the device.
    pub features: u64,
}

/// Maps each BAR the capabilities name, once.
fn map_bars(addr: PciAddress, caps: &VirtioCaps) -> Result<HashMap<u8, Arc<BarMapping>>, PciError> {
    let mut bars = HashMap::new();
    for bar in [caps.common.bar, caps.notify.bar, caps.isr.bar, caps.device.bar] {
        if let std::collections::hash_map::Entry::Vacant(e) = bars.entry(bar) {
            e.insert(BarMapping::map(addr, bar)?);
        }
    }
    Ok(bars)
}

/// The largest power of two that is at most `a` and at most `b` (queue sizes).
fn ring_size(a: u16, b: u16) -> u16 {
    let m = a.min(b).max(1);
    1 << (15 - m.leading_zeros() as u16).min(15)
}

/// First-fit allocation over the physically contiguous runs.
fn alloc_any(allocs: &mut [BumpAllocator], len: usize, align: usize) -> Option<DmaRegion> {
    allocs.iter_mut().find_map(|a| a.alloc(len, align))
}

impl PciTransport {
    /// Finds (or takes `wanted`), binds and sets up the device, with `cfg.queue_pairs` queue
    /// pairs (0: all the device has).
    pub fn open(wanted: Option<PciAddress>, cfg: &GuestConfig) -> Result<PciTransport, GuestError> {
        cfg.validate()?;
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(PciError::NotRoot.into());
        }
        let addr = sysfs::find(wanted)?;
        let uio_path = sysfs::bind_uio(addr)?;
        let caps = caps::parse(&sysfs::config_space(addr)?)?;
        let config = sysfs::open_config(addr)?;
        sysfs::enable_bus_master(&config, addr)?;
        let bars = map_bars(addr, &caps)?;
        let window = |region: caps::CapRegion, min, what| {
            let map = bars.get(&region.bar).cloned().ok_or(PciError::MissingCapability(what))?;
            Window::new(map, region, min, what)
        };
        let common_w = window(caps.common, common::LEN, "common configuration")?;
        let notify_w = window(caps.notify, 2, "notification")?;
        let isr_w = window(caps.isr, 1, "ISR status")?;
        let device_w = window(caps.device, net::MAX_VIRTQUEUE_PAIRS + 2, "device configuration")?;
        let uio = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&uio_path)
            .map_err(PciError::io("cannot open", &uio_path))?;

        // From here on, dropping `dev` (an error below) resets the device again.
        let mut dev = PciDevice {
            addr,
            common: common_w,
            device_cfg: device_w,
            link_status: false,
            generation: 0,
            memory: None,
        };
        let agreed = dev.negotiate()?;

        let max_pairs = if agreed & features::MQ != 0 {
            usize::from(dev.device_cfg.read16(net::MAX_VIRTQUEUE_PAIRS)).max(1)
        } else {
            1
        };
        let pairs = if cfg.queue_pairs == 0 { max_pairs } else { cfg.queue_pairs };
        if pairs > max_pairs {
            return Err(GuestError::TooManyQueuePairs { wanted: pairs, available: max_pairs });
        }
        let event_idx = agreed & features::EVENT_IDX != 0;
        let num_queues = dev.common.read16(common::NUM_QUEUES);
        let mut sizes = Vec::with_capacity(2 * pairs);
        for q in 0..(2 * pairs) as u16 {
            let max = if q < num_queues { dev.queue_max(q) } else { 0 };
            if max == 0 {
                return Err(PciError::NoQueue(q).into());
            }
            sizes.push(ring_size(max, cfg.queue_size));
        }
        // The control queue (index, ring size) follows the last pair the device has.
        let ctrl_queue = match (agreed & features::CTRL_VQ != 0).then_some((2 * max_pairs) as u16) {
            Some(q) => match dev.queue_max(q) {
                0 => return Err(PciError::NoQueue(q).into()),
                max => Some((q, ring_size(max, CTRL_QUEUE_SIZE))),
            },
            None => None,
        };

        dev.memory = Some(HugeMemory::allocate(cfg.memory_size)?);
        dev.generation = dev.common.read8(common::CONFIG_GENERATION);
        let dev = Arc::new(dev);
        let (runs, keep) = match &dev.memory {
            Some(m) => (
                m.runs().into_iter().map(|(off, gpa, len)| (m.host(off), gpa, len)).collect::<Vec<_>>(),
                dev.clone(),
            ),
            None => return Err(GuestError::Config("no memory")),
        };
        let largest = runs.iter().map(|r| r.2).max().unwrap_or(0);
        let mut allocs: Vec<BumpAllocator> = runs
            .into_iter()
            .map(|(host, gpa, len)| {
                // SAFETY: each run lies inside the hugepage mapping, which lives as long as the
                // device (`keep`), and the device sees exactly those bytes at `gpa` (pagemap).
                let region = unsafe { DmaRegion::new(host, gpa, len, keep.clone()) };
                BumpAllocator::new(region)
            })
            .collect();

        // Rings first (small), then one buffer area per pair, each inside one run.
        let too_small = || GuestError::Config("memory_size too small for the rings");
        let mut rings = Vec::with_capacity(2 * pairs);
        for size in &sizes {
            let ring = alloc_ring_any(&mut allocs, *size, event_idx).ok_or_else(too_small)?;
            rings.push(ring);
        }
        let ctrl = match ctrl_queue {
            Some((q, size)) => {
                let ring = alloc_ring_any(&mut allocs, size, event_idx).ok_or_else(too_small)?;
                let buf = alloc_any(&mut allocs, 64, 64).ok_or_else(too_small)?;
                Some((q, ring, buf))
            }
            None => None,
        };
        let remaining: usize = allocs.iter().map(BumpAllocator::remaining).sum();
        let per_pair = (remaining / pairs).saturating_sub(4096) & !4095;
        let mut areas = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            let area = alloc_any(&mut allocs, per_pair, 4096)
                .ok_or(PciError::NotContiguous { needed: per_pair, largest })?;
            areas.push(area);
        }

        let multiplier = usize::try_from(caps.notify_off_multiplier).unwrap_or(0);
        let kick =
            |q: u16, off: u16| PciNotify { window: notify_w.sub(usize::from(off) * multiplier, 2), queue: q };
        let irq = UioInterrupt::new(uio, config, isr_w);
        let mut vqs = Vec::with_capacity(2 * pairs);
        for (q, ring) in rings.into_iter().enumerate() {
            let q = q as u16;
            let off = dev.setup_queue(q, &ring);
            vqs.push(Virtqueue {
                ring,
                kick: Box::new(kick(q, off)),
                call: Some(Box::new(QueueInterrupt(irq.clone()))),
            });
        }
        let mut ctrl = ctrl.map(|(q, ring, buf)| {
            let off = dev.setup_queue(q, &ring);
            ControlQueue { ring, kick: kick(q, off), buf }
        });
        dev.set_status(status::DRIVER_OK);
        let s = dev.status();
        if s & (status::DEVICE_NEEDS_RESET | status::FAILED) != 0 {
            return Err(PciError::DeviceFailed(s).into());
        }
        if pairs > 1 {
            if let Some(ctrl) = ctrl.as_mut() {
                ctrl.set_queue_pairs(pairs as u16)?;
            }
        }

        let link: Arc<dyn Link> = dev.clone();
        let mut vqs = vqs.into_iter();
        let mut out = Vec::with_capacity(pairs);
        for (index, memory) in areas.into_iter().enumerate() {
            let (Some(rx), Some(tx)) = (vqs.next(), vqs.next()) else {
                return Err(GuestError::Config("queue pair"));
            };
            out.push(Some(QueuePair { index, rx, tx, memory, link: link.clone() }));
        }
        log::info!("{addr}: virtio-net set up with features {agreed:#x}, {pairs} of {max_pairs} queue pairs, rings of {sizes:?}");
        Ok(PciTransport { device: dev, pairs: out, features: agreed })
    }

    /// The function's PCI address.
    pub fn address(&self) -> PciAddress {
        self.device.addr
    }
}

fn alloc_ring_any(allocs: &mut [BumpAllocator], size: u16, event_idx: bool) -> Option<SplitRing> {
    allocs.iter_mut().find_map(|a| alloc_ring(a, size, event_idx).ok())
}

impl Transport for PciTransport {
    fn queue_pairs(&self) -> usize {
        self.pairs.len()
    }

    fn alive(&self) -> bool {
        self.device.alive()
    }

    fn take_queue_pair(&mut self, index: usize) -> Result<QueuePair, GuestError> {
        self.pairs.get_mut(index).and_then(Option::take).ok_or(GuestError::NoSuchQueuePair(index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_are_powers_of_two_within_both_limits() {
        assert_eq!(ring_size(256, 1024), 256);
        assert_eq!(ring_size(1024, 1024), 1024);
        assert_eq!(ring_size(1000, 1024), 512);
        assert_eq!(ring_size(64, 16), 16);
        assert_eq!(ring_size(0, 16), 1);
    }
}
