//! [`HostLink`]: the host runtime's [`Link`]: requests go to the worker over the request ring,
//! its events come back over the event ring, and socket options live here until `listen` or
//! `connect` hands them to the worker.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;

use slimtcp_api::app::{Event, Limits, Link, Reply, Request, Submitted};
use slimtcp_api::{Fd, Proto, SocketError, ZeroCopyTx};

use super::buffers::{ReleaseQueue, RxBuf, TxBuf, TxPool, LARGE_TX};
use super::driver::{self, AppEnd};
use super::messages::{Event as WorkerEvent, Reply as WorkerReply, Request as WorkerRequest};
use super::options::{effective_config, SetEffect};
use crate::tcp::TcpConfig;

/// Largest UDP payload in one Ethernet frame of 1500 bytes.
const MAX_DATAGRAM: usize = 1472;
/// Zero-copy transmit buffers the application may hold or have in flight at once.
const MAX_TX_BUFFERS: usize = 1 << 20;

/// What the host link keeps per socket.
#[derive(Debug, Clone)]
pub(super) struct HostSock {
    /// The connection settings its options give.
    pub config: TcpConfig,
    /// The application chose the window scale.
    pub window_scale_explicit: bool,
    /// Keepalive and user timeout as set (applied through `config` at listen/connect).
    pub live: crate::tcp::LivenessOptions,
    /// The port `bind` asked for (TCP binds locally; the worker learns it with listen/connect).
    pub bound_port: Option<u16>,
    /// The socket exists on the worker.
    pub on_worker: bool,
}

/// A request waiting for the worker's reply (the worker answers in order).
#[derive(Debug)]
struct Pending {
    ticket: u64,
    fd: Fd,
    kind: PendingKind,
}

#[derive(Debug, Clone, Copy)]
enum PendingKind {
    Listen { port: u16 },
    Connect,
    UdpBind,
    UdpConnect,
    Accept { new_fd: Fd },
}

/// The host runtime's link (see the module documentation).
#[derive(Debug)]
pub struct HostLink {
    pub(super) end: AppEnd,
    pub(super) releases: Arc<ReleaseQueue>,
    pub(super) pool: TxPool,
    pub(super) local_ip: Ipv4Addr,
    pub(super) defaults: TcpConfig,
    pub(super) max_mss: u16,
    pub(super) burst: usize,
    pub(super) max_sockets: usize,
    pub(super) socks: HashMap<Fd, HostSock>,
    pending: VecDeque<Pending>,
    next_ticket: u64,
}

impl HostLink {
    /// The link over the application's ends of the rings.
    pub(super) fn new(
        end: AppEnd,
        releases: Arc<ReleaseQueue>,
        local_ip: Ipv4Addr,
        defaults: TcpConfig,
        max_mss: u16,
        burst: usize,
        max_sockets: usize,
    ) -> Self {
        HostLink {
            end,
            releases,
            pool: TxPool::default(),
            local_ip,
            defaults,
            max_mss,
            burst,
            max_sockets,
            socks: HashMap::new(),
            pending: VecDeque::new(),
            next_ticket: 0,
        }
    }

    pub(super) fn sock(&self, fd: Fd) -> Result<&HostSock, SocketError> {
        self.socks.get(&fd).ok_or(SocketError::BadHandle)
    }

    pub(super) fn sock_mut(&mut self, fd: Fd) -> Result<&mut HostSock, SocketError> {
        self.socks.get_mut(&fd).ok_or(SocketError::BadHandle)
    }

    /// Whether a request can go on the ring now (`StackDown` once the worker stopped).
    fn room(&self) -> Result<bool, SocketError> {
        self.end.check_alive()?;
        Ok(self.end.requests.slots() > 0)
    }

    /// Puts a request on the ring (after [`room`](Self::room) said yes).
    fn push(&mut self, req: WorkerRequest) -> Submitted {
        match self.end.requests.push(req) {
            Ok(()) => Submitted::Answered(Ok(Reply::Done)),
            Err(_) => Submitted::Answered(Err(SocketError::NoBuffers)),
        }
    }

    /// Puts a replying request on the ring and remembers what its reply means.
    fn push_call(&mut self, fd: Fd, kind: PendingKind, req: WorkerRequest) -> Submitted {
        match self.push(req) {
            Submitted::Answered(Ok(_)) => {
                self.next_ticket += 1;
                let ticket = self.next_ticket;
                self.pending.push_back(Pending { ticket, fd, kind });
                Submitted::Pending(ticket)
            }
            other => other,
        }
    }

    /// Translates a request for the worker; `Err` gives it back when the ring is full.
    fn submit(&mut self, req: Request<TxBuf>) -> Result<Submitted, Request<TxBuf>> {
        let answered = |r: Result<Reply, SocketError>| Ok(Submitted::Answered(r));
        // Requests answered here, without the worker.
        match &req {
            Request::Open { fd, .. } => {
                let sock = HostSock {
                    config: self.defaults.clone(),
                    window_scale_explicit: false,
                    live: crate::tcp::LivenessOptions::default(),
                    bound_port: None,
                    on_worker: false,
                };
                self.socks.insert(*fd, sock);
                return answered(Ok(Reply::Done));
            }
            Request::Bind { fd, proto: Proto::Tcp, addr } => {
                return answered(self.sock_mut(*fd).map(|s| {
                    s.bound_port = Some(addr.port());
                    Reply::Addr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, addr.port()))
                }));
            }
            Request::Listen { fd, .. } => match self.sock(*fd).map(|s| s.bound_port) {
                Ok(Some(p)) if p != 0 => {}
                Ok(_) => return answered(Err(SocketError::InvalidInput)),
                Err(e) => return answered(Err(e)),
            },
            Request::Adopt { .. } => return answered(Err(SocketError::NotSupported)),
            Request::Shutdown { write: false, .. } => return answered(Ok(Reply::Done)),
            Request::Close { fd, .. } if !self.socks.get(fd).is_some_and(|s| s.on_worker) => {
                self.socks.remove(fd);
                return answered(Ok(Reply::Done));
            }
            Request::SetOption { fd, opt } => match self.set_option(*fd, *opt) {
                Ok(SetEffect::Local) => return answered(Ok(Reply::Done)),
                Ok(SetEffect::Burst) => {}
                Err(e) => return answered(Err(e)),
            },
            Request::GetOption { fd, name } => {
                return answered(self.get_option(*fd, *name).map(Reply::Option))
            }
            _ => {}
        }
        match self.room() {
            Ok(true) => {}
            Ok(false) => return Err(req),
            Err(e) => return answered(Err(e)),
        }
        Ok(match req {
            Request::Bind { fd, addr, .. } => {
                self.push_call(fd, PendingKind::UdpBind, WorkerRequest::UdpBind { fd, port: addr.port() })
            }
            Request::Listen { fd, backlog } => {
                let s = match self.sock(fd) {
                    Ok(s) => s,
                    Err(e) => return answered(Err(e)),
                };
                let port = s.bound_port.unwrap_or(0);
                let config = Box::new(effective_config(s));
                self.push_call(
                    fd,
                    PendingKind::Listen { port },
                    WorkerRequest::Listen { fd, port, backlog, config },
                )
            }
            Request::Accept { fd, new_fd } => {
                let Ok(listener) = self.sock(fd) else { return answered(Err(SocketError::BadHandle)) };
                let conn = HostSock {
                    config: listener.config.clone(),
                    window_scale_explicit: false,
                    live: listener.live,
                    bound_port: None,
                    on_worker: true,
                };
                self.socks.insert(new_fd, conn);
                self.push_call(fd, PendingKind::Accept { new_fd }, WorkerRequest::Accept { fd, new_fd })
            }
            Request::Connect { fd, remote } => {
                let Ok(s) = self.sock_mut(fd) else { return answered(Err(SocketError::BadHandle)) };
                s.on_worker = true;
                let config = Box::new(effective_config(s));
                let local_port = s.bound_port.filter(|p| *p != 0);
                self.push_call(
                    fd,
                    PendingKind::Connect,
                    WorkerRequest::Connect { fd, local_port, remote, config },
                )
            }
            Request::UdpConnect { fd, remote } => {
                self.push_call(fd, PendingKind::UdpConnect, WorkerRequest::UdpConnect { fd, peer: remote })
            }
            Request::Send { fd, buf } => self.push(WorkerRequest::Send { fd, buf }),
            Request::SendTo { fd, dst, buf } => self.push(WorkerRequest::UdpSend { fd, dst, buf }),
            Request::Shutdown { fd, .. } => self.push(WorkerRequest::Shutdown { fd }),
            Request::Close { fd, abort } => {
                self.socks.remove(&fd);
                self.push(WorkerRequest::Close { fd, abort })
            }
            Request::SetOption { opt: slimtcp_api::SockOpt::Burst(burst), .. } => {
                let done = self.push(WorkerRequest::SetBurst { burst });
                if matches!(done, Submitted::Answered(Ok(_))) {
                    self.burst = burst;
                }
                done
            }
            _ => Submitted::Answered(Err(SocketError::InvalidInput)),
        })
    }

    /// The worker's reply to the oldest pending request, as the application side's reply.
    fn on_reply(&mut self, fd: Fd, result: Result<WorkerReply, SocketError>) -> Option<Event<RxBuf>> {
        let Some(p) = self.pending.pop_front() else {
            log::error!("reply for {fd} with no request pending");
            return None;
        };
        let result = if p.fd != fd {
            log::error!("reply for {fd} while waiting for {}", p.fd);
            Err(SocketError::InvalidInput)
        } else {
            result
        };
        let result = match (p.kind, result) {
            (PendingKind::Listen { port }, Ok(_)) => {
                self.set_on_worker(p.fd, true);
                Ok(Reply::Addr(SocketAddrV4::new(self.local_ip, port)))
            }
            (PendingKind::UdpBind, Ok(WorkerReply::Bound { local })) => {
                if let Some(s) = self.socks.get_mut(&p.fd) {
                    s.on_worker = true;
                    s.bound_port = Some(local.port());
                }
                Ok(Reply::Addr(local))
            }
            (PendingKind::Connect, Ok(WorkerReply::Bound { local })) => Ok(Reply::Addr(local)),
            (PendingKind::Accept { .. }, Ok(WorkerReply::Accepted { local, peer, more })) => {
                Ok(Reply::Accepted { local, peer, more })
            }
            (PendingKind::UdpConnect, Ok(_)) => Ok(Reply::Done),
            (kind, result) => {
                match kind {
                    PendingKind::Connect | PendingKind::UdpBind => self.set_on_worker(p.fd, false),
                    PendingKind::Accept { new_fd } => {
                        self.socks.remove(&new_fd);
                    }
                    _ => {}
                }
                Err(result.err().unwrap_or(SocketError::InvalidInput))
            }
        };
        Some(Event::Reply { ticket: p.ticket, result })
    }

    fn set_on_worker(&mut self, fd: Fd, on: bool) {
        if let Some(s) = self.socks.get_mut(&fd) {
            s.on_worker = on;
        }
    }

    /// One worker event as the application side's event.
    fn translate(&mut self, event: WorkerEvent) -> Option<Event<RxBuf>> {
        Some(match event {
            WorkerEvent::Reply { fd, result } => return self.on_reply(fd, result),
            WorkerEvent::Connected { fd } => Event::Connected { fd, local: None },
            WorkerEvent::Data { fd, buf } => {
                Event::Data { fd, buf: RxBuf::new(buf, fd, self.releases.clone()) }
            }
            WorkerEvent::Eof { fd } => Event::Eof { fd },
            WorkerEvent::Failed { fd, error } => Event::Failed { fd, error },
            WorkerEvent::Acceptable { fd } => Event::Acceptable { fd },
            WorkerEvent::SendDone { fd, bufs } => {
                let bytes = bufs.iter().map(TxBuf::len).sum();
                for b in bufs {
                    self.pool.recycle(b);
                }
                Event::SendDone { fd, bytes }
            }
            WorkerEvent::Datagram { fd, from, buf } => {
                Event::Datagram { fd, from, buf: RxBuf::new(buf, fd, self.releases.clone()) }
            }
        })
    }
}

impl Link for HostLink {
    type TxBuf = TxBuf;
    type RxBuf = RxBuf;

    fn limits(&self) -> Limits {
        Limits {
            max_sockets: self.max_sockets,
            max_datagram: MAX_DATAGRAM,
            default_sndbuf: self.defaults.tx_buffer,
            max_sndbuf: usize::MAX,
            max_tx_buffers: MAX_TX_BUFFERS,
            max_tx_len: LARGE_TX,
            local_ip: Some(self.local_ip),
        }
    }

    fn try_submit(&mut self, req: Request<TxBuf>) -> Result<Submitted, Request<TxBuf>> {
        self.submit(req)
    }

    fn pump(&mut self, events: &mut Vec<Event<RxBuf>>) -> Result<bool, SocketError> {
        let drove = self.end.drive()?;
        let mut got = false;
        while let Ok(event) = self.end.events.pop() {
            got = true;
            events.extend(self.translate(event));
        }
        Ok(drove || got)
    }

    fn idle(&mut self, idle_steps: u32) -> Result<(), SocketError> {
        driver::back_off(idle_steps);
        Ok(())
    }

    fn alloc(&mut self, len: usize) -> Option<TxBuf> {
        let mut buf = self.pool.alloc(len)?;
        buf.set_len(len);
        Some(buf)
    }

    fn recycle(&mut self, buf: TxBuf) {
        self.pool.recycle(buf);
    }

    fn tx_outstanding(&self) -> usize {
        self.pool.outstanding()
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        // A final step so an inline worker sees the closes the application side queued.
        let _ = self.end.drive();
    }
}
