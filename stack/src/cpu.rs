//! Pinning threads to cores (the worker cores of both runtimes): the one place that calls
//! `sched_setaffinity` and `sched_getaffinity`.

use std::fmt;

/// Errors reading or setting a thread's CPU set.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    /// A core number a `cpu_set_t` cannot hold.
    #[error("core {core} is past the {} cores a CPU set holds", libc::CPU_SETSIZE)]
    CoreOutOfRange {
        /// The core asked for.
        core: usize,
    },
    /// `sched_setaffinity` failed (e.g. no core of the set is one the process may run on).
    #[error("cannot set the thread's CPU set")]
    SetAffinity(#[source] std::io::Error),
    /// `sched_getaffinity` failed.
    #[error("cannot read the thread's CPU set")]
    GetAffinity(#[source] std::io::Error),
    /// A core the process may not run on (outside its affinity: `taskset`, cpusets).
    #[error("core {0} is not among the cores this process may run on")]
    NotAllowed(usize),
    /// Text that is not a CPU list (`0-3,6`).
    #[error("{0:?} is not a CPU list (0-3,6)")]
    BadList(String),
}

/// A set of cores (a `cpu_set_t`; every core in it is below `CPU_SETSIZE`).
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The empty set.
    pub fn empty() -> CpuSet {
        // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
        CpuSet(unsafe { std::mem::zeroed() })
    }

    /// The set of `cores`; fails for a core not below `CPU_SETSIZE`.
    pub fn of(cores: impl IntoIterator<Item = usize>) -> Result<CpuSet, CpuError> {
        let mut set = CpuSet::empty();
        for core in cores {
            set.insert(core)?;
        }
        Ok(set)
    }

    /// Adds `core`; fails (and leaves the set as it was) when it is not below `CPU_SETSIZE`.
    pub fn insert(&mut self, core: usize) -> Result<(), CpuError> {
        if core >= libc::CPU_SETSIZE as usize {
            return Err(CpuError::CoreOutOfRange { core });
        }
        // SAFETY: `core` is below CPU_SETSIZE, checked above, so the bit is inside the set.
        unsafe { libc::CPU_SET(core, &mut self.0) };
        Ok(())
    }

    /// Takes `core` out of the set (nothing for a core past `CPU_SETSIZE`).
    pub fn remove(&mut self, core: usize) {
        if core < libc::CPU_SETSIZE as usize {
            // SAFETY: `core` is below CPU_SETSIZE, checked above, so the bit is inside the set.
            unsafe { libc::CPU_CLR(core, &mut self.0) };
        }
    }

    /// Whether `core` is in the set (false for a core past `CPU_SETSIZE`).
    pub fn contains(&self, core: usize) -> bool {
        // SAFETY: `core` is below CPU_SETSIZE (checked first), so the bit read is inside the set.
        core < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(core, &self.0) }
    }

    /// How many cores the set holds.
    pub fn count(&self) -> usize {
        // SAFETY: CPU_COUNT reads only inside the set.
        usize::try_from(unsafe { libc::CPU_COUNT(&self.0) }).unwrap_or(0)
    }
}

impl CpuSet {
    /// Adds every core of `other`.
    pub fn extend(&mut self, other: &CpuSet) {
        for core in (0..libc::CPU_SETSIZE as usize).filter(|&c| other.contains(c)) {
            // Every core of a set is below CPU_SETSIZE: cannot fail.
            let _ = self.insert(core);
        }
    }
}

/// The kernel's CPU-list format (`0-3,6`, as `taskset -c` and DPDK's `-l` take it).
impl std::str::FromStr for CpuSet {
    type Err = CpuError;

    fn from_str(list: &str) -> Result<CpuSet, CpuError> {
        let bad = || CpuError::BadList(list.to_owned());
        let mut set = CpuSet::empty();
        for item in list.split(',') {
            let (a, b) = item.split_once('-').unwrap_or((item, item));
            let (a, b): (usize, usize) =
                (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
            if a > b {
                return Err(bad());
            }
            for c in a..=b {
                set.insert(c)?;
            }
        }
        Ok(set)
    }
}

/// The kernel's CPU-list format (`0-3,6`, as in `/sys/devices/system/cpu/online` and
/// `taskset -c`); the empty set is `none`.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut cores = (0..libc::CPU_SETSIZE as usize).filter(|&c| self.contains(c)).peekable();
        if cores.peek().is_none() {
            return f.write_str("none");
        }
        let mut first = true;
        while let Some(start) = cores.next() {
            let mut end = start;
            while cores.next_if_eq(&(end + 1)).is_some() {
                end += 1;
            }
            let sep = if first { "" } else { "," };
            first = false;
            if end == start {
                write!(f, "{sep}{start}")?;
            } else {
                write!(f, "{sep}{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries((0..libc::CPU_SETSIZE as usize).filter(|&c| self.contains(c))).finish()
    }
}

/// Pins the calling thread to `core`. Fails for a core past `CPU_SETSIZE`; whether the process
/// may run there is the kernel's answer.
pub fn pin_current_thread(core: usize) -> Result<(), CpuError> {
    set_current_affinity(&CpuSet::of([core])?)
}

/// Lets the calling thread run on the cores of `set`.
pub fn set_current_affinity(set: &CpuSet) -> Result<(), CpuError> {
    // SAFETY: pid 0 is the calling thread; `set.0` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set.0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(CpuError::SetAffinity(std::io::Error::last_os_error()))
    }
}

/// The cores the calling thread may run on.
pub fn current_affinity() -> Result<CpuSet, CpuError> {
    let mut set = CpuSet::empty();
    // SAFETY: pid 0 is the calling thread; `set.0` is a writable cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set.0) };
    if rc == 0 {
        Ok(set)
    } else {
        Err(CpuError::GetAffinity(std::io::Error::last_os_error()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_past_the_cpu_set_is_refused_not_set() {
        let past = libc::CPU_SETSIZE as usize;
        let e = pin_current_thread(past).expect_err("past CPU_SETSIZE");
        assert!(matches!(e, CpuError::CoreOutOfRange { core } if core == past), "{e:?}");
        let mut set = CpuSet::empty();
        assert!(set.insert(past).is_err());
        assert_eq!(set.count(), 0);
        assert!(!set.contains(past));
    }

    #[test]
    fn a_set_holds_the_cores_put_in_it() {
        let set = CpuSet::of([0, 3, 5]).expect("cores below CPU_SETSIZE");
        assert_eq!(set.count(), 3);
        assert!(set.contains(3) && !set.contains(4));
        assert_eq!(format!("{set:?}"), "{0, 3, 5}");
    }

    #[test]
    fn a_set_prints_as_the_kernels_cpu_list() {
        let set = CpuSet::of([0, 1, 2, 3, 6, 8, 9]).expect("cores");
        assert_eq!(set.to_string(), "0-3,6,8-9");
        assert_eq!(CpuSet::of([5]).expect("core").to_string(), "5");
        assert_eq!(CpuSet::empty().to_string(), "none");
        let mut less = set;
        less.remove(2);
        less.remove(100_000);
        assert_eq!(less.to_string(), "0-1,3,6,8-9");
        assert_eq!("0-3,6,8-9".parse::<CpuSet>().expect("a list").to_string(), "0-3,6,8-9");
        for bad in ["", "3-1", "x", "1,,2"] {
            assert!(bad.parse::<CpuSet>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pinned_thread_runs_on_one_core_of_its_former_set() {
        let pinned = std::thread::spawn(|| {
            let before = current_affinity().expect("getaffinity");
            let core = (0..libc::CPU_SETSIZE as usize).find(|&c| before.contains(c)).expect("some core");
            pin_current_thread(core).expect("pin to an allowed core");
            let after = current_affinity().expect("getaffinity");
            (after.count(), after.contains(core))
        })
        .join()
        .expect("thread");
        assert_eq!(pinned, (1, true));
    }
}
