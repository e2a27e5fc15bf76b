//! The DPDK NIC (feature `dpdk`): one [`DpdkNic`] per RX/TX queue pair of a port, one per worker.
//!
//! ```text
//! let eal = Eal::init(["-l", "2", "-a", "0000:3b:00.0"])?;       // once per process
//! let mut config = PortConfig::new("0000:3b:00.0");
//! config.queues = 2;                                             // one pair per worker
//! let nics: Vec<DpdkNic> = DpdkNic::open(eal, &config)?;         // configured and started
//! ```
//!
//! Received frames reach the stack as mbuf-backed [`PacketBuf`]s (no copy), with the NIC's
//! checksum verdict in [`PacketBuf::rx_checksum_ok`]; buffers from [`Nic::alloc_tx`] are mbufs
//! too, so transmit is copy-free; a heap-backed buffer is copied into an mbuf (and counted in
//! [`DpdkNicStats::tx_copied_bytes`]). External payloads ([`Nic::transmit_external`]) are sent
//! from registered memory ([`ExtMemRegion`], attached with [`DpdkNic::attach_region`]) without a
//! copy and reported back by [`Nic::poll_tx_completions`].
//!
//! Parts: [`eal`] (start once per process), [`mempool`], [`port`] (configuration, `net_ring`
//! pairs), [`vdev`] (virtual devices created after start), [`mbuf`] (owned mbufs), [`extmem`]
//! (external memory), [`lcore`] (every polling thread gets the pools' per-lcore cache),
//! `interrupt_thread` (port operations serialized with the drivers' events).

pub mod eal;
pub mod extmem;
mod interrupt_thread;
pub mod lcore;
pub mod mbuf;
pub mod mempool;
pub mod port;
pub mod vdev;

use std::ffi::c_int;
use std::ptr::NonNull;
use std::sync::Arc;

use dpdk_sys as sys;

pub use eal::{Eal, EalError};
pub use extmem::{ExtMemError, ExtMemRegion};
pub use mbuf::Mbuf;
pub use mempool::{Mempool, MempoolConfig, MempoolError};
pub use port::{create_ring_pair, port_names, Offloads, PortConfig, PortError, PortInfo};
pub use vdev::{create_vdev, remove_vdev, VdevError};

use self::extmem::ExtSlots;
use self::mbuf::MbufStorage;
use self::port::Port;
use super::{
    ExternalFrame, ExternalMemory, ExternalPayload, L4Proto, Nic, NicCapabilities, NicError, PacketBuf,
    TxOffload,
};
use crate::time::Instant;
use crate::wire::{ChecksumCapabilities, ChecksumOffload, EthernetAddress};

/// Counters of one DPDK NIC queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkNicStats {
    /// Frames received and handed to the stack.
    pub rx_frames: u64,
    /// Frames dropped on receive (chained frame larger than an mbuf, pool exhausted).
    pub rx_dropped: u64,
    /// Frames transmitted (accepted by the driver).
    pub tx_frames: u64,
    /// Of which external-payload frames.
    pub tx_external_frames: u64,
    /// External payload bytes transmitted without a copy.
    pub tx_external_bytes: u64,
    /// External payload bytes transmitted as a copy (outside every attached region; also in
    /// `tx_copied_bytes`).
    pub tx_external_copied_bytes: u64,
    /// Bytes our code copied on transmit (heap-backed frames, payloads outside any registered
    /// region). Zero for frames from `alloc_tx` and for registered external payloads.
    pub tx_copied_bytes: u64,
    /// Bytes our code copied on receive (chained or shared mbufs made contiguous).
    pub rx_copied_bytes: u64,
    /// Frames the driver took with a TCP or UDP checksum left to the device (the port's
    /// offload, enabled and asked for by the frame).
    pub tx_checksum_offloaded: u64,
}

impl DpdkNicStats {
    /// One frame the driver took, with the offloads it asked for (`enabled` on the port).
    fn count_sent(&mut self, enabled: Offloads, offload: &TxOffload) {
        self.tx_frames += 1;
        if l4_checksum_flag(enabled, offload).is_some() {
            self.tx_checksum_offloaded += 1;
        }
    }

    /// All bytes our code copied, both directions.
    pub fn copied_bytes(&self) -> u64 {
        self.tx_copied_bytes + self.rx_copied_bytes
    }
}

/// An external frame prepared for transmit (headers mbuf, payload chained or copied behind),
/// kept until the driver takes it (or gives it back).
#[derive(Debug)]
struct Pending {
    mbuf: Mbuf,
    offload: TxOffload,
    payload: ExternalPayload,
    header_len: usize,
    /// Slot of a zero-copy payload; `None` when the payload was copied (or empty).
    slot: Option<u32>,
}

/// One RX/TX queue pair of a DPDK port, driven by one worker.
#[derive(Debug)]
pub struct DpdkNic {
    // Dropped first: unmaps external regions while the port still exists.
    ext: ExtSlots,
    port: Arc<Port>,
    queue: u16,
    pool: Mempool,
    burst: usize,
    caps: NicCapabilities,
    raw: Vec<*mut sys::rte_mbuf>,
    /// The metadata of the mbufs of the last receive burst (`raw[i]`'s in `rx_info[i]`).
    rx_info: Vec<sys::shim_mbuf_info>,
    pending: Vec<Pending>,
    /// Tokens of external payloads that were copied: complete once sent.
    copied_done: Vec<u64>,
    stats: DpdkNicStats,
}

// SAFETY: a DpdkNic is used by one thread at a time (`&mut self` for every operation). Its raw
// pointers are scratch space (empty between calls) and slot contexts that only the free callback
// reads (any thread, atomics only); queue access from another thread is allowed by DPDK as long
// as it is not concurrent.
unsafe impl Send for DpdkNic {}

impl DpdkNic {
    /// Configures and starts `config.device` with `config.queues` queue pairs; returns one NIC per
    /// queue pair, in queue order. The port is stopped and closed when all of them are dropped.
    pub fn open(eal: &Eal, config: &PortConfig) -> Result<Vec<DpdkNic>, PortError> {
        let (port, pools) = Port::open(eal, config)?;
        let en = port.info.enabled;
        let caps = NicCapabilities {
            checksum: ChecksumCapabilities {
                ipv4: ChecksumOffload { rx: en.rx_ipv4_checksum, tx: en.tx_ipv4_checksum },
                tcp: ChecksumOffload { rx: en.rx_tcp_checksum, tx: en.tx_tcp_checksum },
                udp: ChecksumOffload { rx: en.rx_udp_checksum, tx: en.tx_udp_checksum },
            },
            mtu: usize::from(config.mtu),
            max_burst: config.burst,
        };
        let port = Arc::new(port);
        let mut nics = Vec::with_capacity(pools.len());
        for (queue, pool) in (0u16..).zip(pools) {
            let ext = ExtSlots::new(config.max_external_in_flight.max(1)).ok_or_else(|| {
                PortError::InvalidConfig {
                    device: config.device.clone(),
                    what: format!("cannot allocate {} external payload slots", config.max_external_in_flight),
                }
            })?;
            nics.push(DpdkNic {
                port: Arc::clone(&port),
                queue,
                pool,
                burst: config.burst,
                caps,
                raw: Vec::with_capacity(config.burst),
                rx_info: Vec::with_capacity(config.burst),
                pending: Vec::with_capacity(config.burst),
                ext,
                copied_done: Vec::new(),
                stats: DpdkNicStats::default(),
            });
        }
        Ok(nics)
    }

    /// The port this queue belongs to.
    pub fn port_info(&self) -> &PortInfo {
        &self.port.info
    }

    /// Makes the port receive unicast frames to `mac` too (a MAC filter, for a stack address
    /// other than the port's own without promiscuous mode). Fails when the driver has no such
    /// filter or refuses it (a VF whose PF does not trust it).
    pub fn add_mac_address(&self, mac: EthernetAddress) -> Result<(), PortError> {
        let info = &self.port.info;
        // SAFETY: the port is configured and started (it lives while `self` does); `mac.0` is
        // the 6 bytes the shim reads (it copies them).
        let rc = unsafe { sys::shim_port_mac_addr_add(info.port_id, mac.0.as_ptr()) };
        if rc != 0 {
            return Err(PortError::Setup {
                device: info.name.clone(),
                step: "rte_eth_dev_mac_addr_add".into(),
                reason: sys::strerror(if rc < -1 { -rc } else { sys::errno() }),
            });
        }
        Ok(())
    }

    /// This NIC's queue number on the port.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// This queue's mempool.
    pub fn mempool(&self) -> Mempool {
        self.pool
    }

    /// Counters.
    pub fn stats(&self) -> DpdkNicStats {
        self.stats
    }

    /// Bytes our code copied so far (both directions): stays 0 on the zero-copy paths.
    pub fn copied_bytes(&self) -> u64 {
        self.stats.copied_bytes()
    }

    /// External payloads handed to the device whose completion has not been polled yet.
    pub fn external_in_flight(&self) -> usize {
        self.ext.in_flight()
    }

    /// Makes payloads inside `region` eligible for zero-copy transmit on this queue (maps the
    /// region for DMA by the port's device on first use).
    pub fn attach_region(&mut self, region: &ExtMemRegion) -> Result<(), ExtMemError> {
        let port = self.port.info.port_id;
        if !self.port.info.enabled.tx_multi_segment {
            return Err(ExtMemError::NoMultiSegment { port });
        }
        region.dma_map(port)?;
        self.ext.add_region(region.clone());
        Ok(())
    }

    /// Receives up to `max` (at most the burst size) raw mbufs, as the driver delivered them
    /// (possibly chained). For tests and tools; the stack uses [`Nic::receive`].
    pub fn receive_mbufs(&mut self, out: &mut Vec<Mbuf>, max: usize) -> usize {
        lcore::ensure_current_thread();
        let n = self.rx_raw(max);
        for &m in &self.raw[..n] {
            if let Some(m) = NonNull::new(m) {
                // SAFETY: the driver handed us ownership of each received mbuf.
                out.push(unsafe { Mbuf::from_raw(m) });
            }
        }
        self.raw.clear();
        self.stats.rx_frames += n as u64;
        n
    }

    /// rx burst into `self.raw[..n]`, each mbuf's metadata in `self.rx_info[..n]` (read in the
    /// same call; checksum verdicts only where the port checks them).
    fn rx_raw(&mut self, max: usize) -> usize {
        let want = max.min(self.burst);
        self.raw.clear();
        self.raw.resize(want, std::ptr::null_mut());
        self.rx_info.resize(want, sys::shim_mbuf_info::default());
        let want16 = u16::try_from(want).unwrap_or(u16::MAX);
        let verdicts = c_int::from(self.port.info.enabled.any_rx_checksum());
        // SAFETY: the port is started, the queue is ours (one NIC per queue, `&mut self`), and
        // `raw` and `rx_info` have room for `want16` entries each.
        let n = unsafe {
            sys::shim_rx_burst_info(
                self.port.info.port_id,
                self.queue,
                self.raw.as_mut_ptr(),
                self.rx_info.as_mut_ptr(),
                want16,
                verdicts,
            )
        };
        let n = usize::from(n);
        self.raw.truncate(n);
        n
    }

    /// Checksum verdict per the [`PacketBuf::rx_checksum_ok`] contract.
    fn verdict(&self, info: &sys::shim_mbuf_info) -> Option<bool> {
        if !self.port.info.enabled.any_rx_checksum() {
            return None;
        }
        let ok = |v: u8| v == sys::SHIM_CKSUM_GOOD || v == sys::SHIM_CKSUM_NONE;
        if info.ip_cksum == sys::SHIM_CKSUM_BAD || info.l4_cksum == sys::SHIM_CKSUM_BAD {
            Some(false)
        } else if ok(info.ip_cksum) && ok(info.l4_cksum) {
            Some(true)
        } else {
            None
        }
    }

    /// A received mbuf as a PacketBuf: in place when it is a single exclusive segment, else
    /// copied into a fresh mbuf (counted); `None` when dropped.
    fn rx_to_packetbuf(&mut self, mbuf: Mbuf, info: sys::shim_mbuf_info) -> Option<PacketBuf> {
        match MbufStorage::with_info(mbuf, info) {
            Ok((storage, info)) => {
                let start = usize::from(info.data_off);
                let verdict = self.verdict(&info);
                Some(PacketBuf::from_mbuf(storage, start, start + usize::from(info.data_len), verdict))
            }
            Err(chain) => {
                let info = chain.info();
                let verdict = self.verdict(&info);
                let len = u16::try_from(info.pkt_len).ok()?;
                let mut flat = self.pool.alloc()?;
                let dst = flat.append(len)?;
                let mut off = 0;
                for seg in chain.segments() {
                    dst[off..off + seg.len()].copy_from_slice(seg);
                    off += seg.len();
                }
                self.stats.rx_copied_bytes += u64::from(len);
                let (storage, info) = MbufStorage::new(flat).ok()?;
                let start = usize::from(info.data_off);
                Some(PacketBuf::from_mbuf(storage, start, start + usize::from(info.data_len), verdict))
            }
        }
    }

    /// `TxOffload` -> shim tx flags, limited to what the port has enabled.
    fn tx_flags(&self, o: &TxOffload) -> u32 {
        let en = self.port.info.enabled;
        let mut f = 0;
        if o.ipv4_checksum && en.tx_ipv4_checksum {
            f |= sys::SHIM_TX_IPV4_CKSUM;
        }
        match l4_checksum_flag(en, o) {
            Some(l4) => f |= l4,
            None if o.l4_checksum.is_some() => {
                log::debug!("tx checksum offload requested but not enabled on this port")
            }
            None => {}
        }
        f
    }

    /// A frame as an mbuf ready for tx: in place when mbuf-backed, else copied (counted).
    fn frame_to_mbuf(&mut self, mut frame: PacketBuf) -> Result<(Mbuf, TxOffload), PacketBuf> {
        if frame.mbuf_mut().is_none() {
            match self.copy_into_mbuf(&frame) {
                Some(copy) => frame = copy,
                None => return Err(frame),
            }
        }
        let offload = frame.offload;
        let flags = self.tx_flags(&offload);
        let (storage, start, end, _) = frame.into_mbuf()?;
        Ok((storage.into_tx_mbuf(start, end, offload.l2_len, offload.l3_len, flags), offload))
    }

    /// A heap-backed frame copied into an mbuf-backed one (counted), same window and offloads;
    /// `None` when the pool is empty or the frame does not fit an mbuf.
    fn copy_into_mbuf(&mut self, frame: &PacketBuf) -> Option<PacketBuf> {
        let len = u16::try_from(frame.len()).ok()?;
        let mut m = self.pool.alloc()?;
        m.append(len)?.copy_from_slice(frame.as_slice());
        self.stats.tx_copied_bytes += u64::from(len);
        let (storage, info) = MbufStorage::new(m).ok()?;
        let start = usize::from(info.data_off);
        let mut copy = PacketBuf::from_mbuf(storage, start, start + usize::from(len), None);
        copy.offload = frame.offload;
        Some(copy)
    }

    /// A pending mbuf the driver did not take, back as a PacketBuf (no copy).
    fn untransmitted(mbuf: Mbuf, offload: TxOffload, len: usize) -> Option<PacketBuf> {
        let (storage, info) = MbufStorage::new(mbuf).ok()?;
        let start = usize::from(info.data_off);
        let end = start + len;
        let mut buf = PacketBuf::from_mbuf(storage, start, end, None);
        buf.offload = offload;
        Some(buf)
    }

    /// Offers the mbufs in `self.raw` (each owned by a frame the caller holds) to the driver and
    /// empties `raw`; returns how many the driver took, from the front: their owners must give
    /// them up (never free them).
    fn burst_raw(&mut self) -> usize {
        let n16 = u16::try_from(self.raw.len()).unwrap_or(u16::MAX);
        // SAFETY: the port is started, the queue is ours; `raw` holds n16 valid mbufs that we own
        // (the caller gives up the ones taken).
        let sent = usize::from(unsafe {
            sys::shim_tx_burst(self.port.info.port_id, self.queue, self.raw.as_mut_ptr(), n16)
        });
        self.raw.clear();
        sent
    }

    /// tx burst of `self.pending` (external frames); returns how many the driver took (removed
    /// from `pending`).
    fn tx_pending(&mut self) -> usize {
        self.raw.clear();
        self.raw.extend(self.pending.iter().map(|p| p.mbuf.as_ptr()));
        // The mbufs stay held by `pending`; the ones the driver took are given up below.
        let sent = self.burst_raw();
        for p in self.pending.drain(..sent) {
            // The driver owns the mbuf now.
            let _ = p.mbuf.into_raw();
            self.stats.count_sent(self.port.info.enabled, &p.offload);
            self.stats.tx_external_frames += 1;
            match p.slot {
                Some(_) => self.stats.tx_external_bytes += p.payload.len() as u64,
                None => {
                    self.stats.tx_external_copied_bytes += p.payload.len() as u64;
                    self.copied_done.push(p.payload.token());
                }
            }
        }
        sent
    }

    /// Prepares an external frame: headers mbuf chained to a zero-copy payload segment (payload
    /// in an attached region), or with the payload copied behind the headers (counted).
    fn prepare_external(&mut self, frame: ExternalFrame) -> Result<Pending, ExternalFrame> {
        let ExternalFrame { headers, payload } = frame;
        let header_len = headers.len();
        let (head, offload) = match self.frame_to_mbuf(headers) {
            Ok(ok) => ok,
            Err(headers) => return Err(ExternalFrame { headers, payload }),
        };
        let give_back =
            |head: Mbuf, payload: ExternalPayload| match Self::untransmitted(head, offload, header_len) {
                Some(headers) => Err(ExternalFrame { headers, payload }),
                None => {
                    log::error!("lost an external frame's headers (mbuf became shared)");
                    Err(ExternalFrame { headers: PacketBuf::new_tx(), payload })
                }
            };
        let (addr, len) = (payload.addr(), payload.len());
        let region =
            (len > 0 && len <= usize::from(u16::MAX)).then(|| self.ext.region_of(addr, len)).flatten();
        if let Some(region) = region {
            let Some((slot, shinfo)) = self.ext.acquire(payload.token(), region) else {
                return give_back(head, payload);
            };
            let Some(seg) = self.pool.alloc() else {
                // Never attached to an mbuf: no callback will fire, free the slot now.
                self.ext.release_unused(slot);
                return give_back(head, payload);
            };
            // SAFETY: `seg` is a fresh mbuf we own; `addr..addr+len` lies in a registered region
            // (IOVA = VA) that stays valid until the callback armed in `shinfo` reports completion
            // (contract of ExternalPayload::new); len <= u16::MAX.
            unsafe {
                sys::shim_attach_extbuf(seg.as_ptr(), addr.cast_mut().cast(), addr as u64, len as u16, shinfo)
            };
            match head.chain(seg) {
                Ok(chain) => {
                    // SAFETY: `chain` is ours; sets the offload request on the chain's head.
                    unsafe {
                        sys::shim_mbuf_set_offload(
                            chain.as_ptr(),
                            offload.l2_len,
                            offload.l3_len,
                            self.tx_flags(&offload),
                        )
                    };
                    Ok(Pending { mbuf: chain, offload, payload, header_len, slot: Some(slot) })
                }
                Err((head, seg)) => {
                    self.ext.cancel(slot);
                    drop(seg);
                    give_back(head, payload)
                }
            }
        } else {
            // Outside any registered region (or empty): copy behind the headers.
            let mut head = head;
            if len > 0 {
                let Some(len16) = u16::try_from(len).ok() else { return give_back(head, payload) };
                let Some(dst) = head.append(len16) else { return give_back(head, payload) };
                payload.copy_to(dst);
                self.stats.tx_copied_bytes += len as u64;
            }
            Ok(Pending { mbuf: head, offload, payload, header_len, slot: None })
        }
    }
}

impl Nic for DpdkNic {
    fn capabilities(&self) -> NicCapabilities {
        self.caps
    }

    fn receive(&mut self, _now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        lcore::ensure_current_thread();
        let n = self.rx_raw(max);
        let raw = std::mem::take(&mut self.raw);
        let infos = std::mem::take(&mut self.rx_info);
        let mut delivered = 0;
        for (&m, &info) in raw[..n].iter().zip(&infos) {
            let Some(m) = NonNull::new(m) else { continue };
            // SAFETY: the driver handed us ownership of each received mbuf.
            let mbuf = unsafe { Mbuf::from_raw(m) };
            match self.rx_to_packetbuf(mbuf, info) {
                Some(buf) => {
                    out.push(buf);
                    delivered += 1;
                }
                None => self.stats.rx_dropped += 1,
            }
        }
        self.raw = raw;
        self.raw.clear();
        self.rx_info = infos;
        self.stats.rx_frames += delivered as u64;
        Ok(delivered)
    }

    /// The burst's mbufs go back to their pools in one bulk free (heap-backed frames are
    /// dropped as such).
    fn release(&mut self, frames: &mut Vec<PacketBuf>) {
        lcore::ensure_current_thread();
        self.raw.clear();
        for frame in frames.drain(..) {
            if let Ok((storage, ..)) = frame.into_mbuf() {
                self.raw.push(storage.into_mbuf().into_raw().as_ptr());
            }
        }
        let count = u32::try_from(self.raw.len()).unwrap_or(u32::MAX);
        if count > 0 {
            // SAFETY: every pointer is an mbuf this NIC's frames owned and gave up (`into_raw`):
            // nobody else frees or uses them; the bulk free handles chains and shared segments
            // as `rte_pktmbuf_free` does, one at a time.
            unsafe { sys::rte_pktmbuf_free_bulk(self.raw.as_mut_ptr(), count) };
        }
        self.raw.clear();
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        lcore::ensure_current_thread();
        let (mbuf, info) = self.pool.alloc_with_info().ok_or(NicError::NoBuffers)?;
        let (storage, info) = MbufStorage::with_info(mbuf, info).map_err(|_| NicError::NoBuffers)?;
        let start = usize::from(info.data_off);
        Ok(PacketBuf::from_mbuf(storage, start, start, None))
    }

    /// Offers up to one burst from the front of `frames` to the driver in place: each frame's
    /// mbuf gets its window and offload flags written but stays in its `PacketBuf` until the
    /// driver takes it, so a full ring costs no conversion and the frames it refused stay where
    /// they are, in order (a heap-backed frame is first replaced by its mbuf copy, counted once).
    fn transmit(&mut self, _now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        lcore::ensure_current_thread();
        let n = frames.len().min(self.burst);
        self.raw.clear();
        for frame in &mut frames[..n] {
            if frame.mbuf_mut().is_none() {
                // Pool exhausted (or an oversized frame): this one and the rest wait.
                let Some(copy) = self.copy_into_mbuf(frame) else { break };
                *frame = copy;
            }
            let offload = frame.offload;
            let flags = self.tx_flags(&offload);
            let Some((mbuf, start, end)) = frame.mbuf_mut() else { break };
            self.raw.push(mbuf.prepare_tx(start, end, offload.l2_len, offload.l3_len, flags));
        }
        // Each mbuf stays owned by its frame; the ones the driver took are given up below.
        let sent = self.burst_raw();
        for frame in frames.drain(..sent) {
            self.stats.count_sent(self.port.info.enabled, &frame.offload);
            match frame.into_mbuf() {
                // The driver owns the mbuf now.
                Ok((storage, ..)) => {
                    let _ = storage.into_mbuf().into_raw();
                }
                // Cannot happen (every offered frame was mbuf-backed); never free what the
                // driver may hold.
                Err(frame) => {
                    log::error!("a transmitted frame was not mbuf-backed");
                    std::mem::forget(frame);
                }
            }
        }
        Ok(sent)
    }

    fn transmit_external(
        &mut self,
        _now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        lcore::ensure_current_thread();
        let n = frames.len().min(self.burst);
        // Allocates only for frames that could not be prepared (no buffer, no slot).
        let mut back: Vec<ExternalFrame> = Vec::new();
        let mut batch = frames.drain(..n);
        while let Some(frame) = batch.next() {
            match self.prepare_external(frame) {
                Ok(p) => self.pending.push(p),
                Err(frame) => {
                    back.push(frame);
                    back.extend(batch.by_ref());
                }
            }
        }
        drop(batch);
        let sent = self.tx_pending();
        // Frames the driver did not take go back to the caller, in order, before the others.
        let mut unsent: Vec<ExternalFrame> = Vec::with_capacity(self.pending.len() + back.len());
        for p in self.pending.drain(..) {
            let mut head = p.mbuf;
            if let Some(slot) = p.slot {
                self.ext.cancel(slot);
                // Dropping the payload segment fires its callback, which the cancel discards.
                drop(head.unchain());
            }
            match Self::untransmitted(head, p.offload, p.header_len) {
                Some(headers) => unsent.push(ExternalFrame { headers, payload: p.payload }),
                None => log::error!("lost an external frame's headers (mbuf became shared)"),
            }
        }
        unsent.extend(back);
        if !unsent.is_empty() {
            frames.splice(0..0, unsent);
        }
        Ok(sent)
    }

    fn supports_external(&self) -> bool {
        true
    }

    fn prepare_thread(&mut self) {
        lcore::ensure_current_thread();
    }

    fn attach_memory(&mut self, region: &ExternalMemory) -> Result<(), NicError> {
        let eal = Eal::get().ok_or_else(|| NicError::ExternalMemory("the EAL is not initialised".into()))?;
        let registered = ExtMemRegion::register_external(eal, region)
            .map_err(|e| NicError::ExternalMemory(e.to_string()))?;
        self.attach_region(&registered).map_err(|e| NicError::ExternalMemory(e.to_string()))
    }

    fn detach_memory(&mut self, base: *const u8) {
        self.ext.remove_region(base);
    }

    fn external_copied_bytes(&self) -> u64 {
        self.stats.tx_external_copied_bytes
    }

    /// The port's MAC address: the one its switch (or, for a VF, the PF's anti-spoofing check)
    /// expects frames from and delivers frames to.
    fn mac_address(&self) -> Option<EthernetAddress> {
        Some(self.port.info.mac)
    }

    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        let copied = self.copied_done.len();
        out.append(&mut self.copied_done);
        copied + self.ext.poll(out)
    }
}

/// The shim flag that leaves `o`'s TCP or UDP checksum to the device, when the port has that
/// offload `en`abled.
fn l4_checksum_flag(en: port::Offloads, o: &TxOffload) -> Option<u32> {
    match o.l4_checksum {
        Some(L4Proto::Tcp) if en.tx_tcp_checksum => Some(sys::SHIM_TX_TCP_CKSUM),
        Some(L4Proto::Udp) if en.tx_udp_checksum => Some(sys::SHIM_TX_UDP_CKSUM),
        _ => None,
    }
}
