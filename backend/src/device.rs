//! The vhost-user control plane: a virtio-net device as the VMM sees it. It only negotiates and
//! hands the rings and memory to the tenant's worker, which does all the data-path work.

use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackend, VringRwLock};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_net::{VIRTIO_NET_F_CTRL_VQ, VIRTIO_NET_F_MQ, VIRTIO_NET_F_MRG_RXBUF};
use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier};

use crate::config::MAX_QUEUE_SIZE;
use crate::guest_mem::GuestMem;
use crate::ring_stop::RingStops;

/// How long GET_VRING_BASE waits for the worker to give back a transmit queue's chains.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// Virtio feature bits the device offers (and nothing else).
pub const DEVICE_FEATURES: u64 = (1 << VIRTIO_F_VERSION_1)
    | (1 << VIRTIO_NET_F_MQ)
    | (1 << VIRTIO_NET_F_CTRL_VQ)
    | (1 << VIRTIO_NET_F_MRG_RXBUF)
    | (1 << VIRTIO_RING_F_EVENT_IDX);

/// vhost-user protocol features the device offers: exactly the ones it implements.
pub fn protocol_features() -> VhostUserProtocolFeatures {
    VhostUserProtocolFeatures::MQ
        | VhostUserProtocolFeatures::REPLY_ACK
        | VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS
}

/// Errors setting up the device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The exit eventfd could not be created.
    #[error("creating the exit eventfd")]
    ExitEvent(#[source] std::io::Error),
}

/// Device ids (for the SIGBUS registry: which device a guest memory region belongs to).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What the control plane shares with the worker.
struct Shared {
    id: u64,
    pairs: usize,
    vrings: Mutex<Option<Vec<VringRwLock>>>,
    mem: Mutex<Option<GuestMemoryAtomic<GuestMem>>>,
    event_idx: AtomicBool,
    acked: Mutex<u64>,
    exit: (EventConsumer, EventNotifier),
    stops: RingStops,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("pairs", &self.pairs).field("event_idx", &self.event_idx).finish()
    }
}

/// The device of one connection (cheap to clone: all clones share state).
#[derive(Debug, Clone)]
pub struct NetDevice {
    shared: Arc<Shared>,
}

impl NetDevice {
    /// A device with `pairs` queue pairs (rings `2 * pairs + 1` with the control queue).
    pub fn new(pairs: usize) -> Result<Self, DeviceError> {
        let exit = new_event_consumer_and_notifier(EventFlag::NONBLOCK).map_err(DeviceError::ExitEvent)?;
        Ok(NetDevice {
            shared: Arc::new(Shared {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                pairs,
                vrings: Mutex::new(None),
                mem: Mutex::new(None),
                event_idx: AtomicBool::new(false),
                acked: Mutex::new(0),
                exit,
                stops: RingStops::default(),
            }),
        })
    }

    /// The rings, once the daemon has handed them over (first ring event).
    pub fn vrings(&self) -> Option<Vec<VringRwLock>> {
        self.shared.vrings.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The guest memory, once a memory table was set.
    pub fn memory(&self) -> Option<GuestMemoryAtomic<GuestMem>> {
        self.shared.mem.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Features the driver acknowledged.
    pub fn acked_features(&self) -> u64 {
        *self.shared.acked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether EVENT_IDX was negotiated.
    pub fn event_idx(&self) -> bool {
        self.shared.event_idx.load(Ordering::Relaxed)
    }

    /// Makes the daemon's ring-event thread leave its loop (needed before dropping the daemon).
    pub fn signal_exit(&self) {
        if let Err(e) = self.shared.exit.1.notify() {
            log::warn!("exit event: {e}");
        }
    }

    /// Whether the VMM truncated a memory file under the mapping of this device's guest memory
    /// (a SIGBUS recovered by [`crate::sigbus`]); the connection must end. `seen` is the
    /// caller's last process-wide recovery count: the check is one atomic load while it stays.
    pub fn memory_poisoned(&self, seen: &mut u64) -> bool {
        let now = crate::sigbus::recovered();
        if now == *seen {
            return false;
        }
        *seen = now;
        crate::sigbus::poisoned(self.shared.id)
    }

    /// Queue pairs.
    pub fn pairs(&self) -> usize {
        self.shared.pairs
    }

    /// Ring stops the worker must serve.
    pub fn ring_stops(&self) -> &RingStops {
        &self.shared.stops
    }
}

impl VhostUserBackend for NetDevice {
    type Bitmap = ();
    type Vring = VringRwLock;

    fn num_queues(&self) -> usize {
        2 * self.shared.pairs + 1
    }

    fn max_queue_size(&self) -> usize {
        MAX_QUEUE_SIZE
    }

    fn features(&self) -> u64 {
        DEVICE_FEATURES | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
    }

    fn acked_features(&self, features: u64) {
        *self.shared.acked.lock().unwrap_or_else(PoisonError::into_inner) = features;
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        protocol_features()
    }

    fn set_event_idx(&self, enabled: bool) {
        self.shared.event_idx.store(enabled, Ordering::Relaxed);
    }

    /// A new memory table: its regions are registered for SIGBUS recovery first (a table that
    /// cannot be is refused, which ends the connection).
    fn update_memory(&self, mem: GuestMemoryAtomic<GuestMem>) -> std::io::Result<()> {
        crate::sigbus::register(&mem.memory(), self.shared.id).map_err(|e| {
            log::error!("guest memory refused: {}", crate::error_chain(&e));
            std::io::Error::other(e)
        })?;
        *self.shared.mem.lock().unwrap_or_else(PoisonError::into_inner) = Some(mem);
        Ok(())
    }

    /// GET_VRING_BASE: the ring is already marked not ready; a transmit queue's held chains
    /// (sends waiting for their ACK, chains waiting behind completions) go back to the used
    /// ring before the answer, the unacknowledged payload copied to host memory first
    /// (docs/protocol.md section 7).
    fn stop_vring(&self, queue_index: u32) -> std::io::Result<()> {
        let idx = queue_index as usize;
        if idx % 2 == 1 && idx < 2 * self.shared.pairs {
            self.shared.stops.request_and_wait(idx / 2, STOP_WAIT);
        }
        Ok(())
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        // vhost-user-backend 0.24 registers the consumer with its epoll through `into_raw_fd`
        // and never closes it: a duplicate handed over here leaked one eventfd per VMM
        // connection (found by the soak). It gets our own descriptor instead, which stays ours
        // (closed when the device is dropped).
        // SAFETY: the descriptor is open for as long as `self` lives; the event loop takes it
        // with `into_raw_fd` at once, so this second `EventConsumer` never closes it.
        let c = unsafe { EventConsumer::from_raw_fd(self.shared.exit.0.as_raw_fd()) };
        let n = self.shared.exit.1.try_clone().ok()?;
        Some((c, n))
    }

    fn handle_event(
        &self,
        _event: u16,
        _evset: EventSet,
        vrings: &[VringRwLock],
        _thread: usize,
    ) -> std::io::Result<()> {
        // The worker busy-polls every ring; a kick only tells us the rings exist.
        let mut slot = self.shared.vrings.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(vrings.to_vec());
        }
        Ok(())
    }
}
