//! Header prediction (`input.rs`, `predicted_ack`): which segments take the short input path.
//! What a predicted segment does is the general path's own work, tested everywhere else; here
//! the point is that nothing the general path must judge is predicted, and that a run's
//! continuations (`on_continuation`, the interface's unparsed next segments) do exactly what
//! `on_segment` does.

use super::harness::*;
use crate::tcp::{Connection, SeqNumber};
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// An established connection with 300 bytes in flight (ISS+1 .. ISS+301).
fn in_flight() -> Connection {
    let mut c = established(cfg(), 1000);
    c.send(&[7u8; 300]).expect("send");
    assert_eq!(out(&mut c, ms(20)).len(), 3);
    c
}

fn predicted(c: &Connection, s: &(TcpRepr, crate::nic::PacketBuf)) -> Option<u32> {
    c.predicted_ack(&s.0, s.1.len()).map(|a| a.0)
}

#[test]
fn in_order_data_and_advancing_acks_are_predicted() {
    let mut c = in_flight();
    let data = seg(TcpFlags::PSH, IRS + 1, Some(ISS + 1), 1000, b"request");
    assert_eq!(predicted(&c, &data), Some(ISS + 1), "in-order data, nothing acknowledged");
    let ack = seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 1000, b"");
    assert_eq!(predicted(&c, &ack), Some(ISS + 101), "an ACK of new data");
    let all = seg(TcpFlags::empty(), IRS + 1, Some(ISS + 301), 1000, b"more");
    assert_eq!(predicted(&c, &all), Some(ISS + 301), "data acknowledging everything in flight");
    // Fed, they do what the general path does: data queued, SND.UNA moved.
    feed(&mut c, ms(21), data);
    let ack = seg(TcpFlags::empty(), IRS + 8, Some(ISS + 101), 1000, b"");
    assert_eq!(predicted(&c, &ack), Some(ISS + 101), "the next ACK, after the data");
    feed(&mut c, ms(21), ack);
    let mut buf = [0u8; 16];
    assert_eq!(c.recv(&mut buf), 7);
    assert_eq!(&buf[..7], b"request");
    assert_eq!(c.send_queued(), 200);
}

#[test]
fn segments_the_general_path_must_judge_are_not_predicted() {
    let c = in_flight();
    let cases = [
        ("a duplicate ACK", seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"")),
        ("data past RCV.NXT", seg(TcpFlags::empty(), IRS + 2, Some(ISS + 1), 1000, b"x")),
        ("old data", seg(TcpFlags::empty(), IRS, Some(ISS + 1), 1000, b"xy")),
        ("a FIN", seg(TcpFlags::FIN, IRS + 1, Some(ISS + 101), 1000, b"")),
        ("a RST", seg(TcpFlags::RST, IRS + 1, Some(ISS + 101), 1000, b"")),
        ("a SYN", seg(TcpFlags::SYN, IRS + 1, Some(ISS + 101), 1000, b"")),
        ("no ACK", seg(TcpFlags::empty(), IRS + 1, None, 1000, b"x")),
        ("an ACK of data never sent", seg(TcpFlags::empty(), IRS + 1, Some(ISS + 302), 1000, b"")),
        ("an ACK below SND.UNA", seg(TcpFlags::empty(), IRS + 1, Some(ISS), 1000, b"x")),
    ];
    for (what, s) in &cases {
        assert_eq!(predicted(&c, s), None, "{what}");
    }
    let (mut repr, payload) = seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 1000, b"");
    repr.sack = crate::wire::TcpSack::blocks([(SeqNumber(ISS + 201), SeqNumber(ISS + 301))]);
    assert_eq!(c.predicted_ack(&repr, payload.len()), None, "SACK blocks");
}

#[test]
fn nothing_is_predicted_during_a_recovery() {
    let mut c = in_flight();
    for at in 21..24 {
        feed(&mut c, ms(at), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
    }
    assert!(c.in_recovery(), "three duplicates start a fast recovery");
    let partial = seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 1000, b"");
    assert_eq!(predicted(&c, &partial), None, "a partial ACK is the recovery's to judge");
}

/// Twelve 100-byte segments from the peer, each header as the first's but for the sequence
/// number, acknowledging 100 of our 300 bytes in flight.
fn run(flags: TcpFlags) -> Vec<(TcpRepr, crate::nic::PacketBuf)> {
    (0..12u8).map(|i| seg(flags, IRS + 1 + 100 * u32::from(i), Some(ISS + 101), 1000, &[i; 100])).collect()
}

#[test]
fn a_runs_continuations_leave_the_connection_as_on_segment_does() {
    // Without and with PSH (which may delay the ACK); the 1000-byte receive buffer fills
    // within the run, and a read in the middle of the second pass reopens it.
    for flags in [TcpFlags::empty(), TcpFlags::PSH] {
        let (mut by_segment, mut by_run) = (in_flight(), in_flight());
        let mut continued = 0;
        for (i, ((repr, mut a), (_, mut b))) in run(flags).into_iter().zip(run(flags)).enumerate() {
            by_segment.on_segment(ms(21), &repr, &mut a);
            let push = repr.flags.contains(TcpFlags::PSH);
            if i > 0 && by_run.takes_continuation(repr.seq_number, SeqNumber(ISS + 101)) {
                by_run.on_continuation(ms(21), repr.seq_number, repr.window_len, push, &mut b);
                continued += 1;
            } else {
                by_run.on_segment(ms(21), &repr, &mut b);
            }
            assert_eq!(format!("{by_segment:?}"), format!("{by_run:?}"), "{flags:?}, after segment {i}");
            if i == 5 {
                let mut buf = [0u8; 250];
                assert_eq!(by_segment.recv(&mut buf), by_run.recv(&mut buf));
            }
        }
        assert!(continued >= 10, "{flags:?}: continued {continued}");
        assert_eq!(out(&mut by_segment, ms(22)), out(&mut by_run, ms(22)), "{flags:?}: what they send");
    }
}

#[test]
fn a_run_taken_the_short_way_leaves_the_connection_as_on_segment_does() {
    // As the interface takes a run: its first segment whole, the continuations' payloads the
    // short way where the connection takes them (their bookkeeping owed and done once, before
    // anything else touches the connection), `on_continuation` where it does not (the
    // 1000-byte buffer fills within the run), or the whole way. The application reads between
    // bursts (after the owed bookkeeping), here 50 bytes after the sixth segment.
    for flags in [TcpFlags::empty(), TcpFlags::PSH] {
        let (mut by_segment, mut by_run) = (in_flight(), in_flight());
        let (mut short, mut declined) = (0, 0);
        let mut owed: Option<(SeqNumber, u16)> = None;
        for (i, ((repr, mut a), (_, mut b))) in run(flags).into_iter().zip(run(flags)).enumerate() {
            by_segment.on_segment(ms(21), &repr, &mut a);
            let push = repr.flags.contains(TcpFlags::PSH);
            let continues = i > 0 && by_run.takes_continuation(repr.seq_number, SeqNumber(ISS + 101));
            if continues && by_run.take_continued_payload(ms(21), push, &mut b) {
                owed = Some((repr.seq_number, repr.window_len));
                short += 1;
            } else {
                if let Some((last_seq, window_len)) = owed.take() {
                    by_run.end_continuation_run(ms(21), last_seq, window_len);
                }
                if continues {
                    by_run.on_continuation(ms(21), repr.seq_number, repr.window_len, push, &mut b);
                    declined += 1;
                } else {
                    by_run.on_segment(ms(21), &repr, &mut b);
                }
            }
            if i == 5 || i == 11 {
                if let Some((last_seq, window_len)) = owed.take() {
                    by_run.end_continuation_run(ms(21), last_seq, window_len);
                }
                assert_eq!(format!("{by_segment:?}"), format!("{by_run:?}"), "{flags:?}, after segment {i}");
                let mut buf = [0u8; 50];
                assert_eq!(by_segment.recv(&mut buf), by_run.recv(&mut buf));
            }
        }
        assert!(short >= 8 && declined >= 1, "{flags:?}: short {short}, declined {declined}");
        assert_eq!(format!("{by_segment:?}"), format!("{by_run:?}"), "{flags:?}: at the end");
        assert_eq!(out(&mut by_segment, ms(22)), out(&mut by_run, ms(22)), "{flags:?}: what they send");
    }
}

#[test]
fn a_continuation_is_refused_where_on_segment_must_judge() {
    let c = in_flight();
    let ack = SeqNumber(ISS + 1);
    assert!(c.takes_continuation(SeqNumber(IRS + 1), ack), "in order, nothing new acknowledged");
    assert!(!c.takes_continuation(SeqNumber(IRS + 2), ack), "past RCV.NXT");
    assert!(!c.takes_continuation(SeqNumber(IRS), ack), "old data");
    assert!(!c.takes_continuation(SeqNumber(IRS + 1), SeqNumber(ISS + 101)), "an ACK of new data");
    let mut c = in_flight();
    for at in 21..24 {
        feed(&mut c, ms(at), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
    }
    assert!(!c.takes_continuation(SeqNumber(IRS + 1), ack), "during a recovery");
}
