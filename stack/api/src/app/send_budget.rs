//! A send budget shared by one application's stream sockets.
//!
//! Each socket may hold up to its own send buffer of bytes handed to the link and not yet
//! acknowledged; with thousands of sockets that is far more than any cache, and an application
//! that keeps every socket full writes its bytes long before the worker sends them: the bytes
//! and each connection's state are then touched cold. The budget bounds the bytes in flight
//! over all of them together (Linux's `tcp_mem` does so for memory). A socket that finds the
//! budget spent joins a queue and is not writable; as acknowledgements give budget back, the
//! sockets at the queue's head are woken in turn, one per quantum free ([`WAKE_QUANTUM`], or
//! the largest buffer a send hands over whole), each with a pass to send up to a quantum ahead
//! of the queue once: every waiting socket gets its turn,
//! none is woken only to find nothing left, and a socket woken that does not send holds
//! nothing back.
//!
//! Peers that stop reading must not stop the others: when the queue has found nothing to wake
//! it for [`STALL`], the bytes of every socket that had no acknowledgement in that time stop
//! counting (they stay in that socket's own buffer), and they count again from its next
//! acknowledgement or send; passes given to sockets that never sent are forgotten then too.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::Fd;

/// The default budget: the default send buffer of one socket, so that a lone connection sends
/// as it would without one.
pub const DEFAULT_SEND_BUDGET: usize = 256 * 1024;

/// The least budget worth waking a socket for: wakes for a few bytes would send them as small
/// segments, and keep more sockets' state in use at once.
pub const WAKE_QUANTUM: usize = 16 * 1024;

/// How long the queue may find nothing to wake it before the sockets that had no
/// acknowledgement meanwhile stop counting.
pub const STALL: Duration = Duration::from_millis(10);

/// Blocked checks between two looks at the clock (a busy application checks after every pump).
const CLOCK_EVERY: u32 = 64;

/// What the budget knows of one socket.
#[derive(Debug, Clone, Copy, Default)]
pub struct BudgetMark {
    /// In the queue of sockets waiting for budget.
    pub(super) queued: bool,
    /// Woken from the queue: its next send may take a quantum although others wait (while
    /// `pass_round` is the budget's).
    pass: bool,
    pass_round: u32,
    /// Its bytes in flight do not count (they had no acknowledgement while the queue stalled).
    exempt: bool,
    /// The blocked period of its last acknowledgement, or of its first send after none.
    moved_in: u32,
}

/// A time the queue finds nothing to wake (see [`SendBudget::check_stall`]).
#[derive(Debug, Clone, Copy)]
struct Blocked {
    /// When it was first seen by a look at the clock.
    since: Option<Instant>,
    /// Checks so far.
    checks: u32,
}

/// The budget (see the module documentation).
#[derive(Debug)]
pub struct SendBudget {
    limit: usize,
    /// What a pass lets a socket send while others wait: [`WAKE_QUANTUM`], or the largest
    /// buffer a send hands over whole (a zero-copy buffer), when larger.
    quantum: usize,
    used: usize,
    waiting: VecDeque<Fd>,
    /// Passes given and not used yet: while any is out, sockets without one wait their turn.
    passes: usize,
    /// Passes are good in this round only; a new one starts whenever nothing is in flight and
    /// nobody waits (so that passes never used are forgotten).
    round: u32,
    /// Counts blocked periods: a socket that moved during the current one is not stalled.
    period: u32,
    blocked: Option<Blocked>,
}

impl SendBudget {
    /// A budget of `limit` bytes in flight over all sockets, for sends that hand over at most
    /// `unit` bytes whole (the budget is at least a quantum).
    pub fn new(limit: usize, unit: usize) -> Self {
        let quantum = WAKE_QUANTUM.max(unit);
        SendBudget {
            limit: limit.max(quantum),
            quantum,
            used: 0,
            waiting: VecDeque::new(),
            passes: 0,
            round: 0,
            period: 0,
            blocked: None,
        }
    }

    /// The budget's size.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes in flight that count against it.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Takes over `old`'s count and queue (a new size for the same sockets).
    pub fn adopt(&mut self, old: SendBudget) {
        self.used = old.used;
        self.waiting = old.waiting;
        self.passes = old.passes;
        self.round = old.round;
        self.period = old.period;
    }

    /// Bytes a socket with `mark` may hand to the link now, as far as the budget goes: what is
    /// free while nobody waits; while others wait, nothing without a pass, and a quantum at
    /// most with one (the sockets woken together each find theirs, and a pass never used
    /// reserves nothing).
    pub fn room(&self, mark: BudgetMark) -> usize {
        let free = self.limit.saturating_sub(self.used);
        if self.waiting.is_empty() && self.passes == 0 {
            free
        } else if self.has_pass(mark) {
            free.min(self.quantum)
        } else {
            0
        }
    }

    /// True when `mark` holds a pass of this round.
    fn has_pass(&self, mark: BudgetMark) -> bool {
        mark.pass && mark.pass_round == self.round
    }

    /// A socket's pass is used (or it is gone).
    fn drop_pass(&mut self, mark: &mut BudgetMark) {
        if self.has_pass(*mark) {
            self.passes -= 1;
        }
        mark.pass = false;
    }

    /// Gives the socket just taken from the queue ([`pop_waiter`](Self::pop_waiter)) its pass.
    pub fn give_pass(&mut self, mark: &mut BudgetMark) {
        mark.queued = false;
        if !self.has_pass(*mark) {
            self.passes += 1;
        }
        mark.pass = true;
        mark.pass_round = self.round;
    }

    /// `n` bytes were handed to the link by a socket that had `in_flight` before; a pass is
    /// used by the send that took it.
    pub fn charge(&mut self, mark: &mut BudgetMark, in_flight: usize, n: usize) {
        self.count_again(mark, in_flight);
        if in_flight == 0 {
            mark.moved_in = self.period;
        }
        self.used += n;
        self.drop_pass(mark);
    }

    /// `n` of the `in_flight` bytes of a socket were acknowledged (or never taken).
    pub fn release(&mut self, mark: &mut BudgetMark, in_flight: usize, n: usize) {
        self.count_again(mark, in_flight);
        self.used = self.used.saturating_sub(n.min(in_flight));
        mark.moved_in = self.period;
        if self.used == 0 && self.waiting.is_empty() {
            // Nothing in flight, nobody waiting: passes never used are forgotten.
            self.round = self.round.wrapping_add(1);
            self.passes = 0;
        }
    }

    /// A socket with `in_flight` bytes is gone (closed, or failed: nothing more comes back).
    pub fn forget(&mut self, mark: &mut BudgetMark, in_flight: usize) {
        if !mark.exempt {
            self.used = self.used.saturating_sub(in_flight);
        }
        mark.exempt = false;
        self.drop_pass(mark);
    }

    /// An exempt socket moved: its bytes count again.
    fn count_again(&mut self, mark: &mut BudgetMark, in_flight: usize) {
        if mark.exempt {
            mark.exempt = false;
            self.used += in_flight;
        }
    }

    /// A socket wants to send and the budget keeps it from it: it waits for its turn (once; a
    /// pass it held and could not use is given up, so that it stands for nothing while queued).
    pub fn wait(&mut self, fd: Fd, mark: &mut BudgetMark) {
        self.drop_pass(mark);
        if !mark.queued {
            mark.queued = true;
            self.waiting.push_back(fd);
        }
    }

    /// How many waiting sockets to wake now: one for each quantum free that no pass given
    /// already stands for.
    pub fn wakes_due(&self) -> usize {
        if self.waiting.is_empty() {
            return 0;
        }
        (self.limit.saturating_sub(self.used) / self.quantum).saturating_sub(self.passes)
    }

    /// The socket at the head of the queue, taken out of it (the caller finds it and gives it
    /// its pass, or skips it when it is gone).
    pub fn pop_waiter(&mut self) -> Option<Fd> {
        self.waiting.pop_front()
    }

    /// Called after each pump: true when sockets wait, nothing is free to wake them, and it
    /// has been so for [`STALL`] (the caller then [`exempt_if_unmoved`](Self::exempt_if_unmoved)s
    /// every socket). Looks at the clock only every [`CLOCK_EVERY`] checks.
    pub fn check_stall(&mut self) -> bool {
        if self.waiting.is_empty() || self.wakes_due() > 0 {
            self.blocked = None;
            return false;
        }
        let period = &mut self.period;
        let blocked = self.blocked.get_or_insert_with(|| {
            *period = period.wrapping_add(1);
            Blocked { since: None, checks: 0 }
        });
        blocked.checks = blocked.checks.wrapping_add(1);
        if blocked.checks % CLOCK_EVERY != 1 {
            return false;
        }
        let now = Instant::now();
        let since = *blocked.since.get_or_insert(now);
        if now.duration_since(since) < STALL {
            return false;
        }
        self.blocked = None;
        // Passes given and never used (their sockets woken and not sending) stand for nothing
        // from now on.
        self.round = self.round.wrapping_add(1);
        self.passes = 0;
        true
    }

    /// After a stall: a socket with bytes in flight that had no acknowledgement (nor first
    /// send) in the stalled period stops counting them.
    pub fn exempt_if_unmoved(&mut self, mark: &mut BudgetMark, in_flight: usize) {
        if in_flight > 0 && !mark.exempt && mark.moved_in != self.period {
            mark.exempt = true;
            self.used = self.used.saturating_sub(in_flight);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wakes the head of the queue, skipping sockets other than `fd` as gone.
    fn wake(b: &mut SendBudget, fd: Fd, mark: &mut BudgetMark) -> Option<Fd> {
        while let Some(head) = b.pop_waiter() {
            if head == fd {
                b.give_pass(mark);
                return Some(head);
            }
        }
        None
    }

    #[test]
    fn a_lone_socket_sends_what_is_free_and_others_then_wait_their_turn_in_order() {
        let mut b = SendBudget::new(64 * 1024, 0);
        let (mut a, mut c, mut d) = (BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        assert_eq!(b.room(a), 64 * 1024);
        b.charge(&mut a, 0, 64 * 1024);
        assert_eq!(b.room(c), 0);
        b.wait(Fd(2), &mut c);
        b.wait(Fd(3), &mut d);
        b.wait(Fd(2), &mut c);
        assert_eq!(b.wakes_due(), 0);
        // Less than a quantum back: nobody is woken, and a socket outside the queue does not
        // jump it.
        b.release(&mut a, 64 * 1024, 8 * 1024);
        assert_eq!(b.wakes_due(), 0);
        assert_eq!(b.room(BudgetMark::default()), 0, "others wait: no room without a pass");
        b.release(&mut a, 56 * 1024, 24 * 1024);
        assert_eq!(b.wakes_due(), 2);
        assert_eq!(wake(&mut b, Fd(2), &mut c), Some(Fd(2)), "first come, first woken");
        assert_eq!(b.wakes_due(), 1, "the pass stands for one quantum");
        assert_eq!(wake(&mut b, Fd(3), &mut d), Some(Fd(3)));
        assert_eq!(b.wakes_due(), 0);
        // The queue is empty, but two passes are out: each may take a quantum, nobody else.
        assert_eq!(b.room(c), WAKE_QUANTUM);
        assert_eq!(b.room(d), WAKE_QUANTUM);
        assert_eq!(b.room(BudgetMark::default()), 0);
        b.charge(&mut c, 0, WAKE_QUANTUM);
        assert_eq!(b.room(c), 0, "a pass is good for one send");
        b.charge(&mut d, 0, WAKE_QUANTUM);
        assert_eq!(b.used(), 64 * 1024);
        assert_eq!(b.room(BudgetMark::default()), 0, "spent");
        b.release(&mut c, WAKE_QUANTUM, 8 * 1024);
        assert_eq!(b.room(BudgetMark::default()), 8 * 1024, "no pass out, nobody waiting: free for all");
    }

    #[test]
    fn a_gone_socket_in_the_queue_is_skipped_and_its_bytes_and_pass_are_given_back() {
        let mut b = SendBudget::new(32 * 1024, 0);
        let (mut a, mut c, mut e) = (BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        b.charge(&mut a, 0, 32 * 1024);
        b.wait(Fd(7), &mut BudgetMark::default());
        b.wait(Fd(8), &mut c);
        b.wait(Fd(9), &mut e);
        b.forget(&mut a, 32 * 1024);
        assert_eq!(b.used(), 0);
        assert_eq!(wake(&mut b, Fd(8), &mut c), Some(Fd(8)));
        assert_eq!(b.room(e), 0, "still queued behind a pass");
        b.forget(&mut c, 0);
        assert_eq!(b.wakes_due(), 2, "the gone socket's pass stands for nothing");
        assert_eq!(wake(&mut b, Fd(9), &mut e), Some(Fd(9)));
        assert_eq!(b.pop_waiter(), None);
    }

    #[test]
    fn passes_never_used_are_forgotten_once_nothing_is_in_flight_and_nobody_waits() {
        let mut b = SendBudget::new(32 * 1024, 0);
        let (mut a, mut idle) = (BudgetMark::default(), BudgetMark::default());
        b.charge(&mut a, 0, 32 * 1024);
        b.wait(Fd(5), &mut idle);
        b.release(&mut a, 32 * 1024, 16 * 1024);
        assert_eq!(wake(&mut b, Fd(5), &mut idle), Some(Fd(5)));
        assert_eq!(b.room(a), 0, "a pass is out");
        b.release(&mut a, 16 * 1024, 16 * 1024);
        assert_eq!(b.room(a), 32 * 1024, "all acknowledged: a new round, the idle pass forgotten");
        assert_eq!(b.room(idle), 32 * 1024);
    }

    #[test]
    fn after_a_stall_the_sockets_that_did_not_move_stop_counting_until_they_move() {
        let mut b = SendBudget::new(32 * 1024, 0);
        let (mut stuck, mut moving, mut waiter) =
            (BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        b.charge(&mut stuck, 0, 24 * 1024);
        b.charge(&mut moving, 0, 8 * 1024);
        b.wait(Fd(9), &mut waiter);
        // The first check starts the blocked period and looks at the clock.
        assert!(!b.check_stall());
        b.release(&mut moving, 8 * 1024, 4 * 1024);
        let start = Instant::now();
        let mut stalled = false;
        while !stalled {
            assert!(start.elapsed() < Duration::from_secs(5), "a stall is found");
            stalled = b.check_stall();
        }
        b.exempt_if_unmoved(&mut stuck, 24 * 1024);
        b.exempt_if_unmoved(&mut moving, 4 * 1024);
        assert_eq!(b.used(), 4 * 1024, "only the socket that moved still counts");
        assert_eq!(b.wakes_due(), 1);
        // The stuck socket's peer reads again: its bytes count again, less what was acknowledged.
        b.release(&mut stuck, 24 * 1024, 8 * 1024);
        assert_eq!(b.used(), 20 * 1024);
        b.forget(&mut stuck, 16 * 1024);
        assert_eq!(b.used(), 4 * 1024);
    }
}
