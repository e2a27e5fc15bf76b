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
//! The relay is also where a hostile VMM's messages are bounded before they reach the daemon
//! (docs/operating.md, "Hostile VMMs"): a message must arrive whole within
//! [`MESSAGE_TIMEOUT`] of its first byte and carry at most [`MAX_FDS`] descriptors (a partial
//! message's descriptors are closed with it); every memory region's file must be a regular file
//! at least as large as the mapped range (`fstat`); a connection has at most
//! [`MAX_MEM_REGIONS`] regions (the daemon's GET_MAX_MEM_SLOTS answer is lowered to match); at
//! most one early enable per ring is deferred. A VMM that breaks a bound is refused: one
//! warning names what it did, and its connection is closed.
//!
//! Control plane only: the data path (virtqueues in shared memory) never passes here.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Write};
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vhost::vhost_user::message::{
    FrontendReq, VhostUserHeaderFlag, VhostUserMemory, VhostUserMemoryRegion, VhostUserSingleMemoryRegion,
    VhostUserU64, VhostUserVringState, MAX_ATTACHED_FD_ENTRIES,
};
use vhost::vhost_user::VhostUserVirtioFeatures;
use vm_memory::ByteValued;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// Message header: request, flags, payload size (u32 each, little-endian): the layout of the
/// vhost crate's `VhostUserMsgHeader`, which it does not export.
const HEADER: usize = 12;
/// Largest payload accepted (vhost-user messages are at most a few KiB).
const MAX_PAYLOAD: usize = 64 * 1024;
/// File descriptors one message may carry (vhost's own limit).
pub const MAX_FDS: usize = MAX_ATTACHED_FD_ENTRIES;
/// A message must be complete this long after its first byte arrived.
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(3);
/// Memory regions one connection may have mapped at once (vhost-user-backend's own limit, 509,
/// is announced but never enforced; QEMU needs 8 without virtio-mem).
pub const MAX_MEM_REGIONS: usize = 64;
/// Rings whose early enable may be deferred (the most a device of `MAX_PAIRS` pairs has).
pub const MAX_DEFERRED_RINGS: usize = 2 * crate::ring_stop::MAX_PAIRS + 1;
/// The protocol version in a header's [`VhostUserHeaderFlag::VERSION`] bits (there is only 1).
const VERSION_1: u32 = 0x1;
/// The header flag of a reply.
const REPLY: u32 = VhostUserHeaderFlag::REPLY.bits();
/// The header flag of a request that wants a reply.
const NEED_REPLY: u32 = VhostUserHeaderFlag::NEED_REPLY.bits();
/// SET_MEM_TABLE's payload: this header, then one region per descriptor.
const MEM_TABLE_HEADER: usize = size_of::<VhostUserMemory>();
/// A memory region in SET_MEM_TABLE: guest address, size, user address, mmap offset.
const REGION: usize = size_of::<VhostUserMemoryRegion>();

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

/// A VMM broke one of the relay's bounds (carried in an `io::Error`; see the module docs).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, Refused(what))
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

    /// The request, `None` for a code the vhost crate does not know (forwarded all the same).
    fn request(&self) -> Option<FrontendReq> {
        FrontendReq::try_from(self.field(0)).ok()
    }

    fn flags(&self) -> u32 {
        self.field(1)
    }

    fn new(request: FrontendReq, flags: u32, payload: &[u8]) -> Message {
        let mut header = [0u8; HEADER];
        header[0..4].copy_from_slice(&(request as u32).to_le_bytes());
        header[4..8].copy_from_slice(&flags.to_le_bytes());
        header[8..12].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        Message { header, payload: payload.to_vec(), fds: Vec::new() }
    }
}

/// A `T` copied from the start of `bytes`; `None` when they are too short. (Copied, so the
/// payload needs no alignment; only its length is trusted, and it is checked.)
fn read_obj<T: ByteValued + Default>(bytes: &[u8]) -> Option<T> {
    let mut value = T::default();
    value.as_mut_slice().copy_from_slice(bytes.get(..size_of::<T>())?);
    Some(value)
}

/// Fills `buf` from `s`, collecting descriptors that arrive on the way. Returns false when the
/// stream ended before the first byte. The first byte of a message (`deadline` still `None`)
/// may take forever; from then on the message must be complete by the deadline.
fn read_full(
    s: &UnixStream,
    buf: &mut [u8],
    fds: &mut Vec<File>,
    deadline: &mut Option<Instant>,
) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        if let Some(d) = *deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(refused(format!(
                    "a message did not arrive whole within {MESSAGE_TIMEOUT:?} of its first byte"
                )));
            }
            s.set_read_timeout(Some(left))?;
        }
        let mut raw = [-1 as RawFd; MAX_FDS];
        let rest = &mut buf[got..];
        let mut iov = [libc::iovec { iov_base: rest.as_mut_ptr().cast(), iov_len: rest.len() }];
        // SAFETY: the iovec points into `buf`, which we borrow mutably; any bytes may be written.
        let received = unsafe { s.recv_with_fds(&mut iov, &mut raw) };
        let (n, nfds) = match received {
            Ok(r) => r,
            Err(e) if matches!(e.errno(), libc::EAGAIN | libc::EINTR) && deadline.is_some() => continue,
            Err(e) => return Err(e.into()),
        };
        for &fd in raw.iter().take(nfds) {
            // SAFETY: recvmsg handed us these descriptors; nobody else owns them.
            fds.push(unsafe { File::from_raw_fd(fd) });
        }
        if fds.len() > MAX_FDS {
            return Err(refused(format!("a message carried more than {MAX_FDS} file descriptors")));
        }
        if n == 0 {
            if got == 0 && deadline.is_none() {
                return Ok(false);
            }
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "vhost-user message cut short"));
        }
        got += n;
        if deadline.is_none() {
            *deadline = Some(Instant::now() + MESSAGE_TIMEOUT);
        }
    }
    Ok(true)
}

/// Reads one whole message; `None` at a clean end of the stream.
fn read_message(s: &UnixStream) -> io::Result<Option<Message>> {
    let mut deadline = None;
    let r = read_message_by(s, &mut deadline);
    if deadline.is_some() {
        // Waiting for the next message's first byte has no limit.
        s.set_read_timeout(None)?;
    }
    r
}

fn read_message_by(s: &UnixStream, deadline: &mut Option<Instant>) -> io::Result<Option<Message>> {
    let mut header = [0u8; HEADER];
    let mut fds = Vec::new();
    if !read_full(s, &mut header, &mut fds, deadline)? {
        return Ok(None);
    }
    let size = u32::from_le_bytes([header[8], header[9], header[10], header[11]]) as usize;
    if size > MAX_PAYLOAD {
        return Err(refused(format!("a vhost-user payload of {size} bytes (at most {MAX_PAYLOAD})")));
    }
    let mut payload = vec![0u8; size];
    if size > 0 && !read_full(s, &mut payload, &mut fds, deadline)? {
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

/// `SET_VRING_ENABLE`s that came before `SET_FEATURES` (see the module documentation): the
/// last state of each ring, at most [`MAX_DEFERRED_RINGS`] rings.
#[derive(Debug, Default)]
struct EarlyEnables {
    features_set: bool,
    deferred: BTreeMap<u32, Vec<u8>>,
}

impl EarlyEnables {
    /// What to do with a frontend message: `Some` messages go to the daemon in order; a
    /// deferred enable goes nowhere now (and may need `reply` to the frontend). Fails for an
    /// enable that cannot be deferred.
    fn filter(&mut self, m: Message, reply: &mut Option<Message>) -> io::Result<Vec<Message>> {
        match m.request() {
            Some(FrontendReq::SET_VRING_ENABLE) if !self.features_set => {
                let ring = match read_obj::<VhostUserVringState>(&m.payload) {
                    Some(state) if m.payload.len() == size_of::<VhostUserVringState>() => state.index,
                    _ => {
                        return Err(refused(format!(
                            "SET_VRING_ENABLE with a {}-byte payload",
                            m.payload.len()
                        )));
                    }
                };
                if !self.deferred.contains_key(&ring) && self.deferred.len() >= MAX_DEFERRED_RINGS {
                    return Err(refused(format!(
                        "SET_VRING_ENABLE before SET_FEATURES for more than {MAX_DEFERRED_RINGS} rings"
                    )));
                }
                log::debug!("SET_VRING_ENABLE before SET_FEATURES: deferred until SET_FEATURES");
                if m.flags() & NEED_REPLY != 0 {
                    let ok = VhostUserU64::new(0);
                    *reply =
                        Some(Message::new(FrontendReq::SET_VRING_ENABLE, VERSION_1 | REPLY, ok.as_slice()));
                }
                self.deferred.insert(ring, m.payload);
                Ok(Vec::new())
            }
            Some(FrontendReq::SET_FEATURES) => {
                self.features_set = true;
                let features = read_obj::<VhostUserU64>(&m.payload).map_or(0, |f| f.value);
                let mut out = vec![m];
                let deferred = std::mem::take(&mut self.deferred);
                if features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() != 0 {
                    out.extend(
                        deferred.values().map(|p| Message::new(FrontendReq::SET_VRING_ENABLE, VERSION_1, p)),
                    );
                }
                Ok(out)
            }
            _ => Ok(vec![m]),
        }
    }
}

/// The memory regions a connection has mapped, as far as the relay can tell: every region's
/// file is checked before the daemon maps it, and their number is bounded.
#[derive(Debug, Default)]
struct MemoryRegions {
    /// Guest address -> size of each region.
    regions: BTreeMap<u64, u64>,
}

impl MemoryRegions {
    /// Checks a memory message; fails (the connection ends) for a region the daemon must not map.
    fn check(&mut self, m: &Message) -> io::Result<()> {
        match m.request() {
            Some(FrontendReq::SET_MEM_TABLE) => {
                let n = read_obj::<VhostUserMemory>(&m.payload).map_or(0, |t| t.num_regions as usize);
                if n > MAX_MEM_REGIONS.min(MAX_FDS)
                    || m.payload.len() < MEM_TABLE_HEADER + n * REGION
                    || m.fds.len() != n
                {
                    return Err(refused(format!(
                        "SET_MEM_TABLE of {n} regions with {} descriptors in {} bytes",
                        m.fds.len(),
                        m.payload.len()
                    )));
                }
                let mut regions = BTreeMap::new();
                // Checked above: the payload holds a region for every descriptor.
                let table = m.payload[MEM_TABLE_HEADER..].chunks_exact(REGION);
                for (file, r) in m.fds.iter().zip(table.filter_map(read_obj::<VhostUserMemoryRegion>)) {
                    let r = Region::from(&r);
                    r.check_file(file)?;
                    regions.insert(r.gpa, r.size);
                }
                self.regions = regions;
            }
            Some(FrontendReq::ADD_MEM_REG) => {
                let (Some(region), [file]) =
                    (read_obj::<VhostUserSingleMemoryRegion>(&m.payload), m.fds.as_slice())
                else {
                    return Err(refused(format!(
                        "ADD_MEM_REG with {} descriptors in {} bytes",
                        m.fds.len(),
                        m.payload.len()
                    )));
                };
                let r = Region::from(&*region);
                if self.regions.len() >= MAX_MEM_REGIONS && !self.regions.contains_key(&r.gpa) {
                    return Err(refused(format!("ADD_MEM_REG beyond {MAX_MEM_REGIONS} memory regions")));
                }
                r.check_file(file)?;
                self.regions.insert(r.gpa, r.size);
            }
            Some(FrontendReq::REM_MEM_REG) => {
                if let Some(region) = read_obj::<VhostUserSingleMemoryRegion>(&m.payload) {
                    self.regions.remove(&Region::from(&*region).gpa);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// What the relay checks of a memory message's region (unpacked from vhost's packed struct).
#[derive(Debug, Clone, Copy)]
struct Region {
    gpa: u64,
    size: u64,
    offset: u64,
}

impl From<&VhostUserMemoryRegion> for Region {
    fn from(r: &VhostUserMemoryRegion) -> Region {
        Region { gpa: r.guest_phys_addr, size: r.memory_size, offset: r.mmap_offset }
    }
}

impl Region {
    /// The file must be a regular file (memfd, hugetlbfs, tmpfs) covering the mapped range:
    /// a mapping past its end raises SIGBUS on first touch.
    fn check_file(&self, file: &File) -> io::Result<()> {
        let meta = file.metadata()?;
        let ft = meta.file_type();
        if !ft.is_file() {
            let kind = if ft.is_char_device() { "a character device" } else { "not a regular file" };
            return Err(refused(format!("memory region at {:#x}: its file is {kind}", self.gpa)));
        }
        match self.offset.checked_add(self.size) {
            Some(end) if self.size > 0 && end <= meta.len() => Ok(()),
            _ => Err(refused(format!(
                "memory region at {:#x}: {:#x} bytes at file offset {:#x}, but the file has {:#x} bytes",
                self.gpa,
                self.size,
                self.offset,
                meta.len()
            ))),
        }
    }
}

/// The two forwarding threads of one connection.
#[derive(Debug)]
pub struct Relay {
    threads: Vec<JoinHandle<()>>,
    vmm: UnixStream,
}

impl Relay {
    /// Relays between `vmm` (the VMM's connection) and `daemon` (the daemon's end) until either
    /// side closes; then both are shut down.
    pub fn spawn(name: &str, vmm: UnixStream, daemon: UnixStream) -> Result<Relay, RelayError> {
        let vmm_writer = Arc::new(Mutex::new(vmm.try_clone().map_err(RelayError::Clone)?));
        let daemon_reader = daemon.try_clone().map_err(RelayError::Clone)?;
        let handle = vmm.try_clone().map_err(RelayError::Clone)?;
        let to_daemon = {
            let vmm_writer = Arc::clone(&vmm_writer);
            let daemon = daemon.try_clone().map_err(RelayError::Clone)?;
            let vmm = vmm.try_clone().map_err(RelayError::Clone)?;
            let name = name.to_owned();
            std::thread::Builder::new()
                .name(format!("{name}-relay-in"))
                .spawn(move || {
                    let mut early = EarlyEnables::default();
                    let mut memory = MemoryRegions::default();
                    let r = (|| -> io::Result<()> {
                        while let Some(m) = read_message(&vmm)? {
                            memory.check(&m)?;
                            let mut reply = None;
                            for out in early.filter(m, &mut reply)? {
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
                    end(&vmm, &daemon, &name, "VMM -> daemon", r);
                })
                .map_err(RelayError::Spawn)?
        };
        let name = name.to_owned();
        let to_vmm = std::thread::Builder::new()
            .name(format!("{name}-relay-out"))
            .spawn(move || {
                let r = (|| -> io::Result<()> {
                    while let Some(mut m) = read_message(&daemon_reader)? {
                        lower_max_mem_slots(&mut m);
                        write_message(&vmm_writer.lock().unwrap_or_else(PoisonError::into_inner), &m)?;
                    }
                    Ok(())
                })();
                end(&vmm, &daemon_reader, &name, "daemon -> VMM", r);
            })
            .map_err(RelayError::Spawn)?;
        Ok(Relay { threads: vec![to_daemon, to_vmm], vmm: handle })
    }

    /// Closes the VMM's connection (both directions then end).
    pub fn shutdown(&self) {
        let _ = self.vmm.shutdown(std::net::Shutdown::Both);
    }

    /// Waits for both directions to end.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// The daemon announces vhost-user-backend's 509 memory slots; the relay allows fewer.
fn lower_max_mem_slots(m: &mut Message) {
    if m.request() != Some(FrontendReq::GET_MAX_MEM_SLOTS)
        || m.flags() & REPLY == 0
        || m.payload.len() != size_of::<VhostUserU64>()
    {
        return;
    }
    if let Some(slots) = read_obj::<VhostUserU64>(&m.payload) {
        m.payload = VhostUserU64::new(slots.value.min(MAX_MEM_REGIONS as u64)).as_slice().to_vec();
    }
}

/// One direction ended: close both connections, so the other direction (and both peers) end.
/// A VMM refused by a bound is one warning; anything else is how connections normally end.
fn end(a: &UnixStream, b: &UnixStream, name: &str, what: &str, r: io::Result<()>) {
    match r {
        Err(e) if e.get_ref().is_some_and(|i| i.is::<Refused>()) => {
            log::warn!("{name}: VMM refused ({e}); closing its connection");
        }
        Err(e) => log::debug!("{name}: vhost-user relay {what}: {e}"),
        Ok(()) => {}
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
    fn the_vhost_structs_have_the_sizes_of_the_wire_format() {
        // vhost-user: a 12-byte header; SET_MEM_TABLE an 8-byte count then 32-byte regions;
        // ADD_MEM_REG and REM_MEM_REG 8 bytes of padding then one region.
        assert_eq!(HEADER, 3 * size_of::<u32>());
        assert_eq!((MEM_TABLE_HEADER, REGION), (8, 32));
        assert_eq!(size_of::<VhostUserSingleMemoryRegion>(), 8 + REGION);
        assert_eq!(size_of::<VhostUserVringState>(), 8);
        assert_eq!(size_of::<VhostUserU64>(), 8);
    }

    #[test]
    fn an_early_enable_is_acknowledged_and_replayed_after_set_features() {
        let (vmm, relay_vmm) = UnixStream::pair().expect("pair");
        let (relay_daemon, daemon) = UnixStream::pair().expect("pair");
        let relay = Relay::spawn("t", relay_vmm, relay_daemon).expect("relay");
        // Early enable with NEED_REPLY: the relay answers, the daemon sees nothing yet.
        write_message(
            &vmm,
            &Message::new(FrontendReq::SET_VRING_ENABLE, VERSION_1 | NEED_REPLY, &vring_state(0, 1)),
        )
        .expect("send");
        let ack = read_message(&vmm).expect("read").expect("ack");
        assert_eq!(
            (ack.request(), ack.flags() & REPLY, ack.payload),
            (Some(FrontendReq::SET_VRING_ENABLE), REPLY, vec![0u8; 8])
        );
        // SET_FEATURES with PROTOCOL_FEATURES: forwarded, then the deferred enable.
        let features = VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() | 1;
        write_message(&vmm, &Message::new(FrontendReq::SET_FEATURES, VERSION_1, &features.to_le_bytes()))
            .expect("send");
        let first = read_message(&daemon).expect("read").expect("features");
        assert_eq!(first.request(), Some(FrontendReq::SET_FEATURES));
        let second = read_message(&daemon).expect("read").expect("enable");
        assert_eq!(
            (second.request(), second.flags(), second.payload),
            (Some(FrontendReq::SET_VRING_ENABLE), VERSION_1, vring_state(0, 1))
        );
        // Later enables pass straight through.
        write_message(&vmm, &Message::new(FrontendReq::SET_VRING_ENABLE, VERSION_1, &vring_state(1, 1)))
            .expect("send");
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
        let mut m = Message::new(FrontendReq::SET_VRING_CALL, VERSION_1, &1u64.to_le_bytes()); // ring 1
                                                                                               // SAFETY: a duplicate of the eventfd's descriptor, owned by the message from now on.
        m.fds.push(unsafe { File::from_raw_fd(libc::dup(call.as_raw_fd())) });
        write_message(&vmm, &m).expect("send");
        let got = read_message(&daemon).expect("read").expect("message");
        assert_eq!(
            (got.request(), got.payload.as_slice(), got.fds.len()),
            (Some(FrontendReq::SET_VRING_CALL), &1u64.to_le_bytes()[..], 1)
        );
        // The descriptor that came through is the same eventfd.
        (&got.fds[0]).write_all(&1u64.to_le_bytes()).expect("signal through the relayed fd");
        assert_eq!(call.read().expect("eventfd"), 1);
        // A reply from the daemon reaches the VMM.
        write_message(
            &daemon,
            &Message::new(FrontendReq::GET_FEATURES, VERSION_1 | REPLY, &7u64.to_le_bytes()),
        )
        .expect("reply");
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
        let mut header = Message::new(FrontendReq::SET_MEM_TABLE, VERSION_1, &[]).header;
        header[8..12].copy_from_slice(&(1u32 << 30).to_le_bytes());
        (&vmm).write_all(&header).expect("send");
        assert!(read_message(&daemon).expect("read").is_none());
        relay.join();
    }
}
