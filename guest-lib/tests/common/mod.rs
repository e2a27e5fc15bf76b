//! Shared test helpers: shared memory, device-side queues (virtio-queue) over our rings.
#![allow(dead_code)]

use std::sync::Arc;

use slimtcp_guest::mem::{BumpAllocator, DmaRegion};
use slimtcp_guest::ring::{alloc_ring, SplitRing};
use slimtcp_guest::vhost_user::{create_memory, memory_region};
use virtio_queue::{Queue, QueueT};
use vm_memory::{GuestAddress, GuestMemoryMmap};

/// Memory plus an allocator over all of it.
pub fn memory(size: usize) -> (Arc<GuestMemoryMmap>, BumpAllocator) {
    let mem = create_memory(size).expect("memfd memory");
    let region: DmaRegion = memory_region(&mem).expect("one region");
    (mem, BumpAllocator::new(region))
}

/// A ring of `size` entries.
pub fn ring(alloc: &mut BumpAllocator, size: u16, event_idx: bool) -> SplitRing {
    alloc_ring(alloc, size, event_idx).expect("ring")
}

/// The device side of `ring`, as virtio-queue implements it.
pub fn device_queue(ring: &SplitRing, event_idx: bool) -> Queue {
    let a = ring.addrs();
    let mut q = Queue::new(ring.size()).expect("queue");
    q.set_size(ring.size());
    q.try_set_desc_table_address(GuestAddress(a.desc)).expect("desc");
    q.try_set_avail_ring_address(GuestAddress(a.avail)).expect("avail");
    q.try_set_used_ring_address(GuestAddress(a.used)).expect("used");
    q.set_event_idx(event_idx);
    q.set_ready(true);
    q
}

/// What a test device says in hello: the guest is 10.0.0.1/24 behind 10.0.0.254, MSS 1460, with
/// `max_sockets` sockets.
pub fn hello_info(max_sockets: u32) -> slimtcp_abi::HelloInfo {
    slimtcp_abi::HelloInfo {
        addr: std::net::Ipv4Addr::new(10, 0, 0, 1),
        prefix_len: 24,
        mac: [2, 0, 0, 0, 0, 1],
        gateway: std::net::Ipv4Addr::new(10, 0, 0, 254),
        mss: 1460,
        max_datagram: 1472,
        max_sockets,
        max_send_in_flight: 8192,
        rx_buffer: 4096,
        max_requests: 64,
    }
}

pub mod fake {
    //! A scripted device: a thread that serves one queue pair with virtio-queue, parses each
    //! request with slimtcp-abi and answers what the test's handler says.

    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread::JoinHandle;

    use slimtcp_abi::{Request, RxMessage};
    use slimtcp_guest::mem::BumpAllocator;
    use slimtcp_guest::transport::{Link, Notify, QueuePair, Virtqueue};
    use virtio_queue::QueueT;
    use vm_memory::{Bytes, GuestMemoryMmap};

    /// What the device answers to one request: messages for the receive queue, and whether
    /// it holds the transmit chain (zero-copy send awaiting its "ACK").
    pub struct Answer {
        pub messages: Vec<(RxMessage, Vec<u8>)>,
        pub hold: bool,
    }

    pub type Injected = Arc<Mutex<VecDeque<(RxMessage, Vec<u8>)>>>;

    pub type Handler = Box<dyn FnMut(&Request, &[u8]) -> Answer + Send>;

    #[derive(Debug)]
    struct NoKick;
    impl Notify for NoKick {
        fn notify(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[derive(Debug)]
    pub struct Alive(pub AtomicBool);
    impl Link for Alive {
        fn alive(&self) -> bool {
            self.0.load(Ordering::Relaxed)
        }
    }

    /// The device thread and what tests observe of it.
    pub struct FakeDevice {
        stop: Arc<AtomicBool>,
        /// Release every held transmit chain.
        pub release: Arc<AtomicBool>,
        /// Every transmit frame (all readable bytes of the chain), in order.
        pub frames: Arc<Mutex<Vec<Vec<u8>>>>,
        /// Messages the test injects (events), written as buffers allow.
        pub inject: Injected,
        /// Chains currently held.
        pub held: Arc<Mutex<Vec<u16>>>,
        pub link: Arc<Alive>,
        handle: Option<JoinHandle<()>>,
    }

    impl FakeDevice {
        /// Stops answering and reports the link down (a dead backend).
        pub fn disconnect(&mut self) {
            self.link.0.store(false, Ordering::Relaxed);
            self.stop.store(true, Ordering::Relaxed);
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }

        /// Recorded frames so far.
        pub fn frames(&self) -> Vec<Vec<u8>> {
            self.frames.lock().expect("frames").clone()
        }
    }

    impl Drop for FakeDevice {
        fn drop(&mut self) {
            self.disconnect();
        }
    }

    /// A queue pair over fresh memory, and the device thread serving it with `handler`.
    pub fn start(queue_size: u16, mut handler: Handler) -> (QueuePair, FakeDevice) {
        let (mem, mut alloc) = super::memory(32 << 20);
        let rx = super::ring(&mut alloc, queue_size, true);
        let tx = super::ring(&mut alloc, queue_size, true);
        let mut rxq = super::device_queue(&rx, true);
        let mut txq = super::device_queue(&tx, true);
        let rest = alloc.remaining() & !4095;
        let memory = alloc.alloc(rest, 4096).expect("buffer memory");
        let _ = BumpAllocator::new(memory.clone());
        let link = Arc::new(Alive(AtomicBool::new(true)));
        let qp = QueuePair {
            index: 0,
            rx: Virtqueue { ring: rx, kick: Box::new(NoKick), call: None },
            tx: Virtqueue { ring: tx, kick: Box::new(NoKick), call: None },
            memory,
            link: link.clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let frames = Arc::new(Mutex::new(Vec::new()));
        let inject = Arc::new(Mutex::new(VecDeque::new()));
        let held = Arc::new(Mutex::new(Vec::new()));
        let handle = {
            let (stop, release, frames, inject, held) =
                (stop.clone(), release.clone(), frames.clone(), inject.clone(), held.clone());
            std::thread::spawn(move || {
                let mem: &GuestMemoryMmap = &mem;
                let mut pending: VecDeque<(RxMessage, Vec<u8>)> = VecDeque::new();
                while !stop.load(Ordering::Relaxed) {
                    while let Some(chain) = txq.pop_descriptor_chain(mem) {
                        let head = chain.head_index();
                        let mut bytes = Vec::new();
                        for d in chain {
                            let mut b = vec![0u8; d.len() as usize];
                            mem.read_slice(&mut b, d.addr()).expect("read");
                            bytes.extend_from_slice(&b);
                        }
                        frames.lock().expect("frames").push(bytes.clone());
                        let answer = match Request::parse(&bytes) {
                            Ok(req) => {
                                req.check_chain_len(bytes.len()).expect("chain length");
                                handler(&req, &bytes[req.wire_len()..])
                            }
                            Err(e) => panic!("guest sent an unparsable request: {e}"),
                        };
                        pending.extend(answer.messages);
                        if answer.hold {
                            held.lock().expect("held").push(head);
                        } else {
                            txq.add_used(mem, head, 0).expect("used");
                        }
                    }
                    if release.swap(false, Ordering::Relaxed) {
                        for h in held.lock().expect("held").drain(..) {
                            txq.add_used(mem, h, 0).expect("used");
                        }
                    }
                    pending.extend(inject.lock().expect("inject").drain(..));
                    while let Some((msg, payload)) = pending.front() {
                        let Some(chain) = rxq.pop_descriptor_chain(mem) else { break };
                        let head = chain.head_index();
                        let d = chain.into_iter().next().expect("one descriptor");
                        let mut buf = vec![0u8; msg.total_len()];
                        assert!(buf.len() <= d.len() as usize, "message larger than the posted buffer");
                        msg.emit(&mut buf).expect("emit");
                        buf[msg.payload_range()].copy_from_slice(payload);
                        mem.write_slice(&buf, d.addr()).expect("write");
                        rxq.add_used(mem, head, buf.len() as u32).expect("used");
                        pending.pop_front();
                    }
                    std::thread::yield_now();
                }
                let _ = &mut rxq;
            })
        };
        let dev = FakeDevice { stop, release, frames, inject, held, link, handle: Some(handle) };
        (qp, dev)
    }
}
