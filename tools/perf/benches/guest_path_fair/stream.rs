//! The two ends of one checked bulk stream, through the copy API or the zero-copy API: the
//! stream's byte at offset i is `i % PERIOD`; the sending end writes that pattern, the
//! receiving end compares every byte it gets with it and counts the stream to its end.

use slimtcp::api::{Fd, SocketApi, SocketError, ZeroCopyTx};

use super::apps::{sock, AppError};

/// The stream's byte at offset `i` is `i % PERIOD` (a prime: chunk edges never line up with it).
pub const PERIOD: usize = 251;
/// Bytes offered per copy send call, and read per copy receive call.
pub const CHUNK: usize = 64 << 10;
/// Zero-copy buffers are about this long (a whole number of segments; as slimtcp-perf's).
const ZC_BUFFER: usize = 16 << 10;
/// Zero-copy buffers filled ahead per connection (4 x 16 KiB: the copy API's 64 KiB chunk).
const ZC_BATCH: usize = 4;

/// Which data-path API an end of the stream uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `send` / `recv` (the application's buffer copied).
    Copy,
    /// `alloc_tx` + `send_zc` / `recv_zc` (payload written and read in place).
    ZeroCopy,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Copy => "copy",
            Api::ZeroCopy => "zero-copy",
        }
    }
}

/// The pattern, long enough for a chunk at any phase.
pub struct Pattern(Vec<u8>);

impl Pattern {
    pub fn new() -> Self {
        Pattern((0..PERIOD + CHUNK).map(|i| (i % PERIOD) as u8).collect())
    }

    /// The `len` (at most [`CHUNK`]) bytes of the stream at `offset`.
    pub fn at(&self, offset: u64, len: usize) -> &[u8] {
        let at = (offset % PERIOD as u64) as usize;
        &self.0[at..at + len]
    }

    /// Whether `data` holds the stream's bytes at `offset` (any length).
    pub fn matches(&self, offset: u64, data: &[u8]) -> bool {
        data.chunks(CHUNK)
            .enumerate()
            .all(|(k, piece)| piece == self.at(offset + (k * CHUNK) as u64, piece.len()))
    }
}

/// `r`, `WouldBlock` (and, for buffer allocation, `NoBuffers`) as `Ok(None)`.
pub fn nb<T>(r: Result<T, SocketError>) -> Result<Option<T>, SocketError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(SocketError::WouldBlock) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The sending end of one stream.
pub struct Sending<B> {
    pub fd: Fd,
    api: Api,
    /// Bytes the stack accepted.
    pub sent: u64,
    /// Zero-copy buffers filled and not yet accepted (they hold the bytes from `sent` on).
    unsent: Vec<B>,
    /// `sent` plus the bytes in `unsent`.
    queued: u64,
    zc_len: usize,
}

impl<B: ZeroCopyTx> Sending<B> {
    pub fn new(fd: Fd, api: Api, mss: u16) -> Self {
        let mss = usize::from(mss.max(1));
        let zc_len = (ZC_BUFFER / mss).max(1) * mss;
        Sending { fd, api, sent: 0, unsent: Vec::new(), queued: 0, zc_len }
    }

    /// Offers the stack what it takes now; returns whether it took anything.
    pub fn fill<A: SocketApi<TxBuf = B>>(&mut self, tx: &mut A, pat: &Pattern) -> Result<bool, AppError> {
        match self.api {
            Api::Copy => {
                let wrote = nb(tx.send(self.fd, pat.at(self.sent, CHUNK))).map_err(sock("send"))?;
                let n = wrote.unwrap_or(0) as u64;
                self.sent += n;
                self.queued = self.sent;
                Ok(n > 0)
            }
            Api::ZeroCopy => self.fill_zero_copy(tx, pat),
        }
    }

    fn fill_zero_copy<A: SocketApi<TxBuf = B>>(
        &mut self,
        tx: &mut A,
        pat: &Pattern,
    ) -> Result<bool, AppError> {
        while self.unsent.len() < ZC_BATCH {
            let mut buf = match tx.alloc_tx(self.zc_len) {
                Ok(b) => b,
                Err(SocketError::NoBuffers | SocketError::WouldBlock) => break,
                Err(e) => return Err(AppError::Socket { op: "alloc_tx", source: e }),
            };
            let len = self.zc_len.min(buf.space_mut().len());
            buf.space_mut()[..len].copy_from_slice(pat.at(self.queued, len));
            buf.set_len(len);
            self.queued += len as u64;
            self.unsent.push(buf);
        }
        if self.unsent.is_empty() {
            return Ok(false);
        }
        let held = |v: &[B]| v.iter().map(|b| b.filled().len() as u64).sum::<u64>();
        let before = held(&self.unsent);
        nb(tx.send_zc(self.fd, &mut self.unsent)).map_err(sock("send_zc"))?;
        let took = before - held(&self.unsent);
        self.sent += took;
        Ok(took > 0)
    }

    /// Gives the buffers never accepted back (the stream ends at `sent`).
    pub fn abandon(&mut self) {
        self.unsent.clear();
        self.queued = self.sent;
    }
}

/// The receiving end of one stream.
pub struct Receiving {
    pub fd: Fd,
    api: Api,
    /// Bytes read (each one checked).
    pub received: u64,
    /// The end of the stream was read.
    pub ended: bool,
}

impl Receiving {
    pub fn new(fd: Fd, api: Api) -> Self {
        Receiving { fd, api, received: 0, ended: false }
    }

    /// One read: `None` when there was nothing, `Some(0)` at the end of the stream, else the
    /// bytes read, checked against the pattern.
    pub fn read<A: SocketApi>(
        &mut self,
        rx: &mut A,
        buf: &mut [u8],
        pat: &Pattern,
    ) -> Result<Option<usize>, AppError> {
        let n = match self.api {
            Api::Copy => {
                let Some(n) = nb(rx.recv(self.fd, buf)).map_err(sock("recv"))? else { return Ok(None) };
                self.check(pat, &buf[..n])?;
                n
            }
            Api::ZeroCopy => match nb(rx.recv_zc(self.fd)).map_err(sock("recv_zc"))? {
                None => return Ok(None),
                Some(None) => 0,
                Some(Some(b)) if b.as_ref().is_empty() => return Ok(None),
                Some(Some(b)) => {
                    let n = b.as_ref().len();
                    self.check(pat, b.as_ref())?;
                    rx.free_rx(b);
                    n
                }
            },
        };
        if n == 0 {
            self.ended = true;
        }
        self.received += n as u64;
        Ok(Some(n))
    }

    fn check(&self, pat: &Pattern, data: &[u8]) -> Result<(), AppError> {
        if pat.matches(self.received, data) {
            Ok(())
        } else {
            Err(AppError::Corrupt { offset: self.received, len: data.len() })
        }
    }
}
