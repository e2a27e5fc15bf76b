//! The SlimTCP connection state machine, sans-IO: segments and a clock in; segments, events and
//! timer deadlines out.
//!
//! SlimTCP keeps RTO (RFC 6298 with Karn's rule and backoff), window scaling and MSS, and drops
//! what a data-center link makes unnecessary: timestamps, PAWS and congestion control. Pure ACKs
//! are coalesced to one per socket per receive burst, except that each out-of-order segment
//! earns a duplicate ACK (up to [`DUP_ACKS_PER_BURST`]).
//!
//! # Loss recovery: where SlimTCP departs from the paper (issue 14)
//!
//! The paper's stack accepted only the next expected segment and recovered by go-back-N: right
//! for a lossless fabric, wrong for guests that talk to the world. Measured against Linux over a
//! TAP with nftables loss on a forwarding hop, 4 MiB at 0.1% loss took 56 s: Linux's RTO recovery
//! (F-RTO, RFC 5682) probes with *new* data past the hole, which an in-order-only receiver
//! drops; Linux, already in its Loss state, ignores the duplicate ACKs, and each timeout
//! recovered one window before the next timeout, doubled and never reset (no RTT sample without
//! timestamps: everything acknowledged was retransmitted), stalled it again (0.2, 0.4, ... 26 s).
//! The same mechanism stalled the 200 MB transfer after a sub-second flood. So, as a receiver:
//!
//! - a bounded **reorder queue** (`reorder.rs`) keeps segments beyond a hole in their buffers:
//!   only bytes inside the advertised window (charged to it), at most
//!   [`reorder::MAX_RANGES`] ranges, small payloads copied out of big buffers; when the hole is
//!   filled the ACK jumps past everything held, so one loss costs one retransmission;
//! - **SACK** (RFC 2018, negotiated when [`TcpConfig::sack`]): pure ACKs carry up to 4 blocks
//!   from the reorder queue, so Linux retransmits exactly the holes, and finds lost
//!   retransmissions (RACK) without a timeout.
//!
//! As a sender (SlimTCP -> Linux, and SlimTCP <-> SlimTCP): **fast retransmit** on the third
//! duplicate ACK or three segments' worth SACKed (RFC 5681, RFC 6675's IsLost), then recovery up
//! to SND.MAX: with SACK every hole below the highest SACKed byte goes once, at once (a bounded
//! [`scoreboard`]); without, NewReno (RFC 6582): each partial ACK retransmits the next hole. A
//! lost retransmission of the first hole goes again: seen when SACK blocks show that data sent
//! after it arrived (the link keeps order), or from a recovery timer (SRTT + 4 RTTVAR, no 200 ms
//! floor, doubled at each expiry) when nothing can tell (a window full of SACKed data). The RTO stays the last resort, still go-back-N but skipping what the peer
//! SACKed (a second timeout in a row forgets the SACK information: RFC 2018 section 8, the
//! receiver may have reneged); SACK blocks still start a recovery right after a timeout, plain
//! duplicate ACKs do not (RFC 6582 section 3.2). The RTO's backoff is undone when new data is
//! acknowledged (BSD's choice).
//! There is still no congestion control: recovery is about not waiting, not about yielding.
//!
//! The in-order fast path is unchanged: an in-order segment costs one extra test (is the
//! reorder queue empty?), and segments without SACK blocks keep the option-less header template.
pub mod config;
pub mod connection;
mod describe;
pub mod events;
mod input;
pub mod isn;
pub mod listen;
pub mod liveness;
pub mod output;
mod persist;
mod recovery;
pub mod recv_buffer;
pub mod reorder;
pub mod rtt;
pub mod scoreboard;
pub mod send_buffer;
pub mod state;
pub mod stats;
pub mod syncookie;
mod timers;
pub mod tx_payload;

#[cfg(test)]
mod tests;

/// Duplicate ACKs sent at most per dispatch for out-of-order arrivals (a fast retransmit needs
/// three).
pub const DUP_ACKS_PER_BURST: u8 = 3;

/// Duplicate ACKs that trigger a fast retransmit (RFC 5681 section 3.2).
pub const DUP_ACK_THRESHOLD: u8 = 3;

pub use crate::wire::SeqNumber;
pub use config::{TcpConfig, MAX_TCP_BUFFER};
pub use connection::{Connection, SendError, MIN_MSS};
pub use events::Events;
pub use isn::IsnGenerator;
pub use listen::{listen_input, reset_for_closed, ListenAction};
pub use liveness::{KeepAlive, LivenessOpt, LivenessOptions};
pub use output::{emit_each, Payload, SegmentRun, SegmentSink, SinkFull};
pub use send_buffer::{Loan, LoanId, LoanedSlice};
/// Why a connection failed: part of the application contract, defined there.
pub use slimtcp_api::ConnError;
pub use state::State;
pub use stats::ConnStats;
pub use syncookie::{cookie_syn_ack, CookieSyn, SynCookies};
pub use tx_payload::{ask_ahead, copy_all, copy_from_slice_at, payload_sum, LoanTag, TxPayload};
