//! Minimal hand-written bindings to DPDK 22.11 for SlimTCP.
//!
//! Two parts:
//! - about twenty functions DPDK exports, declared directly;
//! - the `shim_*` functions of `shim/shim.c`, which wrap DPDK's static-inline functions (rx/tx
//!   burst, mbuf operations, external buffers) and build DPDK's configuration structs in C.
//!
//! DPDK structs stay opaque on the Rust side; the only structs shared with C are the shim's own
//! small plain ones ([`shim_dev_info`], [`shim_mbuf_info`]), mirrored here with `#[repr(C)]`.
//! Everything here is `unsafe` and undocumented beyond DPDK's own docs: the safe layer is
//! `slimtcp::nic::dpdk`.

#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uint, c_void, size_t};

/// Opaque `struct rte_mbuf`.
#[repr(C)]
#[derive(Debug)]
pub struct rte_mbuf {
    _private: [u8; 0],
}

/// `rte_eal_alarm_callback`.
pub type rte_eal_alarm_callback = Option<unsafe extern "C" fn(arg: *mut c_void)>;

/// Opaque `struct rte_mempool`.
#[repr(C)]
#[derive(Debug)]
pub struct rte_mempool {
    _private: [u8; 0],
}

/// Opaque `struct rte_ring`.
#[repr(C)]
#[derive(Debug)]
pub struct rte_ring {
    _private: [u8; 0],
}

/// Opaque `struct rte_mbuf_ext_shared_info`.
#[repr(C)]
#[derive(Debug)]
pub struct rte_mbuf_ext_shared_info {
    _private: [u8; 0],
}

/// `SOCKET_ID_ANY`.
pub const SOCKET_ID_ANY: c_int = -1;
/// `RING_F_SP_ENQ`: single-producer enqueue.
pub const RING_F_SP_ENQ: c_uint = 0x0001;
/// `RING_F_SC_DEQ`: single-consumer dequeue.
pub const RING_F_SC_DEQ: c_uint = 0x0002;
/// `RTE_IOVA_PA`.
pub const RTE_IOVA_PA: c_int = 1;
/// `RTE_IOVA_VA`.
pub const RTE_IOVA_VA: c_int = 2;
/// `LCORE_ID_ANY`: the lcore id of an unregistered non-EAL thread.
pub const LCORE_ID_ANY: c_uint = c_uint::MAX;
/// `RTE_PKTMBUF_HEADROOM` as configured in Debian's build.
pub const RTE_PKTMBUF_HEADROOM: u16 = 128;
/// `RTE_MBUF_DEFAULT_BUF_SIZE`: 2048 bytes of data room plus the headroom.
pub const RTE_MBUF_DEFAULT_BUF_SIZE: u16 = 2048 + RTE_PKTMBUF_HEADROOM;
/// `RTE_ETH_NAME_MAX_LEN`.
pub const RTE_ETH_NAME_MAX_LEN: usize = 64;
/// `RTE_MAX_ETHPORTS` (Debian build).
pub const RTE_MAX_ETHPORTS: u16 = 32;

// Capability / offload bits of `shim_dev_info::caps` (shim.h `SHIM_CAP_*`).
/// The NIC verifies IPv4 header checksums on receive.
pub const SHIM_CAP_RX_IPV4_CKSUM: u32 = 1 << 0;
/// The NIC verifies TCP checksums on receive.
pub const SHIM_CAP_RX_TCP_CKSUM: u32 = 1 << 1;
/// The NIC verifies UDP checksums on receive.
pub const SHIM_CAP_RX_UDP_CKSUM: u32 = 1 << 2;
/// The NIC fills IPv4 header checksums on transmit.
pub const SHIM_CAP_TX_IPV4_CKSUM: u32 = 1 << 3;
/// The NIC fills TCP checksums on transmit.
pub const SHIM_CAP_TX_TCP_CKSUM: u32 = 1 << 4;
/// The NIC fills UDP checksums on transmit.
pub const SHIM_CAP_TX_UDP_CKSUM: u32 = 1 << 5;
/// The NIC transmits chained (multi-segment) mbufs.
pub const SHIM_CAP_TX_MULTI_SEGS: u32 = 1 << 6;
/// The NIC can do TSO (reported only; never enabled).
pub const SHIM_CAP_TX_TCP_TSO: u32 = 1 << 7;
/// The NIC can do LRO (reported only; never enabled).
pub const SHIM_CAP_RX_TCP_LRO: u32 = 1 << 8;
/// The NIC can deliver RSS hashes (reported only; never enabled).
pub const SHIM_CAP_RX_RSS_HASH: u32 = 1 << 9;

// Tx offload request bits of `shim_mbuf_set_tx` (shim.h `SHIM_TX_*`).
/// Ask the NIC to fill the IPv4 header checksum.
pub const SHIM_TX_IPV4_CKSUM: u32 = 1 << 0;
/// Ask the NIC to fill the TCP checksum (pseudo-header sum pre-filled).
pub const SHIM_TX_TCP_CKSUM: u32 = 1 << 1;
/// Ask the NIC to fill the UDP checksum (pseudo-header sum pre-filled).
pub const SHIM_TX_UDP_CKSUM: u32 = 1 << 2;

// Rx checksum verdicts (shim.h `SHIM_CKSUM_*`).
/// The NIC did not check.
pub const SHIM_CKSUM_UNKNOWN: u8 = 0;
/// The NIC checked: good.
pub const SHIM_CKSUM_GOOD: u8 = 1;
/// The NIC checked: bad.
pub const SHIM_CKSUM_BAD: u8 = 2;
/// The NIC reports the checksum as not present / not computed but the data valid.
pub const SHIM_CKSUM_NONE: u8 = 3;

/// `struct shim_dev_info` (shim.h): what SlimTCP needs to know about a port.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_dev_info {
    /// NUL-terminated driver name, e.g. `net_bnxt`, `net_ring`.
    pub driver_name: [c_char; 64],
    /// NUL-terminated device name, e.g. `0000:3b:00.0`, `net_tap0`.
    pub device_name: [c_char; 64],
    /// Maximum RX queues.
    pub max_rx_queues: u16,
    /// Maximum TX queues.
    pub max_tx_queues: u16,
    /// Maximum RX descriptors per queue.
    pub rx_desc_max: u16,
    /// Maximum TX descriptors per queue.
    pub tx_desc_max: u16,
    /// Minimum MTU.
    pub min_mtu: u16,
    /// Maximum MTU.
    pub max_mtu: u16,
    /// `SHIM_CAP_*` bits.
    pub caps: u32,
    /// The port's MAC address.
    pub mac: [u8; 6],
    /// NUMA socket of the port (-1 when unknown).
    pub socket_id: i32,
}

impl Default for shim_dev_info {
    fn default() -> Self {
        shim_dev_info {
            driver_name: [0; 64],
            device_name: [0; 64],
            max_rx_queues: 0,
            max_tx_queues: 0,
            rx_desc_max: 0,
            tx_desc_max: 0,
            min_mtu: 0,
            max_mtu: 0,
            caps: 0,
            mac: [0; 6],
            socket_id: 0,
        }
    }
}

/// `struct shim_mbuf_info` (shim.h): what the Rust side reads from a received mbuf.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_mbuf_info {
    /// Start of the mbuf's buffer.
    pub buf_addr: *mut u8,
    /// Buffer length.
    pub buf_len: u32,
    /// Data offset within the buffer (first segment).
    pub data_off: u16,
    /// Data length of the first segment.
    pub data_len: u16,
    /// Total length of all segments.
    pub pkt_len: u32,
    /// Number of segments.
    pub nb_segs: u16,
    /// 1 for a direct mbuf (its own buffer: not a clone, no external buffer) with refcnt 1.
    pub exclusive: u8,
    /// IPv4 header checksum verdict (`SHIM_CKSUM_*`).
    pub ip_cksum: u8,
    /// L4 checksum verdict (`SHIM_CKSUM_*`).
    pub l4_cksum: u8,
}

impl Default for shim_mbuf_info {
    fn default() -> Self {
        shim_mbuf_info {
            buf_addr: std::ptr::null_mut(),
            buf_len: 0,
            data_off: 0,
            data_len: 0,
            pkt_len: 0,
            nb_segs: 0,
            exclusive: 0,
            ip_cksum: 0,
            l4_cksum: 0,
        }
    }
}

/// `rte_mbuf_extbuf_free_callback_t`.
pub type shim_ext_free_cb = unsafe extern "C" fn(addr: *mut c_void, opaque: *mut c_void);

// Functions exported by DPDK.
extern "C" {
    pub fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub fn rte_eal_cleanup() -> c_int;
    pub fn rte_eal_iova_mode() -> c_int;
    pub fn rte_thread_register() -> c_int;
    pub fn rte_thread_unregister();
    pub fn rte_socket_id() -> c_uint;
    pub fn rte_strerror(errnum: c_int) -> *const c_char;

    pub fn rte_pktmbuf_pool_create(
        name: *const c_char,
        n: c_uint,
        cache_size: c_uint,
        priv_size: u16,
        data_room_size: u16,
        socket_id: c_int,
    ) -> *mut rte_mempool;
    pub fn rte_mempool_free(mp: *mut rte_mempool);
    pub fn rte_mempool_avail_count(mp: *const rte_mempool) -> c_uint;
    pub fn rte_mempool_in_use_count(mp: *const rte_mempool) -> c_uint;
    pub fn rte_pktmbuf_free_bulk(mbufs: *mut *mut rte_mbuf, count: c_uint);

    pub fn rte_ring_create(
        name: *const c_char,
        count: c_uint,
        socket_id: c_int,
        flags: c_uint,
    ) -> *mut rte_ring;
    pub fn rte_ring_free(r: *mut rte_ring);
    pub fn rte_eth_from_rings(
        name: *const c_char,
        rx_queues: *const *mut rte_ring,
        nb_rx_queues: c_uint,
        tx_queues: *const *mut rte_ring,
        nb_tx_queues: c_uint,
        numa_node: c_uint,
    ) -> c_int;

    pub fn rte_eth_dev_count_avail() -> u16;
    pub fn rte_eth_dev_is_valid_port(port_id: u16) -> c_int;
    /// `name` must have room for [`RTE_ETH_NAME_MAX_LEN`] bytes.
    pub fn rte_eth_dev_get_name_by_port(port_id: u16, name: *mut c_char) -> c_int;
    pub fn rte_eth_dev_get_port_by_name(name: *const c_char, port_id: *mut u16) -> c_int;
    pub fn rte_eth_dev_adjust_nb_rx_tx_desc(
        port_id: u16,
        nb_rx_desc: *mut u16,
        nb_tx_desc: *mut u16,
    ) -> c_int;
    /// `rx_conf` is `const struct rte_eth_rxconf *`; SlimTCP passes NULL (driver defaults).
    pub fn rte_eth_rx_queue_setup(
        port_id: u16,
        rx_queue_id: u16,
        nb_rx_desc: u16,
        socket_id: c_uint,
        rx_conf: *const c_void,
        mb_pool: *mut rte_mempool,
    ) -> c_int;
    /// `tx_conf` is `const struct rte_eth_txconf *`; SlimTCP passes NULL (driver defaults).
    pub fn rte_eth_tx_queue_setup(
        port_id: u16,
        tx_queue_id: u16,
        nb_tx_desc: u16,
        socket_id: c_uint,
        tx_conf: *const c_void,
    ) -> c_int;
    pub fn rte_eth_dev_start(port_id: u16) -> c_int;
    pub fn rte_eth_dev_stop(port_id: u16) -> c_int;
    pub fn rte_eth_dev_close(port_id: u16) -> c_int;

    /// Calls `cb(cb_arg)` once, `us` microseconds from now, on the EAL interrupt thread (where
    /// DPDK also runs drivers' interrupt callbacks); 0 or a negative errno (`rte_alarm.h`).
    pub fn rte_eal_alarm_set(us: u64, cb: rte_eal_alarm_callback, cb_arg: *mut c_void) -> c_int;
    /// Removes the alarms set with `cb` and `cb_arg` that have not started; waits for one that
    /// is running on another thread. Returns how many were removed, or -1.
    pub fn rte_eal_alarm_cancel(cb: rte_eal_alarm_callback, cb_arg: *mut c_void) -> c_int;
    pub fn rte_eth_promiscuous_enable(port_id: u16) -> c_int;

    /// Creates (probes) virtual device `name` with driver arguments `args` after EAL start
    /// (`rte_bus_vdev.h`); returns 0 or a negative errno.
    pub fn rte_vdev_init(name: *const c_char, args: *const c_char) -> c_int;
    pub fn rte_vdev_uninit(name: *const c_char) -> c_int;

    pub fn rte_extmem_register(
        va_addr: *mut c_void,
        len: size_t,
        iova_addrs: *mut u64,
        n_pages: c_uint,
        page_sz: size_t,
    ) -> c_int;
    pub fn rte_extmem_unregister(va_addr: *mut c_void, len: size_t) -> c_int;
}

// The C shim (shim/shim.h).
extern "C" {
    pub fn shim_errno() -> c_int;

    pub fn shim_dev_info(port: u16, out: *mut shim_dev_info) -> c_int;
    pub fn shim_port_configure(port: u16, nb_rx: u16, nb_tx: u16, offloads: u32, mtu: u16) -> c_int;
    /// `mac` points to 6 bytes: the port also receives unicast frames to that address.
    pub fn shim_port_mac_addr_add(port: u16, mac: *const u8) -> c_int;
    pub fn shim_port_dma_map(port: u16, addr: *mut c_void, iova: u64, len: size_t) -> c_int;
    pub fn shim_port_dma_unmap(port: u16, addr: *mut c_void, iova: u64, len: size_t) -> c_int;
    /// `rte_lcore_id()`: [`LCORE_ID_ANY`] in an unregistered non-EAL thread.
    pub fn shim_lcore_id() -> c_uint;
    pub fn shim_rx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
    pub fn shim_tx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
    /// `rte_eth_rx_burst` and [`shim_mbuf_info`] of each mbuf received into `infos` (room for
    /// `n`); the checksum verdicts only when `verdicts` is non-zero.
    pub fn shim_rx_burst_info(
        port: u16,
        queue: u16,
        pkts: *mut *mut rte_mbuf,
        infos: *mut shim_mbuf_info,
        n: u16,
        verdicts: c_int,
    ) -> u16;

    pub fn shim_pktmbuf_alloc(mp: *mut rte_mempool) -> *mut rte_mbuf;
    pub fn shim_pktmbuf_alloc_bulk(mp: *mut rte_mempool, mbufs: *mut *mut rte_mbuf, n: c_uint) -> c_int;
    pub fn shim_pktmbuf_free(m: *mut rte_mbuf);
    pub fn shim_pktmbuf_mtod(m: *mut rte_mbuf) -> *mut c_void;
    pub fn shim_pktmbuf_data_len(m: *const rte_mbuf) -> u16;
    pub fn shim_pktmbuf_pkt_len(m: *const rte_mbuf) -> u32;
    pub fn shim_pktmbuf_headroom(m: *const rte_mbuf) -> u16;
    pub fn shim_pktmbuf_tailroom(m: *const rte_mbuf) -> u16;
    pub fn shim_pktmbuf_append(m: *mut rte_mbuf, len: u16) -> *mut c_char;
    pub fn shim_pktmbuf_prepend(m: *mut rte_mbuf, len: u16) -> *mut c_char;
    pub fn shim_pktmbuf_adj(m: *mut rte_mbuf, len: u16) -> *mut c_char;
    pub fn shim_pktmbuf_trim(m: *mut rte_mbuf, len: u16) -> c_int;
    pub fn shim_pktmbuf_chain(head: *mut rte_mbuf, tail: *mut rte_mbuf) -> c_int;
    pub fn shim_pktmbuf_next(m: *const rte_mbuf) -> *mut rte_mbuf;
    pub fn shim_pktmbuf_unchain(head: *mut rte_mbuf) -> *mut rte_mbuf;
    pub fn shim_mbuf_info(m: *const rte_mbuf, out: *mut shim_mbuf_info);
    /// `rte_pktmbuf_alloc` and, for a non-NULL result, its [`shim_mbuf_info`] (checksum verdicts
    /// `SHIM_CKSUM_UNKNOWN`: a fresh mbuf has none).
    pub fn shim_pktmbuf_alloc_info(mp: *mut rte_mempool, out: *mut shim_mbuf_info) -> *mut rte_mbuf;
    pub fn shim_mbuf_set_tx(
        m: *mut rte_mbuf,
        data_off: u16,
        data_len: u16,
        l2_len: u16,
        l3_len: u16,
        tx_flags: u32,
    );
    pub fn shim_mbuf_set_offload(m: *mut rte_mbuf, l2_len: u16, l3_len: u16, tx_flags: u32);

    pub fn shim_shinfo_array_alloc(n: size_t) -> *mut rte_mbuf_ext_shared_info;
    pub fn shim_shinfo_array_free(arr: *mut rte_mbuf_ext_shared_info);
    pub fn shim_shinfo_arm(
        arr: *mut rte_mbuf_ext_shared_info,
        i: size_t,
        cb: shim_ext_free_cb,
        opaque: *mut c_void,
    ) -> *mut rte_mbuf_ext_shared_info;
    pub fn shim_attach_extbuf(
        m: *mut rte_mbuf,
        addr: *mut c_void,
        iova: u64,
        len: u16,
        shinfo: *mut rte_mbuf_ext_shared_info,
    );
}

/// `rte_errno` of the calling thread.
pub fn errno() -> i32 {
    // SAFETY: reads a thread-local integer; no preconditions.
    unsafe { shim_errno() }
}

/// DPDK's description of an errno value (`rte_strerror`).
pub fn strerror(errnum: i32) -> String {
    // SAFETY: rte_strerror accepts any value and returns a pointer to a NUL-terminated string
    // (static, or in a thread-local buffer valid until the next call on this thread).
    let ptr = unsafe { rte_strerror(errnum.abs()) };
    if ptr.is_null() {
        return format!("error {errnum}");
    }
    // SAFETY: non-null, NUL-terminated (see above); copied out before any further call.
    unsafe { std::ffi::CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}
