use super::harness::*;
use crate::tcp::{
    listen_input, reset_for_closed, ConnError, Connection, Events, ListenAction, SeqNumber, State,
};
use crate::wire::tcp::TcpFlags;

#[test]
fn syn_sent_emits_syn_with_mss_and_window_scale() {
    let config = crate::tcp::TcpConfig { window_scale: Some(7), ..cfg() };
    let mut c = Connection::connect(config, local(), remote(), SeqNumber(ISS));
    assert_eq!(c.state(), State::SynSent);
    let segs = out(&mut c, ms(0));
    assert_eq!(segs.len(), 1);
    let (syn, data) = &segs[0];
    assert!(syn.flags.contains(TcpFlags::SYN));
    assert_eq!(syn.ack_number, None);
    assert_eq!(syn.seq_number, SeqNumber(ISS));
    assert_eq!(syn.max_seg_size, Some(100));
    assert_eq!(syn.window_scale, Some(7));
    assert!(data.is_empty());
    // Nothing more until the SYN-ACK or the timer.
    assert!(out(&mut c, ms(1)).is_empty());
}

#[test]
fn syn_ack_establishes_and_is_acknowledged() {
    let mut c = Connection::connect(cfg(), local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    feed(&mut c, ms(5), syn_ack(500));
    assert_eq!(c.state(), State::Established);
    assert!(c.take_events().contains(Events::CONNECTED));
    let segs = out(&mut c, ms(5));
    assert_eq!(segs.len(), 1);
    assert!(is_pure_ack(&segs[0].0, &segs[0].1, IRS + 1));
    assert_eq!(segs[0].0.seq_number, SeqNumber(ISS + 1));
    assert_eq!(c.send_mss(), 100);
    // The RTT of the SYN was sampled: RTO moved off the initial 1 s.
    assert!(c.rto() < secs(1));
}

#[test]
fn peer_mss_lowers_send_mss_and_absence_means_536() {
    let config = crate::tcp::TcpConfig { mss: 1460, ..cfg() };
    let mut c = Connection::connect(config.clone(), local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    feed(&mut c, ms(1), syn_ack(500)); // MSS 100
    assert_eq!(c.send_mss(), 100);
    let mut c = Connection::connect(config, local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    let mut s = syn_ack(500);
    s.0.max_seg_size = None;
    feed(&mut c, ms(1), s);
    assert_eq!(c.send_mss(), 536);
}

#[test]
fn rst_answering_syn_is_connection_refused() {
    let mut c = Connection::connect(cfg(), local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    // A RST without an acceptable ACK is ignored.
    feed(&mut c, ms(1), seg(TcpFlags::RST, 0, None, 0, b""));
    assert_eq!(c.state(), State::SynSent);
    feed(&mut c, ms(1), seg(TcpFlags::RST, 0, Some(ISS + 1), 0, b""));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::Refused));
}

#[test]
fn syn_sent_answers_a_bad_ack_with_reset() {
    let mut c = Connection::connect(cfg(), local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    feed(&mut c, ms(1), seg(TcpFlags::SYN, IRS, Some(ISS + 77), 100, b""));
    assert_eq!(c.state(), State::SynSent);
    let segs = out(&mut c, ms(1));
    assert_eq!(segs.len(), 1);
    assert!(segs[0].0.flags.contains(TcpFlags::RST));
    assert_eq!(segs[0].0.seq_number, SeqNumber(ISS + 77));
}

#[test]
fn peer_mss_below_the_minimum_is_clamped_up_to_it() {
    let config = crate::tcp::TcpConfig { mss: 1460, ..cfg() };
    for (offered, expect) in [(0, 64), (1, 64), (40, 64), (63, 64), (64, 64), (65, 65), (1460, 1460)] {
        // Passive open (the SYN's option) and active open (the SYN-ACK's option) alike.
        let (mut syn, _) = seg(TcpFlags::SYN, IRS, None, 1000, b"");
        syn.max_seg_size = Some(offered);
        let c = Connection::accept(config.clone(), local(), remote(), &syn, SeqNumber(ISS));
        assert_eq!(c.send_mss(), expect, "SYN with MSS {offered}");
        let mut c = Connection::connect(config.clone(), local(), remote(), SeqNumber(ISS));
        out(&mut c, ms(0));
        let mut sa = syn_ack(1000);
        sa.0.max_seg_size = Some(offered);
        feed(&mut c, ms(1), sa);
        assert_eq!(c.state(), State::Established);
        assert_eq!(c.send_mss(), expect, "SYN-ACK with MSS {offered}");
    }
    assert_eq!(crate::tcp::MIN_MSS, 64);
    // Our own configured MSS is ours to choose: a peer's clamp never raises it.
    let (mut syn, _) = seg(TcpFlags::SYN, IRS, None, 1000, b"");
    syn.max_seg_size = Some(1);
    let small = crate::tcp::TcpConfig { mss: 48, ..cfg() };
    assert_eq!(Connection::accept(small, local(), remote(), &syn, SeqNumber(ISS)).send_mss(), 48);
}

#[test]
fn passive_open_sends_syn_ack_then_establishes() {
    let (mut syn, _) = seg(TcpFlags::SYN, IRS, None, 1000, b"");
    syn.max_seg_size = Some(80);
    let mut c = Connection::accept(cfg(), local(), remote(), &syn, SeqNumber(ISS));
    assert_eq!(c.state(), State::SynReceived);
    let segs = out(&mut c, ms(0));
    assert_eq!(segs.len(), 1);
    let sa = &segs[0].0;
    assert!(sa.flags.contains(TcpFlags::SYN));
    assert_eq!(sa.ack_number, Some(SeqNumber(IRS + 1)));
    assert_eq!(sa.window_scale, None, "no scale option unless the peer offered one");
    assert_eq!(c.send_mss(), 80);
    // The handshake's ACK may already carry data.
    feed(&mut c, ms(2), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b"hello"));
    assert_eq!(c.state(), State::Established);
    let mut buf = [0u8; 16];
    assert_eq!(c.recv(&mut buf), 5);
    assert_eq!(&buf[..5], b"hello");
}

#[test]
fn syn_received_resends_syn_ack_on_retransmitted_syn() {
    let (syn, _) = seg(TcpFlags::SYN, IRS, None, 1000, b"");
    let mut c = Connection::accept(cfg(), local(), remote(), &syn, SeqNumber(ISS));
    out(&mut c, ms(0));
    feed(&mut c, ms(5), seg(TcpFlags::SYN, IRS, None, 1000, b""));
    let segs = out(&mut c, ms(5));
    assert_eq!(segs.len(), 1);
    assert!(segs[0].0.flags.contains(TcpFlags::SYN));
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 1)));
}

#[test]
fn syn_received_resets_on_unacceptable_ack() {
    let (syn, _) = seg(TcpFlags::SYN, IRS, None, 1000, b"");
    let mut c = Connection::accept(cfg(), local(), remote(), &syn, SeqNumber(ISS));
    out(&mut c, ms(0));
    feed(&mut c, ms(5), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 9), 1000, b""));
    assert_eq!(c.state(), State::SynReceived);
    let segs = out(&mut c, ms(5));
    assert!(segs[0].0.flags.contains(TcpFlags::RST));
    assert_eq!(segs[0].0.seq_number, SeqNumber(ISS + 9));
}

#[test]
fn simultaneous_open_goes_through_syn_received() {
    let mut c = Connection::connect(cfg(), local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    let mut s = seg(TcpFlags::SYN, IRS, None, 1000, b"");
    s.0.max_seg_size = Some(100);
    feed(&mut c, ms(1), s);
    assert_eq!(c.state(), State::SynReceived);
    let segs = out(&mut c, ms(1));
    assert!(segs[0].0.flags.contains(TcpFlags::SYN));
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 1)));
    feed(&mut c, ms(2), seg(TcpFlags::SYN, IRS, Some(ISS + 1), 1000, b""));
    // The peer's SYN-ACK is a retransmitted SYN with ACK: it still completes the handshake
    // when it acknowledges our SYN.
    feed(&mut c, ms(2), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
    assert_eq!(c.state(), State::Established);
}

#[test]
fn window_scale_needs_both_sides() {
    let config = crate::tcp::TcpConfig { window_scale: Some(2), ..cfg() };
    let mut c = Connection::connect(config.clone(), local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    let mut s = syn_ack(100);
    s.0.window_scale = Some(3);
    feed(&mut c, ms(1), s);
    // Windows after the SYN are scaled by the peer's shift.
    feed(&mut c, ms(2), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 10, b""));
    c.send(&[7u8; 300]).expect("send");
    let segs = out(&mut c, ms(2));
    let sent: usize = segs.iter().map(|s| s.1.len()).sum();
    assert_eq!(sent, 80, "window 10 << 3");

    let mut c = Connection::connect(config, local(), remote(), SeqNumber(ISS));
    out(&mut c, ms(0));
    feed(&mut c, ms(1), syn_ack(100)); // no scale option from the peer
    feed(&mut c, ms(2), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 200, b""));
    c.send(&[7u8; 300]).expect("send");
    let sent: usize = out(&mut c, ms(2)).iter().map(|s| s.1.len()).sum();
    assert_eq!(sent, 200, "unscaled");
}

#[test]
fn listener_classifies_segments() {
    let (syn, _) = seg(TcpFlags::SYN, 1, None, 10, b"");
    assert_eq!(listen_input(&syn), ListenAction::Accept);
    let (rst, _) = seg(TcpFlags::RST, 1, None, 10, b"");
    assert_eq!(listen_input(&rst), ListenAction::Drop);
    let (ack, _) = seg(TcpFlags::empty(), 1, Some(99), 10, b"");
    match listen_input(&ack) {
        ListenAction::Reset(r) => {
            assert_eq!(r.seq_number, SeqNumber(99));
            assert_eq!(r.dst_port, remote().port());
        }
        other => panic!("expected reset, got {other:?}"),
    }
}

#[test]
fn closed_port_resets_per_rfc() {
    let (s, p) = seg(TcpFlags::SYN, 10, None, 10, b"abc");
    let r = reset_for_closed(&s, p.len()).expect("reset");
    assert_eq!(r.seq_number, SeqNumber(0));
    assert_eq!(r.ack_number, Some(SeqNumber(14)));
    let (s, _) = seg(TcpFlags::empty(), 10, Some(77), 10, b"");
    let r = reset_for_closed(&s, 0).expect("reset");
    assert_eq!(r.seq_number, SeqNumber(77));
    assert_eq!(r.ack_number, None);
    let (s, _) = seg(TcpFlags::RST, 10, None, 10, b"");
    assert!(reset_for_closed(&s, 0).is_none(), "never answer a RST with a RST");
}
