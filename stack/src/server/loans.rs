//! The server's loans: a transport's payload piece, tagged with the send it belongs to, as the
//! stack holds it. The stack hands loans back type-erased; [`Loan::recover`] is the one place
//! that gives them their type again.

use std::any::Any;
use std::ptr::NonNull;

use crate::tcp::TxPayload;

/// A payload piece of send `seq` of socket `socket`.
#[derive(Debug)]
pub(super) struct Loan<P> {
    pub socket: u32,
    pub seq: u64,
    pub payload: P,
}

impl<P: TxPayload + 'static> Loan<P> {
    /// The loan in a stack's returned payload; `None` for a payload the server did not loan (a
    /// copy the server made of a backlog loan at a ring stop: nothing to complete).
    pub fn recover(payload: Box<dyn TxPayload>) -> Option<Loan<P>> {
        let any: Box<dyn Any + Send> = payload;
        match any.downcast::<Loan<P>>() {
            Ok(loan) => Some(*loan),
            Err(_) => None,
        }
    }
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
}
