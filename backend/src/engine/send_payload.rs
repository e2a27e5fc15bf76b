//! A stream send's bytes while the stack holds them: guest memory, sent by reference, or the
//! backend's copy of a `COPY` send (docs/protocol.md section 5.6), whose chain went back at once.

use std::ptr::NonNull;

use slimtcp::tcp::TxPayload;

use crate::guest_mem::GuestPayload;

/// One piece of a send (see the module documentation).
#[derive(Debug)]
pub enum SendPayload {
    /// In guest memory, read in place until the peer acknowledged it.
    Guest(GuestPayload),
    /// Copied out of guest memory when the request was taken.
    Copied(Vec<u8>),
}

impl TxPayload for SendPayload {
    fn len(&self) -> usize {
        match self {
            SendPayload::Guest(g) => g.len(),
            SendPayload::Copied(v) => v.len(),
        }
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        match self {
            SendPayload::Guest(g) => g.copy_to(offset, dst),
            SendPayload::Copied(v) => v.copy_to(offset, dst),
        }
    }

    fn as_slice(&self) -> Option<&[u8]> {
        match self {
            SendPayload::Guest(_) => None,
            SendPayload::Copied(v) => Some(v),
        }
    }

    fn external_addr(&self) -> Option<NonNull<u8>> {
        match self {
            SendPayload::Guest(g) => g.external_addr(),
            SendPayload::Copied(_) => None,
        }
    }

    fn read_ahead(&self, offset: usize, n: usize) {
        // The backend's own copy was made on this core: nothing to ask for.
        if let SendPayload::Guest(g) = self {
            g.read_ahead(offset, n);
        }
    }
}
