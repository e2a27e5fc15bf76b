//! The TAP's frame I/O, its [`Nic`] implementation: one `read` per received frame (with
//! offload, its virtio-net header lands in the buffer's headroom and is stripped in place) and
//! one `writev` per transmitted frame (the header, the frame, and an external payload where it
//! lies: the kernel copies them, our code copies nothing).

use std::io::{self, Read};
use std::os::fd::AsRawFd;

use super::vnet::{self, VnetHdr, VNET_HDR_LEN};
use super::{TapNic, TAP_MAX_BURST};
use crate::nic::buf::DEFAULT_HEADROOM;
use crate::nic::offload;
use crate::nic::{ExternalFrame, ExternalPayload, Nic, NicCapabilities, NicError, PacketBuf, TxOffload};
use crate::time::Instant;
use crate::wire::{ChecksumCapabilities, ChecksumOffload};

/// The TAP's answer to a write while its interface is down: the frame is lost, nothing broke.
const LINK_DOWN: i32 = libc::EIO;

impl TapNic {
    fn io_error(&self, source: io::Error) -> NicError {
        NicError::Io { device: self.name.clone(), source }
    }

    fn rx_buf(&mut self) -> PacketBuf {
        match self.spare.take() {
            Some(buf) => buf,
            None => self.pool.take(DEFAULT_HEADROOM),
        }
    }

    /// Bytes of the virtio-net header in front of each frame (0 without offload).
    fn header_len(&self) -> usize {
        if self.offload {
            VNET_HDR_LEN
        } else {
            0
        }
    }

    /// Fills in software what `frame` asks of the device and it does not do (the IPv4 header
    /// checksum; without offload, any checksum), and returns the frame's virtio-net header.
    /// Idempotent, so a frame that could not be written now is prepared again unchanged.
    fn prepare_tx(&mut self, frame: &mut PacketBuf) -> VnetHdr {
        let o = frame.offload;
        if !offload::pending(&o) {
            return VnetHdr::default();
        }
        let mut filled = false;
        if o.ipv4_checksum {
            offload::fill_bytes(frame.as_mut_slice(), &TxOffload { l4_checksum: None, ..o });
            frame.offload.ipv4_checksum = false;
            filled = true;
        }
        if o.l4_checksum.is_some() && !self.offload {
            offload::fill(frame);
            filled = true;
        }
        self.stats.tx_checksum_filled += u64::from(filled);
        VnetHdr::for_tx(&frame.offload)
    }

    /// [`prepare_tx`](Self::prepare_tx) for a frame with an external payload: without offload
    /// its L4 checksum covers the payload, which is read (copied into scratch) for it.
    fn prepare_external(&mut self, frame: &mut ExternalFrame) -> VnetHdr {
        let o = frame.headers.offload;
        if o.l4_checksum.is_none() || self.offload {
            return self.prepare_tx(&mut frame.headers);
        }
        let head = frame.headers.len();
        self.scratch.clear();
        self.scratch.resize(head + frame.payload.len(), 0);
        self.scratch[..head].copy_from_slice(frame.headers.as_slice());
        frame.payload.copy_to(&mut self.scratch[head..]);
        offload::fill_bytes(&mut self.scratch, &o);
        frame.headers.as_mut_slice().copy_from_slice(&self.scratch[..head]);
        frame.headers.offload = TxOffload::default();
        self.stats.tx_checksum_filled += 1;
        VnetHdr::default()
    }

    /// Writes one frame: its virtio-net header (with offload), `frame`, then `payload` in place.
    fn write_frame(&self, hdr: &VnetHdr, frame: &[u8], payload: Option<&ExternalPayload>) -> io::Result<()> {
        let header = hdr.encode();
        let empty = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };
        let mut iov = [empty; 3];
        let mut n = 0;
        if self.offload {
            iov[n] = libc::iovec { iov_base: header.as_ptr().cast_mut().cast(), iov_len: header.len() };
            n += 1;
        }
        iov[n] = libc::iovec { iov_base: frame.as_ptr().cast_mut().cast(), iov_len: frame.len() };
        n += 1;
        if let Some(p) = payload {
            iov[n] = libc::iovec { iov_base: p.addr().cast_mut().cast(), iov_len: p.len() };
            n += 1;
        }
        loop {
            // SAFETY: the first `n` iovecs cover readable memory: `header` and `frame` are
            // borrowed for the call, and an external payload stays readable until its
            // completion is reported (contract of `ExternalPayload::new`), which happens after
            // this call; the kernel only reads them during the call. `n` is at most 3.
            let rc = unsafe { libc::writev(self.file.as_raw_fd(), iov.as_ptr(), n as libc::c_int) };
            if rc >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// What a failed write means for the burst.
enum WriteFailure {
    /// The device is full: stop, the rest stays queued.
    WouldBlock,
    /// A real error.
    Failed(io::Error),
}

/// Sorts a write's outcome: `Ok(true)` written, `Ok(false)` lost to a down link (counts as
/// sent), or why the burst stops.
fn outcome(result: io::Result<()>) -> Result<bool, WriteFailure> {
    match result {
        Ok(()) => Ok(true),
        // The interface is down: the frame is lost, as on an unplugged wire.
        Err(e) if e.raw_os_error() == Some(LINK_DOWN) => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(WriteFailure::WouldBlock),
        Err(e) => Err(WriteFailure::Failed(e)),
    }
}

impl Nic for TapNic {
    /// With offload: TCP and UDP transmit checksums (the IPv4 header checksum is the stack's:
    /// virtio-net cannot fill it). Receive offload is not claimed: the kernel's verdict comes per
    /// frame ([`PacketBuf::rx_checksum_ok`]), and frames without one are verified by the stack.
    fn capabilities(&self) -> NicCapabilities {
        let checksum = if self.offload {
            let tx = ChecksumOffload { rx: false, tx: true };
            ChecksumCapabilities { ipv4: ChecksumOffload::default(), tcp: tx, udp: tx }
        } else {
            ChecksumCapabilities::none()
        };
        NicCapabilities { checksum, mtu: self.mtu, max_burst: TAP_MAX_BURST }
    }

    /// Reads frames until the device has none left or `min(max, 32)` reads were made (a frame
    /// dropped for its virtio-net header takes a read too). A read error after some frames were
    /// read is reported by the next call.
    fn receive(&mut self, _now: Instant, out: &mut Vec<PacketBuf>, max: usize) -> Result<usize, NicError> {
        let max = max.min(TAP_MAX_BURST);
        let headroom = DEFAULT_HEADROOM - self.header_len();
        let mut n = 0;
        let mut reads = 0;
        while reads < max {
            reads += 1;
            let mut buf = self.rx_buf();
            buf.reset(headroom);
            let room = buf.tailroom();
            let result = (&self.file).read(buf.append(room).unwrap_or_default());
            match result {
                Ok(len) if len > 0 => {
                    buf.truncate(len);
                    if self.offload && !vnet::accept(&mut buf, &mut self.stats) {
                        self.spare = Some(buf);
                        continue;
                    }
                    out.push(buf);
                    n += 1;
                }
                Ok(_) => {
                    self.spare = Some(buf);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => self.spare = Some(buf),
                Err(e) => {
                    self.spare = Some(buf);
                    if e.kind() == io::ErrorKind::WouldBlock || n > 0 {
                        break;
                    }
                    return Err(self.io_error(e));
                }
            }
        }
        Ok(n)
    }

    fn alloc_tx(&mut self) -> Result<PacketBuf, NicError> {
        Ok(self.pool.take(DEFAULT_HEADROOM))
    }

    /// Writes frames in order until the device would block. If a write fails, the frames before
    /// it are reported sent (`Ok`); when the very first frame fails it is removed, dropped, and
    /// the error returned, so one bad frame cannot wedge the queue.
    fn transmit(&mut self, _now: Instant, frames: &mut Vec<PacketBuf>) -> Result<usize, NicError> {
        let (sent, failure) = self.write_burst(frames, |nic, frame| {
            let hdr = nic.prepare_tx(frame);
            let written = outcome(nic.write_frame(&hdr, frame.as_slice(), None))?;
            nic.count_written(written, &hdr);
            Ok(())
        });
        match failure {
            Some(e) if sent == 0 => {
                frames.remove(0);
                Err(self.io_error(e))
            }
            _ => {
                frames.drain(..sent);
                Ok(sent)
            }
        }
    }

    fn supports_external(&self) -> bool {
        true
    }

    /// Writes each frame's headers and external payload with one `writev` (the kernel copies
    /// both into its buffer; our code copies nothing), so a payload is complete as soon as the
    /// call returns, successful or not. Stops when the device would block. If a write fails,
    /// the frames before it are reported sent; when the very first frame fails it is removed
    /// (its payload reported complete) and the error returned.
    fn transmit_external(
        &mut self,
        _now: Instant,
        frames: &mut Vec<ExternalFrame>,
    ) -> Result<usize, NicError> {
        let (sent, failure) = self.write_burst(frames, |nic, frame| {
            let hdr = nic.prepare_external(frame);
            let written = outcome(nic.write_frame(&hdr, frame.headers.as_slice(), Some(&frame.payload)))?;
            nic.count_written(written, &hdr);
            nic.completed.push(frame.payload.token());
            Ok(())
        });
        match failure {
            Some(e) if sent == 0 => {
                let frame = frames.remove(0);
                self.completed.push(frame.payload.token());
                Err(self.io_error(e))
            }
            _ => {
                frames.drain(..sent);
                Ok(sent)
            }
        }
    }

    fn poll_tx_completions(&mut self, out: &mut Vec<u64>) -> usize {
        let n = self.completed.len();
        out.append(&mut self.completed);
        n
    }
}

impl TapNic {
    /// Writes `frames` in order with `write` until the device would block or a write fails:
    /// the number written, and the failure (the frames of both transmit paths).
    fn write_burst<T>(
        &mut self,
        frames: &mut [T],
        mut write: impl FnMut(&mut Self, &mut T) -> Result<(), WriteFailure>,
    ) -> (usize, Option<io::Error>) {
        let mut sent = 0;
        for frame in frames.iter_mut() {
            match write(self, frame) {
                Ok(()) => sent += 1,
                Err(WriteFailure::WouldBlock) => return (sent, None),
                Err(WriteFailure::Failed(e)) => return (sent, Some(e)),
            }
        }
        (sent, None)
    }

    /// Counts a frame the burst is done with: written (`NEEDS_CSUM` counted) or lost to a down
    /// link.
    fn count_written(&mut self, written: bool, hdr: &VnetHdr) {
        if !written {
            self.stats.link_down_drops += 1;
        } else if hdr.needs_csum() {
            self.stats.tx_checksum_offloaded += 1;
        }
    }
}
