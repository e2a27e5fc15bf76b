//! Helpers: a recording segment sink and a segment builder.

use std::net::SocketAddrV4;
use std::time::Duration;

use crate::nic::PacketBuf;
use crate::tcp::{emit_each, Connection, Payload, SegmentRun, SegmentSink, SeqNumber, SinkFull, TcpConfig};
use crate::time::Instant;
use crate::wire::tcp::{TcpFlags, TcpRepr};

pub const LOCAL: &str = "10.0.0.1:4000";
pub const REMOTE: &str = "10.0.0.2:80";
pub const ISS: u32 = 1000;
pub const IRS: u32 = 5000;

pub fn local() -> SocketAddrV4 {
    LOCAL.parse().expect("addr")
}

pub fn remote() -> SocketAddrV4 {
    REMOTE.parse().expect("addr")
}

pub fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

pub fn cfg() -> TcpConfig {
    TcpConfig { mss: 100, rx_buffer: 1000, tx_buffer: 4000, window_scale: None, ..TcpConfig::default() }
}

/// Collects emitted segments; can be made to refuse them, or to take only `limit` of them.
#[derive(Default)]
pub struct Recorder {
    pub segs: Vec<(TcpRepr, Vec<u8>)>,
    pub refuse: bool,
    pub limit: Option<usize>,
    /// Runs handed over ([`SegmentSink::emit_run`]); their segments are in `segs`.
    pub runs: usize,
}

impl SegmentSink for Recorder {
    fn emit(&mut self, repr: &TcpRepr, mut payload: Payload<'_>) -> Result<(), SinkFull> {
        if self.refuse || self.limit.is_some_and(|n| self.segs.len() >= n) {
            return Err(SinkFull);
        }
        let mut data = vec![0; payload.len()];
        assert_eq!(payload.copy_to(&mut data), data.len());
        self.segs.push((*repr, data));
        Ok(())
    }

    fn emit_run(&mut self, first: &TcpRepr, run: &mut SegmentRun<'_>) -> usize {
        self.runs += 1;
        emit_each(self, first, run)
    }
}

/// Dispatches and returns what was emitted.
pub fn out(c: &mut Connection, now: Instant) -> Vec<(TcpRepr, Vec<u8>)> {
    let mut r = Recorder::default();
    c.dispatch(now, &mut r);
    r.segs
}

/// A segment from the remote peer to us.
pub fn seg(flags: TcpFlags, seq: u32, ack: Option<u32>, window: u16, data: &[u8]) -> (TcpRepr, PacketBuf) {
    let repr = TcpRepr {
        src_port: remote().port(),
        dst_port: local().port(),
        seq_number: SeqNumber(seq),
        ack_number: ack.map(SeqNumber),
        flags,
        window_len: window,
        max_seg_size: None,
        window_scale: None,
        sack: crate::wire::TcpSack::NONE,
    };
    (repr, PacketBuf::from_slice(data))
}

pub fn feed(c: &mut Connection, now: Instant, mut s: (TcpRepr, PacketBuf)) {
    c.on_segment(now, &s.0, &mut s.1);
}

pub fn syn_ack(window: u16) -> (TcpRepr, PacketBuf) {
    let mut s = seg(TcpFlags::SYN, IRS, Some(ISS + 1), window, b"");
    s.0.max_seg_size = Some(100);
    s
}

/// A connection in ESTABLISHED (active open), the peer's window `window`.
pub fn established(config: TcpConfig, window: u16) -> Connection {
    let mut c = Connection::connect(config, local(), remote(), SeqNumber(ISS));
    let syn = out(&mut c, ms(0));
    assert_eq!(syn.len(), 1);
    feed(&mut c, ms(10), syn_ack(window));
    let ack = out(&mut c, ms(10));
    assert_eq!(ack.len(), 1);
    c
}

pub fn is_pure_ack(r: &TcpRepr, data: &[u8], ack: u32) -> bool {
    r.flags.is_empty() && data.is_empty() && r.ack_number == Some(SeqNumber(ack))
}

pub fn secs(v: u64) -> Duration {
    Duration::from_secs(v)
}
