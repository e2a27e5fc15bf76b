//! Keepalive and the user timeout (`tcp/liveness.rs`).

use std::time::Duration;

use super::harness::*;
use crate::tcp::{ConnError, KeepAlive, State, TcpConfig};
use crate::wire::tcp::TcpFlags;

fn keepalive(idle_ms: u64, interval_ms: u64, count: u32) -> TcpConfig {
    let k = KeepAlive {
        idle: Duration::from_millis(idle_ms),
        interval: Duration::from_millis(interval_ms),
        count,
    };
    TcpConfig { keepalive: Some(k), ..cfg() }
}

fn is_keepalive_probe(r: &crate::wire::tcp::TcpRepr, data: &[u8]) -> bool {
    is_pure_ack(r, data, IRS + 1) && r.seq_number.0 == ISS
}

#[test]
fn a_dead_peer_is_probed_count_times_then_reset() {
    let mut c = established(keepalive(1000, 100, 3), 1000);
    assert_eq!(c.poll_at(), Some(ms(10 + 1000)), "the idle timer runs from the last segment heard");
    let mut probes = 0;
    let mut rst = false;
    while let Some(t) = c.poll_at() {
        c.on_timer(t);
        for (r, d) in out(&mut c, t) {
            probes += usize::from(is_keepalive_probe(&r, &d));
            rst |= r.flags.contains(TcpFlags::RST);
        }
        assert!(t < ms(5000), "the connection must end");
    }
    assert_eq!(probes, 3, "count probes, one an interval apart");
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.error(), Some(ConnError::TimedOut));
    assert!(rst, "the peer (if it comes back) is told");
    assert_eq!(c.stats().keepalive_probes, 3);
}

#[test]
fn an_answer_rearms_the_idle_timer_and_the_connection_lives() {
    let mut c = established(keepalive(1000, 100, 2), 1000);
    for round in 0..5u64 {
        let t = c.poll_at().expect("keepalive armed");
        c.on_timer(t);
        let sent = out(&mut c, t);
        assert!(sent.iter().any(|(r, d)| is_keepalive_probe(r, d)), "round {round}: a probe");
        // The peer answers with an ACK for what it has.
        feed(&mut c, t + Duration::from_millis(5), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 1000, b""));
        assert_eq!(c.poll_at(), Some(t + Duration::from_millis(1005)), "idle again from the answer");
    }
    assert_eq!(c.state(), State::Established);
}

#[test]
fn without_keepalive_an_idle_connection_has_no_timer() {
    let c = established(cfg(), 1000);
    assert_eq!(c.poll_at(), None);
}

#[test]
fn keepalive_set_later_applies_from_then() {
    let mut c = established(cfg(), 1000);
    c.set_liveness(
        ms(500),
        Some(KeepAlive { idle: Duration::from_millis(200), ..KeepAlive::default() }),
        None,
    );
    assert_eq!(c.poll_at(), Some(ms(700)));
    c.set_liveness(ms(600), None, None);
    assert_eq!(c.poll_at(), None, "switched off again");
}

#[test]
fn a_peer_that_never_opens_its_window_is_bounded_by_the_user_timeout() {
    let config = TcpConfig { user_timeout: Some(Duration::from_secs(3)), ..cfg() };
    let mut c = established(config, 0);
    c.send(b"data the peer never takes").expect("send");
    out(&mut c, ms(20));
    // The peer answers every zero-window probe, with a zero window.
    let mut end = None;
    while let Some(t) = c.poll_at() {
        c.on_timer(t);
        let sent = out(&mut c, t);
        if c.state() == State::Closed {
            end = Some(t);
            assert!(sent.iter().any(|(r, _)| r.flags.contains(TcpFlags::RST)));
            break;
        }
        feed(&mut c, t + Duration::from_millis(1), seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1), 0, b""));
        assert!(t < ms(60_000), "the user timeout must end it");
    }
    let end = end.expect("closed");
    assert_eq!(c.error(), Some(ConnError::TimedOut));
    assert!(
        end >= ms(20 + 3000) && end <= ms(20 + 3000 + 100),
        "ended at {end:?}, 3 s after the data was queued"
    );
}

#[test]
fn the_user_timeout_runs_only_while_data_makes_no_progress() {
    let config = TcpConfig { user_timeout: Some(Duration::from_millis(500)), ..cfg() };
    let mut c = established(config, 1000);
    let mut acked = ISS + 1;
    // 10 rounds of 400 ms each: every round sends and gets its ACK, so no stall lasts 500 ms.
    for round in 0..10u64 {
        let now = ms(20 + round * 400);
        c.send(&[7u8; 50]).expect("send");
        out(&mut c, now);
        acked += 50;
        feed(
            &mut c,
            now + Duration::from_millis(300),
            seg(TcpFlags::empty(), IRS + 1, Some(acked), 1000, b""),
        );
        if let Some(t) = c.poll_at() {
            if t <= now + Duration::from_millis(400) {
                c.on_timer(t);
            }
        }
        assert_eq!(c.state(), State::Established, "round {round}");
    }
    assert_eq!(c.poll_at(), None, "nothing waits: no user-timeout deadline");
}
