//! Every thread that polls a DPDK queue is a DPDK lcore, so that its mbuf allocations and frees
//! go through the pool's per-lcore cache.
//!
//! DPDK keeps a mempool cache per lcore id. The EAL's own threads have one (the thread that
//! called `rte_eal_init`, on the main lcore of `-l`); any other thread (a tenant's worker that
//! the backend spawns and pins, the two-core runtime's worker, a test's thread) has
//! `LCORE_ID_ANY` until it is registered, and then every allocation and every free is a
//! compare-and-swap on the pool's shared ring, which hands buffers out first-in first-out across
//! the whole pool, so each one comes back cold. `examples/dpdk_ring_rate.rs` (alloc, fill,
//! transmit, receive, free over `net_ring`) measured 7.8-9.0 Mframes/s on such a thread against
//! 13.0-15.7 on the EAL's (docs/benchmarks.md, ninth round).
//!
//! [`ensure_current_thread`] (called on every entry into a [`DpdkNic`](super::DpdkNic)) registers
//! the calling thread on its first use and gives its lcore id back when the thread ends. Buffers
//! in that id's cache stay there (DPDK counts them as available) for the next thread given the id.
//! Registration makes DPDK's multi-process mode unavailable (no secondary process can attach),
//! which SlimTCP never uses; when it fails (no free lcore id), the thread goes on without a cache.

use std::cell::Cell;

use dpdk_sys as sys;

use super::eal::EalError;

thread_local! {
    /// Whether this thread's registration was already looked at (whatever its outcome).
    static CHECKED: Cell<bool> = const { Cell::new(false) };
    /// Touched once this module registered the thread: its destructor gives the id back.
    static UNREGISTER_AT_EXIT: UnregisterAtExit = const { UnregisterAtExit };
}

/// Makes the calling thread an lcore on its first call; every later call is one thread-local
/// read. A failure is logged once and the thread goes on without a mempool cache.
#[inline]
pub(crate) fn ensure_current_thread() {
    if !CHECKED.get() {
        first_use();
    }
}

#[cold]
fn first_use() {
    CHECKED.set(true);
    if let Err(e) = register_current_thread() {
        log::warn!("{e}: this thread's mbufs bypass the mempool cache (slower, still correct)");
    }
}

/// The calling thread's lcore id; `None` in a thread DPDK does not know (never registered, or
/// not since its id was given back).
pub fn current() -> Option<u32> {
    // SAFETY: reads a thread-local variable of DPDK's; no precondition.
    let id = unsafe { sys::shim_lcore_id() };
    (id != sys::LCORE_ID_ANY).then_some(id)
}

/// Registers the calling thread unless it already is an lcore (an EAL thread, or registered
/// before); returns its lcore id. The id is given back when the thread ends. The EAL must be
/// running.
pub(crate) fn register_current_thread() -> Result<u32, EalError> {
    if let Some(id) = current() {
        return Ok(id);
    }
    // SAFETY: callers hold proof that the EAL is running (an `Eal` or a `DpdkNic`); registering
    // the calling thread has no other precondition.
    if unsafe { sys::rte_thread_register() } < 0 {
        return Err(EalError::RegisterThread { reason: sys::strerror(sys::errno()) });
    }
    // Arms the destructor (thread-local destructors run for the values a thread touched).
    UNREGISTER_AT_EXIT.with(|_| {});
    let id = current()
        .ok_or_else(|| EalError::RegisterThread { reason: "no lcore id after registering".into() })?;
    log::debug!(
        "thread {:?} registered with DPDK as lcore {id}",
        std::thread::current().name().unwrap_or("unnamed")
    );
    Ok(id)
}

/// Gives the thread's lcore id back when the thread ends.
struct UnregisterAtExit;

impl Drop for UnregisterAtExit {
    fn drop(&mut self) {
        // SAFETY: only a thread this module registered touches this value, so its destructor
        // runs on a registered thread, at its end, once.
        unsafe { sys::rte_thread_unregister() }
    }
}
