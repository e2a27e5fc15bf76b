use super::harness::*;
use crate::tcp::{ConnError, State};
use crate::wire::tcp::TcpFlags;

#[test]
fn rst_with_exact_sequence_resets() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::RST, IRS + 1, None, 0, b""));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::Reset));
}

#[test]
fn rst_in_window_but_not_exact_gets_a_challenge_ack() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::RST, IRS + 50, None, 0, b""));
    assert_eq!(c.state(), State::Established);
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1));
    assert_eq!(c.stats().challenge_acks, 1);
}

#[test]
fn rst_outside_the_window_is_dropped_silently() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::RST, IRS + 100_000, None, 0, b""));
    assert_eq!(c.state(), State::Established);
    assert!(out(&mut c, ms(20)).is_empty());
}

#[test]
fn syn_on_an_established_connection_gets_a_challenge_ack() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::SYN, IRS + 1, None, 1000, b""));
    assert_eq!(c.state(), State::Established);
    let segs = out(&mut c, ms(20));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1));
}

#[test]
fn old_ack_outside_max_window_is_challenged_not_processed() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 100]).expect("send");
    out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS.wrapping_sub(100_000)), 1000, b"zz"));
    assert_eq!(c.recv_queued(), 0, "segment dropped");
    assert_eq!(c.stats().challenge_acks, 1);
}

#[test]
fn out_of_window_data_is_acknowledged_not_delivered() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 5000, Some(ISS + 1), 1000, b"far"));
    assert_eq!(c.recv_queued(), 0);
    assert_eq!(c.stats().out_of_window, 1);
    let segs = out(&mut c, ms(20));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1));
}

#[test]
fn answers_to_out_of_window_acks_are_rate_limited() {
    // Segments without data are what two disagreeing ends would ping-pong.
    let mut c = established(cfg(), 1000);
    for _ in 0..10 {
        feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 50_000, Some(ISS + 1), 1000, b""));
    }
    assert_eq!(out(&mut c, ms(20)).len(), 1);
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 50_000, Some(ISS + 1), 1000, b""));
    assert!(out(&mut c, ms(21)).is_empty(), "a second answer within the interval is suppressed");
    feed(&mut c, ms(200), seg(TcpFlags::empty(), IRS + 50_000, Some(ISS + 1), 1000, b""));
    assert_eq!(out(&mut c, ms(200)).len(), 1);
    assert!(c.stats().oow_acks_suppressed >= 10);
}

#[test]
fn each_out_of_window_data_segment_is_answered() {
    // As Linux (`tcp_oow_rate_limited`): data draws no ACK loop, and a sender resending what we
    // hold learns from the answer that it can stop. One answer per dispatch.
    let mut c = established(cfg(), 1000);
    for at in [20, 21, 22] {
        feed(&mut c, ms(at), seg(TcpFlags::empty(), IRS + 50_000, Some(ISS + 1), 1000, b"x"));
        let segs = out(&mut c, ms(at));
        assert_eq!(segs.len(), 1, "answered at {at} ms");
        assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1));
    }
    assert_eq!(c.stats().oow_acks_suppressed, 0);
}
