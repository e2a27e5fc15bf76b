//! `GuestDevice` over a transport with two queue pairs (each served by a scripted device):
//! one `GuestSockets` per pair, each on its own thread; a dead device fails every pair.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::fake::{self, Alive, Answer, FakeDevice};
use slimtcp_abi::{Done, HelloInfo, Request, RequestBody, RxMessage, SocketId, Version};
use slimtcp_api::{Proto, SocketApi, SocketError};
use slimtcp_guest::transport::{Link, QueuePair, Transport};
use slimtcp_guest::{GuestConfig, GuestDevice, GuestError};

const PEER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 5201);

fn info() -> HelloInfo {
    common::hello_info(64)
}

/// A device for pair `k`: socket ids `100 + k`, stream data echoed back, chains returned at once.
fn echo_pair(k: u32) -> impl FnMut(&Request, &[u8]) -> Answer + Send {
    move |req, payload| {
        let done = |socket, d| RxMessage::Complete {
            cookie: req.cookie,
            socket,
            op: req.op().code(),
            result: Ok(d),
        };
        let sid = SocketId(100 + k);
        let messages = match req.body {
            RequestBody::Hello { .. } => {
                vec![RxMessage::HelloDone {
                    cookie: req.cookie,
                    version: Version::CURRENT,
                    result: Ok(info()),
                }]
            }
            RequestBody::Socket { .. } => vec![done(sid, Done::value(0))],
            RequestBody::Send { len } => {
                assert_eq!(req.socket, sid, "pair {k} sees only its own sockets");
                assert_eq!(payload.len(), len as usize);
                return Answer {
                    messages: payload
                        .chunks(2048 - 40)
                        .map(|c| (RxMessage::Data { socket: sid, len: c.len() as u32 }, c.to_vec()))
                        .collect(),
                    hold: false,
                };
            }
            _ if req.flags.is_quiet() => vec![],
            _ => vec![done(req.socket, Done { value: 0, addr: SocketAddrV4::new(info().addr, 49152) })],
        };
        Answer { messages: messages.into_iter().map(|m| (m, Vec::new())).collect(), hold: false }
    }
}

/// Two fake pairs sharing one liveness flag, as one device.
#[derive(Debug)]
struct TwoPairs {
    pairs: Vec<Option<QueuePair>>,
    link: Arc<Alive>,
}

impl Transport for TwoPairs {
    fn queue_pairs(&self) -> usize {
        self.pairs.len()
    }
    fn alive(&self) -> bool {
        self.link.alive()
    }
    fn take_queue_pair(&mut self, index: usize) -> Result<QueuePair, GuestError> {
        self.pairs.get_mut(index).and_then(Option::take).ok_or(GuestError::NoSuchQueuePair(index))
    }
}

fn two_pair_device() -> (GuestDevice, Arc<Alive>, Vec<FakeDevice>) {
    let link = Arc::new(Alive(AtomicBool::new(true)));
    let mut pairs = Vec::new();
    let mut devs = Vec::new();
    for k in 0..2u32 {
        let (mut qp, dev) = fake::start(64, Box::new(echo_pair(k)));
        qp.index = k as usize;
        qp.link = link.clone();
        pairs.push(Some(qp));
        devs.push(dev);
    }
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let dev = GuestDevice::new(Box::new(TwoPairs { pairs, link: link.clone() }), cfg);
    (dev, link, devs)
}

#[test]
fn each_pair_serves_its_own_thread_with_its_own_sockets() {
    let (mut dev, _link, _devs) = two_pair_device();
    assert_eq!(dev.queue_pairs(), 2);
    let apis = dev.take_all().expect("hello on both pairs");
    assert!(dev.take_all().expect("nothing left").is_empty(), "each pair is handed out once");
    drop(dev);
    let threads: Vec<_> = apis
        .into_iter()
        .enumerate()
        .map(|(k, mut api)| {
            std::thread::spawn(move || {
                assert_eq!(api.queue_pair(), k);
                let fd = api.socket(Proto::Tcp).expect("socket");
                api.connect(fd, PEER).expect("connect");
                let msg: Vec<u8> = (0..10_000u32).map(|i| (i as u8) ^ (k as u8 * 0x55)).collect();
                let mut sent = 0;
                while sent < msg.len() {
                    sent += api.send(fd, &msg[sent..]).expect("send");
                }
                let mut back = vec![0u8; msg.len()];
                let mut got = 0;
                while got < back.len() {
                    got += api.recv(fd, &mut back[got..]).expect("recv");
                }
                assert_eq!(back, msg, "pair {k} gets its own bytes back");
            })
        })
        .collect();
    for t in threads {
        t.join().expect("pair thread");
    }
}

#[test]
fn a_dead_device_fails_every_pair_with_enetdown() {
    let (mut dev, link, _devs) = two_pair_device();
    let mut apis = dev.take_all().expect("hello on both pairs");
    let fds: Vec<_> = apis
        .iter_mut()
        .map(|api| {
            let fd = api.socket(Proto::Tcp).expect("socket");
            api.connect(fd, PEER).expect("connect");
            fd
        })
        .collect();
    link.0.store(false, Ordering::Relaxed);
    assert!(!dev.alive());
    for (api, fd) in apis.iter_mut().zip(fds) {
        let mut b = [0u8; 8];
        assert_eq!(api.recv(fd, &mut b), Err(SocketError::StackDown), "pair {}", api.queue_pair());
        assert_eq!(api.socket(Proto::Tcp), Err(SocketError::StackDown), "and stays down");
    }
}

#[test]
fn a_polling_application_also_sees_a_dead_device() {
    use slimtcp_api::{EpollEvent, EpollOp, Ready, SockOpt};
    let (mut dev, link, _devs) = two_pair_device();
    let mut api = dev.take(1).expect("hello on pair 1");
    let fd = api.socket(Proto::Tcp).expect("socket");
    api.connect(fd, PEER).expect("connect");
    api.setsockopt(fd, SockOpt::NonBlocking(true)).expect("nonblocking");
    let ep = api.epoll_create().expect("epoll");
    api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::IN, data: 0 }).expect("add");
    let mut events = [EpollEvent::default(); 4];
    assert_eq!(api.epoll_wait(ep, &mut events, 0), Ok(0));
    link.0.store(false, Ordering::Relaxed);
    // Only zero-timeout waits and non-blocking reads: the library never sleeps, yet notices.
    let mut b = [0u8; 8];
    let mut result = Ok(0);
    for _ in 0..100_000 {
        result = api.epoll_wait(ep, &mut events, 0).and_then(|_| api.recv(fd, &mut b));
        if result != Err(SocketError::WouldBlock) {
            break;
        }
    }
    assert_eq!(result, Err(SocketError::StackDown));
}
