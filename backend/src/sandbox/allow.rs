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

/// What every filtered thread needs: memory (the allocator), locks and sleeps, the log, and
/// the end of a thread.
fn common() -> Vec<Allowed> {
    vec![
        // The allocator (glibc malloc arenas) and Rust's thread-exit clean-up.
        any(libc::SYS_mmap),
        any(libc::SYS_munmap),
        any(libc::SYS_mprotect),
        any(libc::SYS_madvise),
        any(libc::SYS_brk),
        // Locks, condition variables, thread joins.
        any(libc::SYS_futex),
        // Naps and yields.
        any(libc::SYS_clock_nanosleep),
        any(libc::SYS_sched_yield),
        // Logs (stderr) and eventfd signals.
        any(libc::SYS_write),
        // SIGBUS recovery (crate::sigbus) and SIGSYS reports return through it.
        any(libc::SYS_rt_sigreturn),
        // Thread ids (Rust and glibc ask at thread start and for locks).
        any(libc::SYS_gettid),
        // Thread exit: glibc blocks signals, Rust frees the signal stack.
        any(libc::SYS_rt_sigprocmask),
        any(libc::SYS_sigaltstack),
        any(libc::SYS_exit),
    ]
}

/// The thread's name, for the SIGSYS report ([`super::trap`]); control threads also name the
/// threads they spawn.
fn prctl_names(set: bool) -> Result<Allowed, SandboxError> {
    let names = [libc::PR_GET_NAME as u64, libc::PR_SET_NAME as u64];
    one_of(libc::SYS_prctl, 0, if set { &names[..] } else { &names[..1] })
}

/// A tenant's worker: busy-polls its virtqueues in shared memory, moves frames through its NIC
/// (TAP: `read`/`writev` on the TAP descriptor), signals the guest through call eventfds.
pub fn worker() -> Result<Vec<Allowed>, SandboxError> {
    let mut v = common();
    v.extend([any(libc::SYS_read), any(libc::SYS_writev)]);
    v.push(prctl_names(false)?);
    Ok(v)
}

/// The control threads: the vhost-user daemon and its epoll threads, the relay, the watchdog.
/// Sockets they are handed (`recvmsg`/`sendmsg` with `SCM_RIGHTS`), guest memory mapped from the
/// descriptors the VMM sends (`fstat`, `mmap`), eventfds, epoll, threads (never processes).
pub fn control() -> Result<Vec<Allowed>, SandboxError> {
    let mut v = common();
    v.extend([
        any(libc::SYS_read),
        any(libc::SYS_close),
        any(libc::SYS_recvmsg),
        any(libc::SYS_sendmsg),
        any(libc::SYS_accept4),
        any(libc::SYS_shutdown),
        any(libc::SYS_fstat),
        any(libc::SYS_newfstatat),
        any(libc::SYS_statx),
        any(libc::SYS_eventfd2),
        any(libc::SYS_epoll_create1),
        any(libc::SYS_epoll_ctl),
        any(libc::SYS_epoll_wait),
        any(libc::SYS_epoll_pwait),
        any(libc::SYS_set_robust_list),
        any(libc::SYS_rseq),
        any(libc::SYS_clone3),
    ]);
    // Threads only: a clone must share the address space and be a thread of this process.
    v.push(with_bits(libc::SYS_clone, 0, (libc::CLONE_THREAD | libc::CLONE_VM) as u64)?);
    v.push(one_of(libc::SYS_fcntl, 1, &[libc::F_DUPFD_CLOEXEC as u64, libc::F_GETFL as u64])?);
    v.push(one_of(libc::SYS_setsockopt, 2, &[libc::SO_RCVTIMEO as u64])?);
    v.push(prctl_names(true)?);
    // glibc's pthread_getattr_np, which Rust calls as a thread starts (its stack guard).
    v.push(any(libc::SYS_sched_getaffinity));
    Ok(v)
}
