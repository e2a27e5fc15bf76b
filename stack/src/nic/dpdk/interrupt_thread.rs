//! Running a control operation on the EAL interrupt thread.
//!
//! DPDK runs drivers' control events on one thread of its own: link-state interrupts, and, for
//! `net_memif`, every message of the peer on the control socket, its disconnect included. A
//! driver whose control path takes no lock is safe only if every control operation runs there
//! too: DPDK 22.11's memif disconnects (unregisters and frees its control channel) both when the
//! peer goes and when the port is stopped, and the two at once crash the process (seen in the
//! paper-method bench when sender and receiver ended together). An alarm of 1 us runs its
//! callback on that thread, after whatever event it is handling, so [`run`] serializes an
//! operation with the driver's own events.

use std::ffi::c_void;
use std::sync::mpsc;
use std::time::Duration;

use dpdk_sys as sys;

/// How long the interrupt thread may take to start the operation before the caller cancels it
/// and runs it itself (a thread blocked that long is stuck: the operation must still happen).
const START_LIMIT: Duration = Duration::from_secs(5);

type Job = Box<dyn FnOnce() + Send>;

/// The alarm's callback: runs the job `arg` points to.
unsafe extern "C" fn run_job(arg: *mut c_void) {
    // SAFETY: `arg` is the `Box<Job>` that `run` leaked for exactly this one alarm; an alarm
    // fires once, and `run` takes the box back only when cancelling removed the alarm unfired.
    let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
    job();
}

/// Runs `work` on the EAL interrupt thread and returns its result; on the calling thread when
/// the alarm cannot be set or the interrupt thread does not start it within [`START_LIMIT`].
/// `None` only if `work` ended without a result (it cannot: a panic inside the alarm aborts).
/// The EAL must be running. Never call it from the interrupt thread itself (it would wait for
/// itself until the limit).
pub(super) fn run<R: Send + 'static>(work: impl FnOnce() -> R + Send + 'static) -> Option<R> {
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        // The receiver waits until this is sent; it cannot be gone.
        let _ = done_tx.send(work());
    });
    let arg = Box::into_raw(Box::new(job)).cast::<c_void>();
    // SAFETY: the EAL is running (contract); `run_job` takes `arg` as documented there.
    let set = unsafe { sys::rte_eal_alarm_set(1, Some(run_job), arg) };
    if set != 0 {
        log::warn!("rte_eal_alarm_set: {set}; running a port operation on this thread");
        // SAFETY: DPDK refused the alarm, so the box is still only ours.
        unsafe { run_here(arg) };
    } else if let Ok(r) = done_rx.recv_timeout(START_LIMIT) {
        return Some(r);
    } else {
        // SAFETY: cancelling waits for a callback already running; it returns 1 only when it
        // removed the alarm before it fired, and then the box is ours again.
        let removed = unsafe { sys::rte_eal_alarm_cancel(Some(run_job), arg) };
        log::warn!("the EAL interrupt thread did not start a port operation within {START_LIMIT:?}");
        if removed > 0 {
            // SAFETY: as just said.
            unsafe { run_here(arg) };
        }
    }
    // The job has run, here or there, and sent its one result.
    done_rx.recv().ok()
}

/// Runs the job `arg` on this thread.
///
/// # Safety
/// `arg` is a box leaked by [`run`] that no alarm holds any more.
unsafe fn run_here(arg: *mut c_void) {
    // SAFETY: the caller owns the box (contract).
    let job = unsafe { Box::from_raw(arg.cast::<Job>()) };
    job();
}
