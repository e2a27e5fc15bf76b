//! The VMM's side of vhost-user, for attack scenarios against the backend (the system test
//! `tests/tests/hostile_vmm.rs` and the soak's hostile tenant): memory regions over memfds that
//! are smaller than they claim, rings at a fake host address, raw messages, descriptors passed
//! with them, and the checks that the backend ended a connection.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::EventFd;

/// Where the attacker says its memory is (never dereferenced by anyone).
pub const FAKE_HVA: u64 = 0x7f00_0000_0000;

/// A memfd of `len` bytes (sparse).
pub fn memfd(len: u64) -> std::io::Result<File> {
    // SAFETY: memfd_create with a valid NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"hostile-vmm".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor owned by nobody else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len)?;
    Ok(f)
}

/// SET_OWNER, the backend's features, and the protocol features MQ | REPLY_ACK |
/// CONFIGURE_MEM_SLOTS (those it offers).
pub fn negotiate(f: &mut Frontend) -> Result<(), vhost::Error> {
    f.set_owner()?;
    let features = f.get_features()?;
    let pf = f.get_protocol_features()?;
    f.set_protocol_features(
        pf & (VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS),
    )?;
    f.set_features(features)
}

/// Whether the backend closed the connection (a request gets no answer) within `wait`.
pub fn closed_within(f: &mut Frontend, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if f.get_features().is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A memory region of `size` bytes at guest address `gpa`, backed by `file` from offset 0
/// (whatever the file's real size).
pub fn region(gpa: u64, size: u64, file: &File) -> VhostUserMemoryRegionInfo {
    VhostUserMemoryRegionInfo {
        guest_phys_addr: gpa,
        memory_size: size,
        userspace_addr: FAKE_HVA + gpa,
        mmap_offset: 0,
        mmap_handle: file.as_raw_fd(),
    }
}

/// Rings 0 and 1 (256 entries) at the start of guest memory (zeroed: nothing posted), with
/// `events` as [call 0, kick 0, call 1, kick 1], enabled and kicked, so that the backend's
/// worker polls them.
pub fn start_rings(f: &mut Frontend, events: &[EventFd]) -> Result<(), vhost::Error> {
    for ring in 0..2usize {
        let base = ring as u64 * 0x4000;
        f.set_vring_num(ring, 256)?;
        let cfg = VringConfigData {
            queue_max_size: 1024,
            queue_size: 256,
            flags: 0,
            desc_table_addr: FAKE_HVA + 0x1_0000 + base,
            avail_ring_addr: FAKE_HVA + 0x1_1000 + base,
            used_ring_addr: FAKE_HVA + 0x1_2000 + base,
            log_addr: None,
        };
        f.set_vring_addr(ring, &cfg)?;
        f.set_vring_base(ring, 0)?;
        f.set_vring_call(ring, &events[2 * ring])?;
        f.set_vring_kick(ring, &events[2 * ring + 1])?;
        f.set_vring_enable(ring, true)?;
        // A kick that fails only means the worker polls a little later.
        let _ = events[2 * ring + 1].write(1);
    }
    Ok(())
}

/// A raw vhost-user message: request code, flags, then the body's length and the body.
pub fn message(request: u32, flags: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(12 + body.len());
    m.extend_from_slice(&request.to_le_bytes());
    m.extend_from_slice(&flags.to_le_bytes());
    m.extend_from_slice(&(body.len() as u32).to_le_bytes());
    m.extend_from_slice(body);
    m
}

/// Whether the peer closed `s` (end of stream or reset) within its read timeout.
pub fn peer_closed(s: &mut UnixStream) -> bool {
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A pipe (read end, write end): descriptors to pass in messages.
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: pipe2 fills the two-element array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
