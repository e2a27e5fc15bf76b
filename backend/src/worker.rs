//! The one place worker threads are made: spawned with a name, pinned to a core, and a panic
//! turned into a result the caller handles as a device reset instead of a dead process.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::thread::JoinHandle;

use slimtcp::cpu::{current_affinity, pin_current_thread, set_current_affinity, CpuError, CpuSet};
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
    /// The thread could not be pinned to its core; it did not start its work.
    #[error("pinning {name} to core {core}")]
    Pin {
        /// Its name.
        name: String,
        /// The core.
        core: usize,
        /// Why.
        #[source]
        source: CpuError,
    },
}

/// How a worker ended.
#[derive(Debug)]
pub enum WorkerExit<R> {
    /// It returned.
    Done(R),
    /// It panicked (message attached); its state is lost.
    Panicked(String),
    /// It was not pinned, so `f` never ran (its spawner got [`WorkerError::Pin`]).
    NotStarted,
}

/// The CPU set unpinned workers run on: the one the process started with (less the worker
/// cores, see [`keep_control_off`]), remembered before DPDK's EAL pins the thread that starts
/// it to its main lcore (threads spawned from there would inherit that one core).
static INITIAL_AFFINITY: OnceLock<CpuSet> = OnceLock::new();

/// Remembers the calling thread's CPU set as the one unpinned workers run on (first call wins;
/// call it before the EAL starts).
pub fn remember_affinity() {
    INITIAL_AFFINITY.get_or_init(initial_affinity);
}

/// As [`remember_affinity`], less `worker_cores`, and gives the calling thread that set, so the
/// threads it spawns (control plane, relay, serving threads) and unpinned workers keep off the
/// busy-polling cores. When the worker cores are all the process has, everything shares them,
/// with a warning.
pub fn keep_control_off(worker_cores: &[usize]) {
    let set = *INITIAL_AFFINITY.get_or_init(|| {
        let all = initial_affinity();
        let mut set = all;
        for &core in worker_cores {
            set.remove(core);
        }
        if set.count() > 0 {
            return set;
        }
        log::warn!(
            "every CPU of the process is a worker core: control threads share them (start it on a \
             CPU set with one more core)"
        );
        all
    });
    if let Err(e) = set_current_affinity(&set) {
        log::warn!("keeping control threads off the worker cores: {}", error_chain(&e));
    }
    log::info!("control threads run on CPUs {set}");
}

/// The calling thread's CPU set, or every core when it cannot be read.
fn initial_affinity() -> CpuSet {
    current_affinity().unwrap_or_else(|e| {
        log::debug!("{}; unpinned workers may run on every core", error_chain(&e));
        // Every core this machine has (the kernel intersects with what is allowed).
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        CpuSet::of(0..cores.min(libc::CPU_SETSIZE as usize)).unwrap_or_else(|_| CpuSet::empty())
    })
}

/// Gives the calling thread the remembered CPU set (no-op if none was remembered).
fn unpin() {
    let Some(set) = INITIAL_AFFINITY.get() else { return };
    if let Err(e) = set_current_affinity(set) {
        log::debug!("widening the worker's CPU set: {}", error_chain(&e));
    }
}

/// Spawns `f` on a thread named `name`, pinned to `core` when given, else on the CPU set the
/// process started with (see [`remember_affinity`]). Returns once the thread is pinned: a pin
/// that fails is an error, and `f` does not run (it is dropped on that thread).
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
    let (pinned_tx, pinned_rx) = std::sync::mpsc::sync_channel(1);
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let pinned = match core {
                Some(core) => pin_current_thread(core).map(|()| {
                    log::info!("{thread_name}: pinned to core {core} (running on CPU {})", running_on());
                }),
                None => {
                    unpin();
                    Ok(())
                }
            };
            let failed = pinned.is_err();
            let _ = pinned_tx.send(pinned);
            if failed {
                return WorkerExit::NotStarted;
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
        .map_err(|source| WorkerError::Spawn { name: name.to_owned(), source })?;
    match pinned_rx.recv() {
        Ok(Ok(())) => Ok(handle),
        Ok(Err(source)) => {
            let _ = handle.join();
            Err(WorkerError::Pin { name: name.to_owned(), core: core.unwrap_or_default(), source })
        }
        // The thread ended before it said (it cannot panic before): treat as not started.
        Err(_) => Err(WorkerError::Spawn {
            name: name.to_owned(),
            source: std::io::Error::other("the worker thread ended before it started"),
        }),
    }
}

/// Whether a worker could be pinned to `core` now: a thread is pinned there and ends. A tenant
/// checks its core before it serves, so a core it cannot have stops its start.
pub fn check_core(name: &str, core: usize) -> Result<(), WorkerError> {
    let h = spawn_worker(&format!("{name}-corecheck"), Some(core), || ())?;
    let _ = h.join();
    Ok(())
}

/// The CPU the calling thread runs on (`sched_getcpu`), for the log.
fn running_on() -> String {
    // SAFETY: sched_getcpu takes no arguments and only reads the calling thread's CPU.
    let cpu = unsafe { libc::sched_getcpu() };
    if cpu < 0 {
        "unknown".to_owned()
    } else {
        cpu.to_string()
    }
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
                WorkerExit::NotStarted => panic!("not started"),
            }
        })
        .join()
        .expect("thread");
        assert_eq!(worker, all, "the worker runs on every core the process started with");
    }

    #[test]
    fn a_worker_that_cannot_be_pinned_is_an_error_and_never_runs() {
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&ran);
        let past = libc::CPU_SETSIZE as usize;
        let e = spawn_worker("t-nopin", Some(past), move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst)
        })
        .expect_err("no such core");
        assert!(matches!(e, WorkerError::Pin { core, .. } if core == past), "{e:?}");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
        assert!(check_core("t", past).is_err());
        let allowed = current_affinity().expect("affinity");
        let core = (0..past).find(|&c| allowed.contains(c)).expect("a core");
        check_core("t", core).expect("an allowed core");
    }
}
