//! Two connections wired to each other through in-memory segment queues: the handshake, a
//! transfer larger than both windows, and a clean close on both sides.

use std::collections::VecDeque;

use crate::nic::PacketBuf;
use crate::tcp::{Connection, Payload, SegmentSink, SeqNumber, SinkFull, State, TcpConfig};
use crate::time::Instant;
use crate::wire::tcp::TcpRepr;

#[derive(Default)]
struct Wire(VecDeque<(TcpRepr, PacketBuf)>);

impl SegmentSink for Wire {
    fn emit(&mut self, repr: &TcpRepr, mut payload: Payload<'_>) -> Result<(), SinkFull> {
        let mut buf = PacketBuf::with_headroom(payload.len().max(1), 0);
        let dst = buf.append(payload.len()).ok_or(SinkFull)?;
        payload.copy_to(dst);
        self.0.push_back((*repr, buf));
        Ok(())
    }
}

fn deliver(from: &mut Wire, to: &mut Connection, now: Instant) {
    while let Some((r, mut p)) = from.0.pop_front() {
        to.on_segment(now, &r, &mut p);
    }
}

#[test]
fn two_connections_transfer_and_close() {
    let cfg = TcpConfig { mss: 536, rx_buffer: 4096, tx_buffer: 8192, ..TcpConfig::default() };
    let a_addr = "10.0.0.1:1234".parse().expect("addr");
    let b_addr = "10.0.0.2:80".parse().expect("addr");
    let mut a = Connection::connect(cfg.clone(), a_addr, b_addr, SeqNumber(u32::MAX - 2000));
    let mut a_out = Wire::default();
    let mut b_out = Wire::default();
    let now = Instant::from_millis(1);
    a.dispatch(now, &mut a_out);
    let (syn, _) = a_out.0.pop_front().expect("syn");
    let mut b = Connection::accept(cfg, b_addr, a_addr, &syn, SeqNumber(7));

    let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 256) as u8).collect();
    let mut sent = 0;
    let mut received = Vec::new();
    let mut a_closed = false;
    for _ in 0..10_000 {
        if sent < data.len() {
            sent += a.send(&data[sent..]).unwrap_or(0);
        } else if !a_closed && a.state() == State::Established {
            a.close();
            a_closed = true;
        }
        a.dispatch(now, &mut a_out);
        deliver(&mut a_out, &mut b, now);
        let mut buf = [0u8; 3000];
        loop {
            let n = b.recv(&mut buf);
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buf[..n]);
        }
        if b.at_eof() && b.state() == State::CloseWait {
            b.close();
        }
        b.dispatch(now, &mut b_out);
        deliver(&mut b_out, &mut a, now);
        if a.state() == State::TimeWait && b.state() == State::Closed {
            break;
        }
    }
    assert_eq!(received.len(), data.len());
    assert!(received == data, "byte-for-byte identical across a sequence-number wrap");
    assert_eq!(a.state(), State::TimeWait);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(a.stats().retransmits, 0);
}
