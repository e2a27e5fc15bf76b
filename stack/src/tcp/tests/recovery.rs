//! Loss recovery without a timeout on the sending side: fast retransmit on the third duplicate
//! ACK, NewReno partial ACKs retransmitting the next hole, and no fast retransmit from the
//! duplicates that a timeout's go-back-N resends draw.

use super::harness::*;
use crate::tcp::{Connection, SeqNumber};
use crate::wire::tcp::TcpFlags;

fn ack(c: &mut Connection, at: u64, ack: u32) {
    feed(c, ms(at), seg(TcpFlags::empty(), IRS + 1, Some(ack), 1000, b""));
}

fn seqs(c: &mut Connection, at: u64) -> Vec<u32> {
    out(c, ms(at)).iter().filter(|(_, p)| !p.is_empty()).map(|(r, _)| r.seq_number.0).collect()
}

#[test]
fn third_duplicate_ack_retransmits_the_first_unacknowledged_segment() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 500]).expect("send");
    assert_eq!(seqs(&mut c, 20).len(), 5);
    // The first segment is lost: the receiver answers each of the others with a duplicate.
    ack(&mut c, 21, ISS + 1);
    ack(&mut c, 21, ISS + 1);
    assert!(seqs(&mut c, 21).is_empty(), "two duplicates are not enough");
    ack(&mut c, 21, ISS + 1);
    assert_eq!(seqs(&mut c, 21), vec![ISS + 1], "only the missing segment");
    assert_eq!(c.stats().fast_retransmits, 1);
    ack(&mut c, 22, ISS + 1);
    assert!(seqs(&mut c, 22).is_empty(), "one fast retransmit per recovery");
    // The receiver kept the rest: the next ACK covers everything and recovery ends.
    ack(&mut c, 23, ISS + 501);
    assert!(!c.in_recovery());
    assert_eq!(c.stats().retransmits, 1);
    assert_eq!(c.stats().timeouts, 0);
}

#[test]
fn partial_acks_retransmit_each_next_hole() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 500]).expect("send");
    seqs(&mut c, 20);
    // Segments 1 and 3 are lost.
    for _ in 0..3 {
        ack(&mut c, 21, ISS + 1);
    }
    assert_eq!(seqs(&mut c, 21), vec![ISS + 1]);
    // The hole at 1 is filled; the receiver held segment 2: a partial ACK up to the next hole.
    ack(&mut c, 22, ISS + 201);
    assert_eq!(seqs(&mut c, 22), vec![ISS + 201], "the next hole at once, no timeout");
    ack(&mut c, 23, ISS + 501);
    assert!(!c.in_recovery());
    assert_eq!(c.stats().fast_retransmits, 2);
}

#[test]
fn duplicates_drawn_by_go_back_n_start_no_fast_retransmit() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 300]).expect("send");
    seqs(&mut c, 20);
    let t = c.poll_at().expect("rto armed");
    c.on_timer(t);
    assert_eq!(out(&mut c, t).len(), 1, "F-RTO: the head alone at the timeout");
    // The receiver had segments 2 and 3, not 1: its first duplicate confirms the loss to F-RTO.
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
    assert_eq!(out(&mut c, t).len(), 3, "go-back-N after the timeout");
    // Its duplicate ACKs for our resends move nothing.
    for _ in 0..3 {
        feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
    }
    assert!(
        out(&mut c, t).iter().all(|(_, p)| p.is_empty()),
        "no fast retransmit below the timeout's SND.MAX"
    );
    assert_eq!(c.stats().fast_retransmits, 0);
}

#[test]
fn a_lost_fin_is_fast_retransmitted_with_the_last_data() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 150]).expect("send");
    c.shutdown();
    let first = out(&mut c, ms(20));
    assert!(first.last().is_some_and(|(r, _)| r.flags.contains(TcpFlags::FIN)));
    // The first segment arrived, the last one (with the FIN) did not; then three duplicates
    // (of the first, e.g. from reordering).
    ack(&mut c, 21, ISS + 101);
    for _ in 0..3 {
        ack(&mut c, 21, ISS + 101);
    }
    let again = out(&mut c, ms(21));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].0.seq_number.0, ISS + 101);
    assert_eq!(again[0].1.len(), 50);
    assert!(again[0].0.flags.contains(TcpFlags::FIN));
}

#[test]
fn a_lost_fast_retransmission_goes_out_again_after_a_round_trip_of_duplicates() {
    let mut c = established(cfg(), 1000);
    // One clean round trip first, for an RTT estimate (10 ms).
    c.send(&[1u8; 100]).expect("send");
    seqs(&mut c, 0);
    ack(&mut c, 10, ISS + 101);
    c.send(&[1u8; 800]).expect("send");
    assert_eq!(seqs(&mut c, 20).len(), 8);
    for _ in 0..3 {
        ack(&mut c, 21, ISS + 101);
    }
    assert_eq!(seqs(&mut c, 21), vec![ISS + 101]);
    // More duplicates (of segments sent before it): the retransmission may still be on its way.
    ack(&mut c, 25, ISS + 101);
    assert!(seqs(&mut c, 25).is_empty());
    // No ACK for it a round trip later: the recovery timer sends it again, long before the RTO.
    let t = c.poll_at().expect("recovery timer");
    assert!(t < ms(21 + 100), "recovery timer at {t:?}");
    c.on_timer(t);
    assert_eq!(seqs(&mut c, t.total_millis()), vec![ISS + 101]);
    assert_eq!((c.stats().fast_retransmits, c.stats().lost_retransmits), (2, 1));
    assert_eq!(c.stats().timeouts, 0);
}

#[test]
fn a_lost_retransmission_is_seen_when_data_sent_after_it_is_sacked() {
    let mut c = established(cfg(), 2000);
    c.sack_ok = true;
    c.send(&[1u8; 400]).expect("send");
    assert_eq!(seqs(&mut c, 20).len(), 4);
    sack(&mut c, 21, ISS + 1, &[(ISS + 101, ISS + 401)]);
    assert_eq!(seqs(&mut c, 21), vec![ISS + 1]);
    // New data goes out after the retransmission; the receiver SACKs it, not the head.
    c.send(&[1u8; 100]).expect("send");
    assert_eq!(seqs(&mut c, 22), vec![ISS + 401]);
    sack(&mut c, 23, ISS + 1, &[(ISS + 101, ISS + 501)]);
    assert_eq!(seqs(&mut c, 23), vec![ISS + 1], "the head's retransmission was lost");
    assert_eq!(c.stats().lost_retransmits, 1);
}

/// A duplicate ACK of `ack` with SACK blocks.
fn sack(c: &mut Connection, at: u64, ack: u32, blocks: &[(u32, u32)]) {
    let (mut repr, payload) = seg(TcpFlags::empty(), IRS + 1, Some(ack), 1000, b"");
    repr.sack = crate::wire::TcpSack::blocks(blocks.iter().map(|&(l, r)| (SeqNumber(l), SeqNumber(r))));
    feed(c, ms(at), (repr, payload));
}

#[test]
fn with_sack_every_hole_is_retransmitted_at_once_and_only_once() {
    let mut c = established(cfg(), 1000);
    c.sack_ok = true;
    c.send(&[1u8; 800]).expect("send");
    assert_eq!(seqs(&mut c, 20).len(), 8);
    // Segments 1, 3 and 6 are lost; the receiver SACKs what it holds.
    sack(&mut c, 21, ISS + 1, &[(ISS + 101, ISS + 201)]);
    sack(&mut c, 21, ISS + 1, &[(ISS + 301, ISS + 401), (ISS + 101, ISS + 201)]);
    sack(&mut c, 21, ISS + 1, &[(ISS + 301, ISS + 501), (ISS + 101, ISS + 201)]);
    assert_eq!(seqs(&mut c, 21), vec![ISS + 1, ISS + 201], "both holes below the highest SACK");
    sack(&mut c, 21, ISS + 1, &[(ISS + 601, ISS + 801), (ISS + 301, ISS + 501), (ISS + 101, ISS + 201)]);
    assert_eq!(seqs(&mut c, 21), vec![ISS + 501], "only the hole the new block revealed");
    // The retransmissions arrive: everything is acknowledged, no timeout, one copy per loss.
    ack(&mut c, 22, ISS + 801);
    assert!(!c.in_recovery());
    assert_eq!((c.stats().retransmits, c.stats().timeouts), (3, 0));
}

#[test]
fn a_lost_head_retransmission_goes_again_on_the_recovery_timer_when_no_ack_can_tell() {
    let mut c = established(cfg(), 1000);
    c.sack_ok = true;
    c.send(&[1u8; 100]).expect("send");
    seqs(&mut c, 0);
    ack(&mut c, 10, ISS + 101);
    c.send(&[1u8; 400]).expect("send");
    assert_eq!(seqs(&mut c, 20).len(), 4);
    // The first is lost; one ACK SACKs the other three: recovery at once, no third duplicate.
    sack(&mut c, 21, ISS + 101, &[(ISS + 201, ISS + 501)]);
    assert_eq!(seqs(&mut c, 21), vec![ISS + 101]);
    // That retransmission is lost too, and nothing else is in flight to draw a duplicate ACK:
    // the recovery timer (about a round trip, far below the 200 ms RTO floor) sends it again.
    let t = c.poll_at().expect("recovery timer");
    assert!(t < ms(21 + 100), "recovery timer at {t:?}");
    c.on_timer(t);
    assert_eq!(out(&mut c, t).iter().map(|(r, _)| r.seq_number.0).collect::<Vec<_>>(), vec![ISS + 101]);
    assert_eq!((c.stats().lost_retransmits, c.stats().timeouts), (1, 0));
}

#[test]
fn after_a_timeout_a_hole_shorter_than_a_segment_before_sacked_data_goes_again() {
    // Found by the soak: a segment cut short (here by the application's write; in the backend by
    // the edge of a guest buffer) is lost, everything after it is SACKed, and the timeout's
    // go-back-N must resend it although it is shorter than an MSS and more data waits behind
    // the SACKed range (silly window avoidance held it back, and nothing woke the connection).
    let mut c = established(cfg(), 1000);
    c.sack_ok = true;
    c.send(&[1u8; 50]).expect("send");
    assert_eq!(seqs(&mut c, 20), vec![ISS + 1]);
    c.send(&[2u8; 300]).expect("send");
    assert_eq!(seqs(&mut c, 20), vec![ISS + 51, ISS + 151, ISS + 251]);
    c.close();
    let _ = out(&mut c, ms(20));
    // The first segment and every retransmission of it are lost.
    sack(&mut c, 21, ISS + 1, &[(ISS + 51, ISS + 351)]);
    let mut resent_after_timeout = false;
    let mut now = ms(21);
    while c.stats().timeouts < 3 {
        let _ = out(&mut c, now);
        let Some(t) = c.poll_at() else { panic!("data in flight without a timer: {}", c.describe(now)) };
        now = t;
        let timeouts = c.stats().timeouts;
        c.on_timer(now);
        let sent = out(&mut c, now);
        if c.stats().timeouts > timeouts {
            resent_after_timeout |= sent.iter().any(|(r, p)| r.seq_number.0 == ISS + 1 && p.len() == 50);
        }
    }
    assert!(resent_after_timeout, "the head went again after a timeout");
    // The retransmission gets through at last: everything is acknowledged.
    ack(&mut c, 30_000, ISS + 352);
    assert_eq!(c.state(), crate::tcp::State::FinWait2);
}

#[test]
fn a_sender_resending_what_we_hold_learns_it_from_each_answer() {
    // Found by the soak: both ends of an echo had lost each other's ACKs and timed out. Each
    // resent, from SND.UNA, data the other already held: refused whole as old duplicates, ACK
    // fields unread. The answers were rate-limited to one per 100 ms, and went out on the next
    // resend, itself an old duplicate to the other end. Both connections resent for minutes.
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(15), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, &[5u8; 100]));
    c.send(&[4u8; 300]).expect("send");
    assert_eq!(out(&mut c, ms(20)).len(), 3, "three segments; the peer gets them all");
    // The peer's ACKs are lost; our timer fires and the device takes one resend only.
    let t = c.poll_at().expect("retransmission timer");
    c.on_timer(t);
    let mut one = Recorder { limit: Some(1), ..Recorder::default() };
    c.dispatch(t, &mut one);
    assert_eq!(one.segs[0].0.seq_number, SeqNumber(ISS + 1), "go-back-N from SND.UNA");
    // The peer, timed out too, resends its 100 bytes we hold, acknowledging all of ours.
    for at in [t, t + std::time::Duration::from_millis(1)] {
        feed(&mut c, at, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 301), 1000, &[5u8; 100]));
        assert_eq!(c.send_queued(), 300, "an old duplicate's ACK is not read");
        // The rest of the go-back-N, whose ACK the peer would not read (it holds that data),
        // then the answer on its own.
        let mut r = Recorder { limit: Some(3), ..Recorder::default() };
        c.dispatch(at, &mut r);
        let answer = r.segs.iter().find(|s| s.1.is_empty());
        let answer = answer.unwrap_or_else(|| panic!("each old duplicate is answered: {:?}", r.segs));
        assert_eq!(answer.0.ack_number, Some(SeqNumber(IRS + 101)));
        assert_eq!(answer.0.seq_number, SeqNumber(ISS + 301), "at SND.MAX, which the peer can take");
    }
    // The peer takes that answer and answers it: its ACK arrives at our RCV.NXT.
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 101, Some(ISS + 301), 1000, b""));
    assert_eq!(c.send_queued(), 0);
}
