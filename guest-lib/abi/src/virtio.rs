//! The virtio-net header in front of every message.

use crate::codec::{Fields, FieldsMut};
use crate::layout::virtio_net_hdr as l;
use crate::AbiError;

/// Length of `struct virtio_net_hdr_mrg_rxbuf`, which every frame on every queue starts with
/// (VIRTIO_F_VERSION_1 always uses the 12-byte form).
pub const VIRTIO_NET_HDR_LEN: usize = l::SIZE;

/// The virtio-net header as this protocol uses it: no offloads, so everything is zero except
/// `num_buffers`, which the device sets to 1 on the receive queue (a message never spans posted
/// buffers). On the transmit queue the device ignores the header; the guest writes zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VirtioNetHdr;

impl VirtioNetHdr {
    /// Writes a transmit-queue header (all zero).
    pub fn emit_tx(frame: &mut [u8]) -> Result<(), AbiError> {
        FieldsMut::new(frame, 0, l::SIZE).map(drop)
    }

    /// Writes a receive-queue header (all zero, `num_buffers` = 1).
    pub fn emit_rx(frame: &mut [u8]) -> Result<(), AbiError> {
        let mut f = FieldsMut::new(frame, 0, l::SIZE)?;
        f.u16(l::NUM_BUFFERS, 1);
        Ok(())
    }

    /// Checks a receive-queue header: zeros with `num_buffers` = 1.
    pub fn check_rx(frame: &[u8]) -> Result<(), AbiError> {
        let f = Fields::new(frame, 0, l::SIZE)?;
        let ok = f.u16(l::NUM_BUFFERS) == 1
            && f.u8(l::FLAGS) == 0
            && f.u8(l::GSO_TYPE) == 0
            && f.u16(l::HDR_LEN) == 0
            && f.u16(l::GSO_SIZE) == 0
            && f.u16(l::CSUM_START) == 0
            && f.u16(l::CSUM_OFFSET) == 0;
        if ok {
            Ok(())
        } else {
            Err(AbiError::BadVirtioHeader)
        }
    }
}
