//! The `stack_peers` benchmark harness moves the bytes it claims: for SlimTCP and smoltcp over
//! memwire, a fixed number of segments arrives complete and equal to the pattern sent, and every
//! 64-byte echo comes back unchanged. (Correctness only: the benchmark's timings are never
//! checked here.)

#[allow(dead_code)]
#[path = "../examples/stack_peers/peers/mod.rs"]
mod peers;

use peers::slim::SlimPair;
use peers::smol::{SmolPair, SmolPairOnePoll};
use peers::workload::{bulk, round_trips, Until};
use peers::Pair;

fn transfers_exactly<P: Pair>(mss: u16, segments: u64) {
    let want = segments * u64::from(mss);
    let b = bulk::<P>(mss, Until::Bytes(want), true).unwrap_or_else(|e| panic!("{} MSS {mss}: {e}", P::NAME));
    assert_eq!(b.bytes, want, "{} MSS {mss}: bytes received", P::NAME);
    assert!(b.verified);
    // Every segment carries at most one MSS: at least `segments` frames went A -> B.
    assert!(
        b.frames_a_to_b >= segments,
        "{} MSS {mss}: {} frames for {segments} segments",
        P::NAME,
        b.frames_a_to_b
    );
}

#[test]
fn slimtcp_moves_small_and_full_segments_intact() {
    transfers_exactly::<SlimPair>(64, 3_000);
    transfers_exactly::<SlimPair>(1460, 3_000);
}

#[test]
fn smoltcp_moves_small_and_full_segments_intact() {
    transfers_exactly::<SmolPair>(64, 3_000);
    transfers_exactly::<SmolPair>(1460, 3_000);
}

#[test]
fn smoltcp_polled_once_per_step_moves_segments_intact() {
    transfers_exactly::<SmolPairOnePoll>(64, 3_000);
    transfers_exactly::<SmolPairOnePoll>(1460, 3_000);
}

#[test]
fn smoltcp_segments_are_no_larger_than_the_mss() {
    // 64 KiB at MSS 64 needs at least 1024 data frames: the device's MTU caps smoltcp's MSS.
    let b = bulk::<SmolPair>(64, Until::Bytes(64 * 1024), true).unwrap_or_else(|e| panic!("{e}"));
    assert!(b.frames_a_to_b >= 1024, "{} frames", b.frames_a_to_b);
}

#[test]
fn round_trips_echo_every_message_on_both_stacks() {
    assert_eq!(round_trips::<SlimPair>(1460, 10, 200).unwrap_or_else(|e| panic!("{e}")).rtts.len(), 200);
    assert_eq!(round_trips::<SmolPair>(1460, 10, 200).unwrap_or_else(|e| panic!("{e}")).rtts.len(), 200);
}
