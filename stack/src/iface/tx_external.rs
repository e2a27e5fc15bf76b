//! Zero-copy transmit of loaned payloads that may be sent by reference (`TxPayload::by_reference`,
//! e.g. guest memory): the frame is the connection's headers plus an [`ExternalPayload`] the NIC
//! sends from where it lies ([`Nic::transmit_external`]).
//!
//! Every such transmission (first send or retransmission) gets a token; the loan counts it as in
//! flight until the NIC reports the token complete ([`Nic::poll_tx_completions`]). A run's
//! segments inside one loan are counted on it at once, and so are consecutive completions of one
//! loan: the count is the same, one look at the loan instead of one per segment. A loan is handed
//! back to the application only when all its bytes are acknowledged AND none of its transmissions
//! is in flight. A connection freed with transmissions in flight leaves its loans here
//! ("orphans") until their last completion, so no payload is released while the NIC reads it.
//!
//! A UDP datagram's loaned payload is held here, by its token, until its one transmission
//! completes; then it goes back to its socket (or is dropped if the socket is gone).

use slimtcp_api::id_map::IdMap;

use super::neighbor::LoanedDatagram;
use super::socket_set::{SocketHandle, SocketSet};
use super::tokens::TokenSlab;
use super::tx_backlog::TxBacklog;
use super::Counters;
use crate::nic::{ExternalFrame, ExternalPayload, Nic, NicError};
use crate::tcp::{Loan, LoanId, TxPayload};
use crate::time::Instant;

/// External-payload frames queued for the NIC and the transmissions it has not completed.
#[derive(Debug)]
pub(super) struct ExternalTx {
    /// Frames not yet taken by the NIC, in order.
    pub(super) queue: TxBacklog<ExternalFrame>,
    /// Token of each transmission in flight -> what it references.
    tokens: TokenSlab<InFlight>,
    /// Loans of freed connections, kept until their transmissions complete.
    orphans: IdMap<LoanId, Loan>,
    done: Vec<u64>,
}

/// What one transmission in flight references.
#[derive(Debug)]
enum InFlight {
    /// A loan of the TCP connection `h` (which keeps the payload), at its queue position
    /// ([`LoanedSlice::at`](crate::tcp::LoanedSlice::at)).
    Segment(SocketHandle, LoanId, u64),
    /// The payload of a datagram of the UDP socket `h`, held here until completion.
    Datagram(SocketHandle, Box<dyn TxPayload>),
}

impl ExternalTx {
    /// Nothing queued or in flight; frames go to the NIC `burst` at a time.
    pub(super) fn new(burst: usize) -> Self {
        ExternalTx {
            queue: TxBacklog::new(burst),
            tokens: TokenSlab::default(),
            orphans: IdMap::default(),
            done: Vec::new(),
        }
    }

    /// A token for a new transmission referencing `loan` (at queue position `at`) of the
    /// connection `h`.
    pub(super) fn register(&mut self, h: SocketHandle, loan: LoanId, at: u64) -> u64 {
        self.tokens.insert(InFlight::Segment(h, loan, at))
    }

    /// Queues a datagram for the NIC, its payload held here until the transmission completes.
    /// Gives the datagram back if its payload has no address.
    pub(super) fn push_datagram(&mut self, datagram: LoanedDatagram) -> Result<(), LoanedDatagram> {
        let Some(addr) = datagram.payload.external_addr() else { return Err(datagram) };
        let len = datagram.payload.len();
        let LoanedDatagram { socket, headers, payload } = datagram;
        let token = self.tokens.insert(InFlight::Datagram(socket, payload));
        // SAFETY: the payload declared itself sendable by reference (`external_addr`): its `len`
        // bytes stay mapped while it is held, and it is held in `tokens` until the NIC reports
        // this token complete.
        let external = unsafe { ExternalPayload::at(addr, len, token) };
        self.queue.push(ExternalFrame { headers, payload: external });
        Ok(())
    }

    /// Transmissions handed to the NIC (or queued for it) whose completion is still due.
    pub(super) fn in_flight(&self) -> usize {
        self.tokens.len()
    }

    /// Loans still referenced by transmissions, taken from a connection being freed.
    pub(super) fn adopt(&mut self, loans: Vec<Loan>) {
        for loan in loans {
            self.orphans.insert(loan.id(), loan);
        }
    }

    /// Hands queued frames to the NIC; returns how many it took.
    pub(super) fn flush<N: Nic>(
        &mut self,
        nic: &mut N,
        counters: &mut Counters,
        now: Instant,
    ) -> Result<usize, NicError> {
        let (taken, result) = self.queue.offer(|frames| nic.transmit_external(now, frames));
        counters.tx_frames += taken.frames as u64;
        counters.tx_external_frames += taken.frames as u64;
        counters.tx_bytes += taken.bytes;
        counters.tx_external_bytes += taken.external_bytes;
        result.map(|()| taken.frames)
    }

    /// Collects the NIC's completions and credits them to the loans they referenced, noting in
    /// `credited` the sockets that may have a loan to hand back now; returns how many there were.
    pub(super) fn poll_completions<N: Nic>(
        &mut self,
        nic: &mut N,
        sockets: &mut SocketSet,
        credited: &mut Vec<SocketHandle>,
    ) -> usize {
        if self.tokens.is_empty() {
            return 0;
        }
        let n = nic.poll_tx_completions(&mut self.done);
        // Consecutive completions of one loan (a run's segments) are counted on it at once.
        let mut pending: Option<(SegmentLoan, u32)> = None;
        let mut done = std::mem::take(&mut self.done);
        for token in done.drain(..) {
            let segment = match self.tokens.remove(token) {
                Some(InFlight::Segment(h, loan, at)) => SegmentLoan { h, loan, at },
                Some(InFlight::Datagram(h, payload)) => {
                    // A socket closed meanwhile drops the payload: the NIC no longer reads it.
                    if let Some(u) = sockets.udp_mut(h) {
                        u.loan_returned(payload);
                        credited.push(h);
                    }
                    continue;
                }
                None => {
                    log::error!("completion of unknown external transmission {token}");
                    continue;
                }
            };
            match &mut pending {
                Some((last, count)) if *last == segment => *count += 1,
                _ => {
                    if let Some((last, count)) = pending.replace((segment, 1)) {
                        self.complete(last, count, sockets, credited);
                    }
                }
            }
        }
        self.done = done;
        if let Some((last, count)) = pending {
            self.complete(last, count, sockets, credited);
        }
        n
    }

    /// `count` transmissions of `of` completed: counted on the loan, its connection's or, for
    /// a freed connection's, the orphan's (released once its last completed).
    fn complete(
        &mut self,
        of: SegmentLoan,
        count: u32,
        sockets: &mut SocketSet,
        credited: &mut Vec<SocketHandle>,
    ) {
        let SegmentLoan { h, loan, at } = of;
        if let Some(orphan) = self.orphans.get_mut(&loan) {
            if orphan.complete(count) {
                // Released (dropped) only now that the NIC no longer reads it.
                self.orphans.remove(&loan);
            }
            return;
        }
        if sockets.tcp_mut(h).is_some_and(|s| s.conn.transmissions_completed(loan, at, count)) {
            credited.push(h);
        } else {
            log::error!("{count} external transmissions completed for loan {loan} that nobody holds");
        }
    }
}

/// The loan a TCP transmission referenced: its connection, the loan and its queue position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SegmentLoan {
    h: SocketHandle,
    loan: LoanId,
    at: u64,
}
