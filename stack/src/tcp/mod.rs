//! The SlimTCP connection state machine, sans-IO: segments and a clock in; segments, events and
//! timer deadlines out.
//!
//! SlimTCP keeps RTO (RFC 6298 with Karn's rule and backoff), window scaling and MSS, and drops
//! what a reliable, ordered link makes unnecessary: SACK, timestamps, PAWS, congestion control,
//! fast retransmit and the reorder buffer (an out-of-order segment is dropped and answered with a
//! duplicate ACK; recovery is go-back-N from the first unacknowledged byte). Pure ACKs are
//! coalesced to one per socket per receive burst, except that each out-of-order segment earns a
//! duplicate ACK (up to [`DUP_ACKS_PER_BURST`]): a peer that does fast retransmit (Linux) then
//! recovers a loss after three duplicates instead of its retransmission timeout, whose backoff
//! can stall a connection for a minute on a lossy link.

pub mod config;
pub mod connection;
pub mod events;
mod input;
pub mod isn;
pub mod listen;
pub mod liveness;
pub mod output;
pub mod recv_buffer;
pub mod reorder;
pub mod rtt;
pub mod scoreboard;
pub mod send_buffer;
pub mod seq;
pub mod state;
pub mod syncookie;
mod timers;

#[cfg(test)]
mod tests;

/// Duplicate ACKs sent at most per dispatch for out-of-order arrivals (a fast retransmit needs
/// three).
pub const DUP_ACKS_PER_BURST: u32 = 3;

/// Duplicate ACKs that trigger a fast retransmit (RFC 5681 section 3.2).
pub const DUP_ACK_THRESHOLD: u32 = 3;

pub use config::TcpConfig;
pub use connection::{ConnError, ConnStats, Connection, SendError, MIN_MSS};
pub use events::Events;
pub use isn::IsnGenerator;
pub use listen::{listen_input, reset_for_closed, ListenAction};
pub use liveness::{KeepAlive, LivenessOpt, LivenessOptions};
pub use output::{Payload, SegmentSink, SinkFull};
pub use send_buffer::{Loan, LoanId, TxPayload};
pub use seq::SeqNumber;
pub use state::State;
pub use syncookie::{cookie_syn_ack, CookieSyn, SynCookies};
