//! Packet-buffer pools, sized from configuration.
//!
//! A pool lives until the process exits: mbufs anywhere (in the stack, in NIC rings, in another
//! port's rings over `net_ring`) point into it, so freeing it early could never be made safe.
//! Instead a queue's pool is kept for the next opening of the same queue
//! ([`Mempool::for_queue`]): a port opened again (a tenant's VMM reconnecting, a retry after a
//! failed set-up) gets its pools back, so their number is bounded by the configured queues, not
//! by how often ports are opened.

use std::ffi::CString;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use dpdk_sys as sys;

use super::eal::Eal;
use super::mbuf::Mbuf;

/// Sizing of one mempool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MempoolConfig {
    /// Number of mbufs (a power of two minus one is most memory-efficient).
    pub mbufs: u32,
    /// Per-lcore cache (0 disables; at most 512 and `mbufs / 1.5`).
    pub cache_size: u32,
    /// Bytes of data room per mbuf, headroom included.
    pub data_room: u16,
}

impl MempoolConfig {
    /// Enough mbufs for one queue pair: both descriptor rings full, the stack holding a few
    /// bursts, the per-lcore cache, and 1024 more for frames held elsewhere (in flight on a
    /// `net_ring` link, queued in sockets). 1024+1024 descriptors, burst 32: 4095 mbufs (~9 MB).
    pub fn for_queue(rx_descriptors: u16, tx_descriptors: u16, burst: usize) -> Self {
        let cache_size = 256;
        let burst = u32::try_from(burst).unwrap_or(u32::MAX);
        let need = u32::from(rx_descriptors)
            .saturating_add(u32::from(tx_descriptors))
            .saturating_add(burst.saturating_mul(8))
            .saturating_add(cache_size)
            .saturating_add(1024);
        MempoolConfig {
            mbufs: need.checked_next_power_of_two().unwrap_or(u32::MAX / 2 + 1) - 1,
            cache_size,
            data_room: sys::RTE_MBUF_DEFAULT_BUF_SIZE,
        }
    }
}

impl Default for MempoolConfig {
    fn default() -> Self {
        Self::for_queue(1024, 1024, 32)
    }
}

/// Why a mempool could not be created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MempoolError {
    /// `rte_pktmbuf_pool_create` failed (usually: not enough memory for `-m`).
    #[error("cannot create mempool {name} of {mbufs} mbufs x {data_room} bytes: {reason}")]
    Create {
        /// Pool name.
        name: String,
        /// Requested mbufs.
        mbufs: u32,
        /// Requested data room.
        data_room: u16,
        /// DPDK's description of `rte_errno`.
        reason: String,
    },
}

/// A handle to a process-lifetime pktmbuf pool.
#[derive(Debug, Clone, Copy)]
pub struct Mempool(NonNull<sys::rte_mempool>);

// SAFETY: the pool is multi-producer/multi-consumer (default flags) and never freed, so the
// handle may be used from any thread.
unsafe impl Send for Mempool {}
// SAFETY: as above; all operations through `&Mempool` are thread-safe in DPDK.
unsafe impl Sync for Mempool {}

static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// A queue's pool, kept for the queue's next opening.
#[derive(Debug)]
struct QueuePool {
    device: String,
    queue: u16,
    config: MempoolConfig,
    socket: Option<i32>,
    pool: Mempool,
}

/// Every queue pool made so far, by device and queue.
static QUEUE_POOLS: Mutex<Vec<QueuePool>> = Mutex::new(Vec::new());

impl Mempool {
    /// Creates a pool on NUMA `socket` (`None`: any) named from `tag` (kept short: DPDK limits
    /// pool names to 26 characters).
    pub fn create(
        _eal: &Eal,
        tag: &str,
        config: &MempoolConfig,
        socket: Option<i32>,
    ) -> Result<Self, MempoolError> {
        let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
        let mut name = format!("slim{seq}_{tag}");
        name.truncate(24);
        let fail = |reason: String| MempoolError::Create {
            name: name.clone(),
            mbufs: config.mbufs,
            data_room: config.data_room,
            reason,
        };
        let c_name = CString::new(name.clone()).map_err(|_| fail("name contains NUL".to_string()))?;
        // SAFETY: the EAL is running (`_eal`); the name is a valid C string copied by DPDK.
        let mp = unsafe {
            sys::rte_pktmbuf_pool_create(
                c_name.as_ptr(),
                config.mbufs,
                config.cache_size,
                0,
                config.data_room,
                socket.unwrap_or(sys::SOCKET_ID_ANY),
            )
        };
        NonNull::new(mp).map(Mempool).ok_or_else(|| fail(sys::strerror(sys::errno())))
    }

    /// The pool of receive queue `queue` of `device`: the one made for an earlier opening of
    /// that queue with the same sizing and NUMA socket, or a new one.
    pub fn for_queue(
        eal: &Eal,
        device: &str,
        queue: u16,
        config: &MempoolConfig,
        socket: Option<i32>,
    ) -> Result<Self, MempoolError> {
        // A panic elsewhere while holding the lock left the list itself intact.
        let mut pools = QUEUE_POOLS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let same = |p: &&QueuePool| {
            p.device == device && p.queue == queue && p.config == *config && p.socket == socket
        };
        if let Some(p) = pools.iter().find(same) {
            return Ok(p.pool);
        }
        let pool = Self::create(eal, &format!("q{queue}"), config, socket)?;
        pools.push(QueuePool { device: device.to_string(), queue, config: *config, socket, pool });
        Ok(pool)
    }

    /// Pools created in this process so far.
    pub fn created() -> u32 {
        POOL_SEQ.load(Ordering::Relaxed)
    }

    /// The raw pool.
    pub fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.0.as_ptr()
    }

    /// An empty mbuf (default headroom), or `None` when the pool is exhausted.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool is live for the process.
        let m = unsafe { sys::shim_pktmbuf_alloc(self.0.as_ptr()) };
        // SAFETY: a freshly allocated mbuf is owned by nobody else.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m) })
    }

    /// An empty mbuf and its metadata, read in the same call (the transmit path's buffers), or
    /// `None` when the pool is exhausted.
    pub fn alloc_with_info(&self) -> Option<(Mbuf, sys::shim_mbuf_info)> {
        let mut info = sys::shim_mbuf_info::default();
        // SAFETY: the pool is live for the process; `info` is a valid out pointer.
        let m = unsafe { sys::shim_pktmbuf_alloc_info(self.0.as_ptr(), &mut info) };
        // SAFETY: a freshly allocated mbuf is owned by nobody else.
        NonNull::new(m).map(|m| (unsafe { Mbuf::from_raw(m) }, info))
    }

    /// Mbufs currently available in the pool (caches included).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is live.
        unsafe { sys::rte_mempool_avail_count(self.0.as_ptr()) }
    }

    /// Mbufs currently allocated from the pool.
    pub fn in_use(&self) -> u32 {
        // SAFETY: the pool is live.
        unsafe { sys::rte_mempool_in_use_count(self.0.as_ptr()) }
    }
}
