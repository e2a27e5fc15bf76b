//! The SlimTCP connection state machine, sans-IO.

pub mod seq;

pub use seq::SeqNumber;
