//! The vhost-user connection between the VMM and the daemon passes through this relay.
//!
//! QEMU's vhost-user **net** enables the first queue pair (`SET_VRING_ENABLE`) as soon as the
//! netdev connects, long before the guest driver negotiates features and QEMU sends
//! `SET_FEATURES` (seen with QEMU 10.0: `backend/tests/qemu_early_enable.rs`). The vhost crate's
//! request handler accepts `SET_VRING_ENABLE` only once `SET_FEATURES` has acknowledged
//! `VHOST_USER_F_PROTOCOL_FEATURES`, and treats it as a fatal error otherwise: the VMM would be
//! disconnected at once. The relay forwards every message and its file descriptors unchanged in
//! both directions, except a `SET_VRING_ENABLE` that arrives before `SET_FEATURES`: it answers
//! that one itself (when the frontend asked for a reply) and hands it to the daemon right after
//! `SET_FEATURES`, which is when a ring's enable state starts to matter to the daemon.
//!
//! Control plane only: the data path (virtqueues in shared memory) never passes here.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// Message header: request, flags, payload size (u32 each, little-endian).
const HEADER: usize = 12;
/// Largest payload accepted (vhost-user messages are at most a few KiB).
const MAX_PAYLOAD: usize = 64 * 1024;
/// File descriptors one message may carry.
const MAX_FDS: usize = 32;
const SET_FEATURES: u32 = 2;
const SET_VRING_ENABLE: u32 = 18;
/// Header flags.
const VERSION_1: u32 = 0x1;
const REPLY: u32 = 0x4;
const NEED_REPLY: u32 = 0x8;
/// `VHOST_USER_F_PROTOCOL_FEATURES`.
const PROTOCOL_FEATURES: u64 = 1 << 30;

/// Errors starting a relay.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// A socket could not be duplicated for the second direction.
    #[error("duplicating a relay socket")]
    Clone(#[source] io::Error),
    /// A relay thread could not be started.
    #[error("spawning a relay thread")]
    Spawn(#[source] io::Error),
}

/// One vhost-user message with the descriptors that came with it (closed on drop).
#[derive(Debug)]
struct Message {
    header: [u8; HEADER],
    payload: Vec<u8>,
    fds: Vec<File>,
}

impl Message {
    fn field(&self, i: usize) -> u32 {
        u32::from_le_bytes([
            self.header[4 * i],
            self.header[4 * i + 1],
            self.header[4 * i + 2],
            self.header[4 * i + 3],
        ])
    }

    fn request(&self) -> u32 {
        self.field(0)
    }

    fn flags(&self) -> u32 {
        self.field(1)
    }

    fn new(request: u32, flags: u32, payload: &[u8]) -> Message {
        let mut header = [0u8; HEADER];
        header[0..4].copy_from_slice(&request.to_le_bytes());
        header[4..8].copy_from_slice(&flags.to_le_bytes());
        header[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        Message { header, payload: payload.to_vec(), fds: Vec::new() }
    }
}

/// Fills `buf` from `s`, collecting descriptors that arrive on the way. Returns false when the
/// stream ended before the first byte.
fn read_full(s: &UnixStream, buf: &mut [u8], fds: &mut Vec<File>) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        let mut raw = [-1 as RawFd; MAX_FDS];
        let rest = &mut buf[got..];
        let mut iov = [libc::iovec { iov_base: rest.as_mut_ptr().cast(), iov_len: rest.len() }];
        // SAFETY: the iovec points into `buf`, which we borrow mutably; any bytes may be written.
        let (n, nfds) = unsafe { s.recv_with_fds(&mut iov, &mut raw) }.map_err(io::Error::from)?;
        for &fd in raw.iter().take(nfds) {
            // SAFETY: recvmsg handed us these descriptors; nobody else owns them.
            fds.push(unsafe { File::from_raw_fd(fd) });
        }
        if n == 0 {
            if got == 0 {
                return Ok(false);
            }
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "vhost-user message cut short"));
        }
        got += n;
    }
    Ok(true)
}

/// Reads one whole message; `None` at a clean end of the stream.
fn read_message(s: &UnixStream) -> io::Result<Option<Message>> {
    let mut header = [0u8; HEADER];
    let mut fds = Vec::new();
    if !read_full(s, &mut header, &mut fds)? {
        return Ok(None);
    }
    let size = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
    if size > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("vhost-user payload of {size} bytes"),
        ));
    }
    let mut payload = vec![0u8; size];
    if size > 0 && !read_full(s, &mut payload, &mut fds)? {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "vhost-user message cut short"));
    }
    Ok(Some(Message { header, payload, fds }))
}

/// Writes `m` whole, its descriptors with the first bytes.
fn write_message(mut s: &UnixStream, m: &Message) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(HEADER + m.payload.len());
    bytes.extend_from_slice(&m.header);
    bytes.extend_from_slice(&m.payload);
    let fds: Vec<RawFd> = m.fds.iter().map(AsRawFd::as_raw_fd).collect();
    let sent = s.send_with_fds(&[&bytes[..]], &fds).map_err(io::Error::from)?;
    s.write_all(&bytes[sent..])
}

/// `SET_VRING_ENABLE`s that came before `SET_FEATURES` (see the module documentation).
#[derive(Debug, Default)]
struct EarlyEnables {
    features_set: bool,
    deferred: Vec<Vec<u8>>,
}

impl EarlyEnables {
    /// What to do with a frontend message: `Some` messages go to the daemon in order; a
    /// deferred enable goes nowhere now (and may need `reply` to the frontend).
    fn filter(&mut self, m: Message, reply: &mut Option<Message>) -> Vec<Message> {
        match m.request() {
            SET_VRING_ENABLE if !self.features_set => {
                log::debug!("SET_VRING_ENABLE before SET_FEATURES: deferred until SET_FEATURES");
                if m.flags() & NEED_REPLY != 0 {
                    *reply = Some(Message::new(SET_VRING_ENABLE, VERSION_1 | REPLY, &0u64.to_le_bytes()));
                }
                self.deferred.push(m.payload);
                Vec::new()
            }
            SET_FEATURES => {
                self.features_set = true;
                let features = m
                    .payload
                    .get(..8)
                    .map_or(0, |b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]));
                let mut out = vec![m];
                let deferred = std::mem::take(&mut self.deferred);
                if features & PROTOCOL_FEATURES != 0 {
                    out.extend(deferred.iter().map(|p| Message::new(SET_VRING_ENABLE, VERSION_1, p)));
                }
                out
            }
            _ => vec![m],
        }
    }
}

/// The two forwarding threads of one connection.
#[derive(Debug)]
pub struct Relay {
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Relays between `vmm` (the VMM's connection) and `daemon` (the daemon's end) until either
    /// side closes; then both are shut down.
    pub fn spawn(name: &str, vmm: UnixStream, daemon: UnixStream) -> Result<Relay, RelayError> {
        let vmm_writer = Arc::new(Mutex::new(vmm.try_clone().map_err(RelayError::Clone)?));
        let daemon_reader = daemon.try_clone().map_err(RelayError::Clone)?;
        let to_daemon = {
            let vmm_writer = Arc::clone(&vmm_writer);
            let daemon = daemon.try_clone().map_err(RelayError::Clone)?;
            let vmm = vmm.try_clone().map_err(RelayError::Clone)?;
            std::thread::Builder::new()
                .name(format!("{name}-relay-in"))
                .spawn(move || {
                    let mut early = EarlyEnables::default();
                    let r = (|| -> io::Result<()> {
                        while let Some(m) = read_message(&vmm)? {
                            let mut reply = None;
                            for out in early.filter(m, &mut reply) {
                                write_message(&daemon, &out)?;
                            }
                            if let Some(reply) = reply {
                                write_message(
                                    &vmm_writer.lock().unwrap_or_else(PoisonError::into_inner),
                                    &reply,
                                )?;
                            }
                        }
                        Ok(())
                    })();
                    end(&vmm, &daemon, "VMM -> daemon", r);
                })
                .map_err(RelayError::Spawn)?
        };
        let to_vmm = std::thread::Builder::new()
            .name(format!("{name}-relay-out"))
            .spawn(move || {
                let r = (|| -> io::Result<()> {
                    while let Some(m) = read_message(&daemon_reader)? {
                        write_message(&vmm_writer.lock().unwrap_or_else(PoisonError::into_inner), &m)?;
                    }
                    Ok(())
                })();
                end(&vmm, &daemon_reader, "daemon -> VMM", r);
            })
            .map_err(RelayError::Spawn)?;
        Ok(Relay { threads: vec![to_daemon, to_vmm] })
    }

    /// Waits for both directions to end.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// One direction ended: close both connections, so the other direction (and both peers) end.
fn end(a: &UnixStream, b: &UnixStream, what: &str, r: io::Result<()>) {
    if let Err(e) = r {
        log::debug!("vhost-user relay {what}: {e}");
    }
    let _ = a.shutdown(std::net::Shutdown::Both);
    let _ = b.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use vmm_sys_util::eventfd::EventFd;

    fn vring_state(index: u32, num: u32) -> Vec<u8> {
        [index.to_le_bytes(), num.to_le_bytes()].concat()
    }

    #[test]
    fn an_early_enable_is_acknowledged_and_replayed_after_set_features() {
        let (vmm, relay_vmm) = UnixStream::pair().expect("pair");
        let (relay_daemon, daemon) = UnixStream::pair().expect("pair");
        let relay = Relay::spawn("t", relay_vmm, relay_daemon).expect("relay");
        // Early enable with NEED_REPLY: the relay answers, the daemon sees nothing yet.
        write_message(&vmm, &Message::new(SET_VRING_ENABLE, VERSION_1 | NEED_REPLY, &vring_state(0, 1)))
            .expect("send");
        let ack = read_message(&vmm).expect("read").expect("ack");
        assert_eq!(
            (ack.request(), ack.flags() & REPLY, ack.payload),
            (SET_VRING_ENABLE, REPLY, vec![0u8; 8])
        );
        // SET_FEATURES with PROTOCOL_FEATURES: forwarded, then the deferred enable.
        write_message(&vmm, &Message::new(SET_FEATURES, VERSION_1, &(PROTOCOL_FEATURES | 1).to_le_bytes()))
            .expect("send");
        let first = read_message(&daemon).expect("read").expect("features");
        assert_eq!(first.request(), SET_FEATURES);
        let second = read_message(&daemon).expect("read").expect("enable");
        assert_eq!(
            (second.request(), second.flags(), second.payload),
            (SET_VRING_ENABLE, VERSION_1, vring_state(0, 1))
        );
        // Later enables pass straight through.
        write_message(&vmm, &Message::new(SET_VRING_ENABLE, VERSION_1, &vring_state(1, 1))).expect("send");
        assert_eq!(read_message(&daemon).expect("read").expect("enable").payload, vring_state(1, 1));
        drop(vmm);
        let mut rest = Vec::new();
        let _ = (&daemon).read_to_end(&mut rest);
        assert!(rest.is_empty(), "the daemon's side is closed when the VMM goes");
        relay.join();
    }

    #[test]
    fn descriptors_and_replies_pass_unchanged() {
        let (vmm, relay_vmm) = UnixStream::pair().expect("pair");
        let (relay_daemon, daemon) = UnixStream::pair().expect("pair");
        let relay = Relay::spawn("t", relay_vmm, relay_daemon).expect("relay");
        let call = EventFd::new(0).expect("eventfd");
        let mut m = Message::new(13, VERSION_1, &1u64.to_le_bytes()); // SET_VRING_CALL, ring 1
                                                                      // SAFETY: a duplicate of the eventfd's descriptor, owned by the message from now on.
        m.fds.push(unsafe { File::from_raw_fd(libc::dup(call.as_raw_fd())) });
        write_message(&vmm, &m).expect("send");
        let got = read_message(&daemon).expect("read").expect("message");
        assert_eq!((got.request(), got.payload.as_slice(), got.fds.len()), (13, &1u64.to_le_bytes()[..], 1));
        // The descriptor that came through is the same eventfd.
        (&got.fds[0]).write_all(&1u64.to_le_bytes()).expect("signal through the relayed fd");
        assert_eq!(call.read().expect("eventfd"), 1);
        // A reply from the daemon reaches the VMM.
        write_message(&daemon, &Message::new(1, VERSION_1 | REPLY, &7u64.to_le_bytes())).expect("reply");
        assert_eq!(read_message(&vmm).expect("read").expect("reply").payload, 7u64.to_le_bytes());
        drop(daemon);
        assert!(read_message(&vmm).expect("read").is_none(), "the VMM's side is closed when the daemon goes");
        relay.join();
    }

    #[test]
    fn an_oversized_payload_ends_the_connection() {
        let (vmm, relay_vmm) = UnixStream::pair().expect("pair");
        let (relay_daemon, daemon) = UnixStream::pair().expect("pair");
        let relay = Relay::spawn("t", relay_vmm, relay_daemon).expect("relay");
        let mut header = Message::new(5, VERSION_1, &[]).header;
        header[8..12].copy_from_slice(&(1u32 << 30).to_le_bytes());
        (&vmm).write_all(&header).expect("send");
        assert!(read_message(&daemon).expect("read").is_none());
        relay.join();
    }
}
