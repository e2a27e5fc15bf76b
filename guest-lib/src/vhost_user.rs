//! The vhost-user transport: this process plays the VMM.
//!
//! It creates the "guest memory" as a memfd, maps it, connects to the backend's unix socket
//! with vhost's [`Frontend`] and sets the device up in the order VMMs use (set_owner,
//! features, protocol features, queue count, set_features, memory table, then per vring
//! num/base/addr/kick/call, then enable). From then on it drives the split rings itself; the
//! backend sees ordinary virtio-net rings in ordinary guest memory.
//!
//! When the backend offers `REPLY_ACK` (slimtcp-vhost does), every message after
//! `set_protocol_features` carries `NEED_REPLY` and the backend's acknowledgement is awaited:
//! vhost's [`Frontend`] waits for an ack only when the header asks for one, and asks only when
//! told to (`set_hdr_flags`). A refused message is then [`GuestError::Refused`] naming the
//! step, at connect time; without `REPLY_ACK` a final round trip catches a backend that hung up
//! over a refused message.
//!
//! Memory layout (one region, at [`GUEST_MEMORY_BASE`], never at GPA 0):
//! `[rings of pair 0..N][buffer area of pair 0][buffer area of pair 1]...`.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{Frontend, VhostUserFrontend, VhostUserProtocolFeatures};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vm_memory::{FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::mem::{BumpAllocator, DmaRegion};
use crate::ring::{alloc_ring, SplitRing};
use crate::transport::{Interrupt, Link, Notify, QueuePair, Transport, Virtqueue};
use crate::{GuestConfig, GuestError};

/// The guest-physical address of the memfd region (rings at GPA 0 count as "not set").
pub const GUEST_MEMORY_BASE: u64 = 0x1_0000_0000;

pub use crate::features;

#[derive(Debug)]
struct EventKick(EventFd);

impl Notify for EventKick {
    fn notify(&self) -> std::io::Result<()> {
        self.0.write(1)
    }
}

#[derive(Debug)]
struct EventCall(EventFd);

impl Interrupt for EventCall {
    fn wait(&self, timeout: Duration) -> std::io::Result<()> {
        let mut pfd = libc::pollfd { fd: self.0.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        if rc > 0 {
            // Clears the counter; EAGAIN (someone else read it) is fine.
            let _ = self.0.read();
        }
        Ok(())
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.0.as_raw_fd())
    }

    fn acknowledge(&self) {
        // Non-blocking: EAGAIN (nothing signalled, or another thread read it) is fine.
        let _ = self.0.read();
    }
}

/// The backend connection, also the liveness probe of every pair.
struct Connection {
    /// Owns the vhost-user socket `fd` (held, never read: dropping it closes the socket).
    _frontend: Frontend,
    fd: libc::c_int,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("fd", &self.fd).finish()
    }
}

impl Link for Connection {
    fn alive(&self) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd, events: libc::POLLIN | libc::POLLRDHUP, revents: 0 };
        // SAFETY: one valid pollfd; the socket stays open while `_frontend` lives (in self).
        let rc = unsafe { libc::poll(&mut pfd, 1, 0) };
        if rc < 0 {
            // A signal (DPDK's net_tap uses SIGIO, for one) interrupted the check: that says
            // nothing about the backend.
            return std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR);
        }
        if rc == 0 {
            return true;
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return false;
        }
        // Readable without hang-up: the backend never sends unsolicited messages on the
        // main socket, so this is an end of file unless a peek says otherwise.
        let mut b = 0u8;
        // SAFETY: peeks one byte into a valid local buffer.
        let n = unsafe {
            libc::recv(self.fd, (&mut b as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
        };
        match n {
            0 => false,
            n if n > 0 => true,
            _ => std::io::Error::last_os_error().raw_os_error() != Some(libc::ECONNRESET),
        }
    }
}

/// A vhost-user device set up by this process (see the module documentation).
#[derive(Debug)]
pub struct VhostUserTransport {
    conn: Arc<Connection>,
    pairs: Vec<Option<QueuePair>>,
    /// Features agreed with the backend.
    pub features: u64,
    /// Protocol features agreed with the backend.
    pub protocol_features: VhostUserProtocolFeatures,
}

/// Shuts a socket down if not stopped within a time: blocked reads on it then return.
struct Watchdog {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<bool>,
}

impl Watchdog {
    fn start(fd: libc::c_int, after: Duration) -> Watchdog {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            if stopped.recv_timeout(after) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                // SAFETY: `fd` stays open until `stop` joined this thread (the caller holds it).
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
                return true;
            }
            false
        });
        Watchdog { stop, thread }
    }

    /// Stops the watchdog; true when it fired.
    fn stop(self) -> bool {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or(true)
    }
}

fn vhost_err(step: &'static str) -> impl FnOnce(vhost::Error) -> GuestError {
    move |source| match source {
        // A negative acknowledgement (REPLY_ACK): the backend handled the message and said no.
        vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::BackendInternalError) => {
            GuestError::Refused { step }
        }
        source => GuestError::VhostUser { step, source },
    }
}

/// Creates the shared guest memory: a memfd of `size` bytes mapped at [`GUEST_MEMORY_BASE`].
pub fn create_memory(size: usize) -> Result<Arc<GuestMemoryMmap>, GuestError> {
    let name = c"slimtcp-guest";
    // SAFETY: valid NUL-terminated name; the returned fd is owned by the File below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(GuestError::Memory(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(size as u64).map_err(GuestError::Memory)?;
    let ranges = [(GuestAddress(GUEST_MEMORY_BASE), size, Some(FileOffset::new(file, 0)))];
    let mem = GuestMemoryMmap::from_ranges_with_files(&ranges)
        .map_err(|e| GuestError::Memory(std::io::Error::other(e.to_string())))?;
    Ok(Arc::new(mem))
}

/// The whole of a memory made by [`create_memory`] as one [`DmaRegion`] (GPA = host base +
/// offset translation), `None` if it has no region.
pub fn memory_region(mem: &Arc<GuestMemoryMmap>) -> Option<DmaRegion> {
    let region = mem.iter().next()?;
    let keep: crate::mem::KeepAlive = mem.clone();
    // SAFETY: the region is `len()` bytes mapped read-write at `as_ptr()`, kept mapped by
    // `keep` (the `GuestMemoryMmap`), and the device sees it at its guest address.
    Some(unsafe { DmaRegion::new(region.as_ptr(), region.start_addr().0, region.len() as usize, keep) })
}

impl VhostUserTransport {
    /// Connects to the backend at `path` and sets up `cfg.queue_pairs` queue pairs (0: as many
    /// as the device has).
    pub fn connect(path: impl AsRef<Path>, cfg: &GuestConfig) -> Result<VhostUserTransport, GuestError> {
        cfg.validate()?;
        let fe = Frontend::connect(path.as_ref(), 3).map_err(vhost_err("connect"))?;
        // A backend serves one frontend per socket and accepts the next only when the first
        // leaves: our messages then wait unanswered in its listen queue (and vhost's reads
        // retry for ever). A watchdog shuts the socket down when set-up takes too long.
        let watchdog = Watchdog::start(fe.as_raw_fd(), cfg.hello_timeout);
        let set_up = Self::set_up(fe, cfg);
        if watchdog.stop() {
            return Err(GuestError::NoAnswer { step: "set-up", after: cfg.hello_timeout });
        }
        set_up
    }

    /// The set-up messages after connecting (see [`connect`](Self::connect)).
    fn set_up(mut fe: Frontend, cfg: &GuestConfig) -> Result<VhostUserTransport, GuestError> {
        fe.set_owner().map_err(vhost_err("set_owner"))?;
        let Negotiated { features, protocol_features, pairs } = negotiate(&mut fe, cfg)?;
        let whole = share_memory(&mut fe, cfg)?;

        let event_idx = features & features::EVENT_IDX != 0;
        let mut alloc = BumpAllocator::new(whole);
        let mut rings: Vec<(SplitRing, SplitRing)> = Vec::with_capacity(pairs);
        for _ in 0..pairs {
            let rx = alloc_ring(&mut alloc, cfg.queue_size, event_idx).map_err(GuestError::Ring)?;
            let tx = alloc_ring(&mut alloc, cfg.queue_size, event_idx).map_err(GuestError::Ring)?;
            rings.push((rx, tx));
        }
        let per_pair = (alloc.remaining() / pairs) & !4095;
        let mut out = Vec::with_capacity(pairs);
        let conn_fd = fe.as_raw_fd();
        let mut vqs = Vec::new();
        for (k, (rx, tx)) in rings.into_iter().enumerate() {
            let memory = alloc.alloc(per_pair, 4096).ok_or(GuestError::Config("memory_size too small"))?;
            let rx = set_up_queue(&mut fe, 2 * k, rx)?;
            let tx = set_up_queue(&mut fe, 2 * k + 1, tx)?;
            vqs.extend([2 * k, 2 * k + 1]);
            out.push((k, rx, tx, memory));
        }
        for q in vqs {
            fe.set_vring_enable(q, true).map_err(vhost_err("set_vring_enable"))?;
        }
        // A round trip: the backend has handled every message above. Without REPLY_ACK this is
        // how a refusal shows (slimtcp-vhost closes the connection on a message it rejects).
        fe.get_features().map_err(vhost_err("setup round trip"))?;
        let conn = Arc::new(Connection { _frontend: fe, fd: conn_fd });
        if !conn.alive() {
            return Err(GuestError::Disconnected);
        }
        let link: Arc<dyn Link> = conn.clone();
        let pairs = out
            .into_iter()
            .map(|(index, rx, tx, memory)| Some(QueuePair { index, rx, tx, memory, link: link.clone() }))
            .collect();
        log::debug!("vhost-user device set up: features {features:#x}, protocol {protocol_features:?}");
        Ok(VhostUserTransport { conn, pairs, features, protocol_features })
    }

    /// Whether the backend is still connected.
    pub fn alive(&self) -> bool {
        self.conn.alive()
    }
}

/// What the frontend and the backend agreed on.
struct Negotiated {
    /// The virtio features acknowledged (SET_FEATURES).
    features: u64,
    /// The protocol features acknowledged.
    protocol_features: VhostUserProtocolFeatures,
    /// The queue pairs to set up.
    pairs: usize,
}

/// Features, protocol features and the queue count, in the order VMMs ask: what the library
/// needs and wants of what the backend offers, and `cfg.queue_pairs` (0: all) of its pairs.
/// With REPLY_ACK, every later message waits for the backend's acknowledgement.
fn negotiate(fe: &mut Frontend, cfg: &GuestConfig) -> Result<Negotiated, GuestError> {
    let offered = fe.get_features().map_err(vhost_err("get_features"))?;
    if offered & features::REQUIRED != features::REQUIRED {
        return Err(GuestError::MissingFeatures { offered, required: features::REQUIRED });
    }
    let features = offered & features::WANTED;
    let pf_offered = fe.get_protocol_features().map_err(vhost_err("get_protocol_features"))?;
    let protocol_features = pf_offered
        & (VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS);
    fe.set_protocol_features(protocol_features).map_err(vhost_err("set_protocol_features"))?;
    if protocol_features.contains(VhostUserProtocolFeatures::REPLY_ACK) {
        // From here on every message without a reply of its own is acknowledged.
        fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
    }
    let vrings = if protocol_features.contains(VhostUserProtocolFeatures::MQ) {
        fe.get_queue_num().map_err(vhost_err("get_queue_num"))?
    } else {
        2
    };
    let available = usize::try_from(vrings / 2).unwrap_or(usize::MAX).max(1);
    let pairs = if cfg.queue_pairs == 0 { available } else { cfg.queue_pairs };
    if pairs > available {
        return Err(GuestError::TooManyQueuePairs { wanted: pairs, available });
    }
    fe.set_features(features).map_err(vhost_err("set_features"))?;
    Ok(Negotiated { features, protocol_features, pairs })
}

/// Creates the guest memory (`cfg.memory_size`) and hands it to the backend (SET_MEM_TABLE);
/// returns it as one region, which keeps it mapped.
fn share_memory(fe: &mut Frontend, cfg: &GuestConfig) -> Result<DmaRegion, GuestError> {
    let mem = create_memory(cfg.memory_size)?;
    let region = mem.iter().next().ok_or(GuestError::Config("no memory region"))?;
    let info = VhostUserMemoryRegionInfo::from_guest_region(region).map_err(vhost_err("memory region"))?;
    fe.set_mem_table(&[info]).map_err(vhost_err("set_mem_table"))?;
    memory_region(&mem).ok_or(GuestError::Config("no memory region"))
}

/// Announces `ring` as vring `q`: its size, base 0, addresses, and new kick and call eventfds.
fn set_up_queue(fe: &mut Frontend, q: usize, ring: SplitRing) -> Result<Virtqueue, GuestError> {
    let kick = EventFd::new(EFD_NONBLOCK).map_err(GuestError::Notify)?;
    let call = EventFd::new(EFD_NONBLOCK).map_err(GuestError::Notify)?;
    let a = ring.addrs();
    let size = ring.size();
    fe.set_vring_num(q, size).map_err(vhost_err("set_vring_num"))?;
    fe.set_vring_base(q, 0).map_err(vhost_err("set_vring_base"))?;
    let cfgd = VringConfigData {
        queue_max_size: size,
        queue_size: size,
        flags: 0,
        desc_table_addr: a.desc_host,
        used_ring_addr: a.used_host,
        avail_ring_addr: a.avail_host,
        log_addr: None,
    };
    fe.set_vring_addr(q, &cfgd).map_err(vhost_err("set_vring_addr"))?;
    fe.set_vring_kick(q, &kick).map_err(vhost_err("set_vring_kick"))?;
    fe.set_vring_call(q, &call).map_err(vhost_err("set_vring_call"))?;
    Ok(Virtqueue { ring, kick: Box::new(EventKick(kick)), call: Some(Box::new(EventCall(call))) })
}

impl Transport for VhostUserTransport {
    fn queue_pairs(&self) -> usize {
        self.pairs.len()
    }

    fn alive(&self) -> bool {
        self.conn.alive()
    }

    fn take_queue_pair(&mut self, index: usize) -> Result<QueuePair, GuestError> {
        self.pairs.get_mut(index).and_then(Option::take).ok_or(GuestError::NoSuchQueuePair(index))
    }
}
