//! A dispatch's new data handed to the sink as one run (`SegmentRun`, `SegmentSink::emit_run`)
//! against the same bytes sent one segment at a time: a by-reference loan keeps a connection's
//! segments one at a time (its edges may cut them), so a connection whose bytes were copied
//! (runs) and one whose bytes are one by-reference loan (no edge inside) must send the same
//! segments and be left in the same state.

use std::ptr::NonNull;

use super::harness::*;
use crate::tcp::{copy_from_slice_at, Connection, TxPayload};
use crate::wire::tcp::TcpFlags;

/// Bytes a NIC could send by reference (they have an address).
#[derive(Debug)]
struct ByReference(Vec<u8>);

impl TxPayload for ByReference {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        copy_from_slice_at(&self.0, offset, dst)
    }
    fn external_addr(&self) -> Option<NonNull<u8>> {
        NonNull::new(self.0.as_ptr().cast_mut())
    }
}

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

/// Two connections with the peer's `window`, `bytes` queued: copied into one, one by-reference
/// loan in the other.
fn pair(window: u16, bytes: usize) -> (Connection, Connection) {
    let data: Vec<u8> = (0..bytes).map(|i| (i * 7 + i / 11) as u8).collect();
    let mut copied = established(cfg(), window);
    assert_eq!(copied.send(&data).expect("send"), bytes);
    let mut lent = established(cfg(), window);
    lent.send_loaned(Box::new(ByReference(data))).expect("open").expect("fits");
    (copied, lent)
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
        let (mut copied, mut lent) = pair(window, bytes);
        let (mut a, mut b) = (Recorder::default(), Recorder::default());
        copied.dispatch(ms(20), &mut a);
        lent.dispatch(ms(20), &mut b);
        assert_eq!((a.runs, b.runs), (usize::from(a.segs.len() > 1), 0), "({window}, {bytes}): runs");
        assert_eq!(a.segs, b.segs, "({window}, {bytes}): the segments");
        assert_eq!(state(&copied), state(&lent), "({window}, {bytes}): after the dispatch");
        // The peer acknowledges the first two segments and opens its window: the rest goes.
        let ack = seg(TcpFlags::empty(), IRS + 1, Some(ISS + 1 + 200.min(bytes as u32)), 1000, b"");
        feed(&mut copied, ms(25), ack.clone());
        feed(&mut lent, ms(25), ack);
        assert_eq!(out(&mut copied, ms(25)), out(&mut lent, ms(25)), "({window}, {bytes}): after the ACK");
        assert_eq!(state(&copied), state(&lent), "({window}, {bytes}): at the end");
    }
}

#[test]
fn a_run_the_sink_cuts_short_resumes_where_it_stopped() {
    // The sink takes two of the four segments: SND.NXT stops after them, the RTT probe and the
    // retransmission timer are those of the two that left, and the next dispatch sends the rest.
    let (mut copied, mut lent) = pair(1000, 350);
    let (mut a, mut b) = (
        Recorder { limit: Some(2), ..Recorder::default() },
        Recorder { limit: Some(2), ..Recorder::default() },
    );
    assert_eq!(copied.dispatch(ms(20), &mut a), 2);
    assert_eq!(lent.dispatch(ms(20), &mut b), 2);
    assert_eq!((a.runs, b.runs), (1, 0));
    assert_eq!(a.segs, b.segs);
    assert_eq!(state(&copied), state(&lent), "after the cut");
    assert_eq!(copied.stats().segs_out, lent.stats().segs_out);
    let (rest_a, rest_b) = (out(&mut copied, ms(21)), out(&mut lent, ms(21)));
    let lens: Vec<usize> = rest_a.iter().map(|s| s.1.len()).collect();
    assert_eq!(lens, [100, 50]);
    assert!(rest_a[1].0.flags.contains(TcpFlags::PSH));
    assert_eq!(rest_a, rest_b);
    assert_eq!(state(&copied), state(&lent), "after the rest");
}
