//! A Linux TAP device as a [`Nic`]: Ethernet frames exchanged with the kernel through
//! `/dev/net/tun`.
//!
//! [`TapNic::open`] creates the interface in the calling thread's network namespace (or attaches
//! to an existing one of that name), non-blocking and without packet-information prefix. The
//! kernel side of the link is configured with [`TapNic::set_up`] and
//! [`TapNic::set_host_address`]; [`TapNic::wait_readable`] lets an idle loop sleep until a frame
//! arrives or its next timer is due.
//!
//! **Checksum offload** ([`TapConfig::checksum_offload`], on by default): every frame carries a
//! virtio-net header ([`vnet`]: `IFF_VNET_HDR`, 12 bytes, `TUNSETOFFLOAD` with `TUN_F_CSUM`
//! only, no TSO/GSO/UFO). The TAP then offers TCP and UDP transmit checksum offload: a frame
//! whose TCP/UDP checksum the stack left to it goes with `NEEDS_CSUM`, and the kernel completes
//! it where a real one is needed (forwarding, egress on a device without offload) or trusts it
//! (delivery to a local socket): Linux peers cost no software checksum on either side. The
//! IPv4 header checksum is not offloaded (virtio-net has no flag for it): the stack writes it.
//! On receive the kernel marks frames `DATA_VALID` (verified) or `NEEDS_CSUM` (its own, with a
//! partial checksum): both reach the stack with the "good" verdict of
//! [`PacketBuf::rx_checksum_ok`] once their IPv4 header checksum is checked here; frames with
//! neither flag are verified by the stack in software. A partial frame keeps its checksum
//! request in [`PacketBuf::offload`] so that a capture completes it
//! ([`offload::fill_bytes`](crate::nic::offload::fill_bytes)). GSO frames (never negotiated)
//! and headers pointing outside their frame are dropped and counted ([`TapStats`]).
//!
//! Without offload the frames are plain, the kernel side has `tx-checksumming` off (so a
//! capture on it shows real checksums both ways), and the stack computes and verifies every
//! checksum. A capture with `tcpdump` on the kernel side of an offloading TAP shows the partial
//! checksums (tshark reports them bad), as on any NIC with offload; the frames on the wire past
//! a forwarding hop carry real ones.
//!
//! - `ifreq`: the interface ioctls; [`vnet`]: the virtio-net header; `io`: the frame I/O (the
//!   [`Nic`] implementation).

mod ifreq;
mod io;
pub mod vnet;

use std::fs::{File, OpenOptions};
use std::io as stdio;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use libc::{c_int, c_short, c_ulong};

pub use ifreq::configure_host_side;
use ifreq::{control_socket, ioctl_ifreq, ioctl_int_ptr, ioctl_value, set_address_via, set_up_via, IfReq};

use crate::nic::buf::{DEFAULT_BUF_SIZE, DEFAULT_HEADROOM};
use crate::nic::pool::PoolOwner;
#[cfg(doc)]
use crate::nic::Nic;
use crate::nic::PacketBuf;

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
    OpenDevice(#[source] stdio::Error),
    /// `TUNSETIFF` failed: the interface could not be created or attached to.
    #[error("cannot create or attach TAP interface {name}")]
    Attach {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// The `AF_INET` socket used for interface ioctls could not be created.
    #[error("cannot create the interface control socket")]
    ControlSocket(#[source] stdio::Error),
    /// `SIOCGIFMTU` failed.
    #[error("cannot read the MTU of {name}")]
    GetMtu {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// `SIOCGIFFLAGS` failed.
    #[error("cannot read the flags of {name}")]
    GetFlags {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// `SIOCSIFFLAGS` failed.
    #[error("cannot set the flags of {name}")]
    SetFlags {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// `SIOCSIFADDR` failed.
    #[error("cannot set the address of {name}")]
    SetAddress {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// `SIOCSIFNETMASK` failed.
    #[error("cannot set the netmask of {name}")]
    SetNetmask {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// `TUNSETVNETHDRSZ` or `TUNSETVNETLE` failed: no virtio-net header in front of frames.
    #[error("cannot set up the virtio-net header of {name}")]
    VnetHeader {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
    },
    /// `TUNSETOFFLOAD` failed.
    #[error("cannot set the checksum offload of {name}")]
    SetOffload {
        /// The interface.
        name: String,
        /// The OS error.
        #[source]
        source: stdio::Error,
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
        source: stdio::Error,
    },
}

/// How to open a TAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TapConfig {
    /// Exchange a virtio-net header with every frame and let the kernel fill and verify TCP/UDP
    /// checksums (see the module documentation). Default: on. Off: plain frames, every checksum
    /// in software, real checksums in a capture on the kernel side.
    pub checksum_offload: bool,
}

impl Default for TapConfig {
    fn default() -> Self {
        TapConfig { checksum_offload: true }
    }
}

/// Counters of a TAP: checksum work by direction, and frames dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames written with `NEEDS_CSUM`: the kernel has their TCP/UDP checksum to complete.
    pub tx_checksum_offloaded: u64,
    /// Frames whose checksum the TAP filled in software because the frame asked for work this
    /// device does not do (an IPv4 header checksum; any checksum without offload). The stack
    /// asks only for what [`Nic::capabilities`] offers: 0 unless something else built frames.
    pub tx_checksum_filled: u64,
    /// Frames received with `DATA_VALID`: checksums verified before the TAP.
    pub rx_data_valid: u64,
    /// Frames received with `NEEDS_CSUM`: made by the host with a partial checksum it trusts.
    pub rx_checksum_partial: u64,
    /// Frames received with neither flag (with offload on): the stack verifies them.
    pub rx_unverified: u64,
    /// GSO frames received (never negotiated) and dropped.
    pub rx_gso_dropped: u64,
    /// Frames received with a header that does not fit them, dropped.
    pub rx_bad_header: u64,
    /// Frames lost because the interface was down (`EIO` from the TAP).
    pub link_down_drops: u64,
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
    /// Frames carry a virtio-net header and TCP/UDP checksums are offloaded.
    offload: bool,
    /// A receive buffer left over from a read that found nothing, reused next time.
    spare: Option<PacketBuf>,
    /// Receive and transmit buffers: each comes back when its frame is dropped (after the stack
    /// processed it, or after it was written), so a steady flow allocates nothing.
    pool: PoolOwner,
    /// Tokens of external payloads written (or failed): complete, not yet polled.
    completed: Vec<u64>,
    /// A frame flattened to fill its checksum in software (only without offload, see
    /// [`TapStats::tx_checksum_filled`]).
    scratch: Vec<u8>,
    stats: TapStats,
}

impl TapNic {
    /// Opens `/dev/net/tun` and creates (or attaches to) TAP interface `name` in the calling
    /// thread's network namespace, non-blocking, without packet-information prefix, with the
    /// default [`TapConfig`] (checksum offload on).
    pub fn open(name: &str) -> Result<TapNic, TapError> {
        Self::open_with(name, TapConfig::default())
    }

    /// [`open`](Self::open) with `config`.
    pub fn open_with(name: &str, config: TapConfig) -> Result<TapNic, TapError> {
        let invalid = || TapError::InvalidName { name: name.to_string() };
        let mut req = IfReq::new(name).ok_or_else(invalid)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(TUN_PATH)
            .map_err(TapError::OpenDevice)?;
        let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
        if config.checksum_offload {
            flags |= libc::IFF_VNET_HDR;
        }
        req.data.flags = flags as c_short;
        ioctl_ifreq(file.as_raw_fd(), libc::TUNSETIFF as libc::Ioctl, &mut req)
            .map_err(|source| TapError::Attach { name: name.to_string(), source })?;
        let name = req.name();
        let fd = file.as_raw_fd();
        if config.checksum_offload {
            let vnet = |source| TapError::VnetHeader { name: name.clone(), source };
            ioctl_int_ptr(fd, libc::TUNSETVNETHDRSZ as libc::Ioctl, vnet::VNET_HDR_LEN as c_int)
                .map_err(vnet)?;
            ioctl_int_ptr(fd, libc::TUNSETVNETLE as libc::Ioctl, 1).map_err(vnet)?;
        }
        // Checksum only, never TSO/UFO; without offload also clears what an earlier user of a
        // persistent interface may have left (the kernel would send us partial checksums).
        let features = if config.checksum_offload { c_ulong::from(libc::TUN_F_CSUM) } else { 0 };
        ioctl_value(fd, libc::TUNSETOFFLOAD as libc::Ioctl, features)
            .map_err(|source| TapError::SetOffload { name: name.clone(), source })?;

        let ctl = control_socket()?;

        let mut tap = TapNic {
            file,
            ctl,
            name,
            mtu: 0,
            offload: config.checksum_offload,
            spare: None,
            pool: PoolOwner::new(1, DEFAULT_BUF_SIZE),
            completed: Vec::new(),
            scratch: Vec::new(),
            stats: TapStats::default(),
        };
        let mut req = tap.request()?;
        ioctl_ifreq(tap.ctl.as_raw_fd(), libc::SIOCGIFMTU as libc::Ioctl, &mut req)
            .map_err(|source| TapError::GetMtu { name: tap.name.clone(), source })?;
        tap.mtu = usize::try_from(req.mtu()).unwrap_or(0);
        // Buffers that hold the largest frame the MTU allows (a received frame's virtio-net
        // header is read into the headroom).
        tap.pool = PoolOwner::new(POOL_KEEP, DEFAULT_BUF_SIZE.max(DEFAULT_HEADROOM + tap.mtu + L2_OVERHEAD));
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

    /// Whether frames carry a virtio-net header and TCP/UDP checksums are offloaded.
    pub fn checksum_offload(&self) -> bool {
        self.offload
    }

    /// The TAP's counters.
    pub fn stats(&self) -> TapStats {
        self.stats
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
            let err = stdio::Error::last_os_error();
            if err.kind() == stdio::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(TapError::Poll { name: self.name.clone(), source: err });
        }
        Ok(rc > 0 && pfd.revents != 0)
    }

    /// Frames dropped because the interface was down (an operator's `ip link set .. down`, the
    /// Linux side's namespace going away): lost like on an unplugged wire, TCP retransmits.
    pub fn link_down_drops(&self) -> u64 {
        self.stats.link_down_drops
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_before_anything_opens() {
        assert!(matches!(TapNic::open("sixteen-chars-xx"), Err(TapError::InvalidName { .. })));
    }

    #[test]
    fn offload_is_on_by_default() {
        assert!(TapConfig::default().checksum_offload);
    }
}
