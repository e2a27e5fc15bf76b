//! Delayed ACK (`TcpConfig::ack_delay`): the ACK of a lone in-order segment waits for data of
//! ours to ride on, or for its deadline; everything else is acknowledged at once.

use std::time::Duration;

use super::harness::*;
use crate::tcp::{Connection, SeqNumber, TcpConfig};
use crate::time::Instant;
use crate::wire::tcp::TcpFlags;

const DELAY: Duration = Duration::from_micros(200);

fn delayed() -> TcpConfig {
    TcpConfig { ack_delay: Some(DELAY), ..cfg() }
}

fn us(v: u64) -> Instant {
    Instant::from_micros(v)
}

/// Established at 10 ms, the peer's window 1000.
fn conn(config: TcpConfig) -> Connection {
    established(config, 1000)
}

/// One data segment of `len` bytes from the peer at `seq` (offset from IRS + 1).
fn data(offset: u32, len: usize) -> (crate::wire::tcp::TcpRepr, crate::nic::PacketBuf) {
    seg(TcpFlags::PSH, IRS + 1 + offset, Some(ISS + 1), 1000, &vec![7u8; len])
}

#[test]
fn a_lone_request_is_acknowledged_by_the_answer() {
    let mut c = conn(delayed());
    let t = 20_000;
    let pure_acks = c.stats().pure_acks;
    feed(&mut c, us(t), data(0, 64));
    assert!(!c.wants_output(), "the ACK waits for an answer");
    assert!(out(&mut c, us(t)).is_empty());
    assert_eq!(c.poll_at(), Some(us(t) + DELAY));
    // The application answers within the delay: one segment, data and ACK together.
    c.send(&[1u8; 64]).expect("send");
    let segs = out(&mut c, us(t + 50));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].1.len(), 64);
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 1 + 64)));
    assert_eq!(c.stats().pure_acks, pure_acks);
    // Nothing is owed any more: the deadline is gone (the answer's retransmission timer stays).
    assert!(c.poll_at().is_some_and(|at| at > us(t) + DELAY));
    c.on_timer(us(t + 300));
    let late = out(&mut c, us(t + 300));
    assert!(late.is_empty(), "{late:?}");
}

#[test]
fn an_unanswered_segment_is_acknowledged_at_its_deadline() {
    let mut c = conn(delayed());
    let t = 20_000;
    feed(&mut c, us(t), data(0, 64));
    c.on_timer(us(t + 199));
    assert!(out(&mut c, us(t + 199)).is_empty(), "not before the deadline");
    c.on_timer(us(t + 200));
    let segs = out(&mut c, us(t + 200));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1 + 64));
    assert_eq!(c.poll_at(), None);
}

#[test]
fn the_second_segment_is_acknowledged_at_once() {
    let mut c = conn(delayed());
    feed(&mut c, ms(20), data(0, 100));
    feed(&mut c, ms(20), data(100, 100));
    feed(&mut c, ms(20), data(200, 100));
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1, "one ACK for the burst");
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1 + 300));
    // The count starts again: the next lone segment waits.
    feed(&mut c, ms(21), data(300, 100));
    assert!(out(&mut c, ms(21)).is_empty());
    feed(&mut c, ms(21), data(400, 100));
    assert_eq!(out(&mut c, ms(21)).len(), 1);
}

#[test]
fn out_of_order_data_and_the_segment_filling_the_hole_are_acknowledged_at_once() {
    let mut c = conn(delayed());
    feed(&mut c, ms(20), data(100, 100));
    let dup = out(&mut c, ms(20));
    assert_eq!(dup.len(), 1);
    assert!(is_pure_ack(&dup[0].0, &dup[0].1, IRS + 1));
    feed(&mut c, ms(21), data(0, 100));
    let ack = out(&mut c, ms(21));
    assert_eq!(ack.len(), 1, "the hole is filled");
    assert!(is_pure_ack(&ack[0].0, &ack[0].1, IRS + 1 + 200));
}

#[test]
fn a_fin_and_a_duplicate_are_acknowledged_at_once() {
    let mut c = conn(delayed());
    feed(&mut c, ms(20), data(0, 50));
    assert!(out(&mut c, ms(20)).is_empty());
    // The peer resends it (our ACK may have been lost): answered now.
    feed(&mut c, ms(21), data(0, 50));
    let segs = out(&mut c, ms(21));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 51));
    feed(&mut c, ms(22), seg(TcpFlags::FIN | TcpFlags::PSH, IRS + 51, Some(ISS + 1), 1000, b"bye"));
    let segs = out(&mut c, ms(22));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 51 + 3 + 1));
}

#[test]
fn data_that_nearly_shuts_the_window_is_acknowledged_at_once() {
    // 1000-byte buffer, MSS 100: 850 bytes leave 150, less than two segments.
    let mut c = conn(delayed());
    feed(&mut c, ms(20), data(0, 850));
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 1 + 850)));
}

#[test]
fn without_a_delay_every_data_segment_is_acknowledged_at_once() {
    let mut c = conn(TcpConfig { ack_delay: None, ..cfg() });
    feed(&mut c, ms(20), data(0, 64));
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1 + 64));
}

#[test]
fn a_delayed_ack_dies_with_the_connection() {
    let mut c = conn(delayed());
    feed(&mut c, ms(20), data(0, 64));
    c.abort();
    assert_eq!(c.poll_at(), None);
}

#[test]
fn a_segment_inside_a_stream_is_acknowledged_with_its_burst() {
    // No PSH: the peer's write goes on, its next segment is coming; no timer is armed for it.
    let mut c = conn(delayed());
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, &[7u8; 100]));
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1 + 100));
    assert_eq!(c.poll_at(), None);
}
