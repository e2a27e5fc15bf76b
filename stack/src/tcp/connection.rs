//! The transmission control block: one connection's state, and what the application may do to it.
//!
//! Segment input lives in `input.rs`, segment output in `output.rs`, timers in `timers.rs`. The
//! connection never touches a clock or a device: time comes in as `now`, segments go out through a
//! [`SegmentSink`](super::output::SegmentSink).

use std::net::SocketAddrV4;
use std::sync::Arc;

use super::config::TcpConfig;
use super::events::Events;
use super::recv_buffer::RecvBuffer;
use super::reorder::ReorderQueue;
use super::rtt::RttEstimator;
use super::send_buffer::SendBuffer;
use super::state::State;
use super::tx_payload::TxPayload;
use super::{ConnError, SeqNumber};
use crate::nic::PacketBuf;
use crate::time::Instant;
use crate::wire::tcp::TcpRepr;

/// Default MSS when the peer sends no MSS option (RFC 9293 section 3.7.1).
pub(super) const DEFAULT_PEER_MSS: u16 = 536;

/// The smallest MSS SlimTCP uses, its own or the peer's. A peer's MSS option below it (0 and 1
/// included) is *clamped* up to it, as Linux clamps to `tcp_min_snd_mss` (48), rather than
/// refused: a reset would only lose a connection that still works, while honouring a tiny MSS
/// would let a peer make us send one byte per segment (40 bytes of headers for each, and a
/// segment count that the send path and the peer's ACK clock must then carry; cf. the Linux
/// SACK-panic fixes of 2019). 64 is also the least `TCP_MAXSEG` the socket API accepts, and the
/// smallest segment size of the benchmarks. The cost: a peer on a link whose MTU is below 104
/// bytes cannot talk to us, which no Ethernet or data-center link has (IPv4 needs 576 end to end).
pub const MIN_MSS: u16 = 64;

/// Errors from application operations on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The connection is not in a state that allows sending (not yet connected, or closed).
    #[error("connection not open for sending")]
    NotOpen,
    /// The connection failed.
    #[error(transparent)]
    Failed(#[from] ConnError),
}

/// A RST waiting for the next dispatch: its sequence number, and the ACK a RST|ACK carries
/// (the ports are the connection's; the rest of the segment is fixed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PendingReset {
    pub(super) seq: SeqNumber,
    pub(super) ack: Option<SeqNumber>,
}

/// One TCP connection.
#[derive(Debug)]
pub struct Connection {
    /// Shared with the interface's other connections of the same settings (one copy each).
    pub(super) cfg: Arc<TcpConfig>,
    pub(super) state: State,
    pub(super) local: SocketAddrV4,
    pub(super) remote: SocketAddrV4,

    // Send sequence space (RFC 9293 3.3.1).
    pub(super) iss: SeqNumber,
    pub(super) snd_una: SeqNumber,
    pub(super) snd_nxt: SeqNumber,
    /// Highest sequence number sent so far (snd_nxt rewinds on go-back-N; this does not).
    pub(super) snd_max: SeqNumber,
    /// Peer's receive window in bytes (already scaled: at most 65,535 << 14, below 2^30).
    pub(super) snd_wnd: u32,
    /// The largest `snd_wnd` seen.
    pub(super) max_snd_wnd: u32,
    pub(super) snd_wl1: SeqNumber,
    pub(super) snd_wl2: SeqNumber,
    /// Shift applied to windows the peer sends us.
    pub(super) snd_wscale: u8,
    /// Largest segment payload we send.
    pub(super) send_mss: u16,
    pub(super) tx: SendBuffer,
    /// The application closed its sending side: a FIN follows the queued data.
    pub(super) fin_queued: bool,

    // Receive sequence space.
    pub(super) irs: SeqNumber,
    pub(super) rcv_nxt: SeqNumber,
    /// Right edge of the last window we advertised (never moved left).
    pub(super) rcv_adv: SeqNumber,
    /// Shift applied to windows we advertise.
    pub(super) rcv_wscale: u8,
    /// Both SYNs carried the window-scale option.
    pub(super) wscale_ok: bool,
    /// Both SYNs carried SACK-permitted (and our configuration allows it): our ACKs carry SACK
    /// blocks for what the reorder queue holds.
    pub(super) sack_ok: bool,
    pub(super) rx: RecvBuffer,
    /// Segments that arrived beyond a hole (bounded; see `reorder.rs`).
    pub(super) ooo: ReorderQueue,
    pub(super) fin_received: bool,
    /// The application closed the socket entirely: it will never read again.
    pub(super) orphaned: bool,

    // Timers.
    pub(super) rtt: RttEstimator,
    pub(super) rto_deadline: Option<Instant>,
    /// Consecutive retransmission timeouts without progress.
    pub(super) retries: u32,
    /// Karn's rule: the segment being timed (cleared on retransmit).
    pub(super) rtt_probe: Option<super::rtt::RttProbe>,

    // Loss recovery without a timeout (RFC 5681 fast retransmit, RFC 6582 NewReno).
    /// Duplicate ACKs in a row (ACK == SND.UNA, no data, data in flight), saturating (only
    /// reaching [`DUP_ACK_THRESHOLD`](super::DUP_ACK_THRESHOLD) matters).
    pub(super) dup_acks: u8,
    /// Retransmit the segment at SND.UNA on the next output (or, with SACK, the holes).
    pub(super) rexmit_due: bool,
    /// Fast recovery's state, from the first recovery or timeout on (`recovery.rs`).
    pub(super) recovery: Option<Box<super::recovery::Recovery>>,
    /// What the peer SACKed above SND.UNA (when SACK was negotiated).
    pub(super) sacked: super::scoreboard::Scoreboard,
    /// A zero-window probe is due.
    pub(super) probe_due: bool,
    /// Zero-window probing's state, from the first shut window on (`persist.rs`).
    pub(super) persist: Option<Box<super::persist::Persist>>,
    pub(super) time_wait_deadline: Option<Instant>,

    // Output requests.
    /// An ACK goes out on the next dispatch (alone, unless data of ours carries it).
    pub(super) ack_pending: bool,
    /// In-order data waits for its ACK until then (`TcpConfig::ack_delay`; see `input.rs`).
    pub(super) delayed_ack_at: Option<Instant>,
    /// Out-of-order data segments since the last dispatch: each earns its own duplicate ACK (up
    /// to [`DUP_ACKS_PER_BURST`]), so a sender without SACK sees the three it needs for a fast
    /// retransmit instead of waiting for its RTO (RFC 5681 section 4.2).
    pub(super) dup_acks_owed: u8,
    /// A RST to send (in reply to a bad segment, or for an abort).
    pub(super) rst_pending: Option<PendingReset>,

    pub(super) error: Option<ConnError>,
    pub(super) events: Events,
    pub(super) stats: super::stats::Counts,
    /// Keepalive and user timeout (`liveness.rs`).
    pub(super) live: Option<Box<super::liveness::Liveness>>,
}

impl Connection {
    fn new(
        cfg: impl Into<Arc<TcpConfig>>,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNumber,
        state: State,
    ) -> Self {
        let cfg: Arc<TcpConfig> = cfg.into();
        let rtt = RttEstimator::new(cfg.rto_initial, cfg.rto_min, cfg.rto_max);
        let live = super::liveness::Liveness::from_config(&cfg);
        Connection {
            tx: SendBuffer::new(cfg.tx_buffer),
            rx: RecvBuffer::new(cfg.rx_buffer),
            ooo: ReorderQueue::default(),
            send_mss: DEFAULT_PEER_MSS.min(cfg.mss),
            cfg,
            state,
            local,
            remote,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: SeqNumber(0),
            snd_wl2: iss,
            snd_wscale: 0,
            fin_queued: false,
            irs: SeqNumber(0),
            rcv_nxt: SeqNumber(0),
            rcv_adv: SeqNumber(0),
            rcv_wscale: 0,
            wscale_ok: false,
            sack_ok: false,
            fin_received: false,
            orphaned: false,
            rtt,
            rto_deadline: None,
            retries: 0,
            rtt_probe: None,
            dup_acks: 0,
            rexmit_due: false,
            recovery: None,
            sacked: super::scoreboard::Scoreboard::default(),
            probe_due: false,
            persist: None,
            time_wait_deadline: None,
            ack_pending: false,
            delayed_ack_at: None,
            dup_acks_owed: 0,
            rst_pending: None,
            error: None,
            events: Events::empty(),
            stats: super::stats::Counts::default(),
            live,
        }
    }

    /// Active open: a connection in SYN-SENT whose SYN goes out on the next output.
    pub fn connect(
        cfg: impl Into<Arc<TcpConfig>>,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        iss: SeqNumber,
    ) -> Self {
        Self::new(cfg, local, remote, iss, State::SynSent)
    }

    /// Passive open: a connection in SYN-RECEIVED for the peer's `syn` (which a listener accepted);
    /// the SYN-ACK goes out on the next output.
    pub fn accept(
        cfg: impl Into<Arc<TcpConfig>>,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        syn: &TcpRepr,
        iss: SeqNumber,
    ) -> Self {
        let mut c = Self::new(cfg, local, remote, iss, State::SynReceived);
        c.irs = syn.seq_number;
        c.rcv_nxt = syn.seq_number + 1;
        c.apply_syn_options(syn);
        // The window in a SYN is never scaled (RFC 7323 section 2.2).
        c.snd_wnd = u32::from(syn.window_len);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = syn.seq_number;
        c.snd_wl2 = iss;
        c.rcv_adv = c.rcv_nxt;
        c
    }

    /// Passive open from a SYN cookie (see [`super::syncookie`]): a connection in SYN-RECEIVED
    /// whose SYN-ACK (sequence number `cookie.iss`, window [`syn_window`](super::syncookie)) is
    /// already out, with the peer's options as the cookie recorded them. Feed it the ACK that
    /// returned the cookie: that completes the handshake (and delivers any data it carries).
    pub fn from_cookie(
        cfg: impl Into<Arc<TcpConfig>>,
        local: SocketAddrV4,
        remote: SocketAddrV4,
        cookie: &super::syncookie::CookieSyn,
    ) -> Self {
        let cfg: Arc<TcpConfig> = cfg.into();
        let window = usize::from(super::syncookie::syn_window(&cfg));
        let mut c = Self::new(cfg, local, remote, cookie.iss, State::SynReceived);
        c.irs = cookie.irs;
        c.rcv_nxt = cookie.irs + 1;
        c.apply_peer_options(cookie.peer_mss, cookie.peer_wscale);
        c.snd_wl1 = cookie.irs;
        c.snd_wl2 = cookie.iss;
        c.snd_nxt = cookie.iss + 1;
        c.snd_max = c.snd_nxt;
        c.rcv_adv = c.rcv_nxt + window;
        c
    }

    /// Takes the peer's MSS and window-scale options from its SYN.
    pub(super) fn apply_syn_options(&mut self, syn: &TcpRepr) {
        let peer_mss = syn.max_seg_size.unwrap_or(DEFAULT_PEER_MSS);
        self.apply_peer_options(peer_mss, syn.window_scale);
        self.sack_ok = syn.sack.permitted && self.cfg.sack;
    }

    /// Takes the peer's MSS (clamped to at least [`MIN_MSS`], then to our own) and window-scale
    /// shift.
    fn apply_peer_options(&mut self, peer_mss: u16, peer_wscale: Option<u8>) {
        self.send_mss = peer_mss.max(MIN_MSS).min(self.cfg.mss);
        match (peer_wscale, self.cfg.window_scale) {
            (Some(theirs), Some(ours)) => {
                self.snd_wscale = theirs.min(14);
                self.rcv_wscale = ours.min(14);
                self.wscale_ok = true;
            }
            _ => {
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
                self.wscale_ok = false;
            }
        }
    }

    /// True when both sides offered window scaling.
    pub(super) fn wscale_negotiated(&self) -> bool {
        self.wscale_ok
    }

    /// The current state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Our address.
    pub fn local(&self) -> SocketAddrV4 {
        self.local
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddrV4 {
        self.remote
    }

    /// Why the connection failed, if it did.
    pub fn error(&self) -> Option<ConnError> {
        self.error
    }

    /// The largest payload we put in one segment.
    pub fn send_mss(&self) -> usize {
        usize::from(self.send_mss)
    }

    /// Counters.
    pub fn stats(&self) -> super::ConnStats {
        self.stats.snapshot()
    }

    /// Segments sent again so far (`stats().retransmits`, without assembling the rest).
    pub fn retransmits(&self) -> u64 {
        self.stats.retransmits()
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> std::time::Duration {
        self.rtt.rto()
    }

    /// Events since the last [`take_events`](Self::take_events), without clearing them.
    pub fn pending_events(&self) -> Events {
        self.events
    }

    /// Events since the last call (cleared by this call).
    pub fn take_events(&mut self) -> Events {
        std::mem::take(&mut self.events)
    }

    /// Bytes the application can read now.
    pub fn recv_queued(&self) -> usize {
        self.rx.len()
    }

    /// True when a read returned everything and the peer closed (end of stream).
    pub fn at_eof(&self) -> bool {
        self.rx.is_empty() && self.fin_received
    }

    /// Bytes of send-buffer space free now (0 when sending is not allowed).
    pub fn send_space(&self) -> usize {
        if self.state.may_send() && !self.fin_queued {
            self.tx.free()
        } else {
            0
        }
    }

    /// Bytes queued for sending and not yet acknowledged.
    pub fn send_queued(&self) -> usize {
        self.tx.len()
    }

    fn check_send(&self) -> Result<(), SendError> {
        if let Some(e) = self.error {
            return Err(SendError::Failed(e));
        }
        if !self.state.may_send() && self.state != State::SynSent && self.state != State::SynReceived {
            return Err(SendError::NotOpen);
        }
        if self.fin_queued {
            return Err(SendError::NotOpen);
        }
        Ok(())
    }

    /// Copies as much of `data` as fits into the send buffer; returns the bytes taken (0 when
    /// full). Data may be queued before the handshake completes.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, SendError> {
        self.check_send()?;
        Ok(self.tx.push_copy(data))
    }

    /// Zero-copy send: the stack holds `payload` until all its bytes are acknowledged, then
    /// returns it through [`take_completed`](Self::take_completed). Gives it back when it does
    /// not fit.
    pub fn send_loaned(
        &mut self,
        payload: Box<dyn TxPayload>,
    ) -> Result<Result<(), Box<dyn TxPayload>>, SendError> {
        self.check_send()?;
        Ok(self.tx.push_loaned(payload))
    }

    /// Loaned buffers whose bytes the peer acknowledged.
    pub fn take_completed(&mut self) -> impl Iterator<Item = Box<dyn TxPayload>> + '_ {
        self.tx.take_completed()
    }

    /// True when [`take_completed`](Self::take_completed) has buffers to give.
    pub fn has_completed(&self) -> bool {
        self.tx.has_completed()
    }

    /// Copies every queued loan's bytes into the stack and hands the loans back (once no NIC
    /// transmission reads them any more); the stream goes on unchanged. Returns bytes copied.
    pub fn unloan_sends(&mut self) -> usize {
        self.tx.unloan_all()
    }

    /// `n` NIC transmissions referencing loan `id` (at queue position `at`,
    /// [`LoanedSlice::at`](super::send_buffer::LoanedSlice::at)) completed: the loan is handed
    /// back once it is also fully acknowledged (then `WRITABLE`). False when this connection
    /// holds no such loan.
    pub fn transmissions_completed(&mut self, id: super::send_buffer::LoanId, at: u64, n: u32) -> bool {
        let held = self.tx.transmissions_completed(id, at, n);
        if self.tx.has_completed() {
            // A loan to hand back: the owner learns it as it learns of acknowledged ones.
            self.events.insert(Events::WRITABLE);
        }
        held
    }

    /// Loans still referenced by NIC transmissions, taken out before the connection is freed.
    pub fn take_in_flight_loans(&mut self) -> Vec<super::send_buffer::Loan> {
        self.tx.take_in_flight_loans()
    }

    /// Copies received bytes into `dst`; returns how many (0 = nothing queued; check `at_eof`).
    pub fn recv(&mut self, dst: &mut [u8]) -> usize {
        let n = self.rx.read(dst);
        if n > 0 {
            self.window_opened();
        }
        n
    }

    /// Charges the connection's receive storage (receive and reorder queues) to `budget`.
    pub fn bind_rx_budget(&mut self, budget: &crate::rx_memory::RxBudget) {
        self.rx.bind(budget);
        self.ooo.bind(budget);
    }

    /// Zero-copy receive: the next payload buffer, owned by the caller from now on.
    pub fn recv_segment(&mut self) -> Option<PacketBuf> {
        let seg = self.rx.pop_segment()?;
        self.window_opened();
        Some(seg)
    }

    /// Zero-copy receive for an application on another core: the next payload buffer, whose
    /// bytes keep occupying the receive window until [`release_recv`](Self::release_recv).
    pub fn recv_segment_held(&mut self) -> Option<PacketBuf> {
        self.rx.pop_held()
    }

    /// Every received segment at once, appended to `out` in order, held as
    /// [`recv_segment_held`](Self::recv_segment_held)'s are; returns their bytes.
    pub fn recv_all_held(&mut self, out: &mut Vec<PacketBuf>) -> usize {
        self.rx.pop_all_held(out)
    }

    /// The application is done with `n` bytes taken by
    /// [`recv_segment_held`](Self::recv_segment_held): the window opens again.
    pub fn release_recv(&mut self, n: usize) {
        self.rx.release(n);
        self.window_opened();
    }

    /// The receive budget recovered (`iface/rx_pressure.rs`): true when an update is due (the
    /// window grew enough since it was last advertised, or an ACK was pending anyway).
    pub fn window_reopened(&mut self) -> bool {
        self.window_opened();
        self.ack_pending
    }

    /// After the application consumed data: if the window grew enough to matter, send an update
    /// (receiver-side silly window avoidance, RFC 9293 3.8.6.2.2).
    fn window_opened(&mut self) {
        if !self.state.peer_may_send() {
            return;
        }
        let advertised = self.rcv_adv.since(self.rcv_nxt);
        let now_free = self.rx.free();
        let threshold = self.send_mss().max(1).min(self.rx.capacity() / 2);
        if now_free >= advertised + threshold {
            self.ack_pending = true;
        }
    }

    /// Closes our sending side (shutdown(SHUT_WR)): a FIN follows the queued data; we keep
    /// receiving until the peer closes too.
    pub fn shutdown(&mut self) {
        match self.state {
            State::SynSent if !self.tx.is_empty() => {
                // Data is queued: send it, then the FIN, once the handshake completes.
                self.fin_queued = true;
            }
            State::Closed | State::Listen | State::SynSent => {
                self.set_closed();
            }
            State::SynReceived | State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
            }
            _ => {}
        }
    }

    /// Closes the connection for good (close(2)): sends FIN after the queued data, and the
    /// application will not read again. Unread or later-arriving data resets the connection
    /// (RFC 2525 2.17), and FIN-WAIT-2 is bounded by `fin_wait2_timeout`.
    pub fn close(&mut self) {
        if !self.rx.is_empty() {
            self.abort();
            return;
        }
        self.orphaned = true;
        self.shutdown();
    }

    /// Aborts: queues a RST (when synchronized) and goes to CLOSED at once.
    pub fn abort(&mut self) {
        if matches!(
            self.state,
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait
        ) {
            self.rst_pending = Some(self.pending_reset());
        }
        if self.error.is_none() {
            self.error = Some(ConnError::Aborted);
        }
        self.set_closed();
    }

    /// Fails the connection with `err` without telling the peer (e.g. it is unreachable).
    pub fn fail_with(&mut self, err: ConnError) {
        self.fail(err);
    }

    /// Our FIN is queued and the peer has not acknowledged it (it may be unsent, in flight or
    /// lost). Once acknowledged (FIN-WAIT-2, TIME-WAIT) it is never sent again: a FIN past the
    /// one acknowledged would take a sequence number the peer never gave us.
    pub(super) fn fin_outstanding(&self) -> bool {
        self.fin_queued && !matches!(self.state, State::FinWait2 | State::TimeWait | State::Closed)
    }

    /// The state the handshake leads to: ESTABLISHED, or FIN-WAIT-1 when the application
    /// already closed its sending side.
    pub(super) fn synchronized_state(&self) -> State {
        if self.fin_queued {
            State::FinWait1
        } else {
            State::Established
        }
    }

    /// A RST|ACK for the current send position.
    pub(super) fn pending_reset(&self) -> PendingReset {
        PendingReset { seq: self.snd_nxt.max(self.snd_una), ack: Some(self.rcv_nxt) }
    }

    /// The segment of a pending RST.
    pub(super) fn reset_segment(&self, rst: PendingReset) -> TcpRepr {
        TcpRepr {
            src_port: self.local.port(),
            dst_port: self.remote.port(),
            seq_number: rst.seq,
            ack_number: rst.ack,
            flags: crate::wire::tcp::TcpFlags::RST,
            window_len: 0,
            max_seg_size: None,
            window_scale: None,
            sack: crate::wire::TcpSack::NONE,
        }
    }

    /// Goes to CLOSED: timers stop, the owner may free the connection.
    pub(super) fn set_closed(&mut self) {
        self.state = State::Closed;
        self.rto_deadline = None;
        self.stop_persist_timer();
        self.time_wait_deadline = None;
        if let Some(live) = self.live.as_deref_mut() {
            live.stop();
        }
        self.ack_sent();
        self.ooo.clear();
        self.events.insert(Events::CLOSED | Events::READABLE | Events::WRITABLE);
    }

    /// Fails the connection with `err` and closes it.
    pub(super) fn fail(&mut self, err: ConnError) {
        self.error = Some(err);
        self.events.insert(Events::ERROR);
        self.set_closed();
    }

    /// The window we would advertise now, in bytes (unscaled): free receive-buffer space, but
    /// never less than what we already promised.
    pub(super) fn receive_window(&self) -> usize {
        let promised = self.rcv_adv.since(self.rcv_nxt);
        let max = usize::from(u16::MAX) << self.rcv_wscale;
        self.rx.free().max(promised).min(max)
    }
}
