//! TCP state-machine tests, one file per concern. Each test drives a `Connection` with
//! hand-made segments on a virtual clock and checks the segments it emits.

mod close;
mod data;
mod delayed_ack;
mod handshake;
mod harness;
mod liveness;
mod pair;
mod prediction;
mod recovery;
mod rfc5961;
mod runs;
mod syncookie;
mod timers;
mod window;
