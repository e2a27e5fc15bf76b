//! Guest memory that a VMM truncates under the backend's mapping must not kill the process.
//!
//! Guest memory regions are file mappings (`MAP_SHARED` over the VMM's memfd or hugetlbfs
//! file). The relay refuses a region that is larger than its file when it arrives
//! ([`crate::relay`]), but an unsealed file can still be shrunk afterwards; the next access to a
//! page past the new end raises `SIGBUS` (`BUS_ADRERR`) in whichever thread touched it, and the
//! default action ends every tenant of the process.
//!
//! So every region of every memory table is registered here (with its mapping kept alive while
//! registered), and a process-wide `SIGBUS` handler recovers from faults inside a registered
//! region: it maps anonymous zero memory over the whole region (`MAP_FIXED`: the faulting
//! access is retried and now reads zeros; writes go nowhere the guest sees), marks the region
//! poisoned and returns. The region's device ([`crate::device::NetDevice`]) notices at its
//! worker's next step and ends the connection with one clear log line; the tenant then serves
//! the next connection. No unwinding or jumping out of the handler is involved: the access
//! simply completes on other memory, which is fine for guest memory (the guest may change it at
//! any time anyway, and every value read from it is validated).
//!
//! A `SIGBUS` anywhere else goes to the handler installed before this one (Rust's runtime one,
//! or the default action), as if this module did not exist.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError};

use vm_memory::{GuestMemoryBackend, GuestMemoryRegion};

use crate::guest_mem::GuestMem;

/// Regions that can be registered at once, over all tenants (each connection has at most
/// [`crate::relay::MAX_MEM_REGIONS`]).
pub const SLOTS: usize = 1024;

/// A mapped region of guest memory, as the handler sees it (a seqlock: `seq` is odd while the
/// slot changes).
struct Slot {
    seq: AtomicU64,
    start: AtomicUsize,
    len: AtomicUsize,
    owner: AtomicU64,
    poisoned: AtomicBool,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            seq: AtomicU64::new(0),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            owner: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Writes the slot (`len` 0: empty). Only under the [`HELD`] lock.
    fn set(&self, start: usize, len: usize, owner: u64) {
        self.seq.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::Release);
        self.start.store(start, Ordering::Relaxed);
        self.len.store(len, Ordering::Relaxed);
        self.owner.store(owner, Ordering::Relaxed);
        self.poisoned.store(false, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// `(start, len)` if the slot is stable and holds a region; async-signal-safe.
    fn read(&self) -> Option<(usize, usize)> {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 % 2 == 1 {
            return None;
        }
        let start = self.start.load(Ordering::Relaxed);
        let len = self.len.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let s2 = self.seq.load(Ordering::Relaxed);
        (s1 == s2 && len > 0).then_some((start, len))
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// Faults recovered so far (workers compare it with the count they saw last: one load a step).
static RECOVERED: AtomicU64 = AtomicU64::new(0);
/// The mapping of each registered slot, kept alive while registered.
static HELD: Mutex<Vec<Option<Arc<vm_memory::GuestRegionMmap<()>>>>> = Mutex::new(Vec::new());
/// The `SIGBUS` action before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static INSTALL: Once = Once::new();

/// Errors registering guest memory.
#[derive(Debug, thiserror::Error)]
pub enum SigbusError {
    /// Every slot is taken.
    #[error("too many guest memory regions mapped in this process ({SLOTS})")]
    Full,
    /// The handler could not be installed.
    #[error("installing the SIGBUS handler")]
    Install(#[source] std::io::Error),
}

/// Installs the handler (once per process).
pub fn install() -> Result<(), SigbusError> {
    let mut result = Ok(());
    INSTALL.call_once(|| {
        // SAFETY: `sigaction` structures are plain data; all-zero is a valid empty action.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reading the current action into `old`.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) } != 0 {
            result = Err(SigbusError::Install(std::io::Error::last_os_error()));
            return;
        }
        let _ = PREVIOUS.set(old);
        // SAFETY: as above.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `sa_mask` is a valid sigset_t to empty.
        unsafe { libc::sigemptyset(&mut new.sa_mask) };
        // SAFETY: installs a handler that only touches atomics and makes raw system calls.
        if unsafe { libc::sigaction(libc::SIGBUS, &new, std::ptr::null_mut()) } != 0 {
            result = Err(SigbusError::Install(std::io::Error::last_os_error()));
        }
    });
    result
}

/// The handler (see the module documentation). Async-signal-safe: atomics and `mmap` (a raw
/// system call on Linux) only.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR {
        for slot in &TABLE {
            let Some((start, len)) = slot.read() else { continue };
            if addr < start || addr - start >= len {
                continue;
            }
            // SAFETY: [start, start + len) is a guest memory mapping kept alive by HELD for as
            // long as the slot holds it (and a thread faulting in it holds the table that holds
            // it, so it is not swept meanwhile). Replacing it with anonymous memory changes only
            // what guest memory reads as.
            let p = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p as usize == start {
                slot.poisoned.store(true, Ordering::Release);
                RECOVERED.fetch_add(1, Ordering::AcqRel);
                return;
            }
            break;
        }
    }
    chain(sig, info, ctx);
}

/// Hands a fault that is not ours to the previous action.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    match PREVIOUS.get() {
        Some(prev) if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN => {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO: this signature.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(prev.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a plain handler (not SIG_DFL/SIG_IGN): this signature.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // Default action: returning re-runs the access, which faults again and ends the
            // process as it would have without this handler.
            // SAFETY: signal() is async-signal-safe.
            unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
        }
    }
}

/// Registers every region of `mem` (once each) for `owner`, a device id; drops registrations
/// nobody but this module uses any more. Fails when the process has no slot left.
pub fn register(mem: &GuestMem, owner: u64) -> Result<(), SigbusError> {
    install()?;
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    sweep(&mut held);
    for r in mem.iter() {
        let Ok((_, region)) = mem.remove_region(r.start_addr(), r.len()) else { continue };
        if held.iter().flatten().any(|h| Arc::ptr_eq(h, &region)) {
            continue;
        }
        let len = usize::try_from(region.len()).unwrap_or(0);
        let start = region.as_ptr() as usize;
        if len == 0 || start == 0 {
            continue;
        }
        let i = match held.iter().position(Option::is_none) {
            Some(i) => i,
            None if held.len() < SLOTS => {
                held.push(None);
                held.len() - 1
            }
            None => return Err(SigbusError::Full),
        };
        TABLE[i].set(start, len, owner);
        held[i] = Some(region);
    }
    Ok(())
}

/// Drops the registrations whose mapping only this module keeps.
fn sweep(held: &mut [Option<Arc<vm_memory::GuestRegionMmap<()>>>]) {
    for (i, h) in held.iter_mut().enumerate() {
        if h.as_ref().is_some_and(|r| Arc::strong_count(r) == 1) {
            // The slot goes first: the handler must never see a range that is being unmapped.
            TABLE[i].set(0, 0, 0);
            *h = None;
        }
    }
}

/// Drops registrations nobody uses any more (a connection ended).
pub fn release_unused() {
    sweep(&mut HELD.lock().unwrap_or_else(PoisonError::into_inner));
}

/// Faults recovered so far, process-wide.
pub fn recovered() -> u64 {
    RECOVERED.load(Ordering::Acquire)
}

/// Whether a region registered for `owner` was poisoned by a recovered fault.
pub fn poisoned(owner: u64) -> bool {
    TABLE.iter().any(|s| {
        s.read().is_some() && s.owner.load(Ordering::Relaxed) == owner && s.poisoned.load(Ordering::Acquire)
    })
}

/// Regions registered now, process-wide.
pub fn registered_regions() -> usize {
    TABLE.iter().filter(|s| s.read().is_some()).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::FromRawFd;
    use vm_memory::{Bytes, FileOffset, GuestAddress};

    fn memfd(len: u64) -> File {
        // SAFETY: memfd_create with a valid name; the descriptor is owned by the File.
        let fd = unsafe { libc::memfd_create(c"sigbus-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor.
        let f = unsafe { File::from_raw_fd(fd) };
        f.set_len(len).expect("size");
        f
    }

    #[test]
    fn a_truncated_region_reads_zeros_and_is_reported_poisoned() {
        let file = memfd(1 << 20);
        let mem = GuestMem::from_ranges_with_files(&[(
            GuestAddress(0x10000),
            1 << 20,
            Some(FileOffset::new(file.try_clone().expect("dup"), 0)),
        )])
        .expect("memory");
        mem.write_obj(0xabu8, GuestAddress(0x10000 + 8192)).expect("write");
        register(&mem, 4242).expect("register");
        assert!(!poisoned(4242));
        let before = recovered();
        file.set_len(4096).expect("truncate");
        // Past the new end of the file: without recovery this access kills the process.
        let v: u8 = mem.read_obj(GuestAddress(0x10000 + 8192)).expect("read");
        assert_eq!(v, 0, "the region reads as zeros after recovery");
        assert!(recovered() > before);
        assert!(poisoned(4242));
        assert!(!poisoned(4243));
        drop(mem);
        release_unused();
        assert!(!poisoned(4242), "the registration went with the mapping");
    }
}
