//! SYN cookies, sans-IO: what a cookie SYN-ACK carries, which ACKs bring a valid cookie back,
//! and the connection made from one.

use super::harness::*;
use crate::tcp::syncookie::{COOKIE_PERIOD, MSS_TABLE};
use crate::tcp::{cookie_syn_ack, Connection, Events, SeqNumber, State, SynCookies, TcpConfig};
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// The peer's SYN to our listener (the peer is `remote()`, we are `local()`).
fn syn(mss: Option<u16>, wscale: Option<u8>) -> TcpRepr {
    let mut s = seg(TcpFlags::SYN, IRS, None, 64_000, b"").0;
    s.max_seg_size = mss;
    s.window_scale = wscale;
    s
}

/// The peer's ACK returning cookie `iss`.
fn ack_for(iss: SeqNumber, window: u16) -> TcpRepr {
    seg(TcpFlags::empty(), IRS + 1, Some(iss.0.wrapping_add(1)), window, b"").0
}

fn at(period_fraction: f64) -> Instant {
    Instant::from_micros((COOKIE_PERIOD.as_micros() as f64 * period_fraction) as u64)
}

#[test]
fn cookie_syn_ack_carries_our_options_and_the_empty_buffer_window() {
    let cookies = SynCookies::new();
    let config = TcpConfig { window_scale: Some(7), rx_buffer: 1 << 20, ..cfg() };
    let s = syn(Some(1460), Some(9));
    let iss = cookies.make(local(), remote(), &s, ms(5));
    let sa = cookie_syn_ack(&config, &s, iss);
    assert_eq!(sa.flags, TcpFlags::SYN);
    assert_eq!(sa.seq_number, iss);
    assert_eq!(sa.ack_number, Some(SeqNumber(IRS + 1)));
    assert_eq!((sa.src_port, sa.dst_port), (local().port(), remote().port()));
    assert_eq!(sa.max_seg_size, Some(100));
    assert_eq!(sa.window_scale, Some(7));
    assert_eq!(sa.window_len, u16::MAX);
    // No window-scale option from the peer: none from us either (RFC 7323 section 1.3).
    let s = syn(Some(1460), None);
    assert_eq!(cookie_syn_ack(&config, &s, iss).window_scale, None);
}

#[test]
fn a_returned_cookie_gives_back_the_peers_mss_and_window_scale() {
    let cookies = SynCookies::new();
    for (offered, expect) in
        [(1460, 1460), (1448, 1440), (9000, 8960), (536, 536), (100, 64), (64, 64), (0, 64)]
    {
        for wscale in [None, Some(0), Some(7), Some(14), Some(200)] {
            let s = syn(Some(offered), wscale);
            let iss = cookies.make(local(), remote(), &s, ms(1));
            let c = cookies.check(local(), remote(), &ack_for(iss, 100), ms(900)).expect("valid cookie");
            assert_eq!(c.peer_mss, expect, "MSS {offered}");
            assert_eq!(c.peer_wscale, wscale.map(|w| w.min(14)), "MSS {offered} wscale {wscale:?}");
            assert_eq!((c.iss, c.irs), (iss, SeqNumber(IRS)));
        }
    }
    // No MSS option: the RFC 9293 default of 536.
    let iss = cookies.make(local(), remote(), &syn(None, None), ms(1));
    assert_eq!(cookies.check(local(), remote(), &ack_for(iss, 1), ms(2)).map(|c| c.peer_mss), Some(536));
    assert!(MSS_TABLE.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn forged_altered_or_misdirected_acks_are_refused() {
    let cookies = SynCookies::new();
    let s = syn(Some(1460), Some(7));
    let iss = cookies.make(local(), remote(), &s, ms(0));
    let good = ack_for(iss, 100);
    assert!(cookies.check(local(), remote(), &good, ms(1)).is_some());
    // Every single-bit change of the returned cookie breaks it.
    for bit in 0..32 {
        let bad = ack_for(SeqNumber(iss.0 ^ (1 << bit)), 100);
        assert_eq!(cookies.check(local(), remote(), &bad, ms(1)), None, "bit {bit}");
    }
    // Another peer sequence number, another peer, another port of ours, another secret.
    let mut other_seq = good;
    other_seq.seq_number = SeqNumber(IRS + 2);
    assert_eq!(cookies.check(local(), remote(), &other_seq, ms(1)), None);
    let other_peer = "10.0.0.3:80".parse().expect("addr");
    assert_eq!(cookies.check(local(), other_peer, &good, ms(1)), None);
    let other_local = "10.0.0.1:4001".parse().expect("addr");
    assert_eq!(cookies.check(other_local, remote(), &good, ms(1)), None);
    assert_eq!(SynCookies::new().check(local(), remote(), &good, ms(1)), None);
    // Not a bare ACK: SYN, RST, or no ACK at all.
    for flags in [TcpFlags::SYN, TcpFlags::RST] {
        let mut f = good;
        f.flags = flags;
        assert_eq!(cookies.check(local(), remote(), &f, ms(1)), None, "{flags:?}");
    }
    let mut no_ack = good;
    no_ack.ack_number = None;
    assert_eq!(cookies.check(local(), remote(), &no_ack, ms(1)), None);
}

#[test]
fn blind_guesses_almost_never_pass() {
    let cookies = SynCookies::new();
    let mut rng = crate::nic::fault::Rng::new(0x5eed);
    let mut passed = 0;
    for _ in 0..200_000 {
        let guess = ack_for(SeqNumber(rng.next_u64() as u32), 100);
        passed += usize::from(cookies.check(local(), remote(), &guess, at(0.5)).is_some());
    }
    // Expected 200000 / 2^23 = 0.02.
    assert!(passed <= 1, "{passed} random cookies passed");
}

#[test]
fn a_cookie_lives_one_to_two_periods() {
    let cookies = SynCookies::new();
    let s = syn(Some(1460), None);
    let made = at(3.9);
    let iss = cookies.make(local(), remote(), &s, made);
    let ack = ack_for(iss, 100);
    assert!(cookies.check(local(), remote(), &ack, at(3.95)).is_some());
    assert!(cookies.check(local(), remote(), &ack, at(4.99)).is_some(), "the next period");
    assert_eq!(cookies.check(local(), remote(), &ack, at(5.0)), None, "expired");
    assert_eq!(cookies.check(local(), remote(), &ack, at(7.9)), None, "the counter wrapped: still expired");
    assert_eq!(cookies.check(local(), remote(), &ack, at(2.5)), None, "from the future");
    // Early in time (counter 0), a cookie claiming an older period is not mistaken for one.
    let early = cookies.make(local(), remote(), &s, ms(1));
    assert!(cookies.check(local(), remote(), &ack_for(early, 1), ms(2)).is_some());
}

#[test]
fn the_cookie_ack_establishes_with_the_cookies_options() {
    let cookies = SynCookies::new();
    let config = TcpConfig { mss: 1460, window_scale: Some(7), rx_buffer: 1 << 20, ..cfg() };
    let s = syn(Some(1400), Some(9));
    let iss = cookies.make(local(), remote(), &s, ms(0));
    // The ACK carries data and a scaled window.
    let (mut ack, mut data) = seg(TcpFlags::PSH, IRS + 1, Some(iss.0.wrapping_add(1)), 100, b"hello");
    ack.dst_port = local().port();
    let cookie = cookies.check(local(), remote(), &ack, ms(20)).expect("valid");
    let mut c = Connection::from_cookie(config, local(), remote(), &cookie);
    assert_eq!(c.state(), State::SynReceived);
    c.on_segment(ms(20), &ack, &mut data);
    assert_eq!(c.state(), State::Established);
    assert!(c.take_events().contains(Events::CONNECTED | Events::READABLE));
    assert_eq!(c.send_mss(), 1400);
    let mut buf = [0u8; 16];
    assert_eq!(c.recv(&mut buf), 5);
    assert_eq!(&buf[..5], b"hello");
    // Our data goes out at SND.NXT = cookie + 1; the peer's window is scaled by its shift 9.
    assert_eq!(c.send(&[7u8; 3000]).expect("send"), 3000);
    let segs = out(&mut c, ms(21));
    assert_eq!(segs.len(), 3);
    assert_eq!(segs[0].0.seq_number, iss + 1);
    assert_eq!(segs[0].0.ack_number, Some(SeqNumber(IRS + 6)));
    assert_eq!(segs[0].1.len(), 1400);
    // Our window is advertised with our shift 7 (the 5 bytes were read: the buffer is empty).
    assert_eq!(segs[0].0.window_len, ((1 << 20) >> 7) as u16);
}

#[test]
fn a_cookie_connection_without_window_scaling_advertises_unscaled() {
    let cookies = SynCookies::new();
    let config = TcpConfig { mss: 1460, window_scale: Some(7), rx_buffer: 1 << 20, ..cfg() };
    let iss = cookies.make(local(), remote(), &syn(Some(1460), None), ms(0));
    let ack = ack_for(iss, 1000);
    let cookie = cookies.check(local(), remote(), &ack, ms(1)).expect("valid");
    let mut c = Connection::from_cookie(config, local(), remote(), &cookie);
    c.on_segment(ms(1), &ack, &mut crate::nic::PacketBuf::from_slice(b""));
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.send(&[1u8; 3000]).expect("send"), 3000);
    let segs = out(&mut c, ms(2));
    // The peer's window (1000, unscaled) limits what we send; ours is 65535 at most.
    assert_eq!(segs.iter().map(|s| s.1.len()).sum::<usize>(), 1000);
    assert_eq!(segs[0].0.window_len, u16::MAX);
}
