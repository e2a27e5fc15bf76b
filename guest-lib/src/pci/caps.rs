//! The virtio PCI capabilities (virtio 1.2, section 4.1.4): where in which BAR the common
//! configuration, the notification area, the ISR status and the device configuration live.
//! Parsed from the function's configuration space (sysfs `config`), never assumed.

use super::PciError;

/// PCI configuration space: status register (bit 4: a capability list exists).
const PCI_STATUS: usize = 0x06;
const PCI_STATUS_CAP_LIST: u16 = 1 << 4;
/// PCI configuration space: the first capability's offset.
const PCI_CAPABILITY_LIST: usize = 0x34;
/// Capability id of vendor-specific capabilities (virtio's).
const PCI_CAP_ID_VNDR: u8 = 0x09;

/// `cfg_type` values of `struct virtio_pci_cap`.
const VIRTIO_PCI_CAP_COMMON_CFG: u8 = 1;
const VIRTIO_PCI_CAP_NOTIFY_CFG: u8 = 2;
const VIRTIO_PCI_CAP_ISR_CFG: u8 = 3;
const VIRTIO_PCI_CAP_DEVICE_CFG: u8 = 4;

/// One structure's place: `length` bytes at `offset` in BAR `bar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapRegion {
    /// BAR index (0..=5).
    pub bar: u8,
    /// Offset inside the BAR.
    pub offset: u32,
    /// Length in bytes.
    pub length: u32,
}

/// Where the four structures a driver needs are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtioCaps {
    /// `struct virtio_pci_common_cfg`.
    pub common: CapRegion,
    /// The notification area.
    pub notify: CapRegion,
    /// Queue `q`'s notify address is `notify.offset + queue_notify_off(q) * multiplier`.
    pub notify_off_multiplier: u32,
    /// The ISR status byte.
    pub isr: CapRegion,
    /// The device-specific configuration (virtio-net: MAC, status, max pairs).
    pub device: CapRegion,
}

fn u16_at(cfg: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(cfg.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(cfg: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(cfg.get(at..at + 4)?.try_into().ok()?))
}

/// Walks the capability list of configuration space `cfg` (at least the first 256 bytes).
/// The first capability of each type wins, as the specification asks of drivers; a list that
/// loops or leaves the space is an error, as is a missing structure.
pub fn parse(cfg: &[u8]) -> Result<VirtioCaps, PciError> {
    let status = u16_at(cfg, PCI_STATUS).ok_or(PciError::ConfigSpace("shorter than 64 bytes"))?;
    if status & PCI_STATUS_CAP_LIST == 0 {
        return Err(PciError::ConfigSpace("no capability list (not a modern virtio device)"));
    }
    let (mut common, mut notify, mut isr, mut device) = (None, None, None, None);
    let mut multiplier = 0;
    let mut at = usize::from(*cfg.get(PCI_CAPABILITY_LIST).unwrap_or(&0) & !3);
    // At most 48 capabilities fit in 256 bytes: more steps means a loop.
    for _ in 0..48 {
        if at == 0 {
            break;
        }
        let cap = cfg.get(at..at + 16).ok_or(PciError::ConfigSpace("a capability runs past the end"))?;
        let (id, next, cap_len, cfg_type) = (cap[0], cap[1], cap[2], cap[3]);
        if id == PCI_CAP_ID_VNDR && cap_len >= 16 {
            let region = CapRegion {
                bar: cap[4],
                offset: u32_at(cap, 8).unwrap_or(0),
                length: u32_at(cap, 12).unwrap_or(0),
            };
            if region.bar > 5 {
                // Reserved BAR numbers: the specification says to ignore the capability.
            } else if cfg_type == VIRTIO_PCI_CAP_COMMON_CFG && common.is_none() {
                common = Some(region);
            } else if cfg_type == VIRTIO_PCI_CAP_NOTIFY_CFG && notify.is_none() && cap_len >= 20 {
                multiplier =
                    u32_at(cfg, at + 16).ok_or(PciError::ConfigSpace("notify capability truncated"))?;
                notify = Some(region);
            } else if cfg_type == VIRTIO_PCI_CAP_ISR_CFG && isr.is_none() {
                isr = Some(region);
            } else if cfg_type == VIRTIO_PCI_CAP_DEVICE_CFG && device.is_none() {
                device = Some(region);
            }
        }
        at = usize::from(next & !3);
    }
    if at != 0 {
        return Err(PciError::ConfigSpace("the capability list loops"));
    }
    let missing = |what| PciError::MissingCapability(what);
    Ok(VirtioCaps {
        common: common.ok_or_else(|| missing("common configuration"))?,
        notify: notify.ok_or_else(|| missing("notification"))?,
        notify_off_multiplier: multiplier,
        isr: isr.ok_or_else(|| missing("ISR status"))?,
        device: device.ok_or_else(|| missing("device configuration"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QEMU 10's virtio-net-pci (disable-legacy=on) as the notes record it: MSI-X first, then
    /// the virtio structures in BAR 4 at 0x0 / 0x1000 / 0x2000 / 0x3000, multiplier 4.
    fn qemu_like() -> Vec<u8> {
        let mut cfg = vec![0u8; 256];
        cfg[PCI_STATUS..PCI_STATUS + 2].copy_from_slice(&PCI_STATUS_CAP_LIST.to_le_bytes());
        cfg[PCI_CAPABILITY_LIST] = 0x98;
        // MSI-X at 0x98 -> 0x84.
        cfg[0x98] = 0x11;
        cfg[0x99] = 0x84;
        let vndr =
            |cfg: &mut Vec<u8>, at: usize, next: u8, ty: u8, offset: u32, len: u32, extra: Option<u32>| {
                cfg[at] = PCI_CAP_ID_VNDR;
                cfg[at + 1] = next;
                cfg[at + 2] = if extra.is_some() { 20 } else { 16 };
                cfg[at + 3] = ty;
                cfg[at + 4] = 4;
                cfg[at + 8..at + 12].copy_from_slice(&offset.to_le_bytes());
                cfg[at + 12..at + 16].copy_from_slice(&len.to_le_bytes());
                if let Some(m) = extra {
                    cfg[at + 16..at + 20].copy_from_slice(&m.to_le_bytes());
                }
            };
        vndr(&mut cfg, 0x84, 0x70, VIRTIO_PCI_CAP_COMMON_CFG, 0x0, 0x1000, None);
        vndr(&mut cfg, 0x70, 0x60, VIRTIO_PCI_CAP_ISR_CFG, 0x1000, 0x1000, None);
        vndr(&mut cfg, 0x60, 0x48, VIRTIO_PCI_CAP_DEVICE_CFG, 0x2000, 0x1000, None);
        vndr(&mut cfg, 0x48, 0xa0, VIRTIO_PCI_CAP_NOTIFY_CFG, 0x3000, 0x1000, Some(4));
        // A PCI_CFG capability (type 5) last: ignored.
        vndr(&mut cfg, 0xa0, 0x00, 5, 0, 0, Some(0));
        cfg
    }

    #[test]
    fn qemu_layout_is_found_by_walking_the_list() {
        let caps = parse(&qemu_like()).expect("parse");
        assert_eq!(caps.common, CapRegion { bar: 4, offset: 0, length: 0x1000 });
        assert_eq!(caps.isr.offset, 0x1000);
        assert_eq!(caps.device.offset, 0x2000);
        assert_eq!(caps.notify.offset, 0x3000);
        assert_eq!(caps.notify_off_multiplier, 4);
    }

    #[test]
    fn a_looping_list_is_refused() {
        let mut cfg = qemu_like();
        cfg[0xa1] = 0x84; // the last capability points back to the first virtio one
        assert!(matches!(parse(&cfg), Err(PciError::ConfigSpace(_))));
    }

    #[test]
    fn a_missing_structure_is_named() {
        let mut cfg = qemu_like();
        cfg[0x48 + 3] = 0x77; // the notify capability becomes an unknown type
        let e = parse(&cfg).expect_err("no notify");
        assert!(e.to_string().contains("notification"), "{e}");
    }

    #[test]
    fn a_device_without_capabilities_is_not_modern_virtio() {
        let cfg = vec![0u8; 256];
        assert!(matches!(parse(&cfg), Err(PciError::ConfigSpace(_))));
        assert!(parse(&[0u8; 4]).is_err());
    }
}
