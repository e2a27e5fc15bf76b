//! An epoll-like readiness set, independent of where readiness comes from.
//!
//! As in Linux, the set keeps a ready list: a descriptor is queued when its provider reports
//! that its readiness may have grown ([`EpollSet::notify`]) or when it is (re)registered.
//! `collect` re-checks each queued descriptor's current readiness through a probe;
//! level-triggered registrations stay queued while ready, edge-triggered ones leave the list
//! until the next notification, one-shot ones are disarmed until modified. A wait therefore
//! costs the number of ready descriptors, not the number registered.

use std::collections::VecDeque;

use crate::id_map::IdMap;

use super::types::{EpollEvent, EpollOp, Fd, Ready};
use super::SocketError;

#[derive(Debug, Clone, Copy)]
struct Registration {
    interest: Ready,
    data: u64,
    queued: bool,
    disarmed: bool,
}

/// Registrations and the ready list of one epoll instance.
#[derive(Debug, Default)]
pub struct EpollSet {
    regs: IdMap<Fd, Registration>,
    ready: VecDeque<Fd>,
}

impl EpollSet {
    /// `epoll_ctl`.
    pub fn ctl(&mut self, op: EpollOp, fd: Fd, event: EpollEvent) -> Result<(), SocketError> {
        match op {
            EpollOp::Add => {
                if self.regs.contains_key(&fd) {
                    return Err(SocketError::Exists);
                }
                let reg =
                    Registration { interest: event.events, data: event.data, queued: false, disarmed: false };
                self.regs.insert(fd, reg);
                self.notify(fd);
            }
            EpollOp::Modify => {
                let reg = self.regs.get_mut(&fd).ok_or(SocketError::NotRegistered)?;
                reg.interest = event.events;
                reg.data = event.data;
                reg.disarmed = false;
                self.notify(fd);
            }
            EpollOp::Delete => {
                self.regs.remove(&fd).ok_or(SocketError::NotRegistered)?;
            }
        }
        Ok(())
    }

    /// True when `fd` is registered.
    pub fn contains(&self, fd: Fd) -> bool {
        self.regs.contains_key(&fd)
    }

    /// Forgets `fd` (it was closed).
    pub fn remove(&mut self, fd: Fd) {
        self.regs.remove(&fd);
    }

    /// The readiness of `fd` may have grown: check it at the next `collect`.
    pub fn notify(&mut self, fd: Fd) {
        self.notify_grown(fd, Ready::all_kinds());
    }

    /// [`notify`](Self::notify) for a change of the kinds in `grown` only (data arrived: `IN`;
    /// room to send: `OUT`): a registration that asked for none of them (nor errors and hang-ups,
    /// always reported) is not queued, as Linux's wakeup keys skip it.
    pub fn notify_grown(&mut self, fd: Fd, grown: Ready) {
        if let Some(reg) = self.regs.get_mut(&fd) {
            let asked = reg.interest.readiness() | Ready::ERR | Ready::HUP;
            if (asked & grown).is_empty() {
                return;
            }
            if !reg.queued && !reg.disarmed {
                reg.queued = true;
                self.ready.push_back(fd);
            }
        }
    }

    /// Fills `out` with ready descriptors, asking `probe` for each one's current readiness
    /// (told the kinds its registration wants); returns how many were written.
    pub fn collect(&mut self, mut probe: impl FnMut(Fd, Ready) -> Ready, out: &mut [EpollEvent]) -> usize {
        let mut written = 0;
        let candidates = self.ready.len();
        for _ in 0..candidates {
            if written == out.len() {
                break;
            }
            let Some(fd) = self.ready.pop_front() else { break };
            let Some(reg) = self.regs.get_mut(&fd) else { continue };
            reg.queued = false;
            if reg.disarmed {
                continue;
            }
            let wanted = reg.interest.readiness() | Ready::ERR | Ready::HUP;
            let now = probe(fd, wanted) & wanted;
            if now.is_empty() {
                continue;
            }
            out[written] = EpollEvent { events: now, data: reg.data };
            written += 1;
            if reg.interest.contains(Ready::ONESHOT) {
                reg.disarmed = true;
            } else if !reg.interest.contains(Ready::ET) {
                reg.queued = true;
                self.ready.push_back(fd);
            }
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(events: Ready, data: u64) -> EpollEvent {
        EpollEvent { events, data }
    }

    #[test]
    fn an_edge_for_another_kind_does_not_report_unread_data_again() {
        let mut set = EpollSet::default();
        set.ctl(EpollOp::Add, Fd(1), ev(Ready::IN | Ready::ET, 1)).expect("add");
        let mut out = [EpollEvent::default(); 4];
        assert_eq!(set.collect(|_, _| Ready::IN | Ready::OUT, &mut out), 1, "the registration's edge");
        set.notify_grown(Fd(1), Ready::OUT);
        assert_eq!(set.collect(|_, _| Ready::IN | Ready::OUT, &mut out), 0, "room to send: not asked for");
        set.notify_grown(Fd(1), Ready::IN);
        assert_eq!(set.collect(|_, _| Ready::IN | Ready::OUT, &mut out), 1, "more data: a new edge");
        set.notify_grown(Fd(1), Ready::ERR);
        assert_eq!(set.collect(|_, _| Ready::IN | Ready::ERR, &mut out), 1, "errors are always reported");
    }

    #[test]
    fn level_triggered_reports_while_ready() {
        let mut set = EpollSet::default();
        set.ctl(EpollOp::Add, Fd(1), ev(Ready::IN, 7)).expect("add");
        let mut out = [EpollEvent::default(); 4];
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 1);
        assert_eq!(out[0], ev(Ready::IN, 7));
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 1, "still ready: reported again");
        assert_eq!(set.collect(|_, _| Ready::empty(), &mut out), 0);
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 0, "left the list once not ready");
        set.notify(Fd(1));
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 1);
    }

    #[test]
    fn edge_triggered_reports_once_per_notification() {
        let mut set = EpollSet::default();
        set.ctl(EpollOp::Add, Fd(1), ev(Ready::IN | Ready::ET, 1)).expect("add");
        let mut out = [EpollEvent::default(); 4];
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 1);
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 0);
        set.notify(Fd(1));
        set.notify(Fd(1));
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 1, "notifications coalesce");
    }

    #[test]
    fn oneshot_disarms_until_modified() {
        let mut set = EpollSet::default();
        set.ctl(EpollOp::Add, Fd(3), ev(Ready::OUT | Ready::ONESHOT, 3)).expect("add");
        let mut out = [EpollEvent::default(); 4];
        assert_eq!(set.collect(|_, _| Ready::OUT, &mut out), 1);
        set.notify(Fd(3));
        assert_eq!(set.collect(|_, _| Ready::OUT, &mut out), 0);
        set.ctl(EpollOp::Modify, Fd(3), ev(Ready::OUT | Ready::ONESHOT, 3)).expect("modify");
        assert_eq!(set.collect(|_, _| Ready::OUT, &mut out), 1);
    }

    #[test]
    fn errors_and_hangups_are_always_reported_and_interest_filters_the_rest() {
        let mut set = EpollSet::default();
        set.ctl(EpollOp::Add, Fd(1), ev(Ready::IN, 0)).expect("add");
        let mut out = [EpollEvent::default(); 1];
        assert_eq!(set.collect(|_, _| Ready::OUT, &mut out), 0);
        set.notify(Fd(1));
        assert_eq!(set.collect(|_, _| Ready::OUT | Ready::ERR | Ready::HUP, &mut out), 1);
        assert_eq!(out[0].events, Ready::ERR | Ready::HUP);
    }

    #[test]
    fn ctl_errors_match_linux() {
        let mut set = EpollSet::default();
        assert_eq!(set.ctl(EpollOp::Modify, Fd(1), ev(Ready::IN, 0)), Err(SocketError::NotRegistered));
        assert_eq!(set.ctl(EpollOp::Delete, Fd(1), ev(Ready::IN, 0)), Err(SocketError::NotRegistered));
        set.ctl(EpollOp::Add, Fd(1), ev(Ready::IN, 0)).expect("add");
        assert_eq!(set.ctl(EpollOp::Add, Fd(1), ev(Ready::IN, 0)), Err(SocketError::Exists));
        set.ctl(EpollOp::Delete, Fd(1), ev(Ready::IN, 0)).expect("delete");
        let mut out = [EpollEvent::default(); 1];
        assert_eq!(set.collect(|_, _| Ready::IN, &mut out), 0, "deleted: not reported");
    }

    #[test]
    fn a_full_output_keeps_the_rest_for_the_next_wait() {
        let mut set = EpollSet::default();
        for i in 0..5 {
            set.ctl(EpollOp::Add, Fd(i), ev(Ready::IN | Ready::ET, u64::from(i))).expect("add");
        }
        let mut out = [EpollEvent::default(); 2];
        let mut seen = Vec::new();
        for _ in 0..3 {
            let n = set.collect(|_, _| Ready::IN, &mut out);
            seen.extend(out[..n].iter().map(|e| e.data));
        }
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
    }
}
