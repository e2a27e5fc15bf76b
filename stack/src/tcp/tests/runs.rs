//! A dispatch's new data handed to the sink as one run (`SegmentRun`, `SegmentSink::emit_run`)
//! against the same bytes sent one segment at a time. A by-reference loan's edge cuts a
//! segment, and a run ends there: bytes queued as loans of one MSS each go one segment at a
//! time, and must leave as the same segments, and the connection in the same state, as the
//! bytes copied (one run) or lent as one loan (one run inside it).

use super::harness::*;
use crate::tcp::tx_payload::AddressedBytes;
use crate::tcp::Connection;
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// The connection's state without its send buffer (which holds the bytes differently).
fn state(c: &Connection) -> String {
    let text = format!("{c:?}");
    let start = text.find("tx: SendBuffer {").expect("the send buffer in the Debug output");
    let mut depth = 0;
    let mut end = start;
    for (i, ch) in text[start..].char_indices() {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = start + i + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    format!("{}{}", &text[..start], &text[end..])
}

/// Three connections with the peer's `window`, `bytes` queued: copied, one by-reference loan,
/// and by-reference loans of one MSS each (the reference: one segment at a time).
fn trio(window: u16, bytes: usize) -> [Connection; 3] {
    let data: Vec<u8> = (0..bytes).map(|i| (i * 7 + i / 11) as u8).collect();
    let mut copied = established(cfg(), window);
    assert_eq!(copied.send(&data).expect("send"), bytes);
    let mut lent = established(cfg(), window);
    lent.send_loaned(Box::new(AddressedBytes(data.clone()))).expect("open").expect("fits");
    let mut one_by_one = established(cfg(), window);
    for piece in data.chunks(MSS) {
        one_by_one.send_loaned(Box::new(AddressedBytes(piece.to_vec()))).expect("open").expect("fits");
    }
    [copied, lent, one_by_one]
}

/// The harness's MSS (`cfg()`).
const MSS: usize = 100;

/// The copied and the one-loan connections are in the reference's state (`when`).
fn assert_alike(conns: &[Connection; 3], what: &str, when: &str) {
    let [copied, lent, one_by_one] = conns;
    assert_eq!(state(copied), state(one_by_one), "{what}: copied, {when}");
    assert_eq!(state(lent), state(one_by_one), "{what}: one loan, {when}");
}

/// The peer acknowledges up to `ISS + 1 + acked` and opens its window to 1000: all three send
/// the same (the rest), and are left alike.
fn ack_and_compare(conns: &mut [Connection; 3], acked: u32, what: &str) {
    let ack = seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1 + acked), 1000, b"");
    let after: Vec<Vec<(TcpRepr, Vec<u8>)>> = conns
        .iter_mut()
        .map(|c| {
            feed(c, ms(25), ack.clone());
            out(c, ms(25))
        })
        .collect();
    assert_eq!(after[0], after[2], "{what}: copied, after the ACK");
    assert_eq!(after[1], after[2], "{what}: one loan, after the ACK");
    assert_alike(conns, what, "at the end");
}

#[test]
fn a_run_sends_what_one_segment_at_a_time_sends() {
    // (window, bytes): the whole write in one window (a short last segment with PSH, or whole
    // segments only), the window cutting the run (its rest below one MSS held back by silly
    // window avoidance), one whole segment in the window (no run), a single segment (no run)
    // and two.
    for (window, bytes) in
        [(1000, 350), (1000, 1000), (300, 1000), (250, 1000), (180, 1000), (1000, 100), (1000, 150)]
    {
        let mut conns = trio(window, bytes);
        let mut sinks: [Recorder; 3] = Default::default();
        for (c, sink) in conns.iter_mut().zip(&mut sinks) {
            c.dispatch(ms(20), sink);
        }
        let what = format!("({window}, {bytes})");
        let runs = usize::from(sinks[2].segs.len() > 1);
        assert_eq!(sinks.each_ref().map(|s| s.runs), [runs, runs, 0], "{what}: runs");
        assert_eq!(sinks[0].segs, sinks[2].segs, "{what}: copied");
        assert_eq!(sinks[1].segs, sinks[2].segs, "{what}: one loan");
        assert_alike(&conns, &what, "after the dispatch");
        // The peer acknowledges the first two segments and opens its window: the rest goes.
        ack_and_compare(&mut conns, 200.min(bytes as u32), &what);
    }
}

#[test]
fn a_run_the_sink_cuts_short_resumes_where_it_stopped() {
    // The sink takes one, two or three of the four segments: SND.NXT stops after them, the RTT
    // probe and the retransmission timer are those of the segments that left (nothing counted
    // as sent again), and the next dispatch sends the rest.
    for taken in 1..=3 {
        let mut conns = trio(1000, 350);
        let mut sinks: [Recorder; 3] =
            std::array::from_fn(|_| Recorder { limit: Some(taken), ..Recorder::default() });
        for (c, sink) in conns.iter_mut().zip(&mut sinks) {
            assert_eq!(c.dispatch(ms(20), sink), taken);
        }
        assert_eq!(sinks.each_ref().map(|s| s.runs), [1, 1, 0]);
        assert_eq!(sinks[0].segs, sinks[2].segs);
        assert_eq!(sinks[1].segs, sinks[2].segs);
        let what = format!("{taken} taken");
        assert_alike(&conns, &what, "after the cut");
        assert_eq!(conns[0].stats().retransmits, 0, "{what}");
        let rest: Vec<_> = conns.iter_mut().map(|c| out(c, ms(21))).collect();
        let lens: Vec<usize> = rest[2].iter().map(|s| s.1.len()).collect();
        assert_eq!(lens, [100, 100, 100, 50][taken..]);
        assert!(rest[2].last().is_some_and(|s| s.0.flags.contains(TcpFlags::PSH)));
        assert_eq!(rest[0], rest[2]);
        assert_eq!(rest[1], rest[2]);
        assert_alike(&conns, &what, "after the rest");
    }
}

#[test]
fn a_fin_due_goes_on_its_own_segment_after_the_run() {
    // The application closed its side after writing: the segment that ends what is queued
    // carries the FIN (and PSH) and goes one at a time; the segments before it are a run.
    for (window, bytes) in [(1000, 350), (1000, 1000), (1000, 250), (300, 1000)] {
        let mut conns = trio(window, bytes);
        let mut sinks: [Recorder; 3] = Default::default();
        for (c, sink) in conns.iter_mut().zip(&mut sinks) {
            c.shutdown();
            c.dispatch(ms(20), sink);
        }
        let what = format!("({window}, {bytes})");
        assert_eq!(sinks.each_ref().map(|s| s.runs), [1, 1, 0], "{what}: runs");
        assert_eq!(sinks[0].segs, sinks[2].segs, "{what}: copied");
        assert_eq!(sinks[1].segs, sinks[2].segs, "{what}: one loan");
        let fins: Vec<bool> =
            sinks[2].segs.iter().map(|(repr, _)| repr.flags.contains(TcpFlags::FIN)).collect();
        let fin_sent = bytes <= usize::from(window);
        assert_eq!(fins.last(), Some(&fin_sent), "{what}: the FIN on the last segment");
        assert_eq!(fins.iter().filter(|&&fin| fin).count(), usize::from(fin_sent), "{what}: one FIN");
        assert_alike(&conns, &what, "after the dispatch");
        // The peer acknowledges two segments and opens its window: the rest (and the FIN) goes.
        ack_and_compare(&mut conns, 200, &what);
    }
}
