//! Owned mbufs: [`Mbuf`] holds one reference to a DPDK packet buffer (possibly a chain) and frees
//! it on drop.

use std::ptr::NonNull;

use dpdk_sys as sys;

/// An owned `rte_mbuf` (the head of a chain of one or more segments); freed on drop.
#[derive(Debug)]
pub struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an Mbuf owns its mbuf; freeing or using it from another thread is allowed by DPDK
// (SlimTCP's mempools are multi-producer/multi-consumer), and only one thread holds the Mbuf.
unsafe impl Send for Mbuf {}
// SAFETY: `&Mbuf` only reads (data and metadata); mutation needs `&mut Mbuf`.
unsafe impl Sync for Mbuf {}

impl Mbuf {
    /// Takes ownership of `m`.
    ///
    /// # Safety
    /// `m` must be a valid mbuf from a live mempool whose reference the caller owns and gives up.
    pub unsafe fn from_raw(m: NonNull<sys::rte_mbuf>) -> Self {
        Mbuf(m)
    }

    /// Gives up ownership; the caller must free or transmit the mbuf.
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        let m = self.0;
        std::mem::forget(self);
        m
    }

    /// The raw pointer (still owned by `self`).
    pub fn as_ptr(&self) -> *mut sys::rte_mbuf {
        self.0.as_ptr()
    }

    /// Metadata of the first segment and of the chain.
    pub fn info(&self) -> sys::shim_mbuf_info {
        let mut info = sys::shim_mbuf_info::default();
        // SAFETY: self owns a valid mbuf; `info` is a valid out pointer.
        unsafe { sys::shim_mbuf_info(self.0.as_ptr(), &mut info) };
        info
    }

    /// Total length of all segments.
    pub fn pkt_len(&self) -> usize {
        // SAFETY: self owns a valid mbuf.
        unsafe { sys::shim_pktmbuf_pkt_len(self.0.as_ptr()) as usize }
    }

    /// The data bytes of each segment, in order.
    pub fn segments(&self) -> Segments<'_> {
        Segments { next: Some(self.0), _owner: std::marker::PhantomData }
    }

    /// The data bytes of the first segment.
    pub fn data(&self) -> &[u8] {
        self.segments().next().unwrap_or(&[])
    }

    /// Copies all segments' data into one vector (tests, diagnostics).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.pkt_len());
        for seg in self.segments() {
            v.extend_from_slice(seg);
        }
        v
    }

    /// Grows the last segment by `n` bytes and returns them; `None` without room or when the
    /// buffer is shared (another reference could be reading it).
    pub fn append(&mut self, n: u16) -> Option<&mut [u8]> {
        if self.info().exclusive == 0 {
            return None;
        }
        // SAFETY: self owns a valid, exclusively referenced mbuf.
        let p = unsafe { sys::shim_pktmbuf_append(self.0.as_ptr(), n) };
        // SAFETY: on success DPDK returns a pointer to `n` writable bytes inside the (exclusive)
        // buffer, valid while `&mut self` is borrowed.
        NonNull::new(p.cast::<u8>())
            .map(|p| unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), usize::from(n)) })
    }

    /// Appends `tail` as further segments; on failure (too many segments) returns both back.
    pub fn chain(self, tail: Mbuf) -> Result<Mbuf, (Mbuf, Mbuf)> {
        // SAFETY: both are valid owned mbufs; on success DPDK links tail into self's chain, whose
        // single owner is then `self`.
        let rc = unsafe { sys::shim_pktmbuf_chain(self.0.as_ptr(), tail.0.as_ptr()) };
        if rc != 0 {
            return Err((self, tail));
        }
        std::mem::forget(tail);
        Ok(self)
    }

    /// Detaches the segments after the first and returns them as their own chain.
    pub fn unchain(&mut self) -> Option<Mbuf> {
        // SAFETY: self owns a valid mbuf; the shim unlinks the rest of the chain, which becomes a
        // separately owned chain.
        let tail = unsafe { sys::shim_pktmbuf_unchain(self.0.as_ptr()) };
        // SAFETY: the detached tail is a valid chain that nobody else owns.
        NonNull::new(tail).map(|t| unsafe { Mbuf::from_raw(t) })
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: self owns the mbuf (chain) and gives it back exactly once.
        unsafe { sys::shim_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// Iterator over the data of an mbuf chain's segments.
#[derive(Debug)]
pub struct Segments<'a> {
    next: Option<NonNull<sys::rte_mbuf>>,
    _owner: std::marker::PhantomData<&'a Mbuf>,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let m = self.next?;
        // SAFETY: `m` is a segment of the chain borrowed for 'a (valid while borrowed).
        let (data, len, next) = unsafe {
            (
                sys::shim_pktmbuf_mtod(m.as_ptr()).cast::<u8>(),
                sys::shim_pktmbuf_data_len(m.as_ptr()),
                sys::shim_pktmbuf_next(m.as_ptr()),
            )
        };
        self.next = NonNull::new(next);
        if len == 0 || data.is_null() {
            return Some(&[]);
        }
        // SAFETY: a segment's data window is `len` initialised bytes at `data`, immutable while
        // the chain is borrowed shared.
        Some(unsafe { std::slice::from_raw_parts(data, usize::from(len)) })
    }
}

/// An exclusively owned single-segment mbuf seen as plain storage, for [`PacketBuf`]: the whole
/// buffer (`buf_addr .. buf_addr + buf_len`); the data window lives in the `PacketBuf` and is
/// written back into the mbuf on transmit.
///
/// [`PacketBuf`]: crate::nic::PacketBuf
#[derive(Debug)]
pub struct MbufStorage {
    mbuf: Mbuf,
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: an MbufStorage owns its mbuf exclusively (one segment, a direct mbuf with refcnt 1,
// checked in `new`), and `base..base+len` is that mbuf's own buffer: moving the storage to
// another thread moves the only access to those bytes. Freeing it there (drop) is allowed by
// DPDK 22.11: SlimTCP's pools use the default multi-producer/multi-consumer ring, and
// `rte_mempool_default_cache()` returns NULL for an unregistered non-EAL thread (its lcore id is
// LCORE_ID_ANY, >= RTE_MAX_LCORE), which then puts the mbuf straight into the shared ring
// without a per-lcore cache (rte_mempool.h: "unregistered non-EAL threads"); a registered thread
// (every thread that polls a `DpdkNic`, see `lcore`) uses its own lcore cache. The mbuf's
// metadata is only touched through `&mut self` / by value, never from two threads at once.
unsafe impl Send for MbufStorage {}
// SAFETY: `&MbufStorage` only reads the buffer (`bytes`); writing needs `&mut`. No interior
// mutability, so sharing a reference between threads is as safe as sharing a `&[u8]`.
unsafe impl Sync for MbufStorage {}

impl MbufStorage {
    /// Wraps `mbuf` if it is a single segment nobody else references; gives it back otherwise.
    /// Also returns its metadata (read once).
    pub(crate) fn new(mbuf: Mbuf) -> Result<(Self, sys::shim_mbuf_info), Mbuf> {
        let info = mbuf.info();
        Self::with_info(mbuf, info)
    }

    /// [`new`](Self::new) with the metadata already read (`info` must be `mbuf`'s, read since
    /// it was last changed: [`Mempool::alloc_with_info`](super::Mempool::alloc_with_info)).
    pub(crate) fn with_info(
        mbuf: Mbuf,
        info: sys::shim_mbuf_info,
    ) -> Result<(Self, sys::shim_mbuf_info), Mbuf> {
        match NonNull::new(info.buf_addr) {
            Some(base) if info.nb_segs == 1 && info.exclusive == 1 => {
                Ok((MbufStorage { mbuf, base, len: info.buf_len as usize }, info))
            }
            _ => Err(mbuf),
        }
    }

    /// The whole buffer.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `base..base+len` is the buffer of the mbuf we own exclusively (checked in
        // `new`); it stays valid while the mbuf lives, and `&self` keeps it from being mutated.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    /// The whole buffer, writable.
    #[inline]
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes the access unique (no other reference exists,
        // the mbuf is not shared).
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.len) }
    }

    /// Writes the data window and tx offload request into the mbuf and returns it.
    pub(crate) fn into_tx_mbuf(
        mut self,
        start: usize,
        end: usize,
        l2_len: u16,
        l3_len: u16,
        tx_flags: u32,
    ) -> Mbuf {
        self.prepare_tx(start, end, l2_len, l3_len, tx_flags);
        self.mbuf
    }

    /// Writes the data window and tx offload request into the mbuf, which stays owned here: its
    /// pointer may be offered to one `tx_burst`; if the driver takes it, the storage must then be
    /// given up with [`into_mbuf`](Self::into_mbuf) and `Mbuf::into_raw` (never freed here).
    pub(crate) fn prepare_tx(
        &mut self,
        start: usize,
        end: usize,
        l2_len: u16,
        l3_len: u16,
        tx_flags: u32,
    ) -> *mut sys::rte_mbuf {
        let off = u16::try_from(start).unwrap_or(u16::MAX);
        let len = u16::try_from(end.saturating_sub(start)).unwrap_or(u16::MAX);
        // SAFETY: we own the single-segment mbuf; start..end lies within its buffer (PacketBuf
        // keeps its window inside the storage, whose size is buf_len <= u16::MAX).
        unsafe { sys::shim_mbuf_set_tx(self.mbuf.as_ptr(), off, len, l2_len, l3_len, tx_flags) };
        self.mbuf.as_ptr()
    }

    /// The mbuf itself (its metadata as last written).
    pub(crate) fn into_mbuf(self) -> Mbuf {
        self.mbuf
    }
}
