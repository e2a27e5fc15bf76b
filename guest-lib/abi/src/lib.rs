//! The SlimTCP guest protocol, version 1.2: the messages a guest library and `slimtcp-vhost`
//! exchange over the virtqueues of a vhost-user **net** device, in place of Ethernet frames.
//!
//! `docs/protocol.md` is the specification; this crate is its executable form, and its tests check
//! that the byte examples in the document are what the code emits.
//!
//! - Transmit queue (guest -> host): one [`Request`] per descriptor chain. The bytes of a chain's
//!   device-readable descriptors, concatenated, are a *frame*: the 12-byte virtio-net header, the
//!   20-byte [request header](layout::request_header), an op-specific fixed body and, for
//!   [`Op::Send`] and [`Op::SendTo`], the payload.
//! - Receive queue (host -> guest): the guest posts empty buffers; the host writes one
//!   [`RxMessage`] (completion or event, with data payload for [`RxMessage::Data`] and
//!   [`RxMessage::Datagram`]) into each.
//!
//! Every integer is little-endian; IPv4 addresses and MAC addresses are octets in network order.
//! Parsing copies the fields out of the (shared, guest-writable) bytes once, validates all of them
//! and never panics; emitting writes every byte of the message, reserved bytes included.
//!
//! ```
//! use slimtcp_abi::{Request, RequestBody, SocketId, RequestFlags};
//! let req = Request {
//!     cookie: 7,
//!     socket: SocketId(3),
//!     flags: RequestFlags::empty(),
//!     body: RequestBody::Listen { backlog: 128 },
//! };
//! let mut frame = [0u8; 64];
//! let n = req.emit(&mut frame).unwrap();
//! assert_eq!(n, req.wire_len());
//! assert_eq!(Request::parse(&frame[..n]), Ok(req));
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

#[macro_use]
mod codec;
mod errno;
mod error;
pub mod layout;
mod request;
mod rx;
mod virtio;

pub use errno::Errno;
pub use error::AbiError;
pub use request::{Op, Request, RequestBody, RequestFlags, RequestHeader, ShutdownHow, SockOpt, SocketKind};
pub use rx::{Done, HelloInfo, RxKind, RxMessage};
pub use virtio::{VirtioNetHdr, VIRTIO_NET_HDR_LEN};

/// The four bytes every request and every receive-queue message starts with (after the
/// virtio-net header): `"STCP"`. They tell a SlimTCP message from an Ethernet frame that a guest
/// kernel driver bound to the device by mistake would send.
pub const MAGIC: [u8; 4] = *b"STCP";

/// Posted receive buffers must offer at least this many writable bytes (the largest message
/// without payload, [`RxMessage::HelloDone`], is 80). Smaller ones are returned unused.
pub const MIN_RX_BUFFER: usize = 128;

/// A protocol version. The major number changes when an existing layout or meaning changes; the
/// minor number when something is added (ops, options, event kinds, errno values, flags) that a
/// peer may only use once both sides announced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Incompatible revisions.
    pub major: u16,
    /// Compatible additions within a major version.
    pub minor: u16,
}

impl Version {
    /// The version this crate implements.
    pub const CURRENT: Version = Version { major: 1, minor: 2 };

    /// What a host implementing `self` answers to a guest's hello announcing `guest`: the same
    /// major and the smaller minor, or `None` (EPROTONOSUPPORT) when the majors differ.
    pub fn negotiate(self, guest: Version) -> Option<Version> {
        (self.major == guest.major).then(|| Version { major: self.major, minor: self.minor.min(guest.minor) })
    }
}

impl core::fmt::Display for Version {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A socket id. The host chooses them (in the completion of [`Op::Socket`] and in
/// [`RxMessage::Accepted`]); `0` is never a socket and fills the field of messages that have none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SocketId(pub u32);

impl SocketId {
    /// "No socket": hello, socket requests and their completions carry it.
    pub const NONE: SocketId = SocketId(0);

    /// Whether this is [`SocketId::NONE`].
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}
