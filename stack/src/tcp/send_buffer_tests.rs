//! Tests of the send buffer (`send_buffer.rs`).

use super::*;
use crate::tcp::tx_payload::AddressedBytes;

/// Bytes `offset..offset+len` through `copy_out`; the summing copy must give the same bytes and
/// their sum (pieces of any length, at odd offsets too).
fn read_all(b: &mut SendBuffer, offset: usize, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    let n = b.copy_out(offset, &mut out);
    out.truncate(n);
    let mut summed = vec![0; len];
    let (m, sum) = b.copy_out_summed(offset, &mut summed);
    summed.truncate(m);
    assert_eq!(summed, out, "the summing copy's bytes at {offset}+{len}");
    assert_eq!(sum, checksum::data(&out), "the summing copy's sum at {offset}+{len}");
    out
}

#[test]
fn copy_respects_capacity() {
    let mut b = SendBuffer::new(10);
    assert_eq!(b.push_copy(b"0123456789abc"), 10);
    assert_eq!(b.free(), 0);
    assert_eq!(read_all(&mut b, 0, 20), b"0123456789");
}

#[test]
fn capacity_is_bounded_by_the_largest_tcp_buffer() {
    assert_eq!(SendBuffer::new(usize::MAX).capacity(), MAX_TCP_BUFFER);
    assert_eq!(SendBuffer::new(MAX_TCP_BUFFER).free(), MAX_TCP_BUFFER);
}

#[test]
fn segments_span_chunks_and_ack_releases() {
    let mut b = SendBuffer::new(1 << 20);
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(b.push_copy(&data), data.len());
    assert_eq!(read_all(&mut b, 16_000, 1_000), &data[16_000..17_000]);
    b.ack(16_500);
    assert_eq!(b.len(), data.len() - 16_500);
    assert_eq!(read_all(&mut b, 0, 100), &data[16_500..16_600]);
    // Go back: read before the cursor.
    assert_eq!(read_all(&mut b, 10, 10), &data[16_510..16_520]);
    b.ack(100_000);
    assert!(b.is_empty());
}

#[test]
fn loaned_buffers_return_only_when_fully_acked() {
    let mut b = SendBuffer::new(1000);
    b.push_loaned(Box::new(vec![1u8; 100])).expect("fits");
    b.push_loaned(Box::new(vec![2u8; 100])).expect("fits");
    assert!(b.push_loaned(Box::new(vec![3u8; 900])).is_err());
    b.ack(150);
    assert_eq!(b.take_completed().count(), 1);
    assert_eq!(read_all(&mut b, 0, 50), vec![2u8; 50]);
    b.ack(49);
    assert!(!b.has_completed());
    b.ack(1);
    assert_eq!(b.take_completed().count(), 1);
}

#[test]
fn unloaned_buffers_return_at_once_and_their_bytes_stay_queued() {
    let mut b = SendBuffer::new(1 << 20);
    b.push_copy(&[9u8; 10]);
    b.push_loaned(Box::new(vec![1u8; 100])).expect("fits");
    b.push_loaned(Box::new(vec![2u8; 50])).expect("fits");
    b.ack(30); // into the first loan
    let before = read_all(&mut b, 0, 1000);
    assert_eq!(b.unloan_all(), 150);
    let loans: Vec<_> = b.take_completed().collect();
    assert_eq!(loans.len(), 2, "both loans handed back before any ACK of their bytes");
    assert_eq!(read_all(&mut b, 0, 1000), before, "the stream is unchanged");
    assert_eq!(b.segment_limit(0), None, "copies have no by-reference edges");
    b.ack(1000);
    assert!(b.is_empty());
    assert_eq!(b.take_completed().count(), 0);
}

#[test]
fn an_unloaned_buffer_in_flight_returns_after_its_transmission() {
    let mut b = SendBuffer::new(1 << 20);
    b.push_loaned(Box::new(vec![1u8; 100])).expect("fits");
    let id = b.chunks.iter().find_map(|c| match c {
        Chunk::Loaned(l) => Some(l.id),
        Chunk::Copied(_) => None,
    });
    let id = id.expect("one loan");
    assert!(b.transmissions_started(id, 0, 1));
    assert_eq!(b.unloan_all(), 100);
    assert_eq!(b.take_completed().count(), 0, "the NIC still reads it");
    assert!(b.transmissions_completed(id, 0, 1));
    assert_eq!(b.take_completed().count(), 1);
    assert_eq!(read_all(&mut b, 0, 1000), vec![1u8; 100]);
}

#[test]
fn transmissions_find_their_loan_among_many_after_acks() {
    let mut b = SendBuffer::new(1 << 20);
    let mut ids = Vec::new();
    for i in 0..300usize {
        b.push_copy(&[0u8; 7]);
        b.push_loaned(Box::new(vec![1u8; 10 + i % 5])).expect("fits");
        let last = b.chunks.back().and_then(|c| match c {
            Chunk::Loaned(l) => Some(l.id),
            Chunk::Copied(_) => None,
        });
        ids.push(last.expect("just pushed"));
    }
    // Each loan by its position (chunk 2i + 1), or, where the position given is stale
    // (another loan's, or past the queue), by searching.
    let hint = |i: usize| match i % 3 {
        0 => 2 * i as u64 + 1,
        1 => 2 * i as u64 + 3,
        _ => u64::MAX,
    };
    for (i, &id) in ids.iter().enumerate() {
        assert!(b.transmissions_started(id, hint(i), 1), "loan {id} found (at {})", hint(i));
    }
    // Acknowledge the first 100 loans and the copies around them: they linger (in flight).
    let first_100: usize = (0..100).map(|i| 7 + 10 + i % 5).sum();
    b.ack(first_100);
    assert_eq!(b.take_completed().count(), 0, "every acknowledged loan is still in flight");
    // Positions do not move with the acknowledgements; lingering loans are searched.
    for (i, &id) in ids.iter().enumerate().rev() {
        assert!(b.transmissions_completed(id, hint(i), 1), "loan {id} found after the ack");
    }
    assert_eq!(b.take_completed().count(), 100, "only the acknowledged ones come back");
    assert!(!b.transmissions_completed(ids[0], 1, 1), "a returned loan is no longer held");
    assert!(!b.transmissions_started(u64::MAX, 1, 1), "an unknown loan is not held");
    b.ack(usize::MAX);
    assert_eq!(b.take_completed().count(), 200);
}

#[test]
fn sequential_reads_match_random_reads() {
    let mut b = SendBuffer::new(1 << 20);
    let mut expect = Vec::new();
    for i in 0..50u8 {
        let chunk = vec![i; 37 + usize::from(i)];
        expect.extend_from_slice(&chunk);
        if i % 2 == 0 {
            b.push_copy(&chunk);
        } else {
            b.push_loaned(Box::new(chunk)).expect("fits");
        }
    }
    let mut acked = 0;
    let mut off = 0;
    while acked < expect.len() {
        let seg = read_all(&mut b, off, 64);
        assert_eq!(seg, &expect[acked + off..(acked + off + 64).min(expect.len())]);
        off += seg.len();
        if off > 200 {
            b.ack(150);
            acked += 150;
            off -= 150;
        }
        if seg.is_empty() {
            let rest = b.len();
            b.ack(rest);
            acked += rest;
        }
    }
}

#[test]
fn copies_match_a_flat_model_through_pushes_acks_and_reads() {
    let mut rng = crate::nic::fault::Rng::new(0x2545_f491_4f6c_dd1d);
    let mut next = |m: usize| rng.gen_range(0..m as u64) as usize;
    let mut b = SendBuffer::new(1 << 20);
    let mut model: Vec<u8> = Vec::new();
    let mut byte = 0u8;
    for _ in 0..20_000 {
        let action = next(4);
        let n = next(3000);
        let data: Vec<u8> = (0..n)
            .map(|_| {
                byte = byte.wrapping_add(1);
                byte
            })
            .collect();
        match action {
            0 => {
                let taken = b.push_copy(&data);
                model.extend_from_slice(&data[..taken]);
            }
            1 => {
                if b.push_loaned(Box::new(data.clone())).is_ok() {
                    model.extend_from_slice(&data);
                }
            }
            2 => {
                let n = n.min(model.len());
                b.ack(n);
                model.drain(..n);
            }
            _ => {
                let offset = next(model.len() + 1);
                let got = read_all(&mut b, offset, n);
                assert_eq!(got, &model[offset..(offset + n).min(model.len())], "bytes {offset}+{n}");
            }
        }
        assert_eq!(b.len(), model.len());
    }
}

#[test]
fn a_part_of_a_loans_piece_is_that_range_found_on_its_own() {
    // A run's segments take their parts of the run's piece (`LoanedSlice::piece`) instead of
    // finding each in the queue: the same address, length, loan and position.
    let mut b = SendBuffer::new(1 << 20);
    b.push_copy(&[0u8; 50]);
    b.push_loaned(Box::new(AddressedBytes((0..3000u32).map(|i| (i * 7) as u8).collect()))).expect("fits");
    b.ack(20);
    let whole = b.by_reference_slice(30, 2500, false).expect("inside the loan");
    for (at, len) in [(0, 1460), (1460, 1040), (100, 1), (0, 2500), (2499, 1)] {
        assert_eq!(whole.piece(at, len), b.by_reference_slice(30 + at, len, false), "{at}+{len}");
    }
    assert_eq!(whole.piece(2000, 501), None, "past its end");
    assert_eq!(whole.piece(usize::MAX, 2), None, "an offset that overflows");
}
