//! [`SocketApi`] for [`AppSockets`]: the trait surface over the inherent operations, and the
//! epoll sets.

use std::net::SocketAddrV4;

use super::{AppSockets, Link};
use crate::{
    EpollEvent, EpollFd, EpollOp, EpollSet, Fd, Proto, Ready, Shutdown, SockOpt, SockOptName, SocketApi,
    SocketError,
};

impl<L: Link> SocketApi for AppSockets<L> {
    type TxBuf = L::TxBuf;
    type RxBuf = L::RxBuf;

    fn socket(&mut self, proto: Proto) -> Result<Fd, SocketError> {
        self.do_socket(proto)
    }

    fn bind(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        self.do_bind(fd, addr)
    }

    fn listen(&mut self, fd: Fd, backlog: usize) -> Result<(), SocketError> {
        self.do_listen(fd, backlog)
    }

    fn accept(&mut self, fd: Fd) -> Result<(Fd, SocketAddrV4), SocketError> {
        self.do_accept(fd)
    }

    fn connect(&mut self, fd: Fd, addr: SocketAddrV4) -> Result<(), SocketError> {
        self.do_connect(fd, addr)
    }

    fn shutdown(&mut self, fd: Fd, how: Shutdown) -> Result<(), SocketError> {
        self.do_shutdown(fd, how)
    }

    fn close(&mut self, fd: Fd) -> Result<(), SocketError> {
        self.do_close(fd)
    }

    fn setsockopt(&mut self, fd: Fd, opt: SockOpt) -> Result<(), SocketError> {
        self.do_setsockopt(fd, opt)
    }

    fn getsockopt(&mut self, fd: Fd, name: SockOptName) -> Result<SockOpt, SocketError> {
        self.do_getsockopt(fd, name)
    }

    fn local_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        self.do_local_addr(fd)
    }

    fn peer_addr(&self, fd: Fd) -> Result<SocketAddrV4, SocketError> {
        self.do_peer_addr(fd)
    }

    fn send(&mut self, fd: Fd, data: &[u8]) -> Result<usize, SocketError> {
        self.do_send(fd, data)
    }

    fn recv(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, SocketError> {
        self.do_recv(fd, buf)
    }

    fn send_to(&mut self, fd: Fd, data: &[u8], dst: SocketAddrV4) -> Result<usize, SocketError> {
        self.do_send_to(fd, data, dst)
    }

    fn recv_from(&mut self, fd: Fd, buf: &mut [u8]) -> Result<(usize, SocketAddrV4), SocketError> {
        self.do_recv_from(fd, buf)
    }

    fn alloc_tx(&mut self, len: usize) -> Result<L::TxBuf, SocketError> {
        self.do_alloc_tx(len)
    }

    fn send_zc(&mut self, fd: Fd, bufs: &mut Vec<L::TxBuf>) -> Result<usize, SocketError> {
        self.do_send_zc(fd, bufs)
    }

    fn recv_zc(&mut self, fd: Fd) -> Result<Option<L::RxBuf>, SocketError> {
        self.do_recv_zc(fd)
    }

    fn epoll_create(&mut self) -> Result<EpollFd, SocketError> {
        let ep = EpollFd(self.next_epoll);
        self.next_epoll = self.next_epoll.checked_add(1).ok_or(SocketError::TooManySockets)?;
        self.epolls.insert(ep, EpollSet::default());
        Ok(ep)
    }

    fn epoll_ctl(&mut self, ep: EpollFd, op: EpollOp, fd: Fd, event: EpollEvent) -> Result<(), SocketError> {
        let s = self.sockets.get_mut(&fd).ok_or(SocketError::BadHandle)?;
        let set = self.epolls.get_mut(&ep).ok_or(SocketError::BadHandle)?;
        set.ctl(op, fd, event)?;
        match op {
            EpollOp::Add => s.epolls.push(ep),
            EpollOp::Delete => s.epolls.retain(|e| *e != ep),
            EpollOp::Modify => {}
        }
        Ok(())
    }

    fn epoll_wait(
        &mut self,
        ep: EpollFd,
        events: &mut [EpollEvent],
        timeout_ms: i32,
    ) -> Result<usize, SocketError> {
        if events.is_empty() || !self.epolls.contains_key(&ep) {
            return Err(if events.is_empty() { SocketError::InvalidInput } else { SocketError::BadHandle });
        }
        // A poll (timeout 0) reads no clock: busy applications call it in their inner loop.
        let deadline = u64::try_from(timeout_ms)
            .ok()
            .filter(|&ms| ms > 0)
            .map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms));
        let mut idle = 0u32;
        loop {
            let progressed = self.pump()?;
            let (sockets, budget, held) = (&self.sockets, &self.budget, &mut self.budget_held);
            let set = self.epolls.get_mut(&ep).ok_or(SocketError::BadHandle)?;
            let probe = |fd, wanted: Ready| {
                let Some(s) = sockets.get(&fd) else { return Ready::empty() };
                // Wanted writable and kept from it by the budget only: it waits for its turn,
                // and its wake-up puts it back on the ready list.
                if wanted.contains(Ready::OUT) && s.held_by_budget(budget) {
                    held.push(fd);
                }
                s.readiness(budget)
            };
            let found = set.collect(probe, events);
            let mut held = std::mem::take(&mut self.budget_held);
            for fd in held.drain(..) {
                self.wait_for_budget(fd);
            }
            self.budget_held = held;
            if found > 0 || timeout_ms == 0 || deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Ok(found);
            }
            self.idle_step(progressed, &mut idle)?;
        }
    }

    fn epoll_close(&mut self, ep: EpollFd) -> Result<(), SocketError> {
        self.epolls.remove(&ep).ok_or(SocketError::BadHandle)?;
        for s in self.sockets.values_mut() {
            s.epolls.retain(|e| *e != ep);
        }
        Ok(())
    }
}
