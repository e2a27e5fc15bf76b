//! What happens when a filtered thread makes a system call its filter does not allow: the
//! kernel raises `SIGSYS` (`SECCOMP_RET_TRAP`) in that thread, and this handler writes one line
//! to stderr naming the thread and the system call, and makes the call return `EPERM` (it was
//! not executed). The thread goes on and handles the failure as any failed call: at worst its
//! tenant's connection is reset (docs/operating.md, "Sandboxing", says why this and not killing
//! the process or the thread).
//!
//! The handler is async-signal-safe: atomics, `prctl(PR_GET_NAME)` and `write(2)` (which every
//! filter allows) only. After [`LOGGED`] lines it only counts, so a loop of refused calls cannot
//! flood the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// Refusals written to the log; later ones are counted only ([`refused`]).
pub const LOGGED: u64 = 64;

/// Refused system calls so far, process-wide.
static REFUSED: AtomicU64 = AtomicU64::new(0);
static INSTALL: Once = Once::new();

/// Refused system calls so far, process-wide.
pub fn refused() -> u64 {
    REFUSED.load(Ordering::Acquire)
}

/// Installs the `SIGSYS` handler (once per process).
pub fn install() -> std::io::Result<()> {
    let mut result = Ok(());
    INSTALL.call_once(|| {
        // SAFETY: `sigaction` structures are plain data; all-zero is a valid empty action.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigsys as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `sa_mask` is a valid sigset_t to empty.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: installs a handler that only touches atomics, thread-local plain data, the
        // signal's context, prctl(PR_GET_NAME) and write(2).
        if unsafe { libc::sigaction(libc::SIGSYS, &action, std::ptr::null_mut()) } != 0 {
            result = Err(std::io::Error::last_os_error());
        }
    });
    result
}

/// The `SIGSYS` part of `siginfo_t` (`_sigsys` in the kernel's union, after the three ints and
/// the padding that aligns the union on 64-bit targets).
#[repr(C)]
struct SigsysInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    _pad: libc::c_int,
    call_addr: *mut libc::c_void,
    syscall: libc::c_int,
    arch: libc::c_uint,
}

/// `si_code` of a seccomp trap.
const SYS_SECCOMP: libc::c_int = 1;

extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; for SIGSYS it has the
    // `_sigsys` layout of `SigsysInfo`.
    let (code, nr) = unsafe {
        let i = &*info.cast::<SigsysInfo>();
        (i.code, i.syscall)
    };
    if code != SYS_SECCOMP {
        return;
    }
    set_return(ctx, -i64::from(libc::EPERM));
    let n = REFUSED.fetch_add(1, Ordering::AcqRel) + 1;
    if n <= LOGGED {
        let mut line = Line::default();
        line.push(b"slimtcp-vhost: sandbox: thread '");
        let mut name = [0u8; 16];
        // SAFETY: PR_GET_NAME writes at most 16 bytes (NUL included) into `name`.
        unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
        let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        line.push(&name[..len]);
        line.push(b"' made system call ");
        line.number(u64::try_from(nr).unwrap_or(0));
        line.push(b" (");
        line.push(std::env::consts::ARCH.as_bytes());
        line.push(b"), which its seccomp filter forbids: refused with EPERM");
        if n == LOGGED {
            line.push(b"; further refusals are not logged");
        }
        line.push(b" (see docs/operating.md, Sandboxing; --no-seccomp turns the filters off)\n");
        line.write();
    }
}

/// Makes the trapped system call return `value`.
fn set_return(ctx: *mut libc::c_void, value: i64) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the kernel passes the interrupted thread's ucontext to an SA_SIGINFO handler;
        // its RAX is what the trapped system call returns once the handler returns.
        unsafe { (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs[libc::REG_RAX as usize] = value };
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: as above; x0 holds the return value.
        unsafe { (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.regs[0] = value as u64 };
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = (ctx, value);
}

/// A log line built on the stack.
struct Line {
    buf: [u8; 320],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line { buf: [0; 320], len: 0 }
    }
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn number(&mut self, mut v: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    fn write(&self) {
        // SAFETY: writes initialised bytes of `buf` to stderr; write(2) is async-signal-safe.
        let _ = unsafe { libc::write(libc::STDERR_FILENO, self.buf.as_ptr().cast(), self.len) };
    }
}
