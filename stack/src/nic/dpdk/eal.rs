//! The DPDK Environment Abstraction Layer: started once per process, from the operator's
//! arguments.
//!
//! DPDK's EAL cannot be started twice in one process (a second `rte_eal_init` fails with
//! `EALREADY`, even after `rte_eal_cleanup`). [`Eal::init`] therefore keeps the one EAL behind a
//! `OnceLock`: calling it again with the same arguments returns the running EAL, with different
//! arguments an error. A failed start cannot be retried in the same process (DPDK 22.11 keeps
//! part of the parsed options: a retry fails with misleading messages), so later calls return
//! [`EalError::EarlierStartFailed`] naming the first failure.

use std::ffi::CString;
use std::sync::{Mutex, OnceLock};

use dpdk_sys as sys;

/// Program name passed to DPDK as `argv[0]`.
const PROGRAM_NAME: &str = "slimtcp";

/// Why the EAL could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EalError {
    /// An argument contains a NUL byte.
    #[error("EAL argument {0:?} contains a NUL byte")]
    ArgumentHasNul(String),
    /// DPDK rejected the arguments (it prints the offending option above this line).
    #[error("invalid EAL arguments {args:?}: {reason}")]
    InvalidArguments {
        /// The arguments.
        args: Vec<String>,
        /// DPDK's description of `rte_errno`.
        reason: String,
    },
    /// The EAL is already running with other arguments.
    #[error(
        "EAL already initialised with different arguments (running: {running:?}, requested: {requested:?})"
    )]
    AlreadyInitialised {
        /// Arguments of the running EAL.
        running: Vec<String>,
        /// Arguments of this call.
        requested: Vec<String>,
    },
    /// `rte_eal_init` was called outside this module (or an earlier attempt failed after
    /// parsing its arguments), so DPDK refuses a new start.
    #[error("EAL already started outside slimtcp (or a previous start failed midway); restart the process")]
    StartedElsewhere,
    /// The EAL failed to start for another reason (memory, devices, permissions).
    #[error("EAL failed to start with {args:?}: {reason} (rte_errno {errno})")]
    StartFailed {
        /// The arguments.
        args: Vec<String>,
        /// `rte_errno`.
        errno: i32,
        /// DPDK's description of `rte_errno`.
        reason: String,
    },
    /// An earlier start in this process failed; DPDK cannot be started again.
    #[error("an earlier EAL start in this process failed ({0}); fix the arguments and restart the process")]
    EarlierStartFailed(Box<EalError>),
    /// `rte_thread_register` failed (e.g. no free lcore id left).
    #[error("cannot register thread with DPDK: {reason}")]
    RegisterThread {
        /// DPDK's description of `rte_errno`.
        reason: String,
    },
}

/// The running EAL. Proof that DPDK is initialised: the DPDK types take `&Eal`.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
}

static EAL: OnceLock<Eal> = OnceLock::new();
/// Guards starting; holds the first failure, if any.
static INIT_LOCK: Mutex<Option<EalError>> = Mutex::new(None);

impl Eal {
    /// Starts the EAL with the operator's `args` (without a program name), e.g.
    /// `["-l", "2", "-a", "0000:3b:00.0"]` or `["--no-huge", "-m", "256", "--no-pci", "--no-shconf",
    /// "-l", "0", "--vdev=net_tap0,iface=slimt0"]`, or returns the running EAL if it was started
    /// with the same `args`.
    ///
    /// DPDK pins the calling thread to the main lcore (the first core of `-l`).
    pub fn init<I, S>(args: I) -> Result<&'static Eal, EalError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_string()).collect();
        // A poisoned lock only means another thread panicked mid-init; the OnceLock is the truth.
        let mut failed = INIT_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(first) = failed.as_ref() {
            return Err(EalError::EarlierStartFailed(Box::new(first.clone())));
        }
        if let Some(eal) = EAL.get() {
            return if eal.args == args {
                Ok(eal)
            } else {
                Err(EalError::AlreadyInitialised { running: eal.args.clone(), requested: args })
            };
        }
        let mut c_args = Vec::with_capacity(args.len() + 1);
        for arg in std::iter::once(PROGRAM_NAME).chain(args.iter().map(String::as_str)) {
            c_args.push(CString::new(arg).map_err(|_| EalError::ArgumentHasNul(arg.to_string()))?);
        }
        let mut argv: Vec<*mut libc::c_char> = c_args.iter().map(|a| a.as_ptr().cast_mut()).collect();
        let argc = i32::try_from(argv.len()).map_err(|_| EalError::InvalidArguments {
            args: args.clone(),
            reason: "too many arguments".to_string(),
        })?;
        // SAFETY: argv holds argc pointers to NUL-terminated strings. DPDK may permute the
        // pointer array (ours) and may keep pointers to the strings, which is why `c_args` is
        // leaked below on success.
        let rc = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if rc < 0 {
            let errno = sys::errno();
            let e = match errno {
                libc::EINVAL => EalError::InvalidArguments { args, reason: sys::strerror(errno) },
                libc::EALREADY => EalError::StartedElsewhere,
                _ => EalError::StartFailed { args, errno, reason: sys::strerror(errno) },
            };
            *failed = Some(e.clone());
            return Err(e);
        }
        std::mem::forget(c_args);
        log::info!("DPDK EAL started with {args:?}");
        Ok(EAL.get_or_init(|| Eal { args }))
    }

    /// The running EAL, if [`Eal::init`] succeeded.
    pub fn get() -> Option<&'static Eal> {
        EAL.get()
    }

    /// The arguments the EAL was started with.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// True when DMA addresses are virtual addresses (`--iova-mode=va`, vfio with an IOMMU,
    /// `--no-huge`): required for external memory.
    pub fn iova_is_va(&self) -> bool {
        // SAFETY: the EAL is running (self exists); the call only reads its configuration.
        unsafe { sys::rte_eal_iova_mode() == sys::RTE_IOVA_VA }
    }

    /// Registers the calling (non-EAL) thread with DPDK so it gets an lcore id and with it the
    /// per-core mempool caches; returns the id (an EAL thread's own, unchanged). The id is given
    /// back when the thread ends. A thread that polls a [`DpdkNic`](super::DpdkNic) is registered
    /// on its first call without this ([`lcore`](super::lcore)).
    pub fn register_thread(&self) -> Result<u32, EalError> {
        super::lcore::register_current_thread()
    }
}
