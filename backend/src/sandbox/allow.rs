//! The allow-lists: which system calls each kind of filtered thread may make once its set-up is
//! done. Derived by running the system tests under `strace -f` and keeping what the filtered
//! threads called (`scripts/seccomp-syscalls.py`; docs/operating.md, "Sandboxing"), plus the few
//! calls of paths the tests do not take, each with its reason.

use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

use super::SandboxError;

/// A system call and the rules its arguments must meet (none: any arguments).
pub type Allowed = (i64, Vec<SeccompRule>);

fn any(nr: libc::c_long) -> Allowed {
    (nr, Vec::new())
}

/// `nr` when argument `arg` has every bit of `mask` set.
fn with_bits(nr: libc::c_long, arg: u8, mask: u64) -> Result<Allowed, SandboxError> {
    let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(mask), mask)
        .map_err(SandboxError::Rule)?;
    Ok((nr, vec![SeccompRule::new(vec![cond]).map_err(SandboxError::Rule)?]))
}

/// `nr` when argument `arg` is one of `values`.
fn one_of(nr: libc::c_long, arg: u8, values: &[u64]) -> Result<Allowed, SandboxError> {
    let mut rules = Vec::with_capacity(values.len());
    for &v in values {
        let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, v)
            .map_err(SandboxError::Rule)?;
        rules.push(SeccompRule::new(vec![cond]).map_err(SandboxError::Rule)?);
    }
    Ok((nr, rules))
}

/// What every filtered thread needs (each seen in the traces of both kinds unless said).
fn common() -> Vec<Allowed> {
    vec![
        // The allocator (glibc's malloc arenas: mmap, mprotect to grow, madvise and munmap to
        // shrink; mremap when a large (mmap'd) buffer is reallocated, seen under the soak's
        // load; brk for the main arena, not seen but possible when every arena is taken).
        any(libc::SYS_mmap),
        any(libc::SYS_mprotect),
        any(libc::SYS_madvise),
        any(libc::SYS_munmap),
        any(libc::SYS_mremap),
        any(libc::SYS_brk),
        // Locks, condition variables, joins; naps (std::thread::sleep).
        any(libc::SYS_futex),
        any(libc::SYS_clock_nanosleep),
        // Hash maps' random keys (std's RandomState, once per thread).
        any(libc::SYS_getrandom),
        // The log (stderr), eventfd signals, and reads (TAP frames, eventfds).
        any(libc::SYS_write),
        any(libc::SYS_read),
        // `fstat` of a memory region's file (the relay's size check, the page size for DMA).
        any(libc::SYS_statx),
        // Returning from the SIGBUS recovery (crate::sigbus, seen) and from the SIGSYS report
        // (super::trap; without it a refusal would trap again, forever).
        any(libc::SYS_rt_sigreturn),
        // Thread exit: glibc blocks signals, Rust frees the signal stack.
        any(libc::SYS_rt_sigprocmask),
        any(libc::SYS_sigaltstack),
        any(libc::SYS_exit),
        // The kernel's own restart of a sleep (`clock_nanosleep`) interrupted by a stop that
        // runs no handler in this thread: SIGSTOP/SIGCONT, a debugger or strace attaching.
        // Refused, the sleep fails with EPERM and Rust's `thread::sleep` panics (seen: a DPDK
        // tenant's watchdog under strace). It resumes only the call already allowed;
        // cloud-hypervisor and firecracker allow it too.
        any(libc::SYS_restart_syscall),
    ]
}

/// `prctl` for thread names only.
fn prctl_names(set: bool) -> Result<Allowed, SandboxError> {
    // PR_GET_NAME: the SIGSYS report names the thread (not seen: only on a refusal).
    // PR_SET_NAME: control threads name the threads they spawn.
    let names = [libc::PR_GET_NAME as u64, libc::PR_SET_NAME as u64];
    one_of(libc::SYS_prctl, 0, if set { &names[..] } else { &names[..1] })
}

/// A SIGBUS outside guest memory is handed back to the default action (crate::sigbus), which
/// needs `rt_sigaction(SIGBUS)` (not seen: a bug path).
fn sigbus_default() -> Result<Allowed, SandboxError> {
    one_of(libc::SYS_rt_sigaction, 0, &[libc::SIGBUS as u64])
}

/// A tenant's worker: busy-polls its virtqueues in shared memory, moves frames through its NIC
/// (TAP: `read` and `writev` on the TAP descriptor), signals the guest through call eventfds
/// (`write`), yields its core when idle.
pub fn worker() -> Result<Vec<Allowed>, SandboxError> {
    let mut v = common();
    v.extend([any(libc::SYS_writev), any(libc::SYS_sched_yield)]);
    v.push(prctl_names(false)?);
    v.push(sigbus_default()?);
    Ok(v)
}

/// `ioctl` request numbers of vfio's type-1 IOMMU (`<linux/vfio.h>`: `_IO(';', 100 + 13)` and
/// `_IO(';', 100 + 14)`).
pub const VFIO_IOMMU_MAP_DMA: u64 = 0x3b71;
/// See [`VFIO_IOMMU_MAP_DMA`].
pub const VFIO_IOMMU_UNMAP_DMA: u64 = 0x3b72;

/// A DPDK tenant's worker: the worker's list, plus what DPDK calls on the worker's thread after
/// set-up (derived with `strace -f` on `e2e_guest_dpdk_tap` and from DPDK 22.11's sources;
/// docs/operating.md, "Sandboxing"):
///
/// - `readv`: `net_tap` receives a frame with `readv` on its queue descriptor (`writev`, its
///   transmit, is already the TAP worker's); `net_memif` signals with `write` on an eventfd,
///   `net_ring`, `net_null` and `net_bnxt` (registers in mapped BARs) make no call;
/// - `ioctl(VFIO_IOMMU_MAP_DMA | VFIO_IOMMU_UNMAP_DMA)`: `rte_dev_dma_map` / `_unmap` of guest
///   memory on a PCI port bound to vfio-pci (`net_bnxt` in production), when the VMM sets or
///   replaces the memory table; any other request is refused (not seen in the tests: vdevs have
///   no DMA mapping; taken from `pci_dma_map` -> `vfio_type1_dma_mem_map` in DPDK 22.11).
///
/// `rte_extmem_register` / `_unregister` map and unmap DPDK's page table of the region (`mmap`,
/// `madvise`, `munmap`, already allowed) as long as DPDK keeps no shared configuration files
/// (`--no-shconf`, which `slimtcp-vhost` adds when the sandbox is on): with them it would
/// `openat`, `flock`, `ftruncate` and `unlink` a file under /var/run/dpdk, which no filtered
/// thread may.
pub fn dpdk_worker() -> Result<Vec<Allowed>, SandboxError> {
    let mut v = worker()?;
    v.push(any(libc::SYS_readv));
    v.push(one_of(libc::SYS_ioctl, 1, &[VFIO_IOMMU_MAP_DMA, VFIO_IOMMU_UNMAP_DMA])?);
    Ok(v)
}

/// The control threads: the vhost-user daemon's request thread and epoll threads, the relay,
/// the watchdog, and the launcher that starts them. Sockets they are handed (`recvmsg` and
/// `sendmsg` with `SCM_RIGHTS`), guest memory mapped from the descriptors the VMM sends,
/// eventfds, epoll, and threads (never processes).
pub fn control() -> Result<Vec<Allowed>, SandboxError> {
    let mut v = common();
    v.extend([
        // The daemon accepts its end of the relay (the launcher); sockets and descriptors.
        any(libc::SYS_accept4),
        any(libc::SYS_recvmsg),
        any(libc::SYS_sendmsg),
        any(libc::SYS_shutdown),
        any(libc::SYS_close),
        // The daemon's event loops.
        any(libc::SYS_eventfd2),
        any(libc::SYS_epoll_create1),
        any(libc::SYS_epoll_ctl),
        #[cfg(target_arch = "x86_64")]
        any(libc::SYS_epoll_wait),
        #[cfg(not(target_arch = "x86_64"))]
        any(libc::SYS_epoll_pwait),
        // Thread start (glibc and Rust): clone3 is answered ENOSYS by the second filter.
        any(libc::SYS_clone3),
        any(libc::SYS_set_robust_list),
        any(libc::SYS_rseq),
        any(libc::SYS_gettid),
        // glibc's pthread_getattr_np, which Rust calls as a thread starts (its stack guard).
        any(libc::SYS_sched_getaffinity),
    ]);
    // Threads only: a clone must share the address space and be a thread of this process.
    v.push(with_bits(libc::SYS_clone, 0, (libc::CLONE_THREAD | libc::CLONE_VM) as u64)?);
    // Duplicating a socket (`try_clone`) and the relay's read timeout; F_GETFD (reads the
    // close-on-exec flag only) because Rust's standard library, in debug builds, checks that a
    // descriptor is open before it closes it.
    v.push(one_of(libc::SYS_fcntl, 1, &[libc::F_DUPFD_CLOEXEC as u64, libc::F_GETFD as u64])?);
    v.push(one_of(libc::SYS_setsockopt, 2, &[libc::SO_RCVTIMEO as u64])?);
    v.push(prctl_names(true)?);
    v.push(sigbus_default()?);
    Ok(v)
}
