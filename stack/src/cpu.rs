//! Pinning threads to cores (the worker cores of both runtimes).

/// Pins the calling thread to `core`. `EINVAL` when `core` is not below `CPU_SETSIZE`; whether
/// the process may run there is the kernel's answer.
pub fn pin_current_thread(core: usize) -> std::io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `core` is below CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(core, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_past_the_cpu_set_is_refused_not_set() {
        let e = pin_current_thread(libc::CPU_SETSIZE as usize).expect_err("past CPU_SETSIZE");
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
