//! The one place worker threads are made: spawned with a name, pinned to a core, and a panic
//! turned into a result the caller handles as a device reset instead of a dead process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::JoinHandle;

/// Errors starting a worker.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The thread could not be spawned.
    #[error("spawning worker thread {name}")]
    Spawn {
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// How a worker ended.
#[derive(Debug)]
pub enum WorkerExit<R> {
    /// It returned.
    Done(R),
    /// It panicked (message attached); its state is lost.
    Panicked(String),
}

/// Pins the calling thread to `core`.
pub fn pin_to_core(core: usize) -> std::io::Result<()> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes inside `set`; `core` is checked against CPU_SETSIZE by the caller
    // (the configuration only accepts cores this machine has).
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the given size.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Spawns `f` on a thread named `name`, pinned to `core` when given.
pub fn spawn_worker<R, F>(
    name: &str,
    core: Option<usize>,
    f: F,
) -> Result<JoinHandle<WorkerExit<R>>, WorkerError>
where
    R: Send + 'static,
    F: FnOnce() -> R + Send + 'static,
{
    let thread_name = name.to_owned();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            if let Some(core) = core {
                match pin_to_core(core) {
                    Ok(()) => log::info!("{thread_name}: pinned to core {core}"),
                    Err(e) => log::warn!("{thread_name}: cannot pin to core {core}: {e}"),
                }
            }
            match catch_unwind(AssertUnwindSafe(f)) {
                Ok(r) => WorkerExit::Done(r),
                Err(p) => {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_owned());
                    log::error!("{thread_name}: panicked: {msg}; the tenant's device is reset");
                    WorkerExit::Panicked(msg)
                }
            }
        })
        .map_err(|source| WorkerError::Spawn { name: name.to_owned(), source })
}
