//! Zero-copy ownership in the host runtime, in both modes: a transmit buffer accepted by
//! `send_zc` is not handed back before the peer's ACK for its bytes arrives; a received buffer
//! is never reused (or changed) while the application holds it, and the bytes it holds keep
//! occupying the receive window until it is dropped.

mod runtime_pair;

use std::time::{Duration, Instant};

use runtime_pair::{pair, Mode, PairConfig};
use slimtcp::api::{EpollEvent, EpollOp, Fd, Ready, Shutdown, SockOpt, SocketApi, SocketError, ZeroCopyTx};
use slimtcp::runtime::HostSockets;
use slimtcp_testkit::data::{pattern, pattern_mismatch};
use slimtcp_testkit::wait::wait_for;

/// Lets both sides run for `d`.
fn run_for(p: &mut runtime_pair::Pair, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        p.client.progress().expect("client");
        p.server.progress().expect("server");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn tx_buffer_comes_back_only_after_the_ack(mode: Mode) {
    let mut p = pair(mode, PairConfig::for_data());
    let (c, conn) = p.connected(80, &[]);
    // From now on the client hears nothing: the server's ACKs are lost.
    p.client_gate.close();
    let mut buf = p.client.alloc_tx(1000).expect("alloc_tx");
    pattern(5, 0, buf.space_mut());
    let ptr = buf.as_ptr();
    assert_eq!(p.client.send_zc(c, &mut vec![buf]), Ok(1));
    // The peer has the bytes ...
    let got = p.server.recv_zc(conn).expect("recv_zc").expect("data, not end of stream");
    assert_eq!(pattern_mismatch(5, 0, got.as_ref()), None);
    assert_eq!(got.as_ref().len(), 1000);
    // ... but the ACK never reached the sender: the buffer stays with the stack.
    run_for(&mut p, Duration::from_millis(50));
    assert_eq!(p.client.tx_buffers_outstanding(), 1, "held until acknowledged");
    // The ACK of a retransmission gets through: the buffer is recycled, and reused next.
    p.client_gate.open();
    assert!(
        wait_for(Duration::from_secs(5), || {
            p.client.progress().expect("client");
            p.server.progress().expect("server");
            p.client.tx_buffers_outstanding() == 0
        }),
        "returned once acknowledged"
    );
    let again = p.client.alloc_tx(1000).expect("alloc_tx");
    assert_eq!(again.as_ptr(), ptr, "the acknowledged buffer is the one recycled");
}

fn held_rx_buffers_are_never_reused_or_changed(mode: Mode) {
    let mut p = pair(mode, PairConfig::for_data());
    let (c, conn) = p.connected(81, &[]);
    const LEN: u64 = 4 << 20;
    let (client, server) = (&mut p.client, &mut p.server);
    std::thread::scope(|s| {
        s.spawn(move || send_pattern(client, c, 9, LEN));
        let mut held = Vec::new();
        let mut offset = 0u64;
        while held.len() < 16 {
            let b = server.recv_zc(conn).expect("recv_zc").expect("data");
            let copy = b.as_ref().to_vec();
            offset += copy.len() as u64;
            held.push((b, copy));
        }
        let ranges: Vec<(usize, usize)> = held
            .iter()
            .map(|(b, _)| (b.as_ref().as_ptr() as usize, b.as_ref().as_ptr() as usize + b.as_ref().len()))
            .collect();
        while let Some(b) = server.recv_zc(conn).expect("recv_zc") {
            let (start, end) =
                (b.as_ref().as_ptr() as usize, b.as_ref().as_ptr() as usize + b.as_ref().len());
            assert!(ranges.iter().all(|&(s, e)| end <= s || start >= e), "a held buffer's memory was reused");
            assert_eq!(pattern_mismatch(9, offset, b.as_ref()), None);
            offset += b.as_ref().len() as u64;
        }
        assert_eq!(offset, LEN);
        for (b, copy) in &held {
            assert_eq!(b.as_ref(), &copy[..], "a held buffer changed");
        }
    });
}

fn held_rx_buffers_keep_the_window_closed(mode: Mode) {
    const WINDOW: usize = 16 * 1024;
    const LEN: u64 = 256 * 1024;
    let mut p = pair(mode, PairConfig::for_data());
    let (c, conn) = p.connected(82, &[SockOpt::RecvBuffer(WINDOW)]);
    p.server.setsockopt(conn, SockOpt::NonBlocking(true)).expect("nonblocking");
    let ep = p.server.epoll_create().expect("epoll");
    p.server.epoll_ctl(ep, EpollOp::Add, conn, EpollEvent { events: Ready::IN, data: 0 }).expect("add");
    let (client, server) = (&mut p.client, &mut p.server);
    std::thread::scope(|s| {
        s.spawn(move || send_pattern(client, c, 3, LEN));
        // Hold everything that arrives for a while: never more than the window.
        let mut held = Vec::new();
        let mut events = [EpollEvent::default(); 1];
        let end = Instant::now() + Duration::from_millis(300);
        while Instant::now() < end {
            server.epoll_wait(ep, &mut events, 10).expect("wait");
            loop {
                match server.recv_zc(conn) {
                    Ok(Some(b)) => held.push(b),
                    Ok(None) => panic!("end of stream while the window is held"),
                    Err(SocketError::WouldBlock) => break,
                    Err(e) => panic!("recv_zc: {e}"),
                }
            }
        }
        let held_bytes: usize = held.iter().map(|b| b.as_ref().len()).sum();
        assert!(
            held_bytes > 0 && held_bytes <= WINDOW,
            "held {held_bytes} bytes with a {WINDOW}-byte window"
        );
        // Give them back: the rest flows.
        let mut total = held_bytes as u64;
        held.clear();
        server.setsockopt(conn, SockOpt::NonBlocking(false)).expect("blocking");
        while let Some(b) = server.recv_zc(conn).expect("recv_zc") {
            total += b.as_ref().len() as u64;
        }
        assert_eq!(total, LEN);
    });
}

fn send_pattern(api: &mut HostSockets, fd: Fd, seed: u64, len: u64) {
    let mut buf = vec![0u8; 8192];
    let mut offset = 0u64;
    while offset < len {
        let n = buf.len().min((len - offset) as usize);
        pattern(seed, offset, &mut buf[..n]);
        let mut sent = 0;
        while sent < n {
            sent += api.send(fd, &buf[sent..n]).expect("send");
        }
        offset += n as u64;
    }
    api.shutdown(fd, Shutdown::Write).expect("shutdown");
}

both_modes! {
    tx_buffer_comes_back_only_after_the_ack => tx_buffer_comes_back_only_after_the_ack;
    held_rx_buffers_are_never_reused_or_changed => held_rx_buffers_are_never_reused_or_changed;
    held_rx_buffers_keep_the_window_closed => held_rx_buffers_keep_the_window_closed;
}
