//! `hostile`: a guest that breaks the rules through the real device. Queue pair 1 is driven by
//! hand: after a proper hello and a socket, it posts send chains whose payload lies outside
//! guest memory, overflows the address space, is device-writable, loops back to its head, or
//! is ~4 GiB long, and a chain whose request header itself lies outside memory. Each send must
//! get an error completion, every chain must come back, and queue pair 0 (the ordinary guest
//! library) must then echo with Linux as if nothing happened.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use slimtcp_abi::{Errno, Request, RequestBody, RxMessage, SocketId, SocketKind, Version};
use slimtcp_guest::ring::{Segment, VIRTQ_DESC_F_NEXT};
use slimtcp_guest::{DeviceSpec, GuestConfig, GuestSockets, QueuePair};

use crate::{open, AppError};

const RX_BUF: usize = 2048;
const RX_COUNT: usize = 32;
const REQ_SLOT: usize = 128;
const REQ_AREA: usize = RX_BUF * RX_COUNT;
const DATA_AREA: usize = REQ_AREA + 64 * REQ_SLOT;
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Queue pair 1, driven by hand.
struct RawPair {
    qp: QueuePair,
    rx_slot: HashMap<u16, usize>,
    next_req: usize,
    returned: Vec<u16>,
    messages: Vec<RxMessage>,
}

fn check(what: &str) -> impl FnOnce(slimtcp_guest::ring::RingError) -> AppError + '_ {
    move |e| AppError::Check(format!("{what}: {e}"))
}

impl RawPair {
    fn write(&self, offset: usize, bytes: &[u8]) -> Result<(), AppError> {
        if offset + bytes.len() > self.qp.memory.len() {
            return Err(AppError::Check("a raw write past the pair's memory".into()));
        }
        // SAFETY: inside the pair's own DMA memory (checked above), in a slot the device does
        // not hold (request slots are used once; data is only read by the device).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.qp.memory.host().add(offset), bytes.len())
        };
        Ok(())
    }

    fn gpa(&self, offset: usize) -> u64 {
        self.qp.memory.gpa() + offset as u64
    }

    fn post_rx(&mut self) -> Result<(), AppError> {
        for slot in 0..RX_COUNT {
            let seg = Segment { gpa: self.gpa(slot * RX_BUF), len: RX_BUF as u32, writable: true };
            let head = self.qp.rx.ring.add(&[seg]).map_err(check("post a receive buffer"))?;
            self.rx_slot.insert(head, slot);
        }
        self.qp.rx.flush().map_err(|e| AppError::Check(format!("kick: {e}")))
    }

    /// Writes `req` into a fresh request slot; returns its segment.
    fn header(&mut self, req: &Request) -> Result<Segment, AppError> {
        let offset = REQ_AREA + self.next_req * REQ_SLOT;
        self.next_req += 1;
        let mut frame = [0u8; REQ_SLOT];
        let n = req.emit(&mut frame).map_err(|e| AppError::Check(format!("emit: {e}")))?;
        self.write(offset, &frame[..n])?;
        Ok(Segment { gpa: self.gpa(offset), len: n as u32, writable: false })
    }

    fn chain(&mut self, segs: &[Segment]) -> Result<u16, AppError> {
        self.qp.tx.ring.add(segs).map_err(check("add a chain"))
    }

    fn publish(&mut self) -> Result<(), AppError> {
        self.qp.tx.flush().map_err(|e| AppError::Check(format!("kick: {e}")))
    }

    /// Collects messages and returned chains until `done` holds.
    fn pump(&mut self, what: &str, done: impl Fn(&RawPair) -> bool) -> Result<(), AppError> {
        let deadline = Instant::now() + ANSWER_WITHIN;
        while !done(self) {
            if Instant::now() > deadline {
                return Err(AppError::Check(format!(
                    "{what}: no answer within {ANSWER_WITHIN:?}; got {:?}",
                    self.messages
                )));
            }
            while let Some((head, _)) = self.qp.tx.ring.pop_used().map_err(check("transmit used ring"))? {
                self.returned.push(head);
            }
            while let Some((head, len)) = self.qp.rx.ring.pop_used().map_err(check("receive used ring"))? {
                let slot = self
                    .rx_slot
                    .remove(&head)
                    .ok_or_else(|| AppError::Check(format!("unknown rx head {head}")))?;
                let mut frame = vec![0u8; (len as usize).min(RX_BUF)];
                // SAFETY: the device returned this buffer: its bytes are ours to read now.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.qp.memory.host().add(slot * RX_BUF),
                        frame.as_mut_ptr(),
                        frame.len(),
                    )
                };
                let msg = RxMessage::parse(&frame)
                    .map_err(|e| AppError::Check(format!("a malformed message: {e}")))?;
                self.messages.push(msg);
                let seg = Segment { gpa: self.gpa(slot * RX_BUF), len: RX_BUF as u32, writable: true };
                let again = self.qp.rx.ring.add(&[seg]).map_err(check("repost"))?;
                self.rx_slot.insert(again, slot);
                self.qp.rx.flush().map_err(|e| AppError::Check(format!("kick: {e}")))?;
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    fn result_of(&self, cookie: u64) -> Option<Result<SocketId, Errno>> {
        self.messages.iter().find_map(|m| match m {
            RxMessage::Complete { cookie: c, socket, result, .. } if *c == cookie => {
                Some(result.map(|_| *socket))
            }
            RxMessage::HelloDone { cookie: c, result, .. } if *c == cookie => {
                Some(result.map(|_| SocketId::NONE))
            }
            _ => None,
        })
    }

    /// Makes the chain at `head` (two descriptors) loop: its second descriptor points back to
    /// the head. Before publishing: the device has not seen it.
    fn make_loop(&mut self, head: u16) {
        let desc = self.qp.tx.ring.addrs().desc_host as *mut u8;
        // SAFETY: the ring's own descriptor table (size entries of 16 bytes), both indices are
        // below the ring size (the ring handed out `head` and linked it to `second`).
        unsafe {
            let second = u16::from_le(desc.add(usize::from(head) * 16 + 14).cast::<u16>().read_volatile());
            let d = desc.add(usize::from(second) * 16);
            d.add(12).cast::<u16>().write_volatile(VIRTQ_DESC_F_NEXT.to_le());
            d.add(14).cast::<u16>().write_volatile(head.to_le());
        }
    }
}

pub fn run(device: &DeviceSpec, memory: usize, server: SocketAddrV4) -> Result<String, AppError> {
    let mut dev = open(device, memory, 2)?;
    let qp = dev.take_queue_pair(1).map_err(AppError::Attach)?;
    let mut p =
        RawPair { qp, rx_slot: HashMap::new(), next_req: 0, returned: Vec::new(), messages: Vec::new() };
    p.post_rx()?;
    let hello = Request::new(1, SocketId::NONE, RequestBody::Hello { version: Version::CURRENT });
    let seg = p.header(&hello)?;
    p.chain(&[seg])?;
    let socket = Request::new(2, SocketId::NONE, RequestBody::Socket { kind: SocketKind::Tcp });
    let seg = p.header(&socket)?;
    p.chain(&[seg])?;
    p.publish()?;
    p.pump("hello and socket", |p| p.result_of(2).is_some())?;
    let sid = match p.result_of(2) {
        Some(Ok(sid)) => sid,
        other => return Err(AppError::Check(format!("socket on the raw pair: {other:?}"))),
    };

    let data = p.gpa(DATA_AREA);
    let send = |cookie: u64, len: u32| Request::new(cookie, sid, RequestBody::Send { len });
    let hostile: [(u64, &str, u32, Segment); 5] = [
        (10, "outside guest memory", 100, Segment { gpa: 0xdead_0000_0000, len: 100, writable: false }),
        (11, "address overflow", 100, Segment { gpa: u64::MAX - 10, len: 100, writable: false }),
        (12, "device-writable payload", 100, Segment { gpa: data, len: 100, writable: true }),
        (13, "looping chain", 50, Segment { gpa: data, len: 50, writable: false }),
        (14, "4 GiB payload", u32::MAX - 4095, Segment { gpa: data, len: u32::MAX - 4095, writable: false }),
    ];
    let mut heads = Vec::new();
    for (cookie, _, len, payload) in &hostile {
        let hdr = p.header(&send(*cookie, *len))?;
        let head = p.chain(&[hdr, *payload])?;
        if *cookie == 13 {
            p.make_loop(head);
        }
        heads.push(head);
    }
    // A request header outside guest memory: nothing to answer, only the chain to return.
    let lost = p.chain(&[Segment { gpa: 0xbeef_0000_0000, len: 48, writable: false }])?;
    heads.push(lost);
    p.publish()?;
    p.pump("the hostile chains", |p| {
        hostile.iter().all(|(c, ..)| p.result_of(*c).is_some())
            && heads.iter().all(|h| p.returned.contains(h))
    })?;
    let mut answers = Vec::new();
    for (cookie, what, ..) in &hostile {
        match p.result_of(*cookie) {
            Some(Err(e)) => answers.push(format!("{what}: {}", e.name())),
            other => return Err(AppError::Check(format!("{what}: expected an error, got {other:?}"))),
        }
    }

    // Pair 0, the ordinary library, works with Linux.
    let qp0 = dev.take_queue_pair(0).map_err(AppError::Attach)?;
    let cfg = GuestConfig { memory_size: memory, queue_pairs: 2, ..GuestConfig::default() };
    let mut api = GuestSockets::new(qp0, &cfg).map_err(AppError::Attach)?;
    crate::echo::exchange(&mut api, server, 50, 64)?;
    Ok(format!("{} chains returned; {}; then 50 echoes on pair 0", heads.len(), answers.join(", ")))
}
