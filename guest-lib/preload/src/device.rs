//! The process's one SlimTCP device: attached at the first `AF_INET` socket call, its queue
//! pairs handed to threads, and what `fork` does to it.
//!
//! - **Pairs and threads.** Each thread that makes sockets gets a queue pair of its own while
//!   the device has pairs left; later threads share pairs round-robin. A pair is one
//!   [`GuestSockets`] behind a mutex, taken (hello) on first use. A socket lives on the pair
//!   that made it; any thread may use it (the pair's mutex serialises). Nothing sleeps while
//!   holding a pair: blocking is done by the callers (`wait.rs`) between short locked steps.
//! - **fork.** The child shares the parent's rings and memory, so it must never touch them: in a
//!   child, every socket made before the fork fails with `ENETDOWN` (close still works), and
//!   new sockets fail the same way when the parent had attached. A child of a parent that
//!   never attached attaches on its own.
//! - **Exit.** Linux closes a process's sockets at exit and keeps sending what they hold; the
//!   backend instead resets everything when the process goes away. So an `atexit` handler
//!   closes every socket and waits (up to `SLIMTCP_LINGER_MS`) until the peers acknowledged
//!   all sent data and every closed connection ended ([`closing`](crate::closing)).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use slimtcp_api::SocketError;
use slimtcp_guest::{GuestConfig, GuestDevice, GuestSockets};

use crate::closing::Lingering;
use crate::config::Config;
use crate::logger;

/// One queue pair, taken on first use.
#[derive(Debug)]
pub struct Pair {
    index: usize,
    state: Mutex<Option<PairState>>,
}

/// A taken pair: its library instance and its closing connections.
#[derive(Debug)]
struct PairState {
    api: GuestSockets,
    lingering: Lingering,
}

/// The attached device.
#[derive(Debug)]
pub struct Device {
    /// The settings it was attached with.
    pub config: Config,
    device: Mutex<GuestDevice>,
    pairs: Vec<Pair>,
    next_pair: AtomicUsize,
    /// The process that attached (a `vfork` child shares our memory but not our pid).
    pid: u32,
    /// The tenant's address, as the backend said in hello.
    local_ip: std::net::Ipv4Addr,
}

/// Why no SlimTCP socket can be made.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AttachError {
    /// The settings are wrong.
    #[error("{0}")]
    Config(String),
    /// The device could not be attached.
    #[error("cannot attach to {device}: {why}")]
    Device {
        /// The device string.
        device: String,
        /// The library's error.
        why: String,
        /// `SLIMTCP_FALLBACK=1`: sockets go to the kernel instead.
        fallback: bool,
    },
}

impl AttachError {
    /// Whether the user asked for the kernel's sockets when attaching fails (never when the
    /// settings themselves are wrong).
    pub fn fallback(&self) -> bool {
        matches!(self, AttachError::Device { fallback: true, .. })
    }
}

/// The attach outcome (once per process image).
static DEVICE: OnceLock<Result<Device, AttachError>> = OnceLock::new();
/// Set in a child of `fork` (see the module documentation).
static FORKED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The pair this thread makes its sockets on.
    static THREAD_PAIR: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// True in a child of `fork` whose sockets belong to the parent.
pub fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// The outcome of attaching, attaching now when nothing tried yet.
pub fn attach() -> &'static Result<Device, AttachError> {
    DEVICE.get_or_init(|| {
        let config = match Config::from_env() {
            Ok(c) => c,
            Err(e) => {
                logger::init(log::LevelFilter::Warn);
                return Err(AttachError::Config(e.to_string()));
            }
        };
        logger::init(config.log);
        let device = Device::open(config);
        if let Ok(dev) = &device {
            register_process_hooks();
            log::info!("{}", dev.banner());
        }
        device
    })
}

/// The device when attached; `None` when attaching failed or was never tried.
pub fn attached() -> Option<&'static Device> {
    DEVICE.get().and_then(|r| r.as_ref().ok())
}

impl Device {
    fn open(config: Config) -> Result<Device, AttachError> {
        let cfg = GuestConfig {
            queue_pairs: config.queue_pairs,
            memory_size: config.memory,
            ..GuestConfig::default()
        };
        let (name, fallback) = (config.device.to_string(), config.fallback);
        let failed = |why: String| AttachError::Device { device: name.clone(), why, fallback };
        let device = GuestDevice::open(&config.device, cfg).map_err(|e| failed(chain(&e)))?;
        let pairs = (0..device.queue_pairs()).map(|index| Pair { index, state: Mutex::new(None) }).collect();
        let mut dev = Device {
            config,
            device: Mutex::new(device),
            pairs,
            next_pair: AtomicUsize::new(0),
            pid: std::process::id(),
            local_ip: std::net::Ipv4Addr::UNSPECIFIED,
        };
        // Pair 0 now: its hello says whether the backend really serves us, and gives our address.
        dev.local_ip = dev
            .with_pair(0, |api| api.hello_info().addr)
            .map_err(|e| failed(format!("hello on queue pair 0: {e}")))?;
        Ok(dev)
    }

    fn banner(&self) -> String {
        format!(
            "slimtcp-preload {}: attached to {} ({} queue pairs), address {}, pid {}",
            env!("CARGO_PKG_VERSION"),
            self.config.device,
            self.pairs.len(),
            self.local_ip,
            std::process::id()
        )
    }

    /// The tenant's address, as the backend said in hello.
    pub fn local_ip(&self) -> std::net::Ipv4Addr {
        self.local_ip
    }

    /// The pair the calling thread makes sockets on (assigned on its first call).
    pub fn thread_pair(&self) -> usize {
        let assign = || self.next_pair.fetch_add(1, Ordering::Relaxed) % self.pairs.len();
        THREAD_PAIR
            .try_with(|p| match p.get() {
                Some(k) => k,
                None => {
                    let k = assign();
                    p.set(Some(k));
                    k
                }
            })
            .unwrap_or_else(|_| assign())
    }

    /// Runs `f` on pair `k` (taking it first if no thread used it yet).
    pub fn with_pair<R>(&self, k: usize, f: impl FnOnce(&mut GuestSockets) -> R) -> Result<R, SocketError> {
        if forked() {
            return Err(SocketError::StackDown);
        }
        let pair = self.pairs.get(k).ok_or(SocketError::BadHandle)?;
        let mut slot = lock(&pair.state);
        self.ready(pair, &mut slot)?;
        let state = slot.as_mut().ok_or(SocketError::StackDown)?;
        let r = f(&mut state.api);
        state.lingering.sweep(&mut state.api);
        Ok(r)
    }

    /// Closes `fd` on pair `k` the way Linux closes (see [`closing`](crate::closing)).
    pub fn close_socket(
        &self,
        k: usize,
        fd: slimtcp_api::Fd,
        proto: slimtcp_api::Proto,
    ) -> Result<(), SocketError> {
        if forked() {
            return Err(SocketError::StackDown);
        }
        let pair = self.pairs.get(k).ok_or(SocketError::BadHandle)?;
        let mut slot = lock(&pair.state);
        let state = slot.as_mut().ok_or(SocketError::StackDown)?;
        state.lingering.close(&mut state.api, fd, proto);
        Ok(())
    }

    /// Takes `pair` into `slot` when it is still empty.
    fn ready(&self, pair: &Pair, slot: &mut MutexGuard<'_, Option<PairState>>) -> Result<(), SocketError> {
        if slot.is_none() {
            let api = lock(&self.device).take(pair.index).map_err(|e| {
                log::error!("queue pair {}: {e}", pair.index);
                SocketError::StackDown
            })?;
            **slot = Some(PairState { api, lingering: Lingering::default() });
        }
        Ok(())
    }

    /// Runs `f` on pair `k` only if it can be locked before `deadline` (exit-time work: a
    /// thread may be stuck holding it).
    fn with_pair_until<R>(
        &self,
        k: usize,
        deadline: Instant,
        f: impl FnOnce(&mut PairState) -> R,
    ) -> Option<R> {
        let pair = self.pairs.get(k)?;
        loop {
            match pair.state.try_lock() {
                Ok(mut slot) => return slot.as_mut().map(f),
                Err(TryLockError::Poisoned(p)) => return p.into_inner().as_mut().map(f),
                Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(TryLockError::WouldBlock) => return None,
            }
        }
    }

    /// Number of queue pairs.
    pub fn pair_count(&self) -> usize {
        self.pairs.len()
    }
}

/// An error with its causes: `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s = format!("{s}: {c}");
        cause = c.source();
    }
    s
}

/// A mutex whose holder panicked is still usable: the state it guards stays consistent
/// between calls (each call is one library operation).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

extern "C" fn in_forked_child() {
    FORKED.store(true, Ordering::Relaxed);
}

extern "C" fn at_exit() {
    linger();
}

/// Closes every socket and waits for the connections to finish (see the module
/// documentation): from `exit` (an `atexit` handler) and from `_exit`/`_Exit`.
pub fn linger() {
    if forked() {
        return;
    }
    let Some(dev) = attached() else { return };
    if dev.pid != std::process::id() {
        return;
    }
    crate::socket::close_all_at_exit();
    let deadline = Instant::now() + dev.config.linger;
    for k in 0..dev.pairs.len() {
        loop {
            let busy = dev.with_pair_until(k, deadline, |state| {
                let _ = state.api.progress();
                state.lingering.sweep(&mut state.api);
                !state.lingering.is_empty() || state.api.tx_buffers_outstanding() > 0
            });
            if busy != Some(true) || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn register_process_hooks() {
    // SAFETY: registers plain `extern "C"` functions with no arguments; both live as long as
    // the process (this library is never unloaded: LD_PRELOAD objects stay).
    unsafe {
        libc::pthread_atfork(None, None, Some(in_forked_child));
        libc::atexit(at_exit);
    }
}
