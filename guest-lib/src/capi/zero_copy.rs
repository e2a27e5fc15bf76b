//! The zero-copy data path.
//!
//! Transmit: `slim_alloc_tx` hands out a buffer in the memory the device reads; the
//! application writes its payload at `slim_tx_data`, sets the length with `slim_tx_set_len`
//! and passes the handle's address to `slim_send_zc`. When the call took the buffer it sets the
//! handle to NULL: from then on the library owns it (the device reads it in place until the
//! peer acknowledged its bytes). A handle still set after the call (`-EAGAIN`, ...) is still
//! the caller's: send it again or free it with `slim_tx_free`.
//!
//! Receive: `slim_recv_zc` returns the next payload in place, in the receive buffer the
//! device wrote; read it at `slim_rx_data` and give it back with `slim_rx_release` (its bytes
//! count against the receive window until then).

use std::ffi::c_int;

use slimtcp_api::{SocketApi, ZeroCopyTx};

use super::args;
use super::device::{api, SlimCtx};
use super::entry::guarded;
use super::error::CapiError;
use crate::{RxBuf, TxBuf};

/// A zero-copy transmit buffer (opaque to C). Empty once `slim_send_zc` took its buffer.
#[derive(Debug)]
pub struct SlimTxBuf(Option<TxBuf>);

/// A received payload read in place (opaque to C).
#[derive(Debug)]
pub struct SlimRxBuf(RxBuf);

/// The transmit buffer behind a handle that was not sent yet.
///
/// # Safety
/// `tx` is NULL or a live handle from `slim_alloc_tx`, used by one thread at a time.
unsafe fn tx_buf<'a>(tx: *mut SlimTxBuf) -> Result<&'a mut TxBuf, CapiError> {
    // SAFETY: forwarded from the caller.
    unsafe { args::get_mut(tx, "tx") }?.0.as_mut().ok_or(CapiError::BufferSent)
}

/// Allocates a transmit buffer for `len` bytes (at most 65536) and stores its handle in
/// `*out`; its length starts at `len`, its capacity may be larger. Returns 0, or a negative
/// errno (`-ENOBUFS` when the pair's transmit memory is exhausted: buffers in flight come
/// back as the peer acknowledges them).
///
/// # Safety
/// `out` is NULL or writable for a pointer; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_alloc_tx(ctx: *mut SlimCtx, len: usize, out: *mut *mut SlimTxBuf) -> c_int {
    guarded("slim_alloc_tx", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::get_mut(out, "out")?) };
        let buf = api.alloc_tx(len).map_err(CapiError::socket("alloc_tx"))?;
        *out = Box::into_raw(Box::new(SlimTxBuf(Some(buf))));
        Ok(0)
    })
}

/// Where to write the payload (`slim_tx_capacity` bytes); NULL for a bad or sent handle.
///
/// # Safety
/// `tx` is NULL or a live handle. The bytes may be written until the handle is sent or freed.
#[no_mangle]
pub unsafe extern "C" fn slim_tx_data(tx: *mut SlimTxBuf) -> *mut u8 {
    guarded("slim_tx_data", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { tx_buf(tx) }?.space_mut().as_mut_ptr())
    })
}

/// The buffer's room in bytes (0 for a bad or sent handle).
///
/// # Safety
/// `tx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn slim_tx_capacity(tx: *mut SlimTxBuf) -> usize {
    guarded("slim_tx_capacity", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { tx_buf(tx) }?.capacity())
    })
}

/// Sets how many bytes (from `slim_tx_data`) will be sent. Returns 0, or `-EINVAL` when
/// `len` exceeds the capacity or the handle is bad.
///
/// # Safety
/// `tx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn slim_tx_set_len(tx: *mut SlimTxBuf, len: usize) -> c_int {
    guarded("slim_tx_set_len", || {
        // SAFETY: forwarded from the caller.
        let buf = unsafe { tx_buf(tx) }?;
        if len > buf.capacity() {
            let value = i64::try_from(len).unwrap_or(i64::MAX);
            return Err(CapiError::BadArgument { arg: "len", value, expected: "at most the capacity" });
        }
        buf.set_len(len);
        Ok(0)
    })
}

/// Frees a transmit buffer that was not sent (NULL is ignored).
///
/// # Safety
/// `tx` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn slim_tx_free(tx: *mut SlimTxBuf) {
    guarded("slim_tx_free", || {
        if !tx.is_null() {
            // SAFETY: the caller gives back a pointer from `Box::into_raw` in `slim_alloc_tx`.
            drop(unsafe { Box::from_raw(tx) });
        }
        Ok(())
    })
}

/// Sends the buffer `*tx` on `fd` without copying. When the library took it, `*tx` is set to
/// NULL (the library frees it after the peer's acknowledgement) and the bytes sent are
/// returned; otherwise `*tx` is left as it was and stays the caller's (see the module
/// documentation). A blocking socket waits for room in the send buffer.
///
/// # Safety
/// `tx` is NULL or points to a handle pointer from `slim_alloc_tx` (of this context); for
/// `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_send_zc(
    ctx: *mut SlimCtx,
    fd: c_int,
    tx: *mut *mut SlimTxBuf,
) -> libc::ssize_t {
    guarded("slim_send_zc", || {
        // SAFETY: forwarded from the caller.
        let (api, handle) = unsafe { (api(ctx)?, args::get_mut(tx, "tx")?) };
        // SAFETY: `*tx` is NULL or a live handle (the caller's guarantee).
        let slot = unsafe { args::get_mut(*handle, "*tx") }?;
        let fd = args::fd(fd, "send_zc")?;
        let buf = slot.0.take().ok_or(CapiError::BufferSent)?;
        let len = buf.len();
        let mut bufs = vec![buf];
        let result = api.send_zc(fd, &mut bufs);
        slot.0 = bufs.pop();
        if slot.0.is_none() {
            // SAFETY: the handle came from `Box::into_raw` in `slim_alloc_tx`; its buffer is
            // the library's now, so the handle goes and the caller's pointer is cleared.
            drop(unsafe { Box::from_raw(*handle) });
            *handle = std::ptr::null_mut();
        }
        match result.map_err(CapiError::socket("send_zc"))? {
            0 => Ok(0),
            _ => Ok(isize::try_from(len).unwrap_or(isize::MAX)),
        }
    })
}

/// The next received payload of `fd`, in place: stores its handle in `*rx` and returns its
/// length (> 0); 0 at end of stream (`*rx` NULL). Release it with `slim_rx_release`.
///
/// # Safety
/// `rx` is NULL or writable for a pointer; for `ctx`, see `slim_socket`.
#[no_mangle]
pub unsafe extern "C" fn slim_recv_zc(
    ctx: *mut SlimCtx,
    fd: c_int,
    rx: *mut *mut SlimRxBuf,
) -> libc::ssize_t {
    guarded("slim_recv_zc", || {
        // SAFETY: forwarded from the caller.
        let (api, out) = unsafe { (api(ctx)?, args::get_mut(rx, "rx")?) };
        *out = std::ptr::null_mut();
        let Some(buf) = api.recv_zc(args::fd(fd, "recv_zc")?).map_err(CapiError::socket("recv_zc"))? else {
            return Ok(0);
        };
        let len = isize::try_from(buf.len()).unwrap_or(isize::MAX);
        *out = Box::into_raw(Box::new(SlimRxBuf(buf)));
        Ok(len)
    })
}

/// The payload's first byte (`slim_rx_len` bytes, read-only); NULL for a NULL handle.
///
/// # Safety
/// `rx` is NULL or a live handle. The bytes are valid until it is released.
#[no_mangle]
pub unsafe extern "C" fn slim_rx_data(rx: *const SlimRxBuf) -> *const u8 {
    guarded("slim_rx_data", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { args::get(rx, "rx") }?.0.as_slice().as_ptr())
    })
}

/// The payload's length in bytes (0 for a NULL handle).
///
/// # Safety
/// `rx` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn slim_rx_len(rx: *const SlimRxBuf) -> usize {
    guarded("slim_rx_len", || {
        // SAFETY: forwarded from the caller.
        Ok(unsafe { args::get(rx, "rx") }?.0.len())
    })
}

/// Gives a received payload back: its receive buffer is reposted and its bytes reopen the
/// window at the context's next call. Any thread may release; NULL is ignored.
///
/// # Safety
/// `rx` is NULL or a live handle from `slim_recv_zc`, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn slim_rx_release(rx: *mut SlimRxBuf) {
    guarded("slim_rx_release", || {
        if !rx.is_null() {
            // SAFETY: the caller gives back a pointer from `Box::into_raw` in `slim_recv_zc`.
            drop(unsafe { Box::from_raw(rx) });
        }
        Ok(())
    })
}
