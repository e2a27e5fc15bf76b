//! The data calls on SlimTCP sockets, all written once here: receive (`read`, `recv`,
//! `recvfrom`, `readv`, `recvmsg`), send (`write`, `send`, `sendto`, `writev`, `sendmsg`) and
//! `sendfile`.
//!
//! Linux's rules kept: a blocking stream send returns when everything is queued (a
//! non-blocking one may queue part); a receive returns what is there (`MSG_WAITALL`: all of
//! it, unless the stream ends); `MSG_PEEK` reads ahead into a buffer of the socket's that later
//! reads drain first; `EPIPE` raises `SIGPIPE` unless `MSG_NOSIGNAL`.

use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;

use libc::{c_int, c_void, iovec, msghdr, off_t, size_t};
use slimtcp_api::{Proto, Ready, SocketApi};

use crate::device::lock;
use crate::errno::{Errno, Sys};
use crate::logger::warn_once;
use crate::net::{blocking, blocks, dev};
use crate::socket::Entry;
use crate::{addr, real};

/// Receives into `buf`; the source for datagrams (and the peer for streams).
pub fn recv(entry: &Entry, buf: &mut [u8], flags: c_int) -> Sys<(usize, Option<SocketAddrV4>)> {
    if flags & libc::MSG_OOB != 0 {
        return Err(Errno(libc::EOPNOTSUPP));
    }
    if entry.proto == Proto::Tcp {
        if flags & libc::MSG_PEEK != 0 {
            return peek(entry, buf, flags).map(|n| (n, None));
        }
        let mut peeked = lock(&entry.peeked);
        if !peeked.is_empty() {
            let n = peeked.len().min(buf.len());
            buf[..n].copy_from_slice(&peeked[..n]);
            peeked.drain(..n);
            drop(peeked);
            // What arrived after the peeked bytes, as far as it is there already.
            let more = if n < buf.len() {
                recv(entry, &mut buf[n..], flags & !libc::MSG_WAITALL | libc::MSG_DONTWAIT).map_or(0, |r| r.0)
            } else {
                0
            };
            return Ok((n + more, None));
        }
    }
    let s = if entry.proto == Proto::Udp { entry.slim_or_make()? } else { entry.slim()? };
    let nonblocking = !blocks(entry, flags);
    let timeout = lock(&entry.options).recv_timeout;
    if entry.proto == Proto::Udp {
        if flags & libc::MSG_PEEK != 0 {
            warn_once("udp-peek".into(), || {
                "MSG_PEEK on a datagram socket is not supported: EOPNOTSUPP".into()
            });
            return Err(Errno(libc::EOPNOTSUPP));
        }
        let (n, from) = blocking(s, Ready::IN, nonblocking, timeout, |api| api.recv_from(s.fd, buf))?;
        return Ok((n, Some(from)));
    }
    let mut got = blocking(s, Ready::IN, nonblocking, timeout, |api| api.recv(s.fd, buf))?;
    if flags & libc::MSG_WAITALL != 0 && !nonblocking {
        while got > 0 && got < buf.len() {
            match blocking(s, Ready::IN, false, timeout, |api| api.recv(s.fd, &mut buf[got..])) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
    }
    Ok((got, None))
}

/// `MSG_PEEK` on a stream: reads ahead into the socket's peek buffer (waiting, by the
/// socket's blocking rule, only while it is empty) and copies from it without consuming.
fn peek(entry: &Entry, buf: &mut [u8], flags: c_int) -> Sys<usize> {
    let have = lock(&entry.peeked).len();
    if have < buf.len() {
        let s = entry.slim()?;
        let nonblocking = have > 0 || !blocks(entry, flags);
        let timeout = lock(&entry.options).recv_timeout;
        let mut ahead = vec![0u8; buf.len() - have];
        match blocking(s, Ready::IN, nonblocking, timeout, |api| api.recv(s.fd, &mut ahead)) {
            Ok(n) => lock(&entry.peeked).extend_from_slice(&ahead[..n]),
            Err(e) if have == 0 => return Err(e),
            Err(_) => {}
        }
    }
    let peeked = lock(&entry.peeked);
    let n = peeked.len().min(buf.len());
    buf[..n].copy_from_slice(&peeked[..n]);
    Ok(n)
}

/// Sends `data` (to `dst` for a datagram socket not connected).
pub fn send(fd: c_int, entry: &Entry, data: &[u8], flags: c_int, dst: Option<SocketAddrV4>) -> Sys<usize> {
    let r = send_inner(fd, entry, data, flags, dst);
    if r == Err(Errno(libc::EPIPE)) && flags & libc::MSG_NOSIGNAL == 0 {
        // SAFETY: raises a signal in the calling thread, as Linux's send does on EPIPE.
        unsafe { libc::raise(libc::SIGPIPE) };
    }
    r
}

fn send_inner(fd: c_int, entry: &Entry, data: &[u8], flags: c_int, dst: Option<SocketAddrV4>) -> Sys<usize> {
    if flags & libc::MSG_OOB != 0 {
        return Err(Errno(libc::EOPNOTSUPP));
    }
    let nonblocking = !blocks(entry, flags);
    let timeout = lock(&entry.options).send_timeout;
    if entry.proto == Proto::Udp {
        let s = match dst {
            Some(d) if entry.pending() => match entry.decide(fd, dev()?.config.kernel_owns(*d.ip()))? {
                Some(s) => s,
                None => return kernel_sendto(fd, data, flags, d),
            },
            _ => entry.slim()?,
        };
        return match dst {
            Some(d) => blocking(s, Ready::OUT, nonblocking, timeout, |api| api.send_to(s.fd, data, d)),
            None => blocking(s, Ready::OUT, nonblocking, timeout, |api| api.send(s.fd, data)),
        };
    }
    let s = entry.slim().map_err(|e| if e.0 == libc::ENOTCONN { Errno(libc::EPIPE) } else { e })?;
    let mut sent = 0;
    while sent < data.len() || data.is_empty() {
        match blocking(s, Ready::OUT, nonblocking, timeout, |api| api.send(s.fd, &data[sent..])) {
            Ok(n) => sent += n,
            Err(e) if sent == 0 => return Err(e),
            Err(_) => break,
        }
        if nonblocking || data.is_empty() {
            break;
        }
    }
    Ok(sent)
}

/// A datagram of a socket that just went to the kernel.
fn kernel_sendto(fd: c_int, data: &[u8], flags: c_int, d: SocketAddrV4) -> Sys<usize> {
    let sin = slimtcp_guest::sockaddr::to_sockaddr_in(d);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sin` is a sockaddr_in of `len` bytes; `data` is a valid slice.
    let rc = unsafe {
        real::sendto(
            fd,
            data.as_ptr().cast(),
            data.len(),
            flags,
            (&sin as *const libc::sockaddr_in).cast(),
            len,
        )
    };
    usize::try_from(rc).map_err(|_| Errno::last())
}

/// The `iovec`s of a call as slices (empty when `n` is 0).
///
/// # Safety
/// `iov` valid for `n` entries, each valid for its length (as for `readv(2)`).
unsafe fn iovecs<'a>(iov: *const iovec, n: usize) -> Sys<&'a [iovec]> {
    if n == 0 {
        return Ok(&[]);
    }
    if iov.is_null() || n > libc::UIO_MAXIOV as usize {
        return Err(Errno(if iov.is_null() { libc::EFAULT } else { libc::EINVAL }));
    }
    // SAFETY: forwarded contract.
    Ok(unsafe { std::slice::from_raw_parts(iov, n) })
}

/// # Safety
/// `v` describes memory valid for writes of `iov_len` bytes.
unsafe fn iov_mut<'a>(v: &iovec) -> &'a mut [u8] {
    if v.iov_len == 0 || v.iov_base.is_null() {
        return &mut [];
    }
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts_mut(v.iov_base.cast::<u8>(), v.iov_len) }
}

/// # Safety
/// `v` describes memory valid for reads of `iov_len` bytes.
unsafe fn iov_ref<'a>(v: &iovec) -> &'a [u8] {
    if v.iov_len == 0 || v.iov_base.is_null() {
        return &[];
    }
    // SAFETY: forwarded contract.
    unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) }
}

/// Scatter receive (`readv`, `recvmsg`).
///
/// # Safety
/// As for `readv(2)`.
pub unsafe fn recv_vectored(
    entry: &Entry,
    iov: *const iovec,
    n: usize,
    flags: c_int,
) -> Sys<(usize, Option<SocketAddrV4>)> {
    // SAFETY: forwarded contract.
    let iovs = unsafe { iovecs(iov, n) }?;
    if entry.proto == Proto::Udp || flags & libc::MSG_PEEK != 0 {
        let total: usize = iovs.iter().map(|v| v.iov_len).sum();
        let mut tmp = vec![0u8; total];
        let (got, from) = recv(entry, &mut tmp, flags)?;
        let mut at = 0;
        for v in iovs {
            // SAFETY: forwarded contract.
            let dst = unsafe { iov_mut(v) };
            let k = dst.len().min(got - at);
            dst[..k].copy_from_slice(&tmp[at..at + k]);
            at += k;
        }
        return Ok((got, from));
    }
    let mut total = 0;
    for v in iovs {
        // SAFETY: forwarded contract.
        let dst = unsafe { iov_mut(v) };
        if dst.is_empty() {
            continue;
        }
        // After the first bytes, take only what is already there.
        let more = if total == 0 { flags } else { flags | libc::MSG_DONTWAIT };
        match recv(entry, dst, more) {
            Ok((k, _)) => {
                total += k;
                if k < dst.len() {
                    break;
                }
            }
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok((total, None))
}

/// Gather send (`writev`, `sendmsg`).
///
/// # Safety
/// As for `writev(2)`.
pub unsafe fn send_vectored(
    fd: c_int,
    entry: &Entry,
    iov: *const iovec,
    n: usize,
    flags: c_int,
    dst: Option<SocketAddrV4>,
) -> Sys<usize> {
    // SAFETY: forwarded contract.
    let iovs = unsafe { iovecs(iov, n) }?;
    if entry.proto == Proto::Udp {
        let mut dgram = Vec::new();
        for v in iovs {
            // SAFETY: forwarded contract.
            dgram.extend_from_slice(unsafe { iov_ref(v) });
        }
        return send(fd, entry, &dgram, flags, dst);
    }
    let mut total = 0;
    for v in iovs {
        // SAFETY: forwarded contract.
        let src = unsafe { iov_ref(v) };
        if src.is_empty() {
            continue;
        }
        match send(fd, entry, src, flags, None) {
            Ok(k) => {
                total += k;
                if k < src.len() {
                    break;
                }
            }
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(total)
}

/// `recvmsg`: fills `msg_name`, sets `msg_flags` and `msg_controllen` to 0.
///
/// # Safety
/// As for `recvmsg(2)`.
pub unsafe fn recvmsg(entry: &Entry, msg: *mut msghdr, flags: c_int) -> Sys<usize> {
    if msg.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: non-null, and valid by the caller's contract.
    let m = unsafe { &mut *msg };
    // SAFETY: forwarded contract.
    let (n, from) = unsafe { recv_vectored(entry, m.msg_iov, m.msg_iovlen, flags) }?;
    match from {
        // SAFETY: msg_name/msg_namelen as the caller set them up.
        Some(a) if !m.msg_name.is_null() => unsafe { addr::write(a, m.msg_name.cast(), &mut m.msg_namelen) },
        _ => m.msg_namelen = 0,
    }
    m.msg_controllen = 0;
    m.msg_flags = 0;
    Ok(n)
}

/// `sendmsg`: `msg_name` is the destination; control messages are ignored (logged once).
///
/// # Safety
/// As for `sendmsg(2)`.
pub unsafe fn sendmsg(fd: c_int, entry: &Entry, msg: *const msghdr, flags: c_int) -> Sys<usize> {
    if msg.is_null() {
        return Err(Errno(libc::EFAULT));
    }
    // SAFETY: non-null, and valid by the caller's contract.
    let m = unsafe { &*msg };
    let dst = if m.msg_name.is_null() || m.msg_namelen == 0 {
        None
    } else {
        // SAFETY: msg_name valid for msg_namelen bytes (caller's contract).
        Some(unsafe { addr::read(m.msg_name.cast(), m.msg_namelen) }?)
    };
    if m.msg_controllen > 0 {
        warn_once("cmsg".into(), || "sendmsg control messages are ignored by SlimTCP".into());
    }
    // SAFETY: forwarded contract.
    unsafe { send_vectored(fd, entry, m.msg_iov, m.msg_iovlen, flags, dst) }
}

/// `sendfile` to a SlimTCP socket: read from `input`, sent as by `send` (the socket's blocking
/// rule); the file offset (`*offset`, or `input`'s position) moves by what was sent.
///
/// # Safety
/// As for `sendfile(2)`.
pub unsafe fn sendfile(
    out: c_int,
    entry: &Entry,
    input: c_int,
    offset: *mut off_t,
    count: size_t,
) -> Sys<usize> {
    const CHUNK: usize = 256 << 10;
    let mut buf = vec![0u8; count.min(CHUNK)];
    let mut total = 0usize;
    while total < count {
        let want = buf.len().min(count - total);
        let p = buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: `buf` has room for `want` bytes; `offset` is valid when non-null (contract).
        let got = unsafe {
            if offset.is_null() {
                real::read(input, p, want)
            } else {
                real::pread(input, p, want, *offset)
            }
        };
        let got = match usize::try_from(got) {
            Ok(0) => break,
            Ok(g) => g,
            Err(_) if total > 0 => break,
            Err(_) => return Err(Errno::last()),
        };
        let sent = match send(out, entry, &buf[..got], libc::MSG_NOSIGNAL, None) {
            Ok(k) => k,
            Err(e) => {
                unsend(input, offset, got);
                if total > 0 {
                    break;
                }
                return Err(e);
            }
        };
        total += sent;
        if offset.is_null() {
            unsend(input, offset, got - sent);
        } else {
            // SAFETY: non-null, valid by contract.
            unsafe { *offset += sent as off_t };
        }
        if sent < got || entry.nonblocking.load(Ordering::Relaxed) && sent < want {
            break;
        }
    }
    Ok(total)
}

/// Moves `input`'s position back over `n` bytes read but not sent (no-op with an offset).
fn unsend(input: c_int, offset: *mut off_t, n: usize) {
    if offset.is_null() && n > 0 {
        // SAFETY: plain system call.
        unsafe { real::lseek(input, -(n as off_t), libc::SEEK_CUR) };
    }
}
