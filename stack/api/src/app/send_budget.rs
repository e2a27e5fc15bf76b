//! A send budget shared by one application's stream sockets.
//!
//! Each socket may hold up to its own send buffer of bytes handed to the link and not yet
//! acknowledged; with thousands of sockets that is far more than any cache, and an application
//! that keeps every socket full writes its bytes long before the worker sends them: the bytes
//! and each connection's state are then touched cold. The budget bounds the bytes in flight
//! over all of them together (Linux's `tcp_mem` does so for memory). A socket that finds the
//! budget spent joins a queue and is not writable; as acknowledgements give budget back, the
//! sockets at the queue's head are woken in turn, one per quantum free, each with a pass to send
//! a quantum ahead of the queue, in as many sends as the application makes of it (one of 1 MiB
//! or sixteen of 16 KiB: a turn is as long either way), or until its own send buffer is full
//! (then the rest is free for the next): every waiting socket gets its turn, none is woken only
//! to find nothing left, and a socket woken that does not send holds nothing back for long (see
//! [`STALL`]).
//!
//! A quantum is half the budget (two sockets take turns: one sends while the other's bytes come
//! back acknowledged), at most [`MAX_QUANTUM`], and at least [`WAKE_QUANTUM`] and the largest
//! buffer a send hands over whole. Each turn of a socket brings its connection's state back
//! into the cache, in the application and in the stack at both ends, a fixed cost per turn:
//! the larger the turn, the fewer bytes pay it (at 4,096 connections 128 KiB turns moved 7%
//! more than 64 KiB ones, and turns of a whole default send buffer, 256 KiB, 5-8% more than
//! 128 KiB ones; the whole budget as one turn left the link idle while its last bytes came
//! back, 8% less than 64 KiB ones). The default budget is therefore two default send buffers:
//! two sockets take turns, each filling its whole buffer while the other's bytes come back.
//!
//! Peers that read slowly or not at all must not hold up the others. While sockets wait, every
//! [`STALL`] the counted bytes of each socket whose counted bytes were never all acknowledged
//! in the whole period stop counting (they stay in its own buffer, and never count again; its
//! later sends do): a peer that keeps up acknowledges a turn's bytes within a round trip, so
//! these are peers that read slowly or not at all (or, with few sockets, one that is never
//! idle, which then goes a little beyond the budget). Passes given to sockets that never sent
//! are forgotten then too. An acknowledgement gives back the socket's counted bytes first.
//! A period's end looks only at the sockets that may hold counted bytes (a list kept as they
//! charge), not at every socket: with thousands of sockets a walk over all of them every
//! [`STALL`] would cost a cache miss each, most of them with nothing counted.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::Fd;

/// The least default budget: two of the stack's default send buffers (256 KiB each), one turn
/// of a whole buffer each (see the module documentation).
pub const DEFAULT_SEND_BUDGET: usize = 512 * 1024;

/// The default budget over sockets whose send buffer starts at `sndbuf`: at least one whole
/// buffer, so that a lone connection sends as it would without a budget.
pub fn default_for(sndbuf: usize) -> usize {
    DEFAULT_SEND_BUDGET.max(sndbuf)
}

/// The least budget worth waking a socket for: wakes for a few bytes would send them as small
/// segments, and keep more sockets' state in use at once.
pub const WAKE_QUANTUM: usize = 16 * 1024;

/// The most a quantum grows to with the budget: the stack's default send buffer, whole (beyond
/// it a turn's fixed cost is paid by so many bytes that larger turns would only make the others
/// wait longer for theirs), unless a send hands over more whole.
pub const MAX_QUANTUM: usize = 256 * 1024;

/// The quantum of a budget of `limit` bytes whose turns take at least `least` (see the module
/// documentation).
fn quantum_for(limit: usize, least: usize) -> usize {
    (limit / 2).min(MAX_QUANTUM).max(least)
}

/// While sockets wait, bytes that counted for a whole period this long without being
/// acknowledged stop counting.
pub const STALL: Duration = Duration::from_millis(10);

/// Checks while sockets wait between two looks at the clock (a busy application checks after
/// every pump).
const CLOCK_EVERY: u32 = 64;

/// What the budget knows of one socket.
#[derive(Debug, Clone, Copy, Default)]
pub struct BudgetMark {
    /// In the queue of sockets waiting for budget.
    pub(super) queued: bool,
    /// Woken from the queue: it may send this many bytes although others wait (while
    /// `pass_round` is the budget's; none left: no pass).
    pass_left: usize,
    pass_round: u32,
    /// Of its bytes in flight, this many do not count (they were never all acknowledged in a
    /// whole period while sockets waited).
    uncounted: usize,
    /// The period in which its counted bytes last rose from none.
    counting_since: u32,
    /// On the budget's list of sockets that may hold counted bytes.
    listed: bool,
}

impl BudgetMark {
    /// Of a socket's `in_flight` bytes, those that count.
    fn counted(&self, in_flight: usize) -> usize {
        in_flight.saturating_sub(self.uncounted)
    }
}

/// A time sockets wait (see [`SendBudget::period_ended`]).
#[derive(Debug, Clone, Copy)]
struct Waiting {
    /// When the current period started, by the first look at the clock.
    since: Option<Instant>,
    /// Checks so far.
    checks: u32,
}

/// The budget (see the module documentation).
#[derive(Debug)]
pub struct SendBudget {
    limit: usize,
    /// The least quantum: [`WAKE_QUANTUM`], or the largest buffer a send hands over whole (a
    /// zero-copy buffer), when larger.
    least_quantum: usize,
    used: usize,
    waiting: VecDeque<Fd>,
    /// The bytes of passes given and not sent yet: while any is out, sockets without a pass wait
    /// their turn, and no socket is woken for them.
    reserved: usize,
    /// Passes are good in this round only; a new one starts whenever nothing is in flight and
    /// nobody waits (so that passes never used are forgotten).
    round: u32,
    /// Counts the periods of [`STALL`] while sockets wait.
    period: u32,
    waited: Option<Waiting>,
    /// The sockets that may hold counted bytes (each once: `BudgetMark::listed`), the only
    /// ones a period's end must look at: a walk over every socket would cost one cache miss
    /// per socket every [`STALL`], most of them with nothing counted.
    counting: Vec<Fd>,
}

impl SendBudget {
    /// A budget of `limit` bytes in flight over all sockets, for sends that hand over at most
    /// `unit` bytes whole (the budget is at least a quantum).
    pub fn new(limit: usize, unit: usize) -> Self {
        let least_quantum = WAKE_QUANTUM.max(unit);
        let limit = limit.max(least_quantum);
        SendBudget {
            limit,
            least_quantum,
            used: 0,
            waiting: VecDeque::new(),
            reserved: 0,
            round: 0,
            period: 0,
            waited: None,
            counting: Vec::new(),
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

    /// A new size for the same sockets (at least the least quantum; the quantum follows it):
    /// what is in flight and who waits stay as they are.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(self.least_quantum);
    }

    /// What a pass lets a socket send while others wait ([`quantum_for`] the limit).
    fn quantum(&self) -> usize {
        quantum_for(self.limit, self.least_quantum)
    }

    /// Bytes a socket with `mark` may hand to the link now, as far as the budget goes: what is
    /// free while nobody waits; while others wait, nothing without a pass, and what is left of
    /// its pass with one (the sockets woken together each find theirs, and a pass never used
    /// reserves nothing once a period ends).
    pub fn room(&self, mark: BudgetMark) -> usize {
        let free = self.limit.saturating_sub(self.used);
        if self.waiting.is_empty() && self.reserved == 0 {
            free
        } else {
            free.min(self.pass_left(mark))
        }
    }

    /// What is left of the pass `mark` holds (none unless given in this round).
    fn pass_left(&self, mark: BudgetMark) -> usize {
        if mark.pass_round == self.round {
            mark.pass_left
        } else {
            0
        }
    }

    /// `n` bytes of a socket's pass were sent (all of it when `n` is larger).
    fn use_pass(&mut self, mark: &mut BudgetMark, n: usize) {
        let spent = n.min(self.pass_left(*mark));
        self.reserved -= spent;
        mark.pass_left -= spent;
    }

    /// A socket gives up what is left of its pass (or it is gone).
    fn drop_pass(&mut self, mark: &mut BudgetMark) {
        self.use_pass(mark, usize::MAX);
        mark.pass_left = 0;
    }

    /// Gives the socket just taken from the queue ([`pop_waiter`](Self::pop_waiter)) its pass:
    /// a quantum.
    pub fn give_pass(&mut self, mark: &mut BudgetMark) {
        mark.queued = false;
        self.drop_pass(mark);
        let quantum = self.quantum();
        self.reserved += quantum;
        mark.pass_left = quantum;
        mark.pass_round = self.round;
    }

    /// `n` bytes were handed to the link by socket `fd`, which had `in_flight` before; they use
    /// its pass as far as it goes.
    pub fn charge(&mut self, fd: Fd, mark: &mut BudgetMark, in_flight: usize, n: usize) {
        if in_flight <= mark.uncounted {
            mark.counting_since = self.period;
        }
        if n > 0 && !mark.listed {
            mark.listed = true;
            self.counting.push(fd);
        }
        self.used += n;
        self.use_pass(mark, n);
    }

    /// A socket's own send buffer is full: its turn ends there, and what is left of its pass
    /// goes to the next in the queue (a socket with a 16 KiB buffer would otherwise hold most
    /// of a quantum it cannot send, and the budget's bytes would stay idle).
    pub fn own_buffer_full(&mut self, mark: &mut BudgetMark) {
        self.drop_pass(mark);
    }

    /// `n` of the `in_flight` bytes of a socket were acknowledged (or never taken).
    pub fn release(&mut self, mark: &mut BudgetMark, in_flight: usize, n: usize) {
        let n = n.min(in_flight);
        let counted = n.min(mark.counted(in_flight));
        mark.uncounted = mark.uncounted.saturating_sub(n - counted);
        self.used = self.used.saturating_sub(counted);
        if self.used == 0 && self.waiting.is_empty() {
            // Nothing in flight, nobody waiting: passes never used are forgotten.
            self.round = self.round.wrapping_add(1);
            self.reserved = 0;
        }
    }

    /// A socket with `in_flight` bytes is gone (closed, or failed: nothing more comes back).
    pub fn forget(&mut self, mark: &mut BudgetMark, in_flight: usize) {
        self.used = self.used.saturating_sub(mark.counted(in_flight));
        mark.uncounted = 0;
        self.drop_pass(mark);
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

    /// How many waiting sockets to wake now: one for each quantum free beyond what the passes
    /// given and not sent yet stand for.
    pub fn wakes_due(&self) -> usize {
        if self.waiting.is_empty() {
            return 0;
        }
        self.limit.saturating_sub(self.used).saturating_sub(self.reserved) / self.quantum()
    }

    /// The socket at the head of the queue, taken out of it (the caller finds it and gives it
    /// its pass, or skips it when it is gone).
    pub fn pop_waiter(&mut self) -> Option<Fd> {
        self.waiting.pop_front()
    }

    /// Called after each pump: true when sockets have waited for a whole [`STALL`] since the
    /// last period ended (the caller then [`stop_counting_old`](Self::stop_counting_old)s
    /// the bytes of the sockets [`take_counting`](Self::take_counting) names, and a new period
    /// starts). Looks at the clock only every [`CLOCK_EVERY`] checks, and not at all while
    /// nobody waits.
    pub fn period_ended(&mut self) -> bool {
        if self.waiting.is_empty() {
            self.waited = None;
            return false;
        }
        let period = &mut self.period;
        let waited = self.waited.get_or_insert_with(|| {
            // Sockets start waiting: a period starts, and bytes counted before it are old at
            // its end.
            *period = period.wrapping_add(1);
            Waiting { since: None, checks: 0 }
        });
        waited.checks = waited.checks.wrapping_add(1);
        if waited.checks % CLOCK_EVERY != 1 {
            return false;
        }
        let now = Instant::now();
        let since = *waited.since.get_or_insert(now);
        if now.duration_since(since) < STALL {
            return false;
        }
        *waited = Waiting { since: Some(now), checks: 1 };
        self.period = self.period.wrapping_add(1);
        // Passes given and never used (their sockets woken and not sending) stand for nothing
        // from now on.
        self.round = self.round.wrapping_add(1);
        self.reserved = 0;
        true
    }

    /// The sockets that may hold counted bytes, taken off the list for a period's end: each
    /// that still lives goes through [`stop_counting_old`](Self::stop_counting_old), which
    /// lists it again while it still counts.
    pub fn take_counting(&mut self) -> Vec<Fd> {
        std::mem::take(&mut self.counting)
    }

    /// At the end of a period: socket `fd` (from [`take_counting`](Self::take_counting)), whose
    /// counted bytes have not all been acknowledged since before the period started, stops
    /// counting them; one that still counts bytes stays on the list.
    pub fn stop_counting_old(&mut self, fd: Fd, mark: &mut BudgetMark, in_flight: usize) {
        let counted = mark.counted(in_flight);
        if counted > 0 && self.period.wrapping_sub(mark.counting_since) >= 2 {
            self.used = self.used.saturating_sub(counted);
            mark.uncounted = in_flight;
        }
        self.relist(fd, mark, in_flight);
    }

    /// Socket `fd` (taken off the list with [`take_counting`](Self::take_counting)) goes back
    /// on it while it counts bytes, and off it otherwise (its next charge lists it again).
    pub fn relist(&mut self, fd: Fd, mark: &mut BudgetMark, in_flight: usize) {
        mark.listed = mark.counted(in_flight) > 0;
        if mark.listed {
            self.counting.push(fd);
        }
    }

    /// Entries on the list, stale ones (sockets gone, or no longer counting) included.
    pub fn counting_len(&self) -> usize {
        self.counting.len()
    }

    /// True when the list has outgrown `sockets` (those that live), and the caller is to take
    /// it and [`relist`](Self::relist) the live ones: sockets closed, or whose bytes were all
    /// acknowledged, stay listed until a period ends, and without waiters none ends. Amortised:
    /// a prune leaves at most one entry per socket, so the next comes after as many charges.
    pub fn prune_due(&self, sockets: usize) -> bool {
        self.counting_len() > 2 * sockets + 64
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
        let q = b.quantum();
        assert_eq!(q, 32 * 1024, "half the budget");
        let (mut a, mut c, mut d) = (BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        assert_eq!(b.room(a), 64 * 1024);
        b.charge(Fd(1), &mut a, 0, 64 * 1024);
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
        b.release(&mut a, 56 * 1024, 56 * 1024);
        assert_eq!(b.wakes_due(), 2);
        assert_eq!(wake(&mut b, Fd(2), &mut c), Some(Fd(2)), "first come, first woken");
        assert_eq!(b.wakes_due(), 1, "the pass stands for one quantum");
        assert_eq!(wake(&mut b, Fd(3), &mut d), Some(Fd(3)));
        assert_eq!(b.wakes_due(), 0);
        // The queue is empty, but two passes are out: each may take a quantum, nobody else.
        assert_eq!(b.room(c), q);
        assert_eq!(b.room(d), q);
        assert_eq!(b.room(BudgetMark::default()), 0);
        b.charge(Fd(2), &mut c, 0, q);
        assert_eq!(b.room(c), 0, "the pass is spent");
        b.charge(Fd(3), &mut d, 0, q);
        assert_eq!(b.used(), 64 * 1024);
        assert_eq!(b.room(BudgetMark::default()), 0, "spent");
        b.release(&mut c, q, 8 * 1024);
        assert_eq!(b.room(BudgetMark::default()), 8 * 1024, "no pass out, nobody waiting: free for all");
    }

    #[test]
    fn a_pass_is_a_quantum_of_bytes_in_as_many_sends_as_the_application_makes() {
        let mut b = SendBudget::new(256 * 1024, 0);
        let q = b.quantum();
        let (mut a, mut c, mut d) = (BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        b.charge(Fd(1), &mut a, 0, 256 * 1024);
        b.wait(Fd(2), &mut c);
        b.wait(Fd(3), &mut d);
        b.release(&mut a, 256 * 1024, q);
        assert_eq!(b.wakes_due(), 1);
        assert_eq!(wake(&mut b, Fd(2), &mut c), Some(Fd(2)));
        assert_eq!(b.wakes_due(), 0, "the pass stands for its quantum");
        let piece = q / 4;
        for k in 0..4 {
            assert_eq!(b.room(c), q - k * piece, "what is left of the pass after {k} sends");
            b.charge(Fd(2), &mut c, k * piece, piece);
            assert_eq!(b.wakes_due(), 0, "sent or reserved, the quantum is taken");
        }
        assert_eq!(b.room(c), 0, "the pass is spent: a turn is a quantum however it was sent");
        assert_eq!(b.room(d), 0, "still queued");
        // Half a pass sent, the rest given up (the socket waits again): that rest is free.
        b.release(&mut a, 256 * 1024 - q, q);
        assert_eq!(wake(&mut b, Fd(3), &mut d), Some(Fd(3)));
        b.charge(Fd(3), &mut d, 0, q / 2);
        b.wait(Fd(3), &mut d);
        assert_eq!(b.room(d), 0, "queued again: no pass");
        b.release(&mut c, q, q);
        assert_eq!(b.wakes_due(), 1, "the rest of the pass given up stands for nothing");
        // A socket whose own buffer fills before its pass is spent: its turn ends there.
        let mut e = BudgetMark::default();
        b.wait(Fd(4), &mut e);
        assert_eq!(wake(&mut b, Fd(4), &mut e), Some(Fd(4)));
        assert_eq!(b.wakes_due(), 0);
        b.charge(Fd(4), &mut e, 0, 16 * 1024);
        b.wait(Fd(5), &mut BudgetMark::default());
        assert_eq!((b.room(e), b.wakes_due()), (q - 16 * 1024, 0), "its pass goes on");
        b.own_buffer_full(&mut e);
        assert_eq!(b.room(e), 0, "its turn is over");
        assert_eq!(b.wakes_due(), 1, "the rest of its pass is free for the next");
    }

    #[test]
    fn a_quantum_is_half_the_budget_within_its_bounds_and_follows_a_new_limit() {
        let large = 64 * 1024;
        assert_eq!(SendBudget::new(DEFAULT_SEND_BUDGET, large).quantum(), 256 * 1024);
        assert_eq!(SendBudget::new(256 * 1024, large).quantum(), 128 * 1024, "half the budget");
        assert_eq!(SendBudget::new(16 << 20, large).quantum(), MAX_QUANTUM, "at most");
        assert_eq!(SendBudget::new(96 * 1024, large).quantum(), large, "a large send whole");
        assert_eq!(SendBudget::new(16 << 20, 512 * 1024).quantum(), 512 * 1024);
        let mut b = SendBudget::new(8 * 1024, 0);
        assert_eq!((b.limit(), b.quantum()), (WAKE_QUANTUM, WAKE_QUANTUM), "the least budget and quantum");
        b.set_limit(80 * 1024);
        assert_eq!((b.limit(), b.quantum()), (80 * 1024, 40 * 1024));
        b.set_limit(1);
        assert_eq!((b.limit(), b.quantum()), (WAKE_QUANTUM, WAKE_QUANTUM));
    }

    #[test]
    fn a_gone_socket_in_the_queue_is_skipped_and_its_bytes_and_pass_are_given_back() {
        let mut b = SendBudget::new(32 * 1024, 0);
        let (mut a, mut c, mut e) = (BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        b.charge(Fd(1), &mut a, 0, 32 * 1024);
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
        b.charge(Fd(1), &mut a, 0, 32 * 1024);
        b.wait(Fd(5), &mut idle);
        b.release(&mut a, 32 * 1024, 16 * 1024);
        assert_eq!(wake(&mut b, Fd(5), &mut idle), Some(Fd(5)));
        assert_eq!(b.room(a), 0, "a pass is out");
        b.release(&mut a, 16 * 1024, 16 * 1024);
        assert_eq!(b.room(a), 32 * 1024, "all acknowledged: a new round, the idle pass forgotten");
        assert_eq!(b.room(idle), 32 * 1024);
    }

    #[test]
    fn bytes_that_counted_for_a_whole_period_while_sockets_waited_stop_counting_for_good() {
        let mut b = SendBudget::new(64 * 1024, 0);
        let (mut stuck, mut slow, mut fast, mut waiter) =
            (BudgetMark::default(), BudgetMark::default(), BudgetMark::default(), BudgetMark::default());
        b.charge(Fd(1), &mut stuck, 0, 24 * 1024);
        b.charge(Fd(2), &mut slow, 0, 24 * 1024);
        b.wait(Fd(9), &mut waiter);
        // The first check starts a period and looks at the clock.
        assert!(!b.period_ended());
        // In it: the slow peer acknowledges a little (its counted bytes stay old), the fast
        // socket starts sending.
        b.release(&mut slow, 24 * 1024, 4 * 1024);
        b.charge(Fd(3), &mut fast, 0, 16 * 1024);
        let start = Instant::now();
        while !b.period_ended() {
            assert!(start.elapsed() < Duration::from_secs(5), "the period ends");
        }
        let listed = b.take_counting();
        assert_eq!(listed, [Fd(1), Fd(2), Fd(3)], "every socket that charged, once");
        for (fd, mark, in_flight) in
            [(Fd(1), &mut stuck, 24 * 1024), (Fd(2), &mut slow, 20 * 1024), (Fd(3), &mut fast, 16 * 1024)]
        {
            assert!(listed.contains(&fd));
            b.stop_counting_old(fd, mark, in_flight);
        }
        assert_eq!(b.used(), 16 * 1024, "only the bytes counted since the period began still count");
        assert_eq!(b.take_counting(), [Fd(3)], "only the socket that still counts stays listed");
        b.relist(Fd(3), &mut fast, 16 * 1024);
        assert_eq!(b.wakes_due(), 1, "48 KiB free: one quantum of 32 KiB");
        // The slow socket sends again: that counts; its acknowledgements give back the counted
        // bytes first.
        b.charge(Fd(2), &mut slow, 20 * 1024, 8 * 1024);
        assert_eq!(b.used(), 24 * 1024);
        b.release(&mut slow, 28 * 1024, 10 * 1024);
        assert_eq!(b.used(), 16 * 1024, "8 KiB counted, then 2 KiB of the uncounted");
        b.forget(&mut slow, 18 * 1024);
        assert_eq!(b.used(), 16 * 1024, "the rest counted no more");
        b.forget(&mut stuck, 24 * 1024);
        b.release(&mut fast, 16 * 1024, 16 * 1024);
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn a_socket_is_listed_once_while_it_counts_and_its_next_charge_lists_it_again() {
        let mut b = SendBudget::new(64 * 1024, 0);
        let mut a = BudgetMark::default();
        for sent in 0..4 {
            b.charge(Fd(4), &mut a, sent * 1024, 1024);
        }
        assert_eq!(b.counting_len(), 1, "four sends, one entry");
        b.release(&mut a, 4 * 1024, 4 * 1024);
        for fd in b.take_counting() {
            b.relist(fd, &mut a, 0);
        }
        assert_eq!(b.counting_len(), 0, "nothing counted: off the list");
        b.charge(Fd(4), &mut a, 0, 1024);
        assert_eq!(b.take_counting(), [Fd(4)]);
    }

    #[test]
    fn the_list_stays_bounded_by_the_live_sockets_however_many_come_and_go() {
        let mut b = SendBudget::new(64 * 1024, 0);
        let mut live = BudgetMark::default();
        b.charge(Fd(3), &mut live, 0, 1024);
        let mut most = 0;
        for fd in 4..10_000 {
            // A socket sends, is acknowledged and closes; nobody ever waits.
            let mut gone = BudgetMark::default();
            b.charge(Fd(fd), &mut gone, 0, 512);
            b.release(&mut gone, 512, 512);
            b.forget(&mut gone, 0);
            if b.prune_due(1) {
                for listed in b.take_counting() {
                    if listed == Fd(3) {
                        b.relist(listed, &mut live, 1024);
                    }
                }
            }
            most = most.max(b.counting_len());
        }
        assert!(most <= 2 + 64 + 1, "at most {most} entries for one live socket");
        assert!(b.take_counting().contains(&Fd(3)), "the live socket stays listed");
    }
}
