//! A Linux TAP device as a [`Nic`]: Ethernet frames exchanged with the kernel through
//! `/dev/net/tun`.
//!
//! [`TapNic::open`] creates the interface in the calling thread's network namespace (or attaches
//! to an existing one of that name), non-blocking and without packet-information prefix. The
//! kernel side of the link is configured with [`TapNic::set_up`] and
//! [`TapNic::set_host_address`]; [`TapNic::wait_readable`] lets an idle loop sleep until a frame
//! arrives or its next timer is due. No offloads: the stack computes every checksum.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::time::Duration;

use libc::{c_char, c_int, c_short, c_uchar, c_ulong, c_ushort};

use crate::nic::buf::{DEFAULT_BUF_SIZE, DEFAULT_HEADROOM};
use crate::nic::pool::BufferPool;
use crate::nic::{ExternalFrame, Nic, NicCapabilities, NicError, PacketBuf};
use crate::time::Instant;
use crate::wire::ChecksumCapabilities;

/// The TUN/TAP clone device.
pub const TUN_PATH: &str = "/dev/net/tun";
/// Largest burst `receive` returns and `transmit` is asked for.
pub const TAP_MAX_BURST: usize = 32;
/// Ethernet header plus one VLAN tag: what a frame may carry beyond the MTU.
const L2_OVERHEAD: usize = 14 + 4;
/// Free buffers a TAP keeps for reuse.
const POOL_KEEP: usize = 512;

/// Errors opening or configuring a TAP device.
#[derive(Debug, thiserror::Error)]
pub enum TapError {
    /// The interface name is empty, too long (15 bytes max) or contains a NUL byte.
    #[error("invalid interface name {name:?}")]
    InvalidName {
        /// The rejected name.
        name: String,
    },
    /// `/dev/net/tun` could not be opened.
    #[error("cannot open {TUN_PATH}")]
    OpenDevice(#[source] io::Error),
    /// `TUNSETIFF` failed: the interface could not be created or attached to.
    #[error("cannot create or attach TAP interface {name}")]
    Attach {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The `AF_INET` socket used for interface ioctls could not be created.
    #[error("cannot create the interface control socket")]
    ControlSocket(#[source] io::Error),
    /// `SIOCGIFMTU` failed.
    #[error("cannot read the MTU of {name}")]
    GetMtu {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `SIOCGIFFLAGS` failed.
    #[error("cannot read the flags of {name}")]
    GetFlags {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `SIOCSIFFLAGS` failed.
    #[error("cannot set the flags of {name}")]
    SetFlags {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `SIOCSIFADDR` failed.
    #[error("cannot set the address of {name}")]
    SetAddress {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// `SIOCSIFNETMASK` failed.
    #[error("cannot set the netmask of {name}")]
    SetNetmask {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A prefix length above 32.
    #[error("invalid IPv4 prefix length /{prefix_len}")]
    InvalidPrefix {
        /// The rejected prefix length.
        prefix_len: u8,
    },
    /// `poll(2)` failed.
    #[error("cannot poll {name}")]
    Poll {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// `struct ifmap` from `<linux/if.h>`: the largest member of the `ifreq` union.
#[repr(C)]
#[derive(Clone, Copy)]
struct IfMap {
    mem_start: c_ulong,
    mem_end: c_ulong,
    base_addr: c_ushort,
    irq: c_uchar,
    dma: c_uchar,
    port: c_uchar,
}

/// The `ifr_ifru` union of `struct ifreq`, restricted to the members used here.
#[repr(C)]
#[derive(Clone, Copy)]
union IfReqData {
    addr: libc::sockaddr_in,
    flags: c_short,
    mtu: c_int,
    qlen: c_int,
    map: IfMap,
}

/// `struct ifreq` from `<linux/if.h>` (layout checked against `libc::ifreq` in the tests).
#[repr(C)]
#[derive(Clone, Copy)]
struct IfReq {
    name: [c_char; libc::IFNAMSIZ],
    data: IfReqData,
}

impl IfReq {
    /// A zeroed request for interface `name` (at most `IFNAMSIZ - 1` bytes, no NUL).
    fn new(name: &str) -> Option<Self> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return None;
        }
        // `map` is the largest member, so this initialises every byte of the union.
        let map = IfMap { mem_start: 0, mem_end: 0, base_addr: 0, irq: 0, dma: 0, port: 0 };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: IfReqData { map } };
        for (dst, src) in req.name.iter_mut().zip(bytes) {
            *dst = *src as c_char;
        }
        Some(req)
    }

    /// The (NUL-terminated) interface name in the request.
    fn name(&self) -> String {
        let bytes: Vec<u8> = self.name.iter().take_while(|c| **c != 0).map(|c| *c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn flags(&self) -> c_short {
        // SAFETY: every byte of the union is initialised (`new` writes the largest member) and
        // any bit pattern is a valid `c_short`.
        unsafe { self.data.flags }
    }

    fn mtu(&self) -> c_int {
        // SAFETY: every byte of the union is initialised (`new` writes the largest member) and
        // any bit pattern is a valid `c_int`.
        unsafe { self.data.mtu }
    }
}

fn sockaddr_in(addr: Ipv4Addr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(addr.octets()) },
        sin_zero: [0; 8],
    }
}

/// The netmask of a prefix length, or `None` above 32.
fn prefix_mask(prefix_len: u8) -> Option<Ipv4Addr> {
    match prefix_len {
        0 => Some(Ipv4Addr::UNSPECIFIED),
        1..=32 => Some(Ipv4Addr::from(u32::MAX << (32 - u32::from(prefix_len)))),
        _ => None,
    }
}

/// Issues an interface ioctl taking a `struct ifreq`.
fn ioctl_ifreq(fd: RawFd, request: libc::Ioctl, req: &mut IfReq) -> io::Result<()> {
    // SAFETY: `req` is an exclusively borrowed, fully initialised `struct ifreq` with the kernel's
    // layout, alive for the whole call; the requests used here (TUNSETIFF, SIOC[GS]IF*) read and
    // write only within that struct.
    let rc = unsafe { libc::ioctl(fd, request, req as *mut IfReq) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// An `AF_INET` socket for interface ioctls, in the calling thread's network namespace.
fn control_socket() -> Result<OwnedFd, TapError> {
    // SAFETY: plain socket(2) call with constant arguments; no pointers involved.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(TapError::ControlSocket(io::Error::last_os_error()));
    }
    // SAFETY: `raw` is a freshly created socket descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Frames the kernel may queue for us on the device (its transmit queue, kernel -> SlimTCP).
/// Linux's default of 1000 overflows while a busy worker is away for a moment, and SlimTCP,
/// which keeps no reorder buffer, pays each dropped frame with a go-back-N retransmission.
const TAP_TX_QUEUE: c_int = 10_000;

fn set_up_via(fd: RawFd, name: &str) -> Result<(), TapError> {
    let mut req = IfReq::new(name).ok_or_else(|| TapError::InvalidName { name: name.to_string() })?;
    ioctl_ifreq(fd, libc::SIOCGIFFLAGS as libc::Ioctl, &mut req)
        .map_err(|source| TapError::GetFlags { name: name.to_string(), source })?;
    req.data.flags = req.flags() | libc::IFF_UP as c_short;
    ioctl_ifreq(fd, libc::SIOCSIFFLAGS as libc::Ioctl, &mut req)
        .map_err(|source| TapError::SetFlags { name: name.to_string(), source })?;
    let mut qlen = IfReq::new(name).ok_or_else(|| TapError::InvalidName { name: name.to_string() })?;
    qlen.data.qlen = TAP_TX_QUEUE;
    if let Err(e) = ioctl_ifreq(fd, libc::SIOCSIFTXQLEN as libc::Ioctl, &mut qlen) {
        // Not fatal: the device works with the kernel's default queue, only drops sooner.
        log::warn!("{name}: cannot set the transmit queue to {TAP_TX_QUEUE} frames: {e}");
    }
    Ok(())
}

fn set_address_via(fd: RawFd, name: &str, addr: Ipv4Addr, prefix_len: u8) -> Result<(), TapError> {
    let mask = prefix_mask(prefix_len).ok_or(TapError::InvalidPrefix { prefix_len })?;
    let request = || IfReq::new(name).ok_or_else(|| TapError::InvalidName { name: name.to_string() });
    let mut req = request()?;
    req.data.addr = sockaddr_in(addr);
    ioctl_ifreq(fd, libc::SIOCSIFADDR as libc::Ioctl, &mut req)
        .map_err(|source| TapError::SetAddress { name: name.to_string(), source })?;
    let mut req = request()?;
    req.data.addr = sockaddr_in(mask);
    ioctl_ifreq(fd, libc::SIOCSIFNETMASK as libc::Ioctl, &mut req)
        .map_err(|source| TapError::SetNetmask { name: name.to_string(), source })
}

/// Brings interface `name` of the calling thread's network namespace up and gives it
/// `addr/prefix_len`: the kernel side of a TAP link someone else created (e.g. DPDK's `net_tap`).
pub fn configure_host_side(name: &str, addr: Ipv4Addr, prefix_len: u8) -> Result<(), TapError> {
    let ctl = control_socket()?;
    set_up_via(ctl.as_raw_fd(), name)?;
    set_address_via(ctl.as_raw_fd(), name, addr, prefix_len)
}

/// A TAP interface of the current network namespace. Closing it (drop) removes a non-persistent
/// interface.
#[derive(Debug)]
pub struct TapNic {
    file: File,
    /// `AF_INET`/`SOCK_DGRAM` socket for interface ioctls, in the namespace the tap was opened in.
    ctl: OwnedFd,
    name: String,
    mtu: usize,
    /// A receive buffer left over from a read that found nothing, reused next time.
    spare: Option<PacketBuf>,
    /// Receive and transmit buffers: each comes back when its frame is dropped (after the stack
    /// processed it, or after it was written), so a steady flow allocates nothing.
    pool: Arc<BufferPool>,
    /// Tokens of external payloads written (or failed): complete, not yet polled.
    completed: Vec<u64>,
    /// Frames dropped because the interface was down (`EIO` from the TAP).
    link_down_drops: u64,
}

/// The TAP's answer to a write while its interface is down: the frame is lost, nothing broke.
const LINK_DOWN: i32 = libc::EIO;

impl TapNic {
    /// Opens `/dev/net/tun` and creates (or attaches to) TAP interface `name` in the calling
    /// thread's network namespace, non-blocking, without packet-information prefix.
    pub fn open(name: &str) -> Result<TapNic, TapError> {
        let invalid = || TapError::InvalidName { name: name.to_string() };
        let mut req = IfReq::new(name).ok_or_else(invalid)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(TUN_PATH)
            .map_err(TapError::OpenDevice)?;
        req.data.flags = (libc::IFF_TAP | libc::IFF_NO_PI) as c_short;
        ioctl_ifreq(file.as_raw_fd(), libc::TUNSETIFF as libc::Ioctl, &mut req)
            .map_err(|source| TapError::Attach { name: name.to_string(), source })?;
        let name = req.name();

        let ctl = control_socket()?;

        let mut tap = TapNic {
            file,
            ctl,
            name,
            mtu: 0,
            spare: None,
            pool: BufferPool::new(1, DEFAULT_BUF_SIZE),
            completed: Vec::new(),
            link_down_drops: 0,
        };
        let mut req = tap.request()?;
        ioctl_ifreq(tap.ctl.as_raw_fd(), libc::SIOCGIFMTU as libc::Ioctl, &mut req)
            .map_err(|source| TapError::GetMtu { name: tap.name.clone(), source })?;
        tap.mtu = usize::try_from(req.mtu()).unwrap_or(0);
        // Buffers that hold the largest frame the MTU allows.
        tap.pool = BufferPool::new(POOL_KEEP, DEFAULT_BUF_SIZE.max(DEFAULT_HEADROOM + tap.mtu + L2_OVERHEAD));
        Ok(tap)
    }

    /// The interface name (as the kernel assigned it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The MTU read from the device when it was opened.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    fn request(&self) -> Result<IfReq, TapError> {
        IfReq::new(&self.name).ok_or_else(|| TapError::InvalidName { name: self.name.clone() })
    }

    /// Brings the interface up (sets `IFF_UP`).
    pub fn set_up(&self) -> Result<(), TapError> {
        set_up_via(self.ctl.as_raw_fd(), &self.name)
    }

    /// Gives the kernel side of the link `addr/prefix_len` (the host's address on this link).
    pub fn set_host_address(&self, addr: Ipv4Addr, prefix_len: u8) -> Result<(), TapError> {
        set_address_via(self.ctl.as_raw_fd(), &self.name, addr, prefix_len)
    }

    /// Sleeps until a frame can be read or `timeout` passes (`None`: no timeout). Returns whether
    /// the device is readable (or has an error to report); `false` on timeout or a signal.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<bool, TapError> {
        let millis = match timeout {
            None => -1,
            // Round up so a timer due in 0.3 ms does not turn into a busy loop.
            Some(d) => c_int::try_from(d.as_micros().div_ceil(1000)).unwrap_or(c_int::MAX),
        };
        let mut pfd = libc::pollfd { fd: self.file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: `pfd` is one valid, exclusively borrowed `pollfd` and nfds is 1.
        let rc = unsafe { libc::poll(&mut pfd, 1, millis) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(TapError::Poll { name: self.name.clone(), source: err });
        }
        Ok(rc > 0 && pfd.revents != 0)
    }

    fn io_error(&self, source: io::Error) -> NicError {
        NicError::Io { device: self.name.clone(), source }
    }

    fn rx_buf(&mut self) -> PacketBuf {
        match self.spare.take() {
            Some(buf) => buf,
            None => self.pool.take(DEFAULT_HEADROOM),
        }
    }
}

impl TapNic {
    /// Frames dropped because the interface was down (an operator's `ip link set .. down`, the
    /// Linux side's namespace going away): lost like on an unplugged wire, TCP retransmits.
    pub fn link_down_drops(&self) -> u64 {
        self.link_down_drops
    }
}

impl AsRawFd for TapNic {
    /// The `/dev/net/tun` descriptor (for an external poll/epoll).
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsFd for TapNic {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Nic for TapNic {
    fn capabilities(&self) -> NicCapabilities {
        NicCapabilities { checksum: ChecksumCapabilities::none(), mtu: self.mtu, max_burst: TAP_MAX_BURST }
    }

    /// Reads frames until the device has none left or `min(max, 32)` were read. A read error
    /// after some frames were read is reported by the next call.
    fn receive(&mut self, _now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        let max = max.min(TAP_MAX_BURST);
        let mut n = 0;
        while n < max {
            let mut buf = self.rx_buf();
            buf.reset(DEFAULT_HEADROOM);
            let room = buf.tailroom();
            let result = (&self.file).read(buf.append(room).unwrap_or_default());
            match result {
                Ok(len) if len > 0 => {
                    buf.truncate(len);
                    out.push(buf);
                    n += 1;
                }
                Ok(_) => {
                    self.spare = Some(buf);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.spare = Some(buf),
                Err(e) => {
                    self.spare = Some(buf);
                    if e.kind() == io::ErrorKind::WouldBlock || n > 0 {
                        break;
                    }
                    return Err(self.io_error(e));
                }
            }
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        Ok(self.pool.take(DEFAULT_HEADROOM))
    }

    /// Writes frames in order until the device would block. If a write fails, the frames before
    /// it are reported sent (`Ok`); when the very first frame fails it is removed, dropped, and
    /// the error returned, so one bad frame cannot wedge the queue.
    fn transmit(&mut self, _now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        let mut sent = 0;
        let mut failure = None;
        'frames: for frame in frames.iter() {
            loop {
                match (&self.file).write(frame.as_slice()) {
                    Ok(_) => {
                        sent += 1;
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(LINK_DOWN) => {
                        // The interface is down: the frame is lost, as on an unplugged wire.
                        self.link_down_drops += 1;
                        sent += 1;
                        break;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 'frames,
                    Err(e) => {
                        failure = Some(e);
                        break 'frames;
                    }
                }
            }
        }
        match failure {
            Some(e) if sent == 0 => {
                frames.remove(0);
                Err(self.io_error(e))
            }
            _ => {
                frames.drain(..sent);
                Ok(sent)
            }
        }
    }

    fn supports_external(&self) -> bool {
        true
    }

    /// Writes each frame's headers and external payload with one `writev` (the kernel copies
    /// both into its buffer; our code copies nothing), so a payload is complete as soon as the
    /// call returns, successful or not. Stops when the device would block. If a write fails,
    /// the frames before it are reported sent; when the very first frame fails it is removed
    /// (its payload reported complete) and the error returned.
    fn transmit_external(
        &mut self,
        _now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        let mut sent = 0;
        let mut failure = None;
        'frames: for frame in frames.iter() {
            let headers = frame.headers.as_slice();
            let iov = [
                libc::iovec { iov_base: headers.as_ptr().cast_mut().cast(), iov_len: headers.len() },
                libc::iovec {
                    iov_base: frame.payload.addr().cast_mut().cast(),
                    iov_len: frame.payload.len(),
                },
            ];
            loop {
                // SAFETY: two iovecs over readable memory: the headers (borrowed from `frame`) and
                // the external payload (readable until its completion is reported, contract of
                // `ExternalPayload::new`); the kernel only reads them during the call.
                let rc = unsafe { libc::writev(self.file.as_raw_fd(), iov.as_ptr(), 2) };
                if rc >= 0 {
                    self.completed.push(frame.payload.token());
                    sent += 1;
                    break;
                }
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(LINK_DOWN) {
                    self.link_down_drops += 1;
                    self.completed.push(frame.payload.token());
                    sent += 1;
                    break;
                }
                match e.kind() {
                    io::ErrorKind::Interrupted => {}
                    io::ErrorKind::WouldBlock => break 'frames,
                    _ => {
                        failure = Some(e);
                        break 'frames;
                    }
                }
            }
        }
        match failure {
            Some(e) if sent == 0 => {
                let frame = frames.remove(0);
                self.completed.push(frame.payload.token());
                Err(self.io_error(e))
            }
            _ => {
                frames.drain(..sent);
                Ok(sent)
            }
        }
    }

    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        let n = self.completed.len();
        out.append(&mut self.completed);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ifreq_layout_matches_libc() {
        assert_eq!(std::mem::size_of::<IfReq>(), std::mem::size_of::<libc::ifreq>());
        assert_eq!(std::mem::align_of::<IfReq>(), std::mem::align_of::<libc::ifreq>());
        assert_eq!(std::mem::offset_of!(IfReq, data), libc::IFNAMSIZ);
    }

    #[test]
    fn names_are_validated() {
        assert!(IfReq::new("").is_none());
        assert!(IfReq::new("sixteen-chars-xx").is_none());
        assert!(IfReq::new("a\0b").is_none());
        let req = IfReq::new("fifteen-chars-x").expect("15 bytes fit");
        assert_eq!(req.name(), "fifteen-chars-x");
        assert!(matches!(TapNic::open("sixteen-chars-xx"), Err(TapError::InvalidName { .. })));
    }

    #[test]
    fn prefix_masks() {
        assert_eq!(prefix_mask(0), Some(Ipv4Addr::new(0, 0, 0, 0)));
        assert_eq!(prefix_mask(24), Some(Ipv4Addr::new(255, 255, 255, 0)));
        assert_eq!(prefix_mask(31), Some(Ipv4Addr::new(255, 255, 255, 254)));
        assert_eq!(prefix_mask(32), Some(Ipv4Addr::new(255, 255, 255, 255)));
        assert_eq!(prefix_mask(33), None);
    }
}
