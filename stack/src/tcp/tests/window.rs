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

#[test]
fn a_timeout_into_a_zero_window_probes() {
    // Found by the soak: the segments in flight were lost, the receiver's window closed
    // meanwhile, and the update that reopened it was lost too. With data in flight the persist
    // timer stays off, and the timeout's go-back-N found no window to send into: nothing ever
    // went out again.
    let mut c = established(cfg(), 1000);
    c.send(&[4u8; 300]).expect("send");
    assert_eq!(out(&mut c, ms(20)).len(), 3);
    // All three are lost; the receiver's window closes.
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 0, b""));
    let t = c.poll_at().expect("retransmission timer");
    c.on_timer(t);
    let sent = out(&mut c, t);
    assert_eq!(sent.len(), 1, "one probe: {sent:?}");
    assert_eq!((sent[0].0.seq_number, sent[0].1.len()), (SeqNumber(ISS), 0), "SND.UNA - 1, no data");
    // A receiver that answers, still full, is alive: its connection never times out, and each
    // answer draws nothing more until the next timeout (no storm of resends).
    let mut now = t;
    for _ in 0..24 {
        feed(&mut c, now, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 0, b""));
        assert!(out(&mut c, now).is_empty(), "an answer with a shut window draws nothing");
        now = c.poll_at().expect("a timer while data waits");
        c.on_timer(now);
        assert_eq!(out(&mut c, now).len(), 1);
    }
    assert!(c.error().is_none(), "answered probes never time out: {:?}", c.error());
    // The answer says the window opened (the update that was lost): everything goes again.
    feed(&mut c, now, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
    let segs = out(&mut c, now);
    assert_eq!(segs.iter().map(|s| s.1.len()).sum::<usize>(), 300);
    // And a receiver that stops answering is given up as usual.
    let mut d = established(cfg(), 1000);
    d.send(&[4u8; 300]).expect("send");
    let _ = out(&mut d, ms(20));
    feed(&mut d, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 0, b""));
    while d.error().is_none() {
        let t = d.poll_at().expect("a timer until it gives up");
        d.on_timer(t);
        let _ = out(&mut d, t);
    }
    assert_eq!(d.error(), Some(crate::tcp::ConnError::TimedOut));
}

#[test]
fn two_shut_windows_still_exchange_acks() {
    // Found by the soak: an echo whose both ends had shut windows. Each end's segments carried
    // data into the other's zero window and were refused whole, ACK included; the pure ACKs
    // carried SND.NXT, past the other's window (their data had been dropped), and were refused
    // too. Neither end ever learned what the other had received.
    let mut c = established(cfg(), 1000);
    for i in 0..10u32 {
        feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1 + i * 100, Some(ISS + 1), 1000, &[1u8; 100]));
    }
    c.send(&[2u8; 300]).expect("send");
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.iter().map(|s| s.1.len()).sum::<usize>(), 300);
    assert!(segs.iter().all(|s| s.0.window_len == 0), "our buffer is full");
    // The peer dropped our 300 bytes and shut its window; its data segment at our RCV.NXT
    // acknowledges nothing of ours, and finds our window shut.
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1001, Some(ISS + 1), 0, &[3u8; 100]));
    assert_eq!(c.recv_queued(), 1000, "no room: its data is dropped");
    // Our ACK must be acceptable to a receiver whose window is shut at ISS + 1: not SND.NXT.
    let segs = out(&mut c, ms(21));
    let ack = segs.iter().find(|s| s.1.is_empty()).expect("an ACK");
    assert_eq!(ack.0.seq_number, SeqNumber(ISS + 1));
    assert_eq!(ack.0.ack_number, Some(SeqNumber(IRS + 1001)));
    // The peer read some and acknowledges our first 100 bytes, on a data segment into our
    // still shut window: its ACK counts although its data cannot.
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 1001, Some(ISS + 101), 0, &[3u8; 100]));
    assert_eq!(c.send_queued(), 200, "the ACK on a data segment at RCV.NXT was taken");
}

/// A connection whose window scale is `shift` both ways, its receive buffer `rx_buffer`; every
/// data segment is acknowledged at once, so each one's advertised edge can be checked.
fn scaled(shift: u8, rx_buffer: usize) -> crate::tcp::Connection {
    let config = TcpConfig { rx_buffer, window_scale: Some(shift), ack_delay: None, ..cfg() };
    let mut c = crate::tcp::Connection::connect(config, local(), remote(), SeqNumber(ISS));
    let _syn = out(&mut c, ms(0));
    let mut s = syn_ack(1000);
    s.0.window_scale = Some(shift);
    feed(&mut c, ms(1), s);
    let _ack = out(&mut c, ms(1));
    c
}

#[test]
fn a_scaled_window_never_moves_its_right_edge_left() {
    // Found by the soak: scaling rounds the free space down to 8 bytes, so segments of odd sizes
    // moved the advertised right edge back by up to 7. The sender, holding data past the new
    // edge, clamped its pure ACKs there, below what we had received: we refused them.
    let mut c = scaled(3, 1000);
    let mut edge = IRS + 1 + 1000;
    let mut seq = IRS + 1;
    for len in [5usize, 3, 7, 1, 13, 2, 100, 9] {
        feed(&mut c, ms(2), seg(TcpFlags::empty(), seq, Some(ISS + 1), 1000, &vec![1u8; len]));
        seq += len as u32;
        let segs = out(&mut c, ms(2));
        let ack = segs.last().expect("an ACK");
        let right = ack.0.ack_number.expect("ack").0 + (u32::from(ack.0.window_len) << 3);
        assert!(right >= edge, "the right edge moved left: {right} < {edge}");
        edge = right;
    }
    // What was promised is taken, a few bytes past the buffer included.
    let rest = (edge - seq) as usize;
    feed(&mut c, ms(3), seg(TcpFlags::empty(), seq, Some(ISS + 1), 1000, &vec![2u8; rest]));
    assert_eq!(c.recv_queued(), (edge - IRS - 1) as usize);
    assert!(c.recv_queued() > 1000);
}

#[test]
fn a_pure_ack_at_the_right_edge_is_taken() {
    // A sender that filled our window sends its ACKs at the window's right edge (Linux's
    // `tcp_acceptable_seq`, ours too), while its last segments may still be on the way.
    let mut c = established(cfg(), 1000);
    c.send(&[6u8; 100]).expect("send");
    let _ = out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1 + 1000, Some(ISS + 101), 1000, b""));
    assert_eq!(c.send_queued(), 0, "its ACK was read");
    assert_eq!(c.stats().out_of_window, 0);
}
