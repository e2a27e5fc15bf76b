//! Seccomp filters for the backend's threads (issue 14, "Sandboxing").
//!
//! Every thread that handles what a VMM or a guest sends runs under a seccomp-bpf filter
//! (`seccompiler`, as cloud-hypervisor and firecracker do), installed by the thread itself once
//! its set-up is done, so set-up (opening the TAP or DPDK port, pinning, binding sockets) may
//! use anything:
//!
//! - a tenant's **worker** gets the [`ThreadKind::Worker`] filter as its first step, after it
//!   was pinned to its core and was handed its open NIC; a DPDK tenant's worker gets
//!   [`ThreadKind::DpdkWorker`], the same list plus what DPDK's PMDs and its external-memory
//!   registration call ([`Sandbox::SeccompDpdk`], [`Sandbox::worker_kind`]);
//! - the **control** threads of a connection (the vhost-user daemon's request thread and its
//!   epoll threads, the two relay threads) are spawned from a short-lived launcher thread that
//!   installs the [`ThreadKind::Control`] filter first ([`Sandbox::run_confined`]); they inherit
//!   it (a filter is kept across `clone`). The watchdog installs it itself.
//!
//! Not filtered: the thread that serves a tenant's socket (it accepts connections and opens,
//! reopens and closes the NIC, which needs `open`, `ioctl`, sockets and, on DPDK, much more; it
//! reads nothing a VMM sends), DPDK's own threads, and the process's main thread. A worker whose
//! NIC failed or that panicked hands the NIC back to that thread to be closed.
//!
//! A forbidden call is trapped (`SECCOMP_RET_TRAP`): [`trap`] logs it and makes it fail with
//! `EPERM`. The allow-lists are in [`allow`]. `--no-seccomp` ([`Sandbox::Off`]) turns it off.

pub mod allow;
pub mod trap;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule, TargetArch};

/// Errors preparing or installing a filter.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// An allow-list rule did not compile.
    #[error("an allow-list rule")]
    Rule(#[source] seccompiler::BackendError),
    /// This architecture has no filters.
    #[error("no seccomp filters for this architecture ({0}); run with --no-seccomp")]
    Arch(&'static str),
    /// A filter did not compile.
    #[error("compiling the {kind} filter")]
    Compile {
        /// Which.
        kind: ThreadKind,
        /// Why.
        #[source]
        source: seccompiler::BackendError,
    },
    /// The filters were not prepared (an earlier error, logged then).
    #[error("the seccomp filters could not be prepared: {0}")]
    Unprepared(String),
    /// The kernel refused the filter.
    #[error("installing the {kind} filter (a kernel without seccomp: run with --no-seccomp)")]
    Apply {
        /// Which.
        kind: ThreadKind,
        /// Why.
        #[source]
        source: seccompiler::Error,
    },
    /// The `SIGSYS` handler could not be installed.
    #[error("installing the SIGSYS handler")]
    Handler(#[source] std::io::Error),
    /// The SIGBUS handler could not be installed.
    #[error("guest memory fault recovery")]
    Sigbus(#[from] crate::sigbus::SigbusError),
    /// The launcher thread could not be spawned.
    #[error("spawning a sandboxed launcher thread")]
    Spawn(#[source] std::io::Error),
}

/// The kinds of filtered threads, each with its allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadKind {
    /// A tenant's worker (the data path) on a TAP or in-memory NIC.
    Worker,
    /// A DPDK tenant's worker: [`ThreadKind::Worker`]'s list and what DPDK needs
    /// ([`allow::dpdk_worker`]).
    DpdkWorker,
    /// The vhost-user control plane: daemon, relay, watchdog.
    Control,
}

impl std::fmt::Display for ThreadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ThreadKind::Worker => "worker",
            ThreadKind::DpdkWorker => "DPDK worker",
            ThreadKind::Control => "control",
        })
    }
}

/// Whether threads are filtered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sandbox {
    /// Seccomp filters on the worker and control threads (the default).
    #[default]
    Seccomp,
    /// [`Sandbox::Seccomp`] for a tenant whose NIC is a DPDK port: its worker gets the DPDK
    /// worker's allow-list ([`ThreadKind::DpdkWorker`]).
    SeccompDpdk,
    /// The control threads only, the worker unfiltered: for code that embeds the backend with a
    /// NIC of its own whose calls were never traced (the benchmark's guest path). `slimtcp-vhost`
    /// does not use it.
    ControlOnly,
    /// No filters (`--no-seccomp`; for debugging).
    Off,
}

/// The compiled filters: each kind's allow-list, and the control threads' second filter that
/// makes `clone3` fail with `ENOSYS` (its flags are in memory, out of a filter's reach; glibc
/// then falls back to `clone`, whose flags the allow-list checks).
#[derive(Debug)]
struct Filters {
    worker: BpfProgram,
    dpdk_worker: BpfProgram,
    control: BpfProgram,
    no_clone3: BpfProgram,
}

static FILTERS: OnceLock<Result<Filters, String>> = OnceLock::new();

fn arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| SandboxError::Arch(std::env::consts::ARCH))
}

/// An allow-list as a filter's rule map (a call listed twice keeps the wider rules).
fn rule_map(list: Vec<allow::Allowed>) -> BTreeMap<i64, Vec<SeccompRule>> {
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (nr, rules) in list {
        match map.get_mut(&nr) {
            Some(have) if have.is_empty() => {}
            Some(have) if rules.is_empty() => have.clear(),
            Some(have) => have.extend(rules),
            None => {
                map.insert(nr, rules);
            }
        }
    }
    map
}

fn compile(kind: ThreadKind, list: Vec<allow::Allowed>) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(rule_map(list), SeccompAction::Trap, SeccompAction::Allow, arch()?)
        .map_err(|source| SandboxError::Compile { kind, source })?;
    BpfProgram::try_from(filter).map_err(|source| SandboxError::Compile { kind, source })
}

fn build() -> Result<Filters, SandboxError> {
    let no_clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch()?,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|source| SandboxError::Compile { kind: ThreadKind::Control, source })?;
    Ok(Filters {
        worker: compile(ThreadKind::Worker, allow::worker()?)?,
        dpdk_worker: compile(ThreadKind::DpdkWorker, allow::dpdk_worker()?)?,
        control: compile(ThreadKind::Control, allow::control()?)?,
        no_clone3,
    })
}

fn filters() -> Result<&'static Filters, SandboxError> {
    FILTERS
        .get_or_init(|| build().map_err(|e| crate::error_chain(&e)))
        .as_ref()
        .map_err(|e| SandboxError::Unprepared(e.clone()))
}

/// glibc's malloc computes its arena limit lazily, the first time a thread needs a ninth arena,
/// by reading `/sys/devices/system/cpu/online`: an `openat` a filtered thread must not make (seen
/// as a refused call of a `vring_worker` thread). Setting the limit now, to glibc's own default
/// of 8 arenas per CPU, means it never reads it.
fn fix_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(8 * cpus).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a tunable of the allocator.
        if unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) } != 1 {
            log::debug!("mallopt(M_ARENA_MAX) failed; a filtered thread may be refused an openat");
        }
    }
}

impl Sandbox {
    /// Compiles the filters and installs the `SIGSYS` handler, so that a problem shows at start
    /// rather than at the first connection; installs the SIGBUS handler too ([`crate::sigbus`]),
    /// so that filtered threads need not. Nothing to do when off.
    pub fn prepare(self) -> Result<(), SandboxError> {
        if self == Sandbox::Off {
            return Ok(());
        }
        crate::sigbus::install()?;
        fix_malloc_arenas();
        filters()?;
        trap::install().map_err(SandboxError::Handler)
    }

    /// One line for the log saying which mode is active.
    pub fn describe(self) -> &'static str {
        match self {
            Sandbox::Seccomp => {
                "sandbox: seccomp filters on worker and control threads (forbidden calls are logged and fail with EPERM; --no-seccomp turns them off)"
            }
            Sandbox::SeccompDpdk => {
                "sandbox: seccomp filters on worker (DPDK worker allow-list) and control threads"
            }
            Sandbox::ControlOnly => "sandbox: seccomp filters on control threads only",
            Sandbox::Off => "sandbox: off (--no-seccomp): threads are not filtered",
        }
    }

    /// The kind of filter a tenant's worker installs in this mode.
    pub fn worker_kind(self) -> ThreadKind {
        match self {
            Sandbox::SeccompDpdk => ThreadKind::DpdkWorker,
            Sandbox::Seccomp | Sandbox::ControlOnly | Sandbox::Off => ThreadKind::Worker,
        }
    }

    /// This mode for a tenant whose NIC is a DPDK port: [`Sandbox::Seccomp`] becomes
    /// [`Sandbox::SeccompDpdk`]; the others stay.
    pub fn for_dpdk(self) -> Sandbox {
        match self {
            Sandbox::Seccomp => Sandbox::SeccompDpdk,
            other => other,
        }
    }

    /// Installs the `kind` filter on the calling thread, for good (and on the threads it spawns
    /// from now on). Nothing when off, nor for a worker under [`Sandbox::ControlOnly`].
    pub fn confine(self, kind: ThreadKind) -> Result<(), SandboxError> {
        let worker = matches!(kind, ThreadKind::Worker | ThreadKind::DpdkWorker);
        if self == Sandbox::Off || (self == Sandbox::ControlOnly && worker) {
            return Ok(());
        }
        let f = filters()?;
        trap::install().map_err(SandboxError::Handler)?;
        let apply = |p: &BpfProgram| {
            seccompiler::apply_filter(p).map_err(|source| SandboxError::Apply { kind, source })
        };
        match kind {
            ThreadKind::Worker => apply(&f.worker),
            ThreadKind::DpdkWorker => apply(&f.dpdk_worker),
            ThreadKind::Control => {
                apply(&f.no_clone3)?;
                apply(&f.control)
            }
        }
    }

    /// Runs `f` on a new thread named `name` that has installed the `kind` filter first, and
    /// returns its result: every thread `f` spawns inherits the filter. When off, runs `f` here.
    pub fn run_confined<R, F>(self, kind: ThreadKind, name: &str, f: F) -> Result<R, SandboxError>
    where
        R: Send,
        F: FnOnce() -> R + Send,
    {
        if self == Sandbox::Off {
            return Ok(f());
        }
        std::thread::scope(|s| {
            let launcher = std::thread::Builder::new()
                .name(name.to_owned())
                .spawn_scoped(s, move || self.confine(kind).map(|()| f()))
                .map_err(SandboxError::Spawn)?;
            launcher.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

#[cfg(test)]
mod tests;
