use super::harness::*;
use crate::tcp::{Connection, Events, SeqNumber, State};
use crate::wire::tcp::TcpFlags;

#[test]
fn send_cuts_segments_at_mss_within_window() {
    let mut c = established(cfg(), 300);
    assert_eq!(c.send(&[1u8; 1000]).expect("send"), 1000);
    let segs = out(&mut c, ms(20));
    let lens: Vec<usize> = segs.iter().map(|s| s.1.len()).collect();
    assert_eq!(lens, vec![100, 100, 100], "window 300, MSS 100");
    assert_eq!(segs[0].0.seq_number, SeqNumber(ISS + 1));
    assert_eq!(segs[1].0.seq_number, SeqNumber(ISS + 101));
    assert!(segs.iter().all(|s| s.0.ack_number == Some(SeqNumber(IRS + 1))));
    // Nothing more until the window moves.
    assert!(out(&mut c, ms(21)).is_empty());
    // 250 bytes acknowledged, window 300 from there: 250 more bytes may go, but the last
    // 50 would be a silly segment (less than an MSS and less than half the largest window).
    feed(&mut c, ms(30), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 251), 300, b""));
    assert!(c.take_events().contains(Events::WRITABLE));
    assert_eq!(c.send_queued(), 750);
    let lens: Vec<usize> = out(&mut c, ms(30)).iter().map(|s| s.1.len()).collect();
    assert_eq!(lens, vec![100, 100]);
}

#[test]
fn every_segment_of_a_dispatch_carries_the_ack_and_window_the_first_carries() {
    // The segments of one dispatch share their header fields but the sequence number and
    // flags (made once, at the first): the window advertised is the receive buffer's room
    // after unread data, on every one of them, and the ACK is the data received.
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, &[7u8; 240]));
    c.send(&[1u8; 350]).expect("send");
    let segs = out(&mut c, ms(20));
    let lens: Vec<usize> = segs.iter().map(|s| s.1.len()).collect();
    assert_eq!(lens, vec![100, 100, 100, 50]);
    for (i, (repr, _)) in segs.iter().enumerate() {
        assert_eq!(repr.seq_number, SeqNumber(ISS + 1 + 100 * i as u32), "segment {i}");
        assert_eq!(repr.ack_number, Some(SeqNumber(IRS + 241)), "segment {i}");
        assert_eq!(repr.window_len, 1000 - 240, "segment {i}");
        assert_eq!(repr.flags.contains(TcpFlags::PSH), i == 3, "segment {i}: PSH on the last only");
    }
    // Read, then more to send: the next dispatch advertises the room the read made.
    let mut buf = [0u8; 240];
    assert_eq!(c.recv(&mut buf), 240);
    c.send(&[2u8; 150]).expect("send");
    let segs = out(&mut c, ms(21));
    assert!(!segs.is_empty());
    assert!(segs.iter().all(|(repr, _)| repr.window_len == 1000), "{segs:?}");
}

#[test]
fn last_segment_of_a_write_carries_psh() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 150]).expect("send");
    let segs = out(&mut c, ms(20));
    assert!(!segs[0].0.flags.contains(TcpFlags::PSH));
    assert!(segs[1].0.flags.contains(TcpFlags::PSH));
}

#[test]
fn in_order_data_is_queued_and_acknowledged_once_per_burst() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"abc"));
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 4, Some(ISS + 1), 1000, b"def"));
    feed(&mut c, ms(20), seg(TcpFlags::PSH, IRS + 7, Some(ISS + 1), 1000, b"gh"));
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1, "one pure ACK for the whole burst");
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 9));
    assert_eq!(segs[0].0.window_len, 1000 - 8);
    let mut buf = [0u8; 64];
    assert_eq!(c.recv(&mut buf), 8);
    assert_eq!(&buf[..8], b"abcdefgh");
}

#[test]
fn data_to_send_carries_the_ack_instead_of_a_pure_ack() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"ping"));
    c.send(b"pong").expect("send");
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].1, b"pong");
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 5)));
}

#[test]
fn out_of_order_segment_is_held_and_answered_with_a_duplicate_ack() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 4, Some(ISS + 1), 1000, b"def"));
    assert_eq!(c.recv_queued(), 0, "nothing readable before the hole is filled");
    assert_eq!((c.stats().out_of_order, c.stats().reordered), (1, 1));
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1), "duplicate ACK for rcv_nxt");
    // The retransmission of the hole delivers both, and the ACK covers both.
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"abc"));
    let segs = out(&mut c, ms(21));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 7));
    let mut buf = [0u8; 64];
    assert_eq!(c.recv(&mut buf), 6);
    assert_eq!(&buf[..6], b"abcdef");
}

#[test]
fn each_out_of_order_segment_of_a_burst_earns_a_duplicate_ack_up_to_three() {
    let mut c = established(cfg(), 1000);
    // A hole at IRS + 1, then five segments after it in one burst.
    for i in 0..5u32 {
        feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 4 + 3 * i, Some(ISS + 1), 1000, b"xyz"));
    }
    assert_eq!(c.stats().out_of_order, 5);
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 3, "three duplicates: enough for the sender's fast retransmit");
    assert!(segs.iter().all(|(r, p)| is_pure_ack(r, p, IRS + 1)), "all duplicates of rcv_nxt");
    // The hole is filled: one ACK for the burst again, covering all that was held.
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"abc"));
    let segs = out(&mut c, ms(21));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 19)));
    // In-order data after out-of-order data in the same burst: no duplicates of a stale ACK.
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 40, Some(ISS + 1), 1000, b"zzz"));
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 19, Some(ISS + 1), 1000, b"def"));
    let segs = out(&mut c, ms(22));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 22)));
}

#[test]
fn out_of_order_data_beyond_the_advertised_window_is_not_kept() {
    let mut c = established(cfg(), 1000);
    let window = usize::from(out_window(&mut c));
    // Straddles the right edge: only the part inside is kept.
    let edge = IRS + 1 + window as u32;
    feed(&mut c, ms(20), seg(TcpFlags::empty(), edge - 2, Some(ISS + 1), 1000, b"wxyz"));
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, &vec![7u8; window - 2]));
    assert_eq!(c.recv_queued(), window, "the bytes inside the window, and nothing beyond");
}

/// Sends a pure ACK and returns the window it advertised (the default test config has no scale).
fn out_window(c: &mut Connection) -> u16 {
    c.ack_pending = true;
    out(c, ms(10))[0].0.window_len
}

#[test]
fn a_fin_that_arrives_before_the_data_before_it_closes_after_that_data() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::FIN, IRS + 4, Some(ISS + 1), 1000, b"def"));
    assert_eq!(c.state(), State::Established);
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"abc"));
    assert_eq!(c.state(), State::CloseWait);
    let segs = out(&mut c, ms(21));
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 8)), "data and FIN acknowledged");
    let mut buf = [0u8; 64];
    assert_eq!(c.recv(&mut buf), 6);
    assert!(c.at_eof());
}

#[test]
fn overlapping_retransmission_is_trimmed() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"abcd"));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 3, Some(ISS + 1), 1000, b"cdefg"));
    let mut buf = [0u8; 64];
    assert_eq!(c.recv(&mut buf), 7);
    assert_eq!(&buf[..7], b"abcdefg");
    // A full duplicate only triggers an ACK.
    out(&mut c, ms(21));
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"abcd"));
    assert_eq!(c.recv_queued(), 0);
    let segs = out(&mut c, ms(22));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 8));
}

#[test]
fn ack_for_unsent_data_is_answered_and_ignored() {
    let mut c = established(cfg(), 1000);
    c.send(b"abc").expect("send");
    out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 500), 1000, b""));
    assert_eq!(c.send_queued(), 3, "nothing acknowledged");
    let segs = out(&mut c, ms(21));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1));
}

#[test]
fn zero_copy_buffers_return_only_after_ack() {
    let mut c = established(cfg(), 1000);
    c.send_loaned(Box::new(vec![9u8; 150])).expect("open").expect("fits");
    out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 1000, b""));
    assert_eq!(c.take_completed().count(), 0, "only 100 of 150 bytes acknowledged");
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 151), 1000, b""));
    let done: Vec<_> = c.take_completed().collect();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].as_slice(), Some(&[9u8; 150][..]));
}

#[test]
fn sink_refusal_leaves_state_unchanged() {
    let mut c = established(cfg(), 1000);
    c.send(&[5u8; 100]).expect("send");
    let mut r = Recorder { refuse: true, ..Recorder::default() };
    assert_eq!(c.dispatch(ms(20), &mut r), 0);
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].0.seq_number, SeqNumber(ISS + 1));
    assert_eq!(c.stats().retransmits, 0);
}

#[test]
fn fin_carrying_data_delivers_the_data_then_eof() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::FIN, IRS + 1, Some(ISS + 1), 1000, b"bye"));
    assert_eq!(c.state(), crate::tcp::State::CloseWait);
    let mut buf = [0u8; 8];
    assert_eq!(c.recv(&mut buf), 3);
    assert!(c.at_eof());
    let segs = out(&mut c, ms(20));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 5));
}
