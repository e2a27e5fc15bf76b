//! `udp`: datagrams to a UDP echo server with send_to / recv_from; each answer's source
//! address and bytes are checked. A datagram lost on the way is sent again (at most 3 times).

use std::net::{Ipv4Addr, SocketAddrV4};

use slimtcp::api::{EpollEvent, EpollOp, Proto, Ready, SocketApi};
use slimtcp_guest::DeviceSpec;
use slimtcp_testkit::data::pattern;

use crate::{api, sock, AppError};

const TRIES: usize = 3;

pub fn run(
    device: &DeviceSpec,
    memory: usize,
    server: SocketAddrV4,
    count: usize,
) -> Result<String, AppError> {
    let mut api = api(device, memory)?;
    let fd = api.socket(Proto::Udp).map_err(sock("socket"))?;
    api.bind(fd, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).map_err(sock("bind"))?;
    let ep = api.epoll_create().map_err(sock("epoll_create"))?;
    api.epoll_ctl(ep, EpollOp::Add, fd, EpollEvent { events: Ready::IN, data: 0 })
        .map_err(sock("epoll_ctl"))?;
    let mut events = [EpollEvent { events: Ready::empty(), data: 0 }; 4];
    let mut back = vec![0u8; 2048];
    let mut resent = 0;
    let mut bytes = 0;
    let mut sent_bytes = 0;
    for i in 0..count {
        let size = 1 + (i * 37) % 1400;
        let mut msg = vec![0u8; size];
        pattern(500 + i as u64, 0, &mut msg);
        let mut answered = false;
        for attempt in 0..TRIES {
            resent += usize::from(attempt > 0);
            api.send_to(fd, &msg, server).map_err(sock("send_to"))?;
            sent_bytes += size;
            // Earlier duplicates may still arrive: skip answers to other datagrams.
            while api.epoll_wait(ep, &mut events, 1000).map_err(sock("epoll_wait"))? > 0 {
                let (n, from) = api.recv_from(fd, &mut back).map_err(sock("recv_from"))?;
                if from != server {
                    return Err(AppError::Check(format!("datagram {i}: answer from {from}, not {server}")));
                }
                if back[..n] == msg[..] {
                    answered = true;
                    break;
                }
            }
            if answered {
                break;
            }
        }
        if !answered {
            return Err(AppError::Check(format!("datagram {i} ({size} B): no echo after {TRIES} tries")));
        }
        bytes += size;
    }
    api.close(fd).map_err(sock("close"))?;
    Ok(format!("{count} datagrams ({bytes} B) echoed from {server}, {resent} sent again, udp_sent_bytes={sent_bytes}"))
}
