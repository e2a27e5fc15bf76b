//! The application side of the socket API, shared by every provider: [`AppSockets`]
//! implements [`SocketApi`](crate::SocketApi) once over a [`Link`].
//!
//! The core keeps the socket table (a mirror of what the link reported), computes readiness
//! without asking the provider, counts send credit so `EAGAIN` needs no round trip, queues
//! received buffers and datagrams, runs the blocking and non-blocking rules (a non-blocking
//! call applies the link's news once before answering `EAGAIN`), and owns the epoll sets.
//! A [`Link`] only moves requests and events: the host runtime's rings and worker
//! (`slimtcp::runtime::HostSockets`) and the guest library's virtqueues.

mod api_impl;
mod control;
mod data;
mod events;
mod link;
mod send_budget;
mod state;

use crate::id_map::IdMap;
use crate::spares::LocalSpares;
use std::time::Instant;

pub use link::{Event, Limits, Link, Reply, Request, RxPayload, Submitted};
pub use state::DATAGRAM_QUEUE;

use send_budget::SendBudget;
use state::SockEntry;

use crate::{EpollFd, EpollSet, Fd, Ready, SocketError};

/// The largest `listen` backlog; a larger one is cut to it (Linux's default
/// `net.core.somaxconn`). The backend's default per-tenant backlog limit too.
pub const MAX_BACKLOG: usize = 4096;

/// The socket API over one [`Link`] (see the module documentation). One per thread.
#[derive(Debug)]
pub struct AppSockets<L: Link> {
    link: L,
    limits: Limits,
    sockets: IdMap<Fd, SockEntry<L::RxBuf>>,
    next_fd: u32,
    epolls: IdMap<EpollFd, EpollSet>,
    next_epoll: u32,
    /// Answers to pending requests, by ticket.
    replies: IdMap<u64, Result<Reply, SocketError>>,
    /// Event buffer reused across pumps.
    events: Vec<Event<L::RxBuf>>,
    /// Sockets whose non-blocking send found the link's ring full (`SockEntry::no_link_room`),
    /// told once the link moves.
    room_waiters: Vec<Fd>,
    /// The bytes in flight over all stream sockets, bounded (`send_budget.rs`).
    budget: SendBudget,
    /// Sockets an epoll wait found held back by the budget only, to queue for it.
    budget_held: Vec<Fd>,
    /// The storage of emptied receive queues, for the next queue to get data: a queue holds
    /// none while empty, so the buffers of a connection's turn go into storage just used
    /// instead of its own, cold since its last turn (`crate::spares`).
    rxq_spares: LocalSpares<L::RxBuf>,
}

impl<L: Link> AppSockets<L> {
    /// The application side over `link`.
    pub fn with_link(link: L) -> Self {
        let limits = link.limits();
        AppSockets {
            limits,
            link,
            sockets: IdMap::default(),
            next_fd: 3,
            epolls: IdMap::default(),
            next_epoll: 1,
            replies: IdMap::default(),
            events: Vec::new(),
            room_waiters: Vec::new(),
            budget: SendBudget::new(send_budget::default_for(limits.default_sndbuf), limits.max_tx_len),
            budget_held: Vec::new(),
            rxq_spares: LocalSpares::new(),
        }
    }

    /// The link (for provider-specific queries).
    pub fn link(&self) -> &L {
        &self.link
    }

    /// The link, for provider-specific calls (the guest library's sleep hooks).
    pub fn link_mut(&mut self) -> &mut L {
        &mut self.link
    }

    /// What `fd` is ready for now (epoll's rules), from what the link last reported: call
    /// [`progress`](Self::progress) first for news.
    pub fn readiness(&self, fd: Fd) -> Result<crate::Ready, SocketError> {
        Ok(self.entry(fd)?.readiness(&self.budget))
    }

    /// Bytes a read would return now (`FIONREAD`): a stream's queued bytes, or the size of a
    /// datagram socket's next datagram.
    pub fn readable_bytes(&self, fd: Fd) -> Result<usize, SocketError> {
        let s = self.entry(fd)?;
        Ok(match s.proto {
            crate::Proto::Tcp => s.rxq.iter().map(|b| b.as_ref().len()).sum(),
            crate::Proto::Udp => s.datagrams.front().map_or(0, |(_, d)| d.as_ref().len()),
        })
    }

    /// Whether `fd` is listening.
    pub fn is_listening(&self, fd: Fd) -> Result<bool, SocketError> {
        Ok(self.entry(fd)?.phase == state::Phase::Listening)
    }

    /// Applies whatever the provider reported (and lets it run, where the application thread
    /// drives it) without waiting; true when anything happened. Blocking calls and
    /// `epoll_wait` do this already.
    pub fn progress(&mut self) -> Result<bool, SocketError> {
        self.pump()
    }

    /// Bounds the bytes in flight over all stream sockets together (`send_budget.rs`; at
    /// least 16 KiB and the largest transmit buffer). Takes effect for the sends that follow;
    /// sockets already waiting are woken as the new budget allows.
    pub fn set_send_budget(&mut self, bytes: usize) {
        self.budget.set_limit(bytes);
    }

    /// The bytes in flight over all stream sockets that count against the send budget, and
    /// its size.
    pub fn send_budget(&self) -> (usize, usize) {
        (self.budget.used(), self.budget.limit())
    }

    /// Zero-copy transmit buffers handed out (held by the application or in flight).
    pub fn tx_buffers_outstanding(&self) -> usize {
        self.link.tx_outstanding()
    }

    /// Datagrams dropped on `fd` because the application did not read fast enough.
    pub fn datagrams_dropped(&self, fd: Fd) -> Result<u64, SocketError> {
        Ok(self.entry(fd)?.datagrams_dropped)
    }

    fn entry(&self, fd: Fd) -> Result<&SockEntry<L::RxBuf>, SocketError> {
        self.sockets.get(&fd).ok_or(SocketError::BadHandle)
    }

    fn entry_mut(&mut self, fd: Fd) -> Result<&mut SockEntry<L::RxBuf>, SocketError> {
        self.sockets.get_mut(&fd).ok_or(SocketError::BadHandle)
    }

    fn new_fd(&mut self) -> Result<Fd, SocketError> {
        if self.sockets.len() >= self.limits.max_sockets {
            return Err(SocketError::TooManySockets);
        }
        let fd = Fd(self.next_fd);
        self.next_fd = self.next_fd.checked_add(1).ok_or(SocketError::TooManySockets)?;
        Ok(fd)
    }

    /// Lets the link progress and applies its events; true when anything happened.
    fn pump(&mut self) -> Result<bool, SocketError> {
        let mut events = std::mem::take(&mut self.events);
        let progressed = self.link.pump(&mut events);
        let got = !events.is_empty();
        // Nothing takes a registration off an epoll's ready list while events are applied, so
        // a socket that grew the same way as the event before needs no second notice (a burst
        // of segments for one connection costs one).
        let mut last_grown = None;
        for event in events.drain(..) {
            if let Some(grown) = self.on_event(event) {
                if last_grown != Some(grown) {
                    self.notify_grown(grown.0, grown.1);
                    last_grown = Some(grown);
                }
            }
        }
        if self.events.is_empty() {
            self.events = events;
        }
        let progressed = progressed? || got;
        if !self.room_waiters.is_empty() {
            // Sockets whose send found no room (the ring's, or their share of it) become
            // writable once they have it again (an edge for epoll); a send that finds none
            // again marks its socket again.
            let mut waiters = std::mem::take(&mut self.room_waiters);
            waiters.retain(|&fd| {
                if !self.link.has_send_room(fd) {
                    return true;
                }
                if let Some(s) = self.sockets.get_mut(&fd) {
                    s.no_link_room = false;
                }
                self.notify_grown(fd, Ready::OUT);
                false
            });
            self.room_waiters = waiters;
        }
        self.wake_budget_waiters();
        Ok(progressed)
    }

    /// Wakes the sockets waiting for send budget that what is free now is enough for, in
    /// their order, each with a pass for its next send (an edge for epoll); at the end of a
    /// period of waiting, first lets the bytes that counted for all of it stop counting.
    fn wake_budget_waiters(&mut self) {
        if self.budget.period_ended() {
            // Only the sockets that may hold counted bytes, not every socket (a socket gone
            // meanwhile leaves the list: descriptors are never reused).
            for fd in self.budget.take_counting() {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    self.budget.stop_counting_old(fd, &mut s.budget, s.in_flight);
                }
            }
        }
        let mut wakes = self.budget.wakes_due();
        while wakes > 0 {
            let Some(fd) = self.budget.pop_waiter() else { break };
            let Some(s) = self.sockets.get_mut(&fd) else { continue };
            self.budget.give_pass(&mut s.budget);
            self.notify_grown(fd, Ready::OUT);
            wakes -= 1;
        }
    }

    /// `fd` wants to send and only the budget keeps it from it: it waits for its turn.
    fn wait_for_budget(&mut self, fd: Fd) {
        if let Some(s) = self.sockets.get_mut(&fd) {
            self.budget.wait(fd, &mut s.budget);
        }
    }

    /// Charges `n` bytes handed to the link by `fd` (its own count and the budget's).
    fn charge_send(&mut self, fd: Fd, n: usize) -> Result<(), SocketError> {
        let s = self.sockets.get_mut(&fd).ok_or(SocketError::BadHandle)?;
        self.budget.charge(fd, &mut s.budget, s.in_flight, n);
        s.in_flight += n;
        if s.send_room() == 0 {
            self.budget.own_buffer_full(&mut s.budget);
        }
        if self.budget.prune_due(self.sockets.len()) {
            for fd in self.budget.take_counting() {
                if let Some(s) = self.sockets.get_mut(&fd) {
                    self.budget.relist(fd, &mut s.budget, s.in_flight);
                }
            }
        }
        Ok(())
    }

    /// Gives back up to `n` of `fd`'s bytes in flight (acknowledged, or never taken).
    fn release_send(&mut self, fd: Fd, n: usize) {
        if let Some(s) = self.sockets.get_mut(&fd) {
            self.budget.release(&mut s.budget, s.in_flight, n);
            s.in_flight -= n.min(s.in_flight);
        }
    }

    /// `fd`'s bytes in flight will never be acknowledged (it failed, or its count restarts).
    fn drop_in_flight(&mut self, fd: Fd) {
        if let Some(s) = self.sockets.get_mut(&fd) {
            self.budget.forget(&mut s.budget, std::mem::take(&mut s.in_flight));
        }
    }

    /// One step of a wait: resets `idle` after progress, otherwise idles the link.
    fn idle_step(&mut self, progressed: bool, idle: &mut u32) -> Result<(), SocketError> {
        if progressed {
            *idle = 0;
            Ok(())
        } else {
            *idle = idle.saturating_add(1);
            self.link.idle(*idle)
        }
    }

    /// Pumps until `done` holds (true) or `deadline` passes (false).
    fn wait_until(
        &mut self,
        deadline: Option<Instant>,
        mut done: impl FnMut(&Self) -> bool,
    ) -> Result<bool, SocketError> {
        let mut idle = 0u32;
        loop {
            let progressed = self.pump()?;
            if done(self) {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            self.idle_step(progressed, &mut idle)?;
        }
    }

    /// Waits until `fd` is gone or a write would not block (within the send budget).
    fn wait_until_writable(&mut self, fd: Fd) -> Result<(), SocketError> {
        self.wait_until(None, |app| app.sockets.get(&fd).is_none_or(|s| s.writable(&app.budget))).map(|_| ())
    }

    /// Waits until `fd` is gone or `ready` holds for it.
    fn wait_for(&mut self, fd: Fd, ready: impl Fn(&SockEntry<L::RxBuf>) -> bool) -> Result<(), SocketError> {
        self.wait_until(None, |s| s.sockets.get(&fd).is_none_or(&ready)).map(|_| ())
    }

    /// The non-blocking rule: the first time, applies the link's news and says to look again
    /// (true); after that, `EAGAIN`.
    fn pump_once(&mut self, pumped: &mut bool) -> Result<bool, SocketError> {
        if std::mem::replace(pumped, true) {
            return Err(SocketError::WouldBlock);
        }
        self.pump()?;
        Ok(true)
    }

    /// Submits a request (pumping while the link has no room) and waits for its answer.
    fn request(&mut self, mut req: Request<L::TxBuf>) -> Result<Reply, SocketError> {
        let mut idle = 0u32;
        loop {
            match self.link.try_submit(req) {
                Ok(submitted) => return self.answer(submitted),
                Err(back) => req = back,
            }
            let progressed = self.pump()?;
            self.idle_step(progressed, &mut idle)?;
        }
    }

    /// Submits `req` if the link has room for it now (after one pump when it has not), and
    /// waits for its answer; gives `req` back while the link's ring stays full, never waiting
    /// for room (the non-blocking form of [`request`](Self::request)).
    fn request_now(
        &mut self,
        req: Request<L::TxBuf>,
    ) -> Result<Result<Reply, SocketError>, Request<L::TxBuf>> {
        let req = match self.link.try_submit(req) {
            Ok(submitted) => return Ok(self.answer(submitted)),
            Err(back) => back,
        };
        if let Err(e) = self.pump() {
            return Ok(Err(e));
        }
        match self.link.try_submit(req) {
            Ok(submitted) => Ok(self.answer(submitted)),
            Err(back) => Err(back),
        }
    }

    /// The answer to a submitted request: at once, or once the link replies.
    fn answer(&mut self, submitted: Submitted) -> Result<Reply, SocketError> {
        match submitted {
            Submitted::Answered(result) => result,
            Submitted::Pending(ticket) => self.await_reply(ticket),
        }
    }

    /// `fd`'s non-blocking send found the link's ring full: not writable until the link moves.
    fn wait_for_room(&mut self, fd: Fd) {
        if let Some(s) = self.sockets.get_mut(&fd) {
            if !s.no_link_room {
                s.no_link_room = true;
                self.room_waiters.push(fd);
            }
        }
    }

    fn await_reply(&mut self, ticket: u64) -> Result<Reply, SocketError> {
        self.wait_until(None, |s| s.replies.contains_key(&ticket))?;
        self.replies.remove(&ticket).unwrap_or(Err(SocketError::StackDown))
    }

    /// Tells the epoll sets of `fd` that its readiness may have changed.
    fn notify(&mut self, fd: Fd) {
        self.notify_grown(fd, Ready::all_kinds());
    }

    /// Tells `fd`'s epoll sets that its readiness of the kinds in `grown` may have grown.
    fn notify_grown(&mut self, fd: Fd, grown: Ready) {
        let Some(s) = self.sockets.get(&fd) else { return };
        for ep in &s.epolls {
            if let Some(set) = self.epolls.get_mut(ep) {
                set.notify_grown(fd, grown);
            }
        }
    }
}

impl<L: Link> Drop for AppSockets<L> {
    fn drop(&mut self) {
        // Close what is left, so connections end cleanly instead of lingering in the provider
        // (best effort: no waiting for room).
        let fds: Vec<Fd> = self.sockets.keys().copied().collect();
        for fd in fds {
            if let Some(s) = self.sockets.remove(&fd) {
                let abort = !s.rxq.is_empty();
                drop(s);
                let _ = self.link.try_submit(Request::Close { fd, abort });
            }
        }
    }
}
