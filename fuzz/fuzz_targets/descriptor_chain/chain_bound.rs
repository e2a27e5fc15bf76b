//! Upper bounds of the bytes a device may write through the chains published on one queue, as
//! [`Track::see`](super::Track::see) needs them before and after every engine call.
//!
//! The bound of a chain sums every descriptor the device could visit: up to the queue size of
//! them, loops included, an indirect table counted as its entry count times its longest entry.
//! Walked naively, every head costs up to the queue size in steps and every step through an
//! indirect descriptor a scan of up to 4096 entries, for each of up to 256 pending heads: one
//! hostile input took seconds in the harness while the engine took under a millisecond. Here,
//! during one look at memory (which does not change meanwhile), each descriptor is read and each
//! indirect table scanned at most once, each head is walked once, and a walk that comes back to
//! a descriptor adds the rest of its visits arithmetically: the same bounds, in time linear in
//! the descriptors reached.

use super::{Host, F_INDIRECT, F_NEXT, RINGS_END};

/// Indirect tables longer than this make the bound unbounded (and count as reaching the rings).
const MAX_INDIRECT_ENTRIES: u64 = 4096;

/// One descriptor as a walk counts it: the bytes it adds, whether it reaches into the rings, and
/// where the walk goes next (`None`: it ends here).
#[derive(Clone, Copy)]
struct Visit {
    bytes: u64,
    rings: bool,
    next: Option<u16>,
}

/// The descriptor table of one queue during one look at guest memory; reused across looks.
#[derive(Default)]
pub struct ChainBounds {
    table: u64,
    size: u16,
    /// Each descriptor, once read (by index, below the queue size).
    visits: Vec<Option<Visit>>,
    /// Each head's bound and rings flag, once walked.
    bounds: Vec<Option<(u64, bool)>>,
    /// During a walk: the step at which each descriptor was first reached.
    reached_at: Vec<Option<u16>>,
    /// During a walk: the descriptors reached, and the bytes counted before each step.
    path: Vec<u16>,
    before: Vec<u64>,
}

impl ChainBounds {
    /// Starts a new look at the table at `table` of a queue of `size` entries: forgets what was
    /// read before (the guest or the device may have written since).
    pub fn start(&mut self, table: u64, size: u16) {
        let n = usize::from(size);
        self.table = table;
        self.size = size;
        self.visits.clear();
        self.visits.resize(n, None);
        self.bounds.clear();
        self.bounds.resize(n, None);
        self.reached_at.clear();
        self.reached_at.resize(n, None);
    }

    /// The bound of the chain at `head` and whether any of its descriptors reaches into the
    /// rings.
    pub fn of(&mut self, g: &Host, head: u16) -> (u64, bool) {
        let Some(&known) = self.bounds.get(usize::from(head)) else { return (0, false) };
        if let Some(b) = known {
            return b;
        }
        let b = self.walk(g, head);
        self.bounds[usize::from(head)] = Some(b);
        b
    }

    fn walk(&mut self, g: &Host, head: u16) -> (u64, bool) {
        let size = self.size;
        let mut total = 0u64;
        let mut rings = false;
        self.path.clear();
        self.before.clear();
        let mut i = head;
        for step in 0..size {
            if i >= size {
                break;
            }
            if let Some(first) = self.reached_at[usize::from(i)] {
                // A loop: the walk repeats steps `first..step` until it has made `size` steps.
                let (len, left) = (u64::from(step - first), u64::from(size - step));
                let first = usize::from(first);
                let lap = total.saturating_sub(self.before[first]);
                // `left % len < len`: the partial lap ends before `step`.
                let part = self.before[first + (left % len) as usize] - self.before[first];
                total = total.saturating_add(lap.saturating_mul(left / len)).saturating_add(part);
                break;
            }
            self.reached_at[usize::from(i)] = Some(step);
            self.path.push(i);
            self.before.push(total);
            let v = self.visit(g, i);
            total = total.saturating_add(v.bytes);
            rings |= v.rings;
            match v.next {
                Some(next) => i = next,
                None => break,
            }
        }
        for &i in &self.path {
            self.reached_at[usize::from(i)] = None;
        }
        (total, rings)
    }

    fn visit(&mut self, g: &Host, i: u16) -> Visit {
        if let Some(v) = self.visits[usize::from(i)] {
            return v;
        }
        let v = read_visit(g, self.table + u64::from(i) * 16);
        self.visits[usize::from(i)] = Some(v);
        v
    }
}

/// The descriptor at `at` as a walk counts it.
fn read_visit(g: &Host, at: u64) -> Visit {
    let touches = |addr: u64, len: u64| addr < RINGS_END && addr.saturating_add(len) > 0;
    let end = Visit { bytes: 0, rings: false, next: None };
    let (Some(addr), Some(len), Some(flags), Some(next)) =
        (g.u64(at), g.u32(at + 8), g.u16(at + 12), g.u16(at + 14))
    else {
        return end;
    };
    let next = (flags & F_NEXT != 0).then_some(next);
    if flags & F_INDIRECT == 0 {
        return Visit { bytes: u64::from(len), rings: touches(addr, u64::from(len)), next };
    }
    let entries = u64::from(len / 16);
    if entries > MAX_INDIRECT_ENTRIES {
        return Visit { bytes: u64::MAX, rings: true, next: None };
    }
    let mut longest = 0;
    let mut rings = false;
    for j in 0..entries {
        let e = addr.wrapping_add(16 * j);
        if let (Some(a), Some(l)) = (g.u64(e), g.u32(e + 8)) {
            longest = longest.max(l);
            rings |= touches(a, u64::from(l));
        }
    }
    Visit { bytes: entries * u64::from(longest), rings, next }
}
