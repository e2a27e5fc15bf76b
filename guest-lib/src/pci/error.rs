//! Why the PCI transport could not set the device up. Each message names what to do.

use crate::spec::PciAddress;

/// A PCI transport set-up failure.
#[derive(Debug, thiserror::Error)]
pub enum PciError {
    /// Not running as root (sysfs binding, BAR mapping and pagemap need it).
    #[error(
        "the pci transport needs root (binding the device, mapping its BAR, reading /proc/self/pagemap)"
    )]
    NotRoot,
    /// No virtio-net PCI function (1af4:1041) in this VM.
    #[error("no virtio-net PCI device (1af4:1041) found in /sys/bus/pci/devices: attach a vhost-user-net device to the VM (docs/guest-lib.md)")]
    NoDevice,
    /// The named function does not exist.
    #[error("PCI device {0} does not exist (see /sys/bus/pci/devices)")]
    NoSuchDevice(PciAddress),
    /// The named function is not a modern virtio-net device.
    #[error("PCI device {addr} is {vendor:04x}:{device:04x}, not a modern virtio-net device (1af4:1041; QEMU: disable-legacy=on)")]
    NotVirtioNet {
        /// Where.
        addr: PciAddress,
        /// Its vendor id.
        vendor: u16,
        /// Its device id.
        device: u16,
    },
    /// The function is bound to a driver this library does not take it from.
    #[error("PCI device {addr} is bound to {driver}: unbind it first (echo {addr} > /sys/bus/pci/drivers/{driver}/unbind)")]
    BoundElsewhere {
        /// Where.
        addr: PciAddress,
        /// The driver that has it.
        driver: String,
    },
    /// uio_pci_generic is not loaded.
    #[error("the uio_pci_generic driver is not loaded: modprobe uio_pci_generic")]
    NoUioDriver,
    /// Binding gave no /dev/uioN.
    #[error("PCI device {0} has no uio node after binding it to uio_pci_generic (see dmesg)")]
    NoUioNode(PciAddress),
    /// A sysfs or device file could not be used.
    #[error("{what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The configuration space is not what a modern virtio device has.
    #[error("PCI configuration space: {0}")]
    ConfigSpace(&'static str),
    /// A virtio structure is missing from the capability list.
    #[error("the device has no virtio {0} capability (not a virtio 1.x device?)")]
    MissingCapability(&'static str),
    /// A capability points outside its BAR.
    #[error("the virtio {what} structure lies outside BAR {bar} ({len} bytes)")]
    CapabilityOutsideBar {
        /// Which structure.
        what: &'static str,
        /// The BAR.
        bar: u8,
        /// The BAR's length.
        len: usize,
    },
    /// The device did not finish a reset.
    #[error("the device did not complete its reset within 1 s")]
    ResetTimeout,
    /// The device lacks a feature the protocol needs.
    #[error("the device offers features {offered:#x} without {missing:#x} (VERSION_1 is required: QEMU disable-legacy=on)")]
    MissingFeatures {
        /// Offered.
        offered: u64,
        /// Missing.
        missing: u64,
    },
    /// FEATURES_OK did not stick.
    #[error("the device refused features {0:#x} (FEATURES_OK not set)")]
    FeaturesRefused(u64),
    /// A queue the device should have is absent.
    #[error("the device has no queue {0}")]
    NoQueue(u16),
    /// The device failed during set-up.
    #[error(
        "the device set DEVICE_NEEDS_RESET or FAILED (status {0:#x}) during set-up; is the backend running?"
    )]
    DeviceFailed(u8),
    /// Not enough hugepages.
    #[error("{needed} free 2 MiB hugepages needed, {free} free: echo {needed} > /proc/sys/vm/nr_hugepages (or boot with hugepages={needed})")]
    NoHugepages {
        /// Needed.
        needed: usize,
        /// Free now.
        free: usize,
    },
    /// The hugepages are not physically contiguous enough for one queue pair's buffer area.
    #[error("a queue pair needs {needed} physically contiguous bytes, the largest hugepage run is {largest}: reserve hugepages at boot (hugepages=N) or use a smaller memory_size")]
    NotContiguous {
        /// Needed.
        needed: usize,
        /// Largest run found.
        largest: usize,
    },
    /// /proc/self/pagemap gave no physical address.
    #[error("/proc/self/pagemap shows no physical address for a hugepage (needs root: CAP_SYS_ADMIN)")]
    NoPhysicalAddress,
    /// The control queue did not answer.
    #[error("the control queue did not answer {0} within 1 s")]
    ControlTimeout(&'static str),
    /// The control queue answered with an error.
    #[error("the device refused control command {0}")]
    ControlRefused(&'static str),
    /// The ring driver refused a layout.
    #[error("virtqueue set-up")]
    Ring(#[source] crate::ring::RingError),
}

impl PciError {
    /// The errno a C caller sees for this failure.
    pub fn errno(&self) -> i32 {
        match self {
            PciError::NotRoot | PciError::NoPhysicalAddress => libc::EPERM,
            PciError::NoDevice
            | PciError::NoSuchDevice(_)
            | PciError::NotVirtioNet { .. }
            | PciError::ConfigSpace(_)
            | PciError::MissingCapability(_)
            | PciError::CapabilityOutsideBar { .. }
            | PciError::NoQueue(_) => libc::ENODEV,
            PciError::BoundElsewhere { .. } => libc::EBUSY,
            PciError::NoUioDriver | PciError::NoUioNode(_) => libc::ENOENT,
            PciError::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            PciError::ResetTimeout | PciError::ControlTimeout(_) => libc::ETIMEDOUT,
            PciError::MissingFeatures { .. } | PciError::FeaturesRefused(_) => libc::EOPNOTSUPP,
            PciError::NoHugepages { .. } | PciError::NotContiguous { .. } => libc::ENOMEM,
            PciError::DeviceFailed(_) | PciError::ControlRefused(_) | PciError::Ring(_) => libc::EIO,
        }
    }

    /// An I/O error on `path` while doing `what`.
    pub(crate) fn io(
        what: &'static str,
        path: impl AsRef<std::path::Path>,
    ) -> impl FnOnce(std::io::Error) -> PciError {
        let path = path.as_ref().display().to_string();
        move |source| PciError::Io { what, path, source }
    }
}
