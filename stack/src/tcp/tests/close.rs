use super::harness::*;
use crate::tcp::{Events, State, TcpConfig};
use crate::wire::tcp::TcpFlags;

fn fin_of(segs: &[(crate::wire::tcp::TcpRepr, Vec<u8>)]) -> Option<u32> {
    segs.iter().find(|s| s.0.flags.contains(TcpFlags::FIN)).map(|s| s.0.seq_number.0)
}

#[test]
fn active_close_walks_fin_wait_to_time_wait_to_closed() {
    let config = TcpConfig { time_wait: secs(2), ..cfg() };
    let mut c = established(config, 1000);
    c.send(b"data").expect("send");
    c.shutdown();
    assert_eq!(c.state(), State::FinWait1);
    let segs = out(&mut c, ms(20));
    assert_eq!(segs.len(), 1, "FIN rides on the last data segment");
    assert!(segs[0].0.flags.contains(TcpFlags::FIN));
    assert_eq!(segs[0].1, b"data");
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 6), 1000, b""));
    assert_eq!(c.state(), State::FinWait2);
    feed(&mut c, ms(22), seg(TcpFlags::FIN, IRS + 1, Some(ISS + 6), 1000, b""));
    assert_eq!(c.state(), State::TimeWait);
    let segs = out(&mut c, ms(22));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 2));
    // A retransmitted FIN is acknowledged again.
    feed(&mut c, ms(500), seg(TcpFlags::FIN, IRS + 1, Some(ISS + 6), 1000, b""));
    let segs = out(&mut c, ms(500));
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 2));
    assert_eq!(c.poll_at(), Some(ms(2500)), "2*MSL restarted");
    c.on_timer(ms(2500));
    assert_eq!(c.state(), State::Closed);
    assert!(c.error().is_none());
}

#[test]
fn passive_close_walks_close_wait_to_last_ack_to_closed() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::FIN, IRS + 1, Some(ISS + 1), 1000, b""));
    assert_eq!(c.state(), State::CloseWait);
    assert!(c.take_events().contains(Events::PEER_CLOSED));
    assert!(c.at_eof());
    // We may still send after the peer's FIN.
    c.send(b"late").expect("send allowed in CLOSE-WAIT");
    c.shutdown();
    assert_eq!(c.state(), State::LastAck);
    let segs = out(&mut c, ms(21));
    assert_eq!(fin_of(&segs), Some(ISS + 1));
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 2, Some(ISS + 6), 1000, b""));
    assert_eq!(c.state(), State::Closed);
    assert!(c.error().is_none());
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut c = established(cfg(), 1000);
    c.shutdown();
    let segs = out(&mut c, ms(20));
    assert_eq!(fin_of(&segs), Some(ISS + 1));
    // The peer's FIN crosses ours: it does not acknowledge our FIN yet.
    feed(&mut c, ms(21), seg(TcpFlags::FIN, IRS + 1, Some(ISS + 1), 1000, b""));
    assert_eq!(c.state(), State::Closing);
    feed(&mut c, ms(22), seg(TcpFlags::empty(), IRS + 2, Some(ISS + 2), 1000, b""));
    assert_eq!(c.state(), State::TimeWait);
}

#[test]
fn fin_and_ack_of_our_fin_in_one_segment() {
    let mut c = established(cfg(), 1000);
    c.shutdown();
    out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::FIN, IRS + 1, Some(ISS + 2), 1000, b""));
    assert_eq!(c.state(), State::TimeWait);
}

#[test]
fn lost_fin_is_retransmitted() {
    let mut c = established(cfg(), 1000);
    c.shutdown();
    out(&mut c, ms(20));
    let t = c.poll_at().expect("rto");
    c.on_timer(t);
    assert_eq!(fin_of(&out(&mut c, t)), Some(ISS + 1));
}

#[test]
fn close_with_unread_data_resets() {
    let mut c = established(cfg(), 1000);
    feed(&mut c, ms(20), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"unread"));
    c.close();
    assert_eq!(c.state(), State::Closed);
    let segs = out(&mut c, ms(21));
    assert!(segs[0].0.flags.contains(TcpFlags::RST));
}

#[test]
fn data_for_a_closed_socket_resets() {
    let mut c = established(cfg(), 1000);
    c.close();
    out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 2), 1000, b"more"));
    assert_eq!(c.state(), State::Closed);
    assert!(out(&mut c, ms(21)).iter().any(|s| s.0.flags.contains(TcpFlags::RST)));
}

#[test]
fn orphaned_fin_wait_2_is_bounded() {
    let config = TcpConfig { fin_wait2_timeout: secs(3), ..cfg() };
    let mut c = established(config, 1000);
    c.close();
    out(&mut c, ms(20));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 2), 1000, b""));
    assert_eq!(c.state(), State::FinWait2);
    let t = c.poll_at().expect("fin-wait-2 timer");
    c.on_timer(t);
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn send_after_shutdown_is_refused() {
    let mut c = established(cfg(), 1000);
    c.shutdown();
    assert!(c.send(b"x").is_err());
}

#[test]
fn close_during_connect_with_queued_data_sends_it_after_the_handshake() {
    let mut c = crate::tcp::Connection::connect(cfg(), local(), remote(), crate::tcp::SeqNumber(ISS));
    out(&mut c, ms(0));
    c.send(b"early").expect("queue before connected");
    c.close();
    assert_eq!(c.state(), State::SynSent);
    feed(&mut c, ms(5), syn_ack(1000));
    assert_eq!(c.state(), State::FinWait1);
    let segs = out(&mut c, ms(5));
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].1, b"early");
    assert!(segs[0].0.flags.contains(TcpFlags::FIN));
}

#[test]
fn close_during_connect_without_data_just_closes() {
    let mut c = crate::tcp::Connection::connect(cfg(), local(), remote(), crate::tcp::SeqNumber(ISS));
    out(&mut c, ms(0));
    c.close();
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn fin_wait_2_acknowledges_the_peers_data_without_sending_our_fin_again() {
    // Half-close: we shut our side, the peer acknowledges our FIN and keeps sending (a client
    // that sent its request and reads the answer). Each ACK of ours is a pure ACK: the FIN is
    // acknowledged, so it is neither sent again nor given a second sequence number.
    let mut c = established(cfg(), 1000);
    c.shutdown();
    let segs = out(&mut c, ms(20));
    assert_eq!(fin_of(&segs), Some(ISS + 1));
    feed(&mut c, ms(21), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 2), 1000, b""));
    assert_eq!(c.state(), State::FinWait2);
    assert!(!c.wants_output(), "nothing owed once the FIN is acknowledged");
    for (i, at) in [(0u32, 22u64), (1, 23), (2, 24)] {
        feed(&mut c, ms(at), seg(TcpFlags::empty(), IRS + 1 + 5 * i, Some(ISS + 2), 1000, b"reply"));
        let segs = out(&mut c, ms(at));
        assert_eq!(segs.len(), 1, "one ACK for the data at {at} ms: {segs:?}");
        assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 6 + 5 * i), "{:?}", segs[0].0);
        assert_eq!(segs[0].0.seq_number, crate::tcp::SeqNumber(ISS + 2), "after our FIN, not past it");
    }
    assert_eq!(c.poll_at(), None, "no retransmission timer: nothing of ours is in flight");
    assert_eq!(c.state(), State::FinWait2);
}
