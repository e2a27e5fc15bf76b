//! The VMM side of vhost-user for tests: memfd guest memory, the vhost crate's frontend, and
//! ring set-up as QEMU and cloud-hypervisor send it.

use std::fs::File;
use std::os::fd::FromRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use slimtcp_vhost::device::{protocol_features, DEVICE_FEATURES};
use slimtcp_vhost::guest_mem::GuestMem;
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{FileOffset, GuestAddress, GuestMemoryBackend};
use vmm_sys_util::eventfd::EventFd;

/// Ring size the tests use.
pub const QSIZE: u16 = 256;

/// Guest memory in a memfd (shareable with the backend), `RAM` bytes at 0.
pub fn memfd_memory() -> GuestMem {
    // SAFETY: a plain memfd_create call with a valid NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"slimtcp-test".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: `fd` is a new descriptor owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(super::RAM).expect("size memfd");
    GuestMem::from_ranges_with_files(&[(
        GuestAddress(0),
        super::RAM as usize,
        Some(FileOffset::new(file, 0)),
    )])
    .expect("memfd guest memory")
}

/// The memory table message's regions.
pub fn regions(mem: &GuestMem) -> Vec<VhostUserMemoryRegionInfo> {
    mem.iter().map(|r| VhostUserMemoryRegionInfo::from_guest_region(r).expect("region info")).collect()
}

/// Connects to the daemon at `path` (retrying until it listens) for a device of `pairs` pairs.
pub fn connect(path: &Path, pairs: usize) -> Frontend {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match Frontend::connect(path, (2 * pairs + 1) as u64) {
            Ok(f) => return f,
            Err(e) => {
                assert!(Instant::now() < deadline, "cannot connect: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// The host address of `gpa` (vhost-user ring addresses are VMM addresses).
pub fn hva(mem: &GuestMem, gpa: GuestAddress) -> u64 {
    mem.get_host_address(gpa).expect("hva") as u64
}

/// Sets up ring `idx` of the device (num, addr, base, call, kick) from `ring`, starting at
/// avail index `base` (0 for a fresh ring, GET_VRING_BASE's answer for a restarted one).
pub fn setup_ring(
    f: &mut Frontend,
    mem: &GuestMem,
    idx: usize,
    ring: &super::Ring<'_>,
    (call, kick): (&EventFd, &EventFd),
    base: u16,
) {
    f.set_vring_num(idx, QSIZE).expect("set_vring_num");
    let cfg = VringConfigData {
        queue_max_size: 1024,
        queue_size: QSIZE,
        flags: 0,
        desc_table_addr: hva(mem, ring.mock.desc_table_addr()),
        used_ring_addr: hva(mem, ring.mock.used_addr()),
        avail_ring_addr: hva(mem, ring.mock.avail_addr()),
        log_addr: None,
    };
    f.set_vring_addr(idx, &cfg).expect("set_vring_addr");
    f.set_vring_base(idx, base).expect("set_vring_base");
    f.set_vring_call(idx, call).expect("set_vring_call");
    f.set_vring_kick(idx, kick).expect("set_vring_kick");
}

/// SET_OWNER and feature negotiation for a device of `pairs` pairs; returns its features.
pub fn negotiate(f: &mut Frontend, pairs: usize) -> u64 {
    f.set_owner().expect("set_owner");
    let features = f.get_features().expect("get_features");
    assert_eq!(features & DEVICE_FEATURES, DEVICE_FEATURES);
    assert_ne!(features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits(), 0);
    let pf = f.get_protocol_features().expect("get_protocol_features");
    assert!(!pf.contains(VhostUserProtocolFeatures::INFLIGHT_SHMFD));
    assert!(pf.contains(protocol_features()));
    f.set_protocol_features(pf & protocol_features()).expect("set_protocol_features");
    assert_eq!(f.get_queue_num().expect("get_queue_num"), (2 * pairs + 1) as u64);
    features
}
