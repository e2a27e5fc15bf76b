//! Owned packet buffers: what a NIC hands the stack on receive and takes back on transmit.
//!
//! A [`PacketBuf`] is a window (`start..end`) into storage with headroom in front, so headers can
//! be stripped (`advance`) on receive and prepended (`prepend`) on transmit without copying.
//! Storage is heap memory for the software NICs; with the `dpdk` feature a buffer can also be a
//! DPDK mbuf (single segment, exclusively owned), so received frames reach the stack and built
//! frames reach the NIC without a copy. The method set and its semantics are the same for both;
//! cloning an mbuf-backed buffer yields a heap-backed copy.

use super::pool::HeapBytes;

/// Bytes reserved in front of a transmit buffer for headers (Ethernet + IPv4 + TCP with options).
pub const DEFAULT_HEADROOM: usize = 128;
/// Default buffer size: a 1500-byte MTU frame plus headroom, rounded up.
pub const DEFAULT_BUF_SIZE: usize = 2048;

/// Bytes of a frame's first cache lines that hold its headers (Ethernet, IPv4, TCP with options).
const HEADER_PREFETCH_BYTES: usize = 128;

/// Checksum work a transmitted frame asks the NIC to do (only set when the NIC offers it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxOffload {
    /// Length of the link-layer header.
    pub l2_len: u16,
    /// Length of the IPv4 header.
    pub l3_len: u16,
    /// The NIC fills in the IPv4 header checksum.
    pub ipv4_checksum: bool,
    /// The NIC fills in the TCP or UDP checksum (the pseudo-header sum is pre-filled).
    pub l4_checksum: Option<L4Proto>,
}

impl TxOffload {
    /// The offloads to request for an Ethernet + 20-byte IPv4 frame carrying `l4`, given what the
    /// device offers (nothing is requested that the device does not do).
    pub fn ipv4(l4: L4Proto, caps: &crate::wire::ChecksumCapabilities) -> Self {
        let l4_tx = match l4 {
            L4Proto::Tcp => caps.tcp.tx,
            L4Proto::Udp => caps.udp.tx,
        };
        TxOffload { l2_len: 14, l3_len: 20, ipv4_checksum: caps.ipv4.tx, l4_checksum: l4_tx.then_some(l4) }
    }
}

/// Transport protocol of a frame, for checksum offload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// The most bytes of storage a buffer uses (its window offsets are 32-bit).
const MAX_CAPACITY: usize = u32::MAX as usize;

/// An offset within a buffer's used storage (at most [`MAX_CAPACITY`], so it fits).
fn offset(n: usize) -> u32 {
    n.min(MAX_CAPACITY) as u32
}

/// An owned packet buffer.
#[derive(Debug, Clone)]
pub struct PacketBuf {
    storage: Storage,
    /// The data window, in 32 bits so that moving a buffer (rings, queues, events) stays cheap:
    /// storage beyond [`MAX_CAPACITY`] is never used.
    start: u32,
    end: u32,
    /// Checksums left to the device: on a frame to transmit, the offloads the stack requests;
    /// on a received frame, what its sender left to a device and nothing filled (a virtio-net
    /// `NEEDS_CSUM` frame from the TAP, a memwire frame with offload). Such a frame is valid as
    /// it is (its verdict says so); a copy that must show real checksums (a capture) is
    /// completed with [`offload::fill_bytes`](super::offload::fill_bytes).
    pub offload: TxOffload,
    /// The NIC's checksum verdict for a received frame:
    /// - `Some(true)`: the NIC verified the IPv4 header checksum and the TCP/UDP checksum, both
    ///   good (the stack may skip verifying them);
    /// - `Some(false)`: the NIC found one of them bad (the stack drops the frame as
    ///   [`BadChecksum`](crate::wire::WireError::BadChecksum));
    /// - `None`: no verdict (software NICs, non-IP frames, a NIC that did not check): the stack
    ///   verifies in software, as its [`ChecksumCapabilities`](crate::wire::ChecksumCapabilities)
    ///   say.
    ///
    /// Always `None` on buffers built for transmit.
    pub rx_checksum_ok: Option<bool>,
}

/// Where the bytes live: heap memory, a pool's or a buffer's own (one kind, so that without
/// DPDK every access to a buffer's bytes is a plain field read, no question of kind), or an
/// mbuf.
#[derive(Debug)]
enum Storage {
    Heap(HeapBytes),
    #[cfg(feature = "dpdk")]
    Mbuf(super::dpdk::mbuf::MbufStorage),
}

impl Storage {
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Heap(h) => h.bytes(),
            #[cfg(feature = "dpdk")]
            Storage::Mbuf(m) => m.bytes(),
        }
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Storage::Heap(h) => h.bytes_mut(),
            #[cfg(feature = "dpdk")]
            Storage::Mbuf(m) => m.bytes_mut(),
        }
    }
}

/// A copy is a buffer of its own on the heap, whatever the original's storage.
impl Clone for Storage {
    fn clone(&self) -> Self {
        Storage::Heap(HeapBytes::unpooled(self.bytes().into()))
    }
}

/// An empty buffer of no capacity (allocates nothing): what a buffer taken out of a place that
/// must stay valid leaves behind (`std::mem::take`).
impl Default for PacketBuf {
    #[inline]
    fn default() -> Self {
        PacketBuf {
            storage: Storage::Heap(HeapBytes::unpooled(Box::default())),
            start: 0,
            end: 0,
            offload: TxOffload::default(),
            rx_checksum_ok: None,
        }
    }
}

impl PacketBuf {
    /// An empty buffer of `capacity` bytes whose data starts after `headroom` bytes.
    pub fn with_headroom(capacity: usize, headroom: usize) -> Self {
        let headroom = headroom.min(capacity);
        PacketBuf {
            storage: Storage::Heap(HeapBytes::unpooled(vec![0u8; capacity].into_boxed_slice())),
            start: offset(headroom),
            end: offset(headroom),
            offload: TxOffload::default(),
            rx_checksum_ok: None,
        }
    }

    /// An empty buffer over heap bytes (a pool's, see [`super::pool`]).
    pub(crate) fn on_heap(bytes: HeapBytes, headroom: usize) -> Self {
        let headroom = headroom.min(bytes.bytes().len());
        PacketBuf {
            storage: Storage::Heap(bytes),
            start: offset(headroom),
            end: offset(headroom),
            offload: TxOffload::default(),
            rx_checksum_ok: None,
        }
    }

    /// An empty transmit buffer of the default size and headroom.
    pub fn new_tx() -> Self {
        Self::with_headroom(DEFAULT_BUF_SIZE, DEFAULT_HEADROOM)
    }

    /// A buffer holding a copy of `bytes` (tests, and NICs that receive by copying).
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut b = Self::with_headroom(bytes.len().max(DEFAULT_BUF_SIZE - DEFAULT_HEADROOM), 0);
        if let Some(dst) = b.append(bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        b
    }

    /// The data bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.storage.bytes()[self.start as usize..self.end as usize]
    }

    /// The data bytes, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage.bytes_mut()[self.start as usize..self.end as usize]
    }

    /// Number of data bytes.
    #[inline]
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// True when no data bytes are held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Free bytes in front of the data.
    #[inline]
    pub fn headroom(&self) -> usize {
        self.start as usize
    }

    /// Free bytes after the data.
    #[inline]
    pub fn tailroom(&self) -> usize {
        self.capacity() - self.end as usize
    }

    /// Total storage size (what of it a buffer can use: at most 4 GiB).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.storage.bytes().len().min(MAX_CAPACITY)
    }

    /// Grows the data by `n` bytes at the end and returns them; `None` without room.
    #[inline]
    pub fn append(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.tailroom() {
            return None;
        }
        let old = self.end as usize;
        // n <= tailroom: the new end is within the used storage (32 bits).
        self.end += n as u32;
        Some(&mut self.storage.bytes_mut()[old..old + n])
    }

    /// Grows the data by `n` bytes at the front and returns them; `None` without headroom.
    #[inline]
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.start as usize {
            return None;
        }
        self.start -= n as u32;
        let start = self.start as usize;
        Some(&mut self.storage.bytes_mut()[start..start + n])
    }

    /// Asks the CPU to bring the first two cache lines of the data (a frame's headers) into its
    /// caches ahead of their first read: a frame received long after it was written (thousands of
    /// connections' windows in flight) is no longer in any cache, and the stack's first look at
    /// it would otherwise wait for memory. A hint only: nothing is read or changed.
    #[inline]
    pub fn prefetch_headers(&self) {
        slimtcp_api::prefetch::lines(self.data_ptr(), HEADER_PREFETCH_BYTES);
    }

    /// After [`prefetch_headers`](Self::prefetch_headers), the rest of what the receive path
    /// reads of a received frame: its lines past the headers when its checksums are to be
    /// verified in software (no good verdict from the NIC); nothing more otherwise (the payload
    /// is read by whoever takes it, perhaps on another core).
    #[inline]
    pub fn prefetch_received(&self) {
        if self.rx_checksum_ok != Some(true) && self.len() > HEADER_PREFETCH_BYTES {
            slimtcp_api::prefetch::lines(
                self.data_ptr().wrapping_add(HEADER_PREFETCH_BYTES),
                self.len() - HEADER_PREFETCH_BYTES,
            );
        }
    }

    /// Hints that `len` bytes after the data (where the next `append`s write) are about to be
    /// written: a buffer taken from a pool may have its lines in another core's cache (the
    /// application's, which read the frame it last held).
    #[inline]
    pub fn prefetch_tail(&self, len: usize) {
        slimtcp_api::prefetch::lines_for_write(self.data_ptr().wrapping_add(self.len()), len);
    }

    /// The address of the first data byte (for hints; never dereferenced through it).
    #[inline]
    fn data_ptr(&self) -> *const u8 {
        self.storage.bytes().as_ptr().wrapping_add(self.start as usize)
    }

    /// Drops `n` bytes from the front (strips a header). Returns false if fewer are held.
    #[inline]
    pub fn advance(&mut self, n: usize) -> bool {
        if n > self.len() {
            return false;
        }
        self.start += n as u32;
        true
    }

    /// The `n` bytes just in front of the data (headers [`advance`](Self::advance) stripped),
    /// when the buffer holds that many there.
    #[inline]
    pub(crate) fn stripped(&self, n: usize) -> Option<&[u8]> {
        let start = self.start as usize;
        self.storage.bytes().get(start.checked_sub(n)?..start)
    }

    /// Keeps only the first `len` data bytes (no-op when already shorter).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.end = self.start + len as u32;
        }
    }

    /// Empties the buffer and restores `headroom` bytes in front, for reuse.
    pub fn reset(&mut self, headroom: usize) {
        let headroom = headroom.min(self.capacity());
        self.start = offset(headroom);
        self.end = offset(headroom);
        self.offload = TxOffload::default();
        self.rx_checksum_ok = None;
    }
}

/// Conversions for the DPDK NIC: mbufs in and out without copying.
#[cfg(feature = "dpdk")]
impl PacketBuf {
    /// Wraps an mbuf whose data window is `start..end` of its storage.
    pub(crate) fn from_mbuf(
        storage: super::dpdk::mbuf::MbufStorage,
        start: usize,
        end: usize,
        rx_checksum_ok: Option<bool>,
    ) -> Self {
        let end = end.min(storage.bytes().len());
        PacketBuf {
            storage: Storage::Mbuf(storage),
            start: offset(start.min(end)),
            end: offset(end),
            offload: TxOffload::default(),
            rx_checksum_ok,
        }
    }

    /// The mbuf under an mbuf-backed buffer and the data window (`start..end`), for transmit in
    /// place; `None` when heap-backed.
    pub(crate) fn mbuf_mut(&mut self) -> Option<(&mut super::dpdk::mbuf::MbufStorage, usize, usize)> {
        match &mut self.storage {
            Storage::Mbuf(m) => Some((m, self.start as usize, self.end as usize)),
            Storage::Heap(_) => None,
        }
    }

    /// The mbuf and the data window (`start..end`), or the buffer itself when heap-backed.
    pub(crate) fn into_mbuf(self) -> Result<(super::dpdk::mbuf::MbufStorage, usize, usize, TxOffload), Self> {
        match self.storage {
            Storage::Mbuf(m) => Ok((m, self.start as usize, self.end as usize, self.offload)),
            Storage::Heap(_) => Err(self),
        }
    }
}

/// Moves every buffer of `from` to the end of `to`, in order, in bulk: into an empty `to` the
/// two vectors trade storage (no buffer touched, `to`'s emptied vector left in `from` for reuse),
/// else they are appended in one move.
#[inline]
pub(crate) fn move_all(from: &mut Vec<PacketBuf>, to: &mut Vec<PacketBuf>) {
    if to.is_empty() {
        std::mem::swap(to, from);
    } else {
        to.append(from);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers (heap- or mbuf-backed) move between the app and worker threads of the two-core
    /// runtime: `PacketBuf` must be `Send` (and `Sync`) whatever the features.
    #[test]
    fn packet_buffers_can_cross_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<PacketBuf>();
    }

    #[test]
    fn prepend_append_advance_truncate() {
        let mut b = PacketBuf::with_headroom(64, 16);
        assert_eq!(b.len(), 0);
        b.append(4).expect("room").copy_from_slice(b"data");
        b.prepend(2).expect("headroom").copy_from_slice(b"hd");
        assert_eq!(b.as_slice(), b"hddata");
        assert!(b.prepend(15).is_none());
        assert!(b.append(64).is_none());
        assert!(b.advance(2));
        assert_eq!(b.as_slice(), b"data");
        assert!(!b.advance(5));
        b.truncate(2);
        assert_eq!(b.as_slice(), b"da");
        b.rx_checksum_ok = Some(false);
        let c = b.clone();
        assert_eq!(c.as_slice(), b.as_slice());
        assert_eq!(c.rx_checksum_ok, Some(false));
        b.reset(8);
        assert!(b.is_empty());
        assert_eq!(b.headroom(), 8);
        assert_eq!(b.rx_checksum_ok, None, "reset clears the rx verdict");
    }
}
