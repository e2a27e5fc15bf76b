//! Segments that match no connection: the LISTEN and CLOSED rows of RFC 9293 section 3.10.7.

use super::SeqNumber;
use crate::wire::tcp::{TcpFlags, TcpRepr};

/// What a listener does with a segment that matches no connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenAction {
    /// A connection request: create a connection in SYN-RECEIVED (if the backlog allows).
    Accept,
    /// Answer with this RST.
    Reset(TcpRepr),
    /// Ignore it.
    Drop,
}

/// RFC 9293 3.10.7.2: a segment arriving for a listening port.
pub fn listen_input(seg: &TcpRepr) -> ListenAction {
    if seg.flags.contains(TcpFlags::RST) {
        return ListenAction::Drop;
    }
    if let Some(ack) = seg.ack_number {
        return ListenAction::Reset(reply(seg, ack, None));
    }
    if seg.flags.contains(TcpFlags::SYN) {
        return ListenAction::Accept;
    }
    ListenAction::Drop
}

/// RFC 9293 3.10.7.1: the RST answering a segment for no connection (`None` for a RST).
pub fn reset_for_closed(seg: &TcpRepr, payload_len: usize) -> Option<TcpRepr> {
    if seg.flags.contains(TcpFlags::RST) {
        return None;
    }
    Some(match seg.ack_number {
        Some(ack) => reply(seg, ack, None),
        None => reply(seg, SeqNumber(0), Some(seg.seq_number + seg.segment_len(payload_len))),
    })
}

fn reply(seg: &TcpRepr, seq: SeqNumber, ack: Option<SeqNumber>) -> TcpRepr {
    TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        seq_number: seq,
        ack_number: ack,
        flags: TcpFlags::RST,
        window_len: 0,
        max_seg_size: None,
        window_scale: None,
        sack: crate::wire::TcpSack::NONE,
    }
}
