//! One Ethernet port configured with N RX/TX queue pairs in the paper's profile: TSO, LRO and RSS
//! off; IPv4/TCP/UDP checksum offloads used when the port reports them.

use std::collections::HashSet;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use dpdk_sys as sys;

use super::eal::Eal;
use super::mempool::{Mempool, MempoolConfig, MempoolError};
use crate::wire::EthernetAddress;

/// How to set up a port. Build with [`PortConfig::new`] and adjust fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// Which port: its DPDK name (a PCI address given with `-a`, e.g. `0000:3b:00.0`; a vdev name,
    /// e.g. `net_tap0`; a `net_ring` pair member) or its port number, e.g. `0`.
    pub device: String,
    /// RX/TX queue pairs, one per worker (default 1).
    pub queues: u16,
    /// RX descriptors per queue (default 1024; adjusted to the driver's limits).
    pub rx_descriptors: u16,
    /// TX descriptors per queue (default 1024; adjusted to the driver's limits).
    pub tx_descriptors: u16,
    /// Largest burst received or transmitted at once (default 32).
    pub burst: usize,
    /// MTU (default 1500).
    pub mtu: u16,
    /// Receive frames for every MAC (for a stack MAC other than the port's that the port cannot
    /// filter for; `net_tap` hands over every frame either way). Default off: the port's own
    /// unicast MAC and broadcasts.
    pub promiscuous: bool,
    /// Use the port's IPv4/TCP/UDP checksum offloads when it reports them (default on).
    pub checksum_offload: bool,
    /// Mempool per queue (default: [`MempoolConfig::for_queue`] from the fields above).
    pub mempool: Option<MempoolConfig>,
    /// External-payload frames in flight per queue (default 4096).
    pub max_external_in_flight: usize,
}

impl PortConfig {
    /// Defaults for `device`.
    pub fn new(device: impl Into<String>) -> Self {
        PortConfig {
            device: device.into(),
            queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            burst: 32,
            mtu: 1500,
            promiscuous: false,
            checksum_offload: true,
            mempool: None,
            max_external_in_flight: 4096,
        }
    }

    /// The mempool sizing in effect.
    pub fn mempool_config(&self) -> MempoolConfig {
        self.mempool
            .unwrap_or_else(|| MempoolConfig::for_queue(self.rx_descriptors, self.tx_descriptors, self.burst))
    }
}

/// Offload features, as reported by a port or as enabled by SlimTCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Offloads {
    /// RX IPv4 header checksum verification.
    pub rx_ipv4_checksum: bool,
    /// RX TCP checksum verification.
    pub rx_tcp_checksum: bool,
    /// RX UDP checksum verification.
    pub rx_udp_checksum: bool,
    /// TX IPv4 header checksum insertion.
    pub tx_ipv4_checksum: bool,
    /// TX TCP checksum insertion.
    pub tx_tcp_checksum: bool,
    /// TX UDP checksum insertion.
    pub tx_udp_checksum: bool,
    /// TX of chained mbufs (needed for external payloads).
    pub tx_multi_segment: bool,
    /// TCP segmentation offload (never enabled).
    pub tso: bool,
    /// Large receive offload (never enabled).
    pub lro: bool,
    /// RSS hash delivery (never enabled).
    pub rss_hash: bool,
}

impl Offloads {
    fn from_bits(b: u32) -> Self {
        Offloads {
            rx_ipv4_checksum: b & sys::SHIM_CAP_RX_IPV4_CKSUM != 0,
            rx_tcp_checksum: b & sys::SHIM_CAP_RX_TCP_CKSUM != 0,
            rx_udp_checksum: b & sys::SHIM_CAP_RX_UDP_CKSUM != 0,
            tx_ipv4_checksum: b & sys::SHIM_CAP_TX_IPV4_CKSUM != 0,
            tx_tcp_checksum: b & sys::SHIM_CAP_TX_TCP_CKSUM != 0,
            tx_udp_checksum: b & sys::SHIM_CAP_TX_UDP_CKSUM != 0,
            tx_multi_segment: b & sys::SHIM_CAP_TX_MULTI_SEGS != 0,
            tso: b & sys::SHIM_CAP_TX_TCP_TSO != 0,
            lro: b & sys::SHIM_CAP_RX_TCP_LRO != 0,
            rss_hash: b & sys::SHIM_CAP_RX_RSS_HASH != 0,
        }
    }

    /// Any RX checksum verification.
    pub fn any_rx_checksum(&self) -> bool {
        self.rx_ipv4_checksum || self.rx_tcp_checksum || self.rx_udp_checksum
    }
}

/// What SlimTCP knows about a configured port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// DPDK port number.
    pub port_id: u16,
    /// DPDK port name.
    pub name: String,
    /// Driver, e.g. `net_bnxt`, `net_tap`, `net_ring`.
    pub driver: String,
    /// The port's MAC address.
    pub mac: EthernetAddress,
    /// Driver limit on RX queues.
    pub max_rx_queues: u16,
    /// Driver limit on TX queues.
    pub max_tx_queues: u16,
    /// Configured queue pairs.
    pub queues: u16,
    /// Configured MTU.
    pub mtu: u16,
    /// What the port reports.
    pub reported: Offloads,
    /// What SlimTCP enabled.
    pub enabled: Offloads,
    /// NUMA socket, when known.
    pub socket: Option<i32>,
}

/// Why a port could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// No port of that name or number.
    #[error(
        "no DPDK port {device:?} (available: {available:?}; pass it with -a <PCI address> or --vdev=...)"
    )]
    NotFound {
        /// The requested device.
        device: String,
        /// Names of the ports DPDK has.
        available: Vec<String>,
    },
    /// The port is already configured by this process.
    #[error("DPDK port {device:?} is already in use")]
    InUse {
        /// The requested device.
        device: String,
    },
    /// The configuration is inconsistent.
    #[error("invalid port configuration for {device:?}: {what}")]
    InvalidConfig {
        /// The requested device.
        device: String,
        /// What is wrong.
        what: String,
    },
    /// More queue pairs than the driver supports.
    #[error("DPDK port {device:?} ({driver}) supports {max} queue pairs, {requested} requested")]
    TooManyQueues {
        /// The requested device.
        device: String,
        /// Its driver.
        driver: String,
        /// Driver limit.
        max: u16,
        /// Requested.
        requested: u16,
    },
    /// A DPDK call failed while configuring or starting the port.
    #[error("cannot set up DPDK port {device:?}: {step} failed: {reason}")]
    Setup {
        /// The requested device.
        device: String,
        /// The step (DPDK function).
        step: String,
        /// DPDK's description of the error.
        reason: String,
    },
    /// A mempool for the port could not be created.
    #[error(transparent)]
    Mempool(#[from] MempoolError),
    /// A `net_ring` pair could not be created.
    #[error("cannot create net_ring port {name:?}: {reason}")]
    RingPair {
        /// The port name.
        name: String,
        /// DPDK's description of the error.
        reason: String,
    },
}

/// Ports configured by this process.
static PORTS_IN_USE: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

fn claim(port: u16) -> bool {
    let mut set = PORTS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
    set.get_or_insert_with(HashSet::new).insert(port)
}

fn release(port: u16) {
    let mut set = PORTS_IN_USE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = set.as_mut() {
        s.remove(&port);
    }
}

/// Names of all ports DPDK knows.
pub fn port_names(_eal: &Eal) -> Vec<String> {
    (0..sys::RTE_MAX_ETHPORTS)
        // SAFETY: the EAL is running; any port number may be asked about.
        .filter(|&p| unsafe { sys::rte_eth_dev_is_valid_port(p) } != 0)
        .filter_map(port_name)
        .collect()
}

fn port_name(port: u16) -> Option<String> {
    let mut buf = [0 as libc::c_char; sys::RTE_ETH_NAME_MAX_LEN];
    // SAFETY: buf has the RTE_ETH_NAME_MAX_LEN bytes the function may write.
    if unsafe { sys::rte_eth_dev_get_name_by_port(port, buf.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: on success the buffer holds a NUL-terminated name.
    Some(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

fn lookup(eal: &Eal, device: &str) -> Result<u16, PortError> {
    let not_found = || PortError::NotFound { device: device.to_string(), available: port_names(eal) };
    if let Ok(id) = device.parse::<u16>() {
        // SAFETY: the EAL is running; any port number may be asked about.
        return if unsafe { sys::rte_eth_dev_is_valid_port(id) } != 0 { Ok(id) } else { Err(not_found()) };
    }
    let name = CString::new(device).map_err(|_| not_found())?;
    let mut id = 0u16;
    // SAFETY: valid C string and out pointer.
    if unsafe { sys::rte_eth_dev_get_port_by_name(name.as_ptr(), &mut id) } != 0 {
        return Err(not_found());
    }
    Ok(id)
}

fn c_name(bytes: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = bytes.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A configured, started port; stopped and closed when the last queue's NIC is dropped.
#[derive(Debug)]
pub(crate) struct Port {
    pub(crate) info: PortInfo,
}

impl Port {
    /// Configures and starts the port; returns it with one mempool per queue.
    pub(crate) fn open(eal: &Eal, config: &PortConfig) -> Result<(Port, Vec<Mempool>), PortError> {
        let device = config.device.as_str();
        let invalid =
            |what: &str| PortError::InvalidConfig { device: device.to_string(), what: what.to_string() };
        if config.queues == 0 {
            return Err(invalid("queues must be at least 1"));
        }
        if config.burst == 0 || config.burst > usize::from(u16::MAX) {
            return Err(invalid("burst must be between 1 and 65535"));
        }
        let id = lookup(eal, device)?;
        if !claim(id) {
            return Err(PortError::InUse { device: device.to_string() });
        }
        match Self::setup(eal, id, config) {
            Ok(ok) => Ok(ok),
            Err(e) => {
                release(id);
                Err(e)
            }
        }
    }

    fn setup(eal: &Eal, id: u16, config: &PortConfig) -> Result<(Port, Vec<Mempool>), PortError> {
        let device = config.device.as_str();
        let fail = |step: &str, rc: i32| PortError::Setup {
            device: device.to_string(),
            step: step.to_string(),
            // ethdev calls return -errno; some only set rte_errno.
            reason: sys::strerror(if rc < -1 { -rc } else { sys::errno() }),
        };
        let mut raw = sys::shim_dev_info::default();
        // SAFETY: the port exists; `raw` is a valid out pointer.
        let rc = unsafe { sys::shim_dev_info(id, &mut raw) };
        if rc != 0 {
            return Err(fail("rte_eth_dev_info_get", rc));
        }
        let driver = c_name(&raw.driver_name);
        let max = raw.max_rx_queues.min(raw.max_tx_queues);
        if config.queues > max {
            return Err(PortError::TooManyQueues {
                device: device.to_string(),
                driver,
                max,
                requested: config.queues,
            });
        }
        let mut want = sys::SHIM_CAP_TX_MULTI_SEGS;
        if config.checksum_offload {
            want |= sys::SHIM_CAP_RX_IPV4_CKSUM
                | sys::SHIM_CAP_RX_TCP_CKSUM
                | sys::SHIM_CAP_RX_UDP_CKSUM
                | sys::SHIM_CAP_TX_IPV4_CKSUM
                | sys::SHIM_CAP_TX_TCP_CKSUM
                | sys::SHIM_CAP_TX_UDP_CKSUM;
        }
        let enabled_bits = raw.caps & want;
        // SAFETY: the port exists and is stopped (just claimed by us); the shim builds the conf.
        let rc =
            unsafe { sys::shim_port_configure(id, config.queues, config.queues, enabled_bits, config.mtu) };
        if rc != 0 {
            return Err(fail("rte_eth_dev_configure", rc));
        }
        let (mut nb_rx, mut nb_tx) = (config.rx_descriptors, config.tx_descriptors);
        // SAFETY: the port is configured; both out pointers are valid.
        let rc = unsafe { sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut nb_rx, &mut nb_tx) };
        if rc != 0 {
            return Err(fail("rte_eth_dev_adjust_nb_rx_tx_desc", rc));
        }
        let socket = (raw.socket_id >= 0).then_some(raw.socket_id);
        // Cast: SOCKET_ID_ANY (-1) is passed to DPDK as (unsigned)-1, as C callers do.
        let socket_arg = raw.socket_id as libc::c_uint;
        let pool_config = MempoolConfig { ..config.mempool_config() };
        let mut pools = Vec::with_capacity(usize::from(config.queues));
        for q in 0..config.queues {
            let pool = Mempool::for_queue(eal, device, q, &pool_config, socket)?;
            // SAFETY: configured port, queue index below the configured count, live pool; NULL
            // rxconf selects the driver's defaults plus the port-level offloads.
            let rc = unsafe {
                sys::rte_eth_rx_queue_setup(id, q, nb_rx, socket_arg, std::ptr::null(), pool.as_ptr())
            };
            if rc != 0 {
                return Err(fail(&format!("rte_eth_rx_queue_setup (queue {q})"), rc));
            }
            // SAFETY: as above; NULL txconf selects the driver's defaults plus port offloads.
            let rc = unsafe { sys::rte_eth_tx_queue_setup(id, q, nb_tx, socket_arg, std::ptr::null()) };
            if rc != 0 {
                return Err(fail(&format!("rte_eth_tx_queue_setup (queue {q})"), rc));
            }
            pools.push(pool);
        }
        if config.promiscuous {
            // SAFETY: the port exists.
            let rc = unsafe { sys::rte_eth_promiscuous_enable(id) };
            if rc != 0 {
                return Err(fail("rte_eth_promiscuous_enable", rc));
            }
        }
        // SAFETY: the port is configured with all its queues set up.
        let rc = unsafe { sys::rte_eth_dev_start(id) };
        if rc != 0 {
            return Err(fail("rte_eth_dev_start", rc));
        }
        let info = PortInfo {
            port_id: id,
            name: port_name(id).unwrap_or_else(|| device.to_string()),
            driver,
            mac: EthernetAddress(raw.mac),
            max_rx_queues: raw.max_rx_queues,
            max_tx_queues: raw.max_tx_queues,
            queues: config.queues,
            mtu: config.mtu,
            reported: Offloads::from_bits(raw.caps),
            enabled: Offloads::from_bits(enabled_bits),
            socket,
        };
        log::info!(
            "DPDK port {} ({}) started: {} queue pair(s), {nb_rx}/{nb_tx} descriptors, offloads {:?}",
            info.name,
            info.driver,
            info.queues,
            info.enabled
        );
        Ok((Port { info }, pools))
    }
}

/// Drivers whose control path takes no lock against their own events on the EAL interrupt
/// thread: their ports are stopped and closed on that thread (`interrupt_thread`).
const CONTROL_ON_INTERRUPT_THREAD: &[&str] = &["net_memif"];

/// Stops port `id`, then closes it (which also releases a vdev's resources).
fn stop_and_close(id: u16) -> (i32, i32) {
    // SAFETY: the caller owns the started port and no queue of it is used any more (`Port::drop`).
    unsafe { (sys::rte_eth_dev_stop(id), sys::rte_eth_dev_close(id)) }
}

impl Drop for Port {
    fn drop(&mut self) {
        let id = self.info.port_id;
        // Every NIC holding the port is gone, so no queue of it is used any more.
        let result = if CONTROL_ON_INTERRUPT_THREAD.contains(&self.info.driver.as_str()) {
            super::interrupt_thread::run(move || stop_and_close(id))
        } else {
            Some(stop_and_close(id))
        };
        match result {
            Some((0, 0)) => {}
            Some((stop, close)) => {
                log::warn!("DPDK port {}: stop returned {stop}, close returned {close}", self.info.name);
            }
            None => log::warn!("DPDK port {}: stop and close did not report", self.info.name),
        }
        release(id);
    }
}

static RING_SEQ: AtomicU32 = AtomicU32::new(0);

/// Creates two `net_ring` ports wired back to back (what one transmits the other receives) with
/// one queue pair each, over rings of `ring_size` frames (a power of two; holds `ring_size - 1`).
/// The frames cross without a copy: the receiver gets the sender's mbufs. Returns the ports'
/// DPDK names (`net_ring_<name_a>`, `net_ring_<name_b>`), to use as [`PortConfig::device`].
pub fn create_ring_pair(
    eal: &Eal,
    name_a: &str,
    name_b: &str,
    ring_size: u32,
) -> Result<(String, String), PortError> {
    let _ = eal;
    let seq = RING_SEQ.fetch_add(1, Ordering::Relaxed);
    let fail = |name: &str, reason: String| PortError::RingPair { name: name.to_string(), reason };
    let mut rings = [std::ptr::null_mut(); 2];
    for (i, ring) in rings.iter_mut().enumerate() {
        let rname = CString::new(format!("slimrp{seq}_{i}")).map_err(|_| fail(name_a, "bad name".into()))?;
        // SAFETY: the EAL is running; the name is a valid C string (DPDK copies it).
        *ring = unsafe {
            sys::rte_ring_create(
                rname.as_ptr(),
                ring_size,
                sys::SOCKET_ID_ANY,
                sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
            )
        };
        if ring.is_null() {
            return Err(fail(name_a, format!("rte_ring_create: {}", sys::strerror(sys::errno()))));
        }
    }
    // a receives from ring 0 and transmits into ring 1; b the other way round.
    let mut names = Vec::with_capacity(2);
    for (name, rx, tx) in [(name_a, rings[0], rings[1]), (name_b, rings[1], rings[0])] {
        let c = CString::new(name).map_err(|_| fail(name, "name contains NUL".into()))?;
        // SAFETY: one live ring in each array, as the counts say; the rings live for the process.
        let rc = unsafe { sys::rte_eth_from_rings(c.as_ptr(), &rx, 1, &tx, 1, 0) };
        let port = u16::try_from(rc).map_err(|_| fail(name, sys::strerror(sys::errno())))?;
        names.push(port_name(port).unwrap_or_else(|| format!("net_ring_{name}")));
    }
    let b = names.pop().unwrap_or_default();
    let a = names.pop().unwrap_or_default();
    Ok((a, b))
}
