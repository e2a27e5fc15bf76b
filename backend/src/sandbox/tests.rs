//! The filters on real threads of the test process (a filter binds only the thread that
//! installs it and the threads it spawns afterwards, so the test harness stays unfiltered).

use super::*;

/// Runs `f` on a fresh thread named `name` under `kind`'s filter (installed by that thread).
fn on_filtered_thread<R: Send + 'static>(
    sandbox: Sandbox,
    kind: ThreadKind,
    name: &str,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            sandbox.confine(kind).expect("filter installed");
            f()
        })
        .expect("spawn")
        .join()
        .expect("filtered thread")
}

/// `socket(AF_INET, SOCK_STREAM)`: the result, and errno when it failed.
fn inet_socket() -> (libc::c_int, Option<i32>) {
    // SAFETY: socket() with constant arguments; a descriptor it returns is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return (fd, std::io::Error::last_os_error().raw_os_error());
    }
    // SAFETY: our own descriptor.
    unsafe { libc::close(fd) };
    (fd, None)
}

#[test]
fn the_filters_compile_for_this_machine() {
    Sandbox::Seccomp.prepare().expect("filters and handler");
    let f = filters().expect("compiled");
    assert!(!f.worker.is_empty() && !f.dpdk_worker.is_empty() && !f.control.is_empty());
}

#[test]
fn a_worker_is_refused_a_new_socket_with_eperm_and_the_refusal_is_counted() {
    let before = trap::refused();
    let (fd, errno, wrote) = on_filtered_thread(Sandbox::Seccomp, ThreadKind::Worker, "t-worker", || {
        let (fd, errno) = inet_socket();
        // What the worker does need still works: memory, locks, the log, eventfd signals.
        let v: Vec<u8> = vec![7; 1 << 20];
        let m = std::sync::Mutex::new(v.len());
        let e = vmm_sys_util::eventfd::EventFd::new(0).map(|_| ());
        let wrote = *m.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (fd, errno, (wrote, e.is_err()))
    });
    assert_eq!((fd, errno), (-1, Some(libc::EPERM)), "socket() refused with EPERM");
    assert_eq!(wrote, (1 << 20, true), "allocation works; eventfd2 is not a worker's call");
    assert!(trap::refused() >= before + 2, "the refusals were counted");
}

#[test]
fn a_worker_cannot_run_a_program_or_trace_one() {
    let (exec, ptrace) = on_filtered_thread(Sandbox::Seccomp, ThreadKind::Worker, "t-worker2", || {
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        let envp = [std::ptr::null::<libc::c_char>()];
        // SAFETY: valid NUL-terminated argument and environment arrays. Refused by the filter;
        // were it not, the test process would become /bin/true and the test fail loudly.
        let exec = unsafe { libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), envp.as_ptr()) };
        let exec_errno = std::io::Error::last_os_error().raw_os_error();
        // SAFETY: PTRACE_TRACEME takes no pointers.
        let ptrace = unsafe { libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) };
        let ptrace_errno = std::io::Error::last_os_error().raw_os_error();
        ((exec, exec_errno), (ptrace, ptrace_errno))
    });
    assert_eq!(exec, (-1, Some(libc::EPERM)));
    assert_eq!(ptrace, (-1, Some(libc::EPERM)));
}

#[test]
fn control_threads_may_spawn_threads_but_not_processes() {
    let (thread_ran, fork) = on_filtered_thread(Sandbox::Seccomp, ThreadKind::Control, "t-control", || {
        let ran = std::thread::spawn(inet_socket).join().expect("a thread of a control thread");
        // SAFETY: fork() is refused by the filter; should it not be, the child exits at once.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: the child of an unexpected fork leaves without running anything.
            unsafe { libc::_exit(0) };
        }
        (ran, (pid, std::io::Error::last_os_error().raw_os_error()))
    });
    assert_eq!(thread_ran, (-1, Some(libc::EPERM)), "the spawned thread inherited the filter");
    assert_eq!(fork, (-1, Some(libc::EPERM)), "fork refused");
}

#[test]
fn run_confined_filters_the_launcher_and_what_it_spawns() {
    let r = Sandbox::Seccomp
        .run_confined(ThreadKind::Control, "t-launch", || {
            std::thread::spawn(inet_socket).join().expect("spawned from the launcher")
        })
        .expect("launcher");
    assert_eq!(r, (-1, Some(libc::EPERM)));
}

#[test]
fn off_filters_nothing() {
    let (fd, errno) = on_filtered_thread(Sandbox::Off, ThreadKind::Worker, "t-off", inet_socket);
    assert!(fd >= 0 && errno.is_none(), "socket() works without the sandbox");
    let r = Sandbox::Off.run_confined(ThreadKind::Control, "t-off-launch", inet_socket).expect("runs here");
    assert!(r.0 >= 0);
}

/// A pipe holding `bytes`: (read end, write end).
fn pipe_with(bytes: &[u8]) -> (libc::c_int, libc::c_int) {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 returns.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    // SAFETY: writes initialised bytes to our own pipe.
    let n = unsafe { libc::write(fds[1], bytes.as_ptr().cast(), bytes.len()) };
    assert_eq!(usize::try_from(n).ok(), Some(bytes.len()));
    (fds[0], fds[1])
}

/// `readv` of one buffer from `fd`: the bytes read, or errno.
fn readv_one(fd: libc::c_int) -> Result<Vec<u8>, Option<i32>> {
    let mut buf = [0u8; 16];
    let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: one iovec over `buf`, which outlives the call.
    let n = unsafe { libc::readv(fd, &iov, 1) };
    match usize::try_from(n) {
        Ok(n) => Ok(buf[..n].to_vec()),
        Err(_) => Err(std::io::Error::last_os_error().raw_os_error()),
    }
}

/// `ioctl(fd, request, NULL)`: errno (the call fails on a pipe either way: `ENOTTY` when the
/// filter let it through to the kernel, `EPERM` when the filter refused it).
fn ioctl_errno(fd: libc::c_int, request: u64) -> Option<i32> {
    // SAFETY: on a pipe, these requests read or write nothing through the null pointer (the
    // kernel answers ENOTTY, or the filter refuses the call).
    let rc = unsafe { libc::ioctl(fd, request as libc::c_ulong, std::ptr::null_mut::<libc::c_void>()) };
    assert_eq!(rc, -1, "ioctl {request:#x} on a pipe");
    std::io::Error::last_os_error().raw_os_error()
}

/// `openat(AT_FDCWD, "/etc/hostname", O_RDONLY)`: errno when it failed.
fn open_a_file() -> Option<i32> {
    // SAFETY: a constant NUL-terminated path; a descriptor it returns is closed at once.
    let fd =
        unsafe { libc::openat(libc::AT_FDCWD, c"/etc/hostname".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd >= 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
        return None;
    }
    std::io::Error::last_os_error().raw_os_error()
}

#[test]
fn a_dpdk_worker_gets_the_dpdk_list_and_a_tap_worker_does_not() {
    assert_eq!(Sandbox::Seccomp.for_dpdk(), Sandbox::SeccompDpdk);
    assert_eq!(Sandbox::Off.for_dpdk(), Sandbox::Off, "--no-seccomp stays off");
    assert_eq!(Sandbox::SeccompDpdk.worker_kind(), ThreadKind::DpdkWorker);
    assert_eq!(Sandbox::Seccomp.worker_kind(), ThreadKind::Worker);
}

#[test]
fn a_dpdk_worker_may_receive_from_net_tap_and_map_dma_but_nothing_more() {
    let (rx, tx) = pipe_with(b"frame");
    let sandbox = Sandbox::SeccompDpdk;
    let (read, map, unmap, other_ioctl, open, socket) =
        on_filtered_thread(sandbox, sandbox.worker_kind(), "t-dpdk-worker", move || {
            (
                readv_one(rx),
                ioctl_errno(rx, allow::VFIO_IOMMU_MAP_DMA),
                ioctl_errno(rx, allow::VFIO_IOMMU_UNMAP_DMA),
                ioctl_errno(rx, libc::FIONREAD),
                open_a_file(),
                inet_socket(),
            )
        });
    assert_eq!(read, Ok(b"frame".to_vec()), "readv (net_tap's receive) is allowed");
    assert_eq!(map, Some(libc::ENOTTY), "VFIO_IOMMU_MAP_DMA reaches the kernel");
    assert_eq!(unmap, Some(libc::ENOTTY), "VFIO_IOMMU_UNMAP_DMA reaches the kernel");
    assert_eq!(other_ioctl, Some(libc::EPERM), "any other ioctl request is refused");
    assert_eq!(open, Some(libc::EPERM), "no file may be opened");
    assert_eq!(socket, (-1, Some(libc::EPERM)), "no socket may be made");
    for fd in [rx, tx] {
        // SAFETY: our own descriptors, no longer used.
        unsafe { libc::close(fd) };
    }
}

#[test]
fn a_tap_worker_may_not_make_the_dpdk_workers_calls() {
    let (rx, tx) = pipe_with(b"frame");
    let (read, map) = on_filtered_thread(Sandbox::Seccomp, ThreadKind::Worker, "t-tap-worker", move || {
        (readv_one(rx), ioctl_errno(rx, allow::VFIO_IOMMU_MAP_DMA))
    });
    assert_eq!(read, Err(Some(libc::EPERM)), "readv is not a TAP worker's call");
    assert_eq!(map, Some(libc::EPERM));
    for fd in [rx, tx] {
        // SAFETY: our own descriptors, no longer used.
        unsafe { libc::close(fd) };
    }
}

#[test]
fn a_filtered_sleep_survives_a_stop_and_continue_of_the_process() {
    // A stop and continue of the process (a debugger, strace attaching, SIGSTOP/SIGCONT)
    // restarts an interrupted sleep through restart_syscall; refused, the sleep failed with
    // EPERM and thread::sleep panicked.
    use std::sync::atomic::{AtomicBool, Ordering};
    let sandbox = Sandbox::SeccompDpdk;
    let asleep = std::sync::Arc::new(AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&asleep);
    let sleeper = std::thread::Builder::new()
        .name("t-sleeper".into())
        .spawn(move || {
            sandbox.confine(sandbox.worker_kind()).expect("filter installed");
            flag.store(true, Ordering::Release);
            std::thread::sleep(std::time::Duration::from_millis(500));
        })
        .expect("spawn");
    while !asleep.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    // The whole process stops (this thread too): another process continues it.
    let pid = std::process::id().to_string();
    let mut cont = std::process::Command::new("sh")
        .args(["-c", &format!("sleep 0.2; kill -CONT {pid}")])
        .spawn()
        .expect("sh");
    // SAFETY: a stop signal to this process; the child above continues it.
    unsafe { libc::kill(libc::getpid(), libc::SIGSTOP) };
    cont.wait().expect("kill -CONT");
    sleeper.join().expect("the sleeper's restarted sleep was not refused");
}
