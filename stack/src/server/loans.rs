//! The server's loans: a transport's payload piece, tagged with the send it belongs to, as the
//! stack holds it. The stack hands a loan back type-erased; its [`tag`](TxPayload::tag) says
//! which send it completes, and dropping it gives the transport's memory back (a guest's
//! mapping, a host buffer to its pool): no downcast.

use std::ptr::NonNull;

use crate::tcp::{LoanTag, TxPayload};

/// A payload piece of send `seq` of socket `socket`.
#[derive(Debug)]
pub(super) struct Loan<P> {
    pub socket: u32,
    pub seq: u64,
    pub payload: P,
}

impl<P: TxPayload> TxPayload for Loan<P> {
    fn len(&self) -> usize {
        self.payload.len()
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        self.payload.copy_to(offset, dst)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        self.payload.as_slice()
    }

    fn external_addr(&self) -> Option<NonNull<u8>> {
        self.payload.external_addr()
    }

    #[inline]
    fn read_ahead(&self, offset: usize, n: usize) {
        self.payload.read_ahead(offset, n);
    }

    fn tag(&self) -> Option<LoanTag> {
        Some(LoanTag { socket: self.socket, seq: self.seq })
    }
}
