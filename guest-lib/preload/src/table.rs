//! Which kernel descriptor numbers name SlimTCP sockets (and which epoll descriptors have
//! SlimTCP members).
//!
//! Every intercepted call asks this first, so the answer for an ordinary descriptor (a file, a
//! pipe, a kernel socket) is one relaxed atomic load of a bitmap word: the call then goes to
//! the C library unchanged. Only numbers whose bit is set take the read lock of the map.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use libc::c_int;

/// Descriptor numbers this library can name (a SlimTCP socket on a larger number is refused
/// with `EMFILE`).
pub const MAX_FDS: usize = 1 << 20;

/// A bitmap of descriptor numbers plus the map behind it.
pub struct Table<T> {
    bits: [AtomicU64; MAX_FDS / 64],
    map: RwLock<BTreeMap<c_int, Arc<T>>>,
}

impl<T> Table<T> {
    /// An empty table (const: it lives in a static, usable before anything ran).
    pub const fn new() -> Self {
        Table { bits: [const { AtomicU64::new(0) }; MAX_FDS / 64], map: RwLock::new(BTreeMap::new()) }
    }

    fn slot(fd: c_int) -> Option<(usize, u64)> {
        let i = usize::try_from(fd).ok().filter(|&i| i < MAX_FDS)?;
        Some((i / 64, 1u64 << (i % 64)))
    }

    /// Whether `fd` may be in the table (the fast test).
    pub fn marked(&self, fd: c_int) -> bool {
        Self::slot(fd).is_some_and(|(w, b)| self.bits[w].load(Ordering::Relaxed) & b != 0)
    }

    /// The entry of `fd`.
    pub fn get(&self, fd: c_int) -> Option<Arc<T>> {
        if !self.marked(fd) {
            return None;
        }
        self.map.read().unwrap_or_else(PoisonError::into_inner).get(&fd).cloned()
    }

    /// Names `value` by `fd`; false when `fd` is out of range.
    pub fn insert(&self, fd: c_int, value: Arc<T>) -> bool {
        let Some((w, b)) = Self::slot(fd) else { return false };
        self.map.write().unwrap_or_else(PoisonError::into_inner).insert(fd, value);
        self.bits[w].fetch_or(b, Ordering::Release);
        true
    }

    /// Forgets `fd`, returning its entry.
    pub fn remove(&self, fd: c_int) -> Option<Arc<T>> {
        let (w, b) = Self::slot(fd)?;
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        self.bits[w].fetch_and(!b, Ordering::Release);
        map.remove(&fd)
    }

    /// Every entry and its number.
    pub fn all(&self) -> Vec<(c_int, Arc<T>)> {
        self.map.read().unwrap_or_else(PoisonError::into_inner).iter().map(|(k, v)| (*k, v.clone())).collect()
    }
}

impl<T> std::fmt::Debug for Table<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.map.read().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("Table").field("entries", &n).finish()
    }
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_follow_the_map() {
        let t: Box<Table<u32>> = Box::default();
        assert!(!t.marked(5) && t.get(5).is_none());
        assert!(t.insert(5, Arc::new(7)));
        assert!(t.marked(5) && !t.marked(4) && !t.marked(69));
        assert_eq!(t.get(5).as_deref(), Some(&7));
        assert!(!t.insert(-1, Arc::new(1)) && !t.insert(MAX_FDS as c_int, Arc::new(1)));
        assert_eq!(t.remove(5).as_deref(), Some(&7));
        assert!(!t.marked(5) && t.all().is_empty());
    }
}
