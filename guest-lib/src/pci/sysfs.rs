//! The PCI function through sysfs: finding the virtio-net device, taking it from `virtio-pci`
//! and giving it to `uio_pci_generic`, its configuration space, bus mastering, and mapping a BAR.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PciError;
use crate::spec::PciAddress;

const DEVICES: &str = "/sys/bus/pci/devices";
const UIO_DRIVER: &str = "uio_pci_generic";
/// Red Hat / virtio vendor id and the modern (1.x) virtio-net device id.
pub const VIRTIO_VENDOR: u16 = 0x1af4;
/// Modern virtio-net: 0x1040 + device type 1.
pub const VIRTIO_NET_MODERN: u16 = 0x1041;

/// PCI command register and its bus-master bit.
const PCI_COMMAND: u64 = 0x04;
const PCI_COMMAND_MASTER: u16 = 1 << 2;

fn dev_dir(addr: PciAddress) -> PathBuf {
    Path::new(DEVICES).join(addr.to_string())
}

fn read_hex_id(path: &Path) -> Option<u16> {
    let text = std::fs::read_to_string(path).ok()?;
    u16::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

fn ids(addr: PciAddress) -> Option<(u16, u16)> {
    let dir = dev_dir(addr);
    Some((read_hex_id(&dir.join("vendor"))?, read_hex_id(&dir.join("device"))?))
}

/// The device to use: `wanted` after checking it is a modern virtio-net function, or the
/// first such function on the system (lowest address).
pub fn find(wanted: Option<PciAddress>) -> Result<PciAddress, PciError> {
    if let Some(addr) = wanted {
        let (vendor, device) = ids(addr).ok_or(PciError::NoSuchDevice(addr))?;
        if (vendor, device) != (VIRTIO_VENDOR, VIRTIO_NET_MODERN) {
            return Err(PciError::NotVirtioNet { addr, vendor, device });
        }
        return Ok(addr);
    }
    let entries = std::fs::read_dir(DEVICES).map_err(PciError::io("cannot list", DEVICES))?;
    let mut found: Vec<PciAddress> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|a| ids(*a) == Some((VIRTIO_VENDOR, VIRTIO_NET_MODERN)))
        .collect();
    found.sort();
    found.first().copied().ok_or(PciError::NoDevice)
}

/// The driver bound to `addr`, if any.
fn driver_of(addr: PciAddress) -> Option<String> {
    let link = std::fs::read_link(dev_dir(addr).join("driver")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

fn write_sysfs(path: &Path, value: &str) -> Result<(), PciError> {
    std::fs::write(path, value).map_err(PciError::io("cannot write", path))
}

/// Makes sure `uio_pci_generic` drives `addr` (taking it from `virtio-pci` if needed) and
/// returns its `/dev/uioN`.
pub fn bind_uio(addr: PciAddress) -> Result<PathBuf, PciError> {
    if !Path::new("/sys/bus/pci/drivers").join(UIO_DRIVER).exists() {
        return Err(PciError::NoUioDriver);
    }
    let dir = dev_dir(addr);
    match driver_of(addr).as_deref() {
        Some(UIO_DRIVER) => {}
        Some(driver @ "virtio-pci") => {
            log::info!("{addr}: taking the device from {driver} for {UIO_DRIVER}");
            write_sysfs(&dir.join("driver").join("unbind"), &addr.to_string())?;
            bind_to_uio(addr)?;
        }
        Some(driver) => return Err(PciError::BoundElsewhere { addr, driver: driver.to_owned() }),
        None => bind_to_uio(addr)?,
    }
    uio_node(addr)
}

fn bind_to_uio(addr: PciAddress) -> Result<(), PciError> {
    let dir = dev_dir(addr);
    // driver_override makes exactly this function bind to uio_pci_generic (a new_id would
    // claim every virtio-net device of the VM).
    write_sysfs(&dir.join("driver_override"), UIO_DRIVER)?;
    write_sysfs(Path::new("/sys/bus/pci/drivers_probe"), &addr.to_string())?;
    match driver_of(addr).as_deref() {
        Some(UIO_DRIVER) => Ok(()),
        Some(other) => Err(PciError::BoundElsewhere { addr, driver: other.to_owned() }),
        None => Err(PciError::NoUioNode(addr)),
    }
}

/// `/dev/uioN` of a function bound to uio (devtmpfs creates the node asynchronously: waits
/// briefly for it).
fn uio_node(addr: PciAddress) -> Result<PathBuf, PciError> {
    let uio_dir = dev_dir(addr).join("uio");
    let name = std::fs::read_dir(&uio_dir)
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok()?.file_name().to_str().map(str::to_owned)))
        .ok_or(PciError::NoUioNode(addr))?;
    let node = Path::new("/dev").join(name);
    let deadline = Instant::now() + Duration::from_secs(1);
    while !node.exists() {
        if Instant::now() >= deadline {
            return Err(PciError::NoUioNode(addr));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(node)
}

/// The function's configuration space (all of it that sysfs shows: 256 or 4096 bytes as root).
pub fn config_space(addr: PciAddress) -> Result<Vec<u8>, PciError> {
    let path = dev_dir(addr).join("config");
    std::fs::read(&path).map_err(PciError::io("cannot read", &path))
}

/// The function's configuration space file, open for reading and writing.
pub fn open_config(addr: PciAddress) -> Result<File, PciError> {
    let path = dev_dir(addr).join("config");
    OpenOptions::new().read(true).write(true).open(&path).map_err(PciError::io("cannot open", &path))
}

/// Sets the bus-master bit in the command register: the device (QEMU's control queue, for
/// one) may then access memory. uio_pci_generic enables the device but not bus mastering.
pub fn enable_bus_master(f: &File, addr: PciAddress) -> Result<(), PciError> {
    let path = dev_dir(addr).join("config");
    let mut cmd = [0u8; 2];
    f.read_exact_at(&mut cmd, PCI_COMMAND).map_err(PciError::io("cannot read", &path))?;
    let value = u16::from_le_bytes(cmd);
    if value & PCI_COMMAND_MASTER == 0 {
        f.write_all_at(&(value | PCI_COMMAND_MASTER).to_le_bytes(), PCI_COMMAND)
            .map_err(PciError::io("cannot write", &path))?;
    }
    Ok(())
}

/// A BAR mapped into this process (unmapped on drop).
#[derive(Debug)]
pub struct BarMapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain device memory owned by this value; accesses go through
// `super::regs::Window`, which does single volatile loads and stores.
unsafe impl Send for BarMapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for BarMapping {}

impl BarMapping {
    /// Maps BAR `bar` of `addr` through sysfs `resourceN`.
    pub fn map(addr: PciAddress, bar: u8) -> Result<Arc<BarMapping>, PciError> {
        let path = dev_dir(addr).join(format!("resource{bar}"));
        let file: File = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(PciError::io("cannot open", &path))?;
        let len = file.metadata().map_err(PciError::io("cannot stat", &path))?.len() as usize;
        if len == 0 {
            return Err(PciError::ConfigSpace("a virtio capability names an empty BAR"));
        }
        // SAFETY: a fresh shared mapping of the BAR file; the kernel checks length and access.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(PciError::io("cannot map", &path)(std::io::Error::last_os_error()));
        }
        Ok(Arc::new(BarMapping { base: base.cast(), len }))
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// First byte.
    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

impl Drop for BarMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`; nothing uses it any more (every
        // Window holds an Arc of this).
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}
