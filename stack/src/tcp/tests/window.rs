use super::harness::*;
use crate::tcp::{SeqNumber, TcpConfig};
use crate::wire::tcp::TcpFlags;

#[test]
fn receive_window_is_free_buffer_and_never_shrinks() {
    let mut c = established(cfg(), 1000); // rx buffer 1000
    for i in 0..9u32 {
        feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1 + i * 100, Some(ISS + 1), 1000, &[1u8; 100]));
    }
    let segs = out(&mut c, ms(20));
    assert_eq!(segs[0].0.window_len, 100);
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 901, Some(ISS + 1), 1000, &[1u8; 100]));
    let segs = out(&mut c, ms(21));
    assert_eq!(segs[0].0.window_len, 0, "buffer full: zero window");
    // Data beyond the zero window is not accepted, and answered with an ACK.
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 1001, Some(ISS + 1), 1000, &[1u8; 10]));
    assert_eq!(c.recv_queued(), 1000);
    let segs = out(&mut c, ms(22));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1001));
}

#[test]
fn reading_sends_a_window_update_once_it_matters() {
    let mut c = established(cfg(), 1000);
    for i in 0..10u32 {
        feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1 + i * 100, Some(ISS + 1), 1000, &[1u8; 100]));
    }
    out(&mut c, ms(20));
    let mut buf = [0u8; 50];
    c.recv(&mut buf);
    assert!(out(&mut c, ms(21)).is_empty(), "50 bytes is less than one MSS: no update");
    c.recv(&mut buf);
    let segs = out(&mut c, ms(22));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].0.window_len, 100);
}

#[test]
fn window_larger_than_64k_uses_the_scale() {
    let config = TcpConfig { rx_buffer: 1 << 20, window_scale: Some(5), ..cfg() };
    let mut c = crate::tcp::Connection::connect(config, local(), remote(), SeqNumber(ISS));
    let syn = out(&mut c, ms(0));
    assert_eq!(syn[0].0.window_len, u16::MAX, "SYN windows are unscaled, capped at 65535");
    let mut s = syn_ack(1000);
    s.0.window_scale = Some(0);
    feed(&mut c, ms(1), s);
    let segs = out(&mut c, ms(1));
    assert_eq!(segs[0].0.window_len, ((1 << 20) >> 5) as u16);
}

#[test]
fn zero_window_is_probed_until_it_opens() {
    let mut c = established(cfg(), 0);
    c.send(&[3u8; 300]).expect("send");
    assert!(out(&mut c, ms(20)).is_empty(), "zero window: nothing sent");
    let deadline = c.poll_at().expect("persist timer armed");
    c.on_timer(deadline);
    let probe = out(&mut c, deadline);
    assert_eq!(probe.len(), 1);
    assert_eq!(probe[0].0.seq_number, SeqNumber(ISS), "probe uses SND.UNA - 1");
    assert!(probe[0].1.is_empty());
    // The peer answers with an open window: data flows.
    feed(&mut c, deadline, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 200, b""));
    let segs = out(&mut c, deadline);
    assert_eq!(segs.iter().map(|s| s.1.len()).sum::<usize>(), 200);
}

#[test]
fn zero_window_probes_back_off_and_continue_while_answered() {
    let mut c = established(cfg(), 0);
    c.send(&[3u8; 10]).expect("send");
    out(&mut c, ms(20));
    let mut last = ms(20);
    let mut gaps = Vec::new();
    for _ in 0..12 {
        let t = c.poll_at().expect("persist");
        gaps.push(t - last);
        last = t;
        c.on_timer(t);
        assert_eq!(out(&mut c, t).len(), 1);
        feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 0, b""));
    }
    assert!(gaps[2] > gaps[1], "backoff");
    assert!(c.error().is_none(), "answered probes never time out");
}

#[test]
fn sender_avoids_silly_windows_and_probes_instead() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 1000]).expect("send");
    out(&mut c, ms(20));
    // The peer acknowledges everything but offers only 10 bytes.
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1001), 10, b""));
    c.send(&[1u8; 500]).expect("send");
    assert!(out(&mut c, ms(21)).is_empty(), "a 10-byte window is not worth a segment");
    let t = c.poll_at().expect("persist timer guards against a lost window update");
    c.on_timer(t);
    let probe = out(&mut c, t);
    assert_eq!(probe.len(), 1);
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1001), 1000, b""));
    assert_eq!(out(&mut c, t).iter().map(|s| s.1.len()).sum::<usize>(), 500);
}
