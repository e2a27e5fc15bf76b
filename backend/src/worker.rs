//! The one place worker threads are made: spawned with a name, pinned to a core, and a panic
//! turned into a result the caller handles as a device reset instead of a dead process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::thread::JoinHandle;

use slimtcp::cpu::{current_affinity, pin_current_thread, set_current_affinity, CpuSet};
use slimtcp::report::error_chain;

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

/// The CPU set the process started with, remembered before DPDK's EAL pins the thread that
/// starts it to its main lcore (threads spawned from there would inherit that one core).
static INITIAL_AFFINITY: OnceLock<CpuSet> = OnceLock::new();

/// Remembers the calling thread's CPU set as the one unpinned workers run on (first call wins;
/// call it before the EAL starts).
pub fn remember_affinity() {
    INITIAL_AFFINITY.get_or_init(|| {
        current_affinity().unwrap_or_else(|e| {
            log::debug!("{}; unpinned workers may run on every core", error_chain(&e));
            // Every core this machine has (the kernel intersects with what is allowed).
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            CpuSet::of(0..cores.min(libc::CPU_SETSIZE as usize)).unwrap_or_else(|_| CpuSet::empty())
        })
    });
}

/// Gives the calling thread the remembered CPU set (no-op if none was remembered).
fn unpin() {
    let Some(set) = INITIAL_AFFINITY.get() else { return };
    if let Err(e) = set_current_affinity(set) {
        log::debug!("widening the worker's CPU set: {}", error_chain(&e));
    }
}

/// Spawns `f` on a thread named `name`, pinned to `core` when given, else on the CPU set the
/// process started with (see [`remember_affinity`]).
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
            match core {
                Some(core) => match pin_current_thread(core) {
                    Ok(()) => log::info!("{thread_name}: pinned to core {core}"),
                    Err(e) => log::warn!("{thread_name}: cannot pin to core {core}: {}", error_chain(&e)),
                },
                None => unpin(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus_of_this_thread() -> usize {
        current_affinity().expect("getaffinity").count()
    }

    #[test]
    fn an_unpinned_worker_gets_the_initial_cpu_set_not_its_spawners() {
        let all = std::thread::spawn(|| {
            remember_affinity();
            cpus_of_this_thread()
        })
        .join()
        .expect("thread");
        // The spawner is pinned to one core, as DPDK's EAL pins the thread that starts it.
        let worker = std::thread::spawn(|| {
            pin_current_thread(0).expect("pin");
            assert_eq!(cpus_of_this_thread(), 1);
            let h = spawn_worker("t-unpinned", None, cpus_of_this_thread).expect("spawn");
            match h.join().expect("join") {
                WorkerExit::Done(n) => n,
                WorkerExit::Panicked(m) => panic!("{m}"),
            }
        })
        .join()
        .expect("thread");
        assert_eq!(worker, all, "the worker runs on every core the process started with");
    }
}
