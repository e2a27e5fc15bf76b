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
    assert!(!f.worker.is_empty() && !f.control.is_empty());
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
