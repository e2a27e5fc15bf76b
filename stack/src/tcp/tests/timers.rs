use super::harness::*;
use crate::tcp::{ConnError, Connection, SeqNumber, State, TcpConfig};
use crate::wire::tcp::TcpFlags;

fn seqs_of(segs: &[(crate::wire::tcp::TcpRepr, Vec<u8>)]) -> Vec<u32> {
    segs.iter().map(|s| s.0.seq_number.0).collect()
}

#[test]
fn rto_retransmits_go_back_n_from_first_unacked_byte() {
    let mut c = established(cfg(), 1000);
    c.send(&[1u8; 300]).expect("send");
    let first = out(&mut c, ms(20));
    assert_eq!(first.len(), 3);
    // The first segment is acknowledged, the rest are lost.
    feed(&mut c, ms(30), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 1000, b""));
    let t = c.poll_at().expect("rto armed");
    c.on_timer(t);
    // F-RTO: the head first; its ACK stops short of what was in flight and no new data waits,
    // so the timeout cannot be judged spurious: everything from SND.UNA goes again.
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 101], "the head at the timeout");
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 201), 1000, b""));
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 201], "then the rest of the window");
    assert_eq!(c.stats().retransmits, 2);
    assert_eq!((c.stats().timeouts, c.stats().spurious_timeouts, c.stats().fast_retransmits), (1, 0, 0));
}

#[test]
fn a_timeout_whose_acks_were_only_late_resends_the_head_alone() {
    // F-RTO (RFC 5682): the peer got everything, its ACKs were late (a starved worker, a
    // deep queue). The timeout resends the head; the late ACKs then move SND.UNA, new data
    // goes, and the window that was in flight is never sent twice.
    let mut c = established(cfg(), 400);
    c.send(&[1u8; 400]).expect("send");
    c.send(&[2u8; 200]).expect("more data waits for the window");
    assert_eq!(seqs_of(&out(&mut c, ms(20))), vec![ISS + 1, ISS + 101, ISS + 201, ISS + 301]);
    let t = c.poll_at().expect("rto armed");
    c.on_timer(t);
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 1], "only the head at the timeout");
    // The first late ACK: new data goes (the window moved by 200), nothing old.
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 201), 400, b""));
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 401, ISS + 501], "new data, no go-back-N");
    // The second moves SND.UNA too: the timeout was spurious.
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 401), 400, b""));
    assert!(out(&mut c, t).is_empty(), "nothing in flight is sent again");
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 601), 400, b""));
    let s = c.stats();
    assert_eq!((s.timeouts, s.spurious_timeouts, s.retransmits), (1, 1, 1));
    assert_eq!(c.send_queued(), 0);
}

#[test]
fn a_timeout_confirmed_by_a_duplicate_ack_goes_back_n() {
    // F-RTO's second step: the head's ACK lets new data go; the peer, missing the segments
    // after the head, answers it with a duplicate: the rest of the window was lost.
    let mut c = established(cfg(), 300);
    c.send(&[1u8; 300]).expect("send");
    c.send(&[2u8; 100]).expect("send");
    assert_eq!(out(&mut c, ms(20)).len(), 3, "the window holds three segments");
    let t = c.poll_at().expect("rto armed");
    c.on_timer(t);
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 1]);
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 300, b""));
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 301], "new data, so the next ACK can tell");
    feed(&mut c, t, seg(TcpFlags::empty(), IRS + 1, Some(ISS + 101), 300, b""));
    assert_eq!(seqs_of(&out(&mut c, t)), vec![ISS + 101, ISS + 201, ISS + 301], "go-back-N from SND.UNA");
    let s = c.stats();
    assert_eq!((s.timeouts, s.spurious_timeouts), (1, 0));
}

#[test]
fn rto_backs_off_exponentially_and_gives_up_with_timeout() {
    let config = TcpConfig { max_retries: 3, ..cfg() };
    let mut c = established(config, 1000);
    c.send(b"x").expect("send");
    out(&mut c, ms(20));
    let mut last = ms(20);
    let mut gaps = Vec::new();
    let mut rst_seen = false;
    while let Some(t) = c.poll_at() {
        gaps.push(t - last);
        last = t;
        c.on_timer(t);
        for (r, _) in out(&mut c, t) {
            rst_seen |= r.flags.contains(TcpFlags::RST);
        }
    }
    assert_eq!(gaps.len(), 4, "three retransmissions, then give up");
    assert_eq!(gaps[1], gaps[0] * 2);
    assert_eq!(gaps[2], gaps[1] * 2);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
    assert!(rst_seen, "the peer is told");
}

#[test]
fn syn_is_retransmitted_then_connect_times_out() {
    let config = TcpConfig { max_syn_retries: 2, ..cfg() };
    let mut c = Connection::connect(config, local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    let mut syns = 1;
    while let Some(t) = c.poll_at() {
        c.on_timer(t);
        syns += out(&mut c, t).iter().filter(|s| s.0.flags.contains(TcpFlags::SYN)).count();
    }
    assert_eq!(syns, 3);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
}

#[test]
fn karn_rule_skips_samples_of_retransmitted_segments() {
    let mut c = established(cfg(), 1000);
    let rto_before = c.rto();
    c.send(b"abc").expect("send");
    out(&mut c, ms(100));
    let t = c.poll_at().expect("rto");
    c.on_timer(t);
    out(&mut c, t);
    let backed_off = c.rto();
    assert_eq!(backed_off, rto_before * 2);
    // An ACK long after the retransmission must not produce a (wrong) sample. The backoff is
    // undone on that progress (as BSD does), from the old estimate: no 5 s sample in it.
    let srtt = c.rtt.srtt();
    feed(&mut c, t + secs(5), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 4), 1000, b""));
    assert_eq!(c.rtt.srtt(), srtt, "no sample taken");
    assert_eq!(c.rto(), rto_before, "backoff undone by the acknowledgment of new data");
    // A fresh segment is timed again.
    c.send(b"d").expect("send");
    let t2 = t + secs(6);
    out(&mut c, t2);
    feed(
        &mut c,
        t2 + std::time::Duration::from_millis(10),
        seg(TcpFlags::empty(), IRS + 1, Some(ISS + 5), 1000, b""),
    );
    assert!(c.rto() < backed_off);
}

#[test]
fn ack_of_all_data_stops_the_timer() {
    let mut c = established(cfg(), 1000);
    c.send(b"abc").expect("send");
    out(&mut c, ms(20));
    assert!(c.poll_at().is_some());
    feed(&mut c, ms(25), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 4), 1000, b""));
    assert_eq!(c.poll_at(), None);
}
