//! Header prediction (`input.rs`, `predicted_ack`): which segments take the short input path.
//! What a predicted segment does is the general path's own work, tested everywhere else; here
//! the point is that nothing the general path must judge is predicted.

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
