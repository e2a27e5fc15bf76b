//! The worker: rx burst, demux, per-socket batches, timers, tx burst.
