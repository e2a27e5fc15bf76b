//! virtio-net / virtio feature bits the guest library negotiates, on either transport.

/// VIRTIO_NET_F_MRG_RXBUF (the 12-byte header; this protocol never merges).
pub const MRG_RXBUF: u64 = 1 << 15;
/// VIRTIO_NET_F_CTRL_VQ (PCI: enables the pairs past the first; vhost-user: this process is the
/// VMM and enables them itself).
pub const CTRL_VQ: u64 = 1 << 17;
/// VIRTIO_NET_F_MQ.
pub const MQ: u64 = 1 << 22;
/// VIRTIO_RING_F_EVENT_IDX.
pub const EVENT_IDX: u64 = 1 << 29;
/// VHOST_USER_F_PROTOCOL_FEATURES.
pub const PROTOCOL_FEATURES: u64 = 1 << 30;
/// VIRTIO_F_VERSION_1.
pub const VERSION_1: u64 = 1 << 32;
/// What a vhost-user backend must offer.
pub const REQUIRED: u64 = VERSION_1 | PROTOCOL_FEATURES;
/// What the driver takes when offered.
pub const WANTED: u64 = REQUIRED | MRG_RXBUF | MQ | EVENT_IDX;
/// VIRTIO_NET_F_STATUS: the link status in the device configuration (QEMU clears LINK_UP when
/// its vhost-user backend goes away).
pub const STATUS: u64 = 1 << 16;
/// VIRTIO_F_ACCESS_PLATFORM: accepted when offered (without an IOMMU addresses are physical).
pub const ACCESS_PLATFORM: u64 = 1 << 33;
/// What a PCI device must offer (the VMM consumes VHOST_USER_F_PROTOCOL_FEATURES).
pub const PCI_REQUIRED: u64 = VERSION_1;
/// What the PCI transport takes when offered.
pub const PCI_WANTED: u64 = VERSION_1 | MRG_RXBUF | MQ | CTRL_VQ | EVENT_IDX | STATUS | ACCESS_PLATFORM;
