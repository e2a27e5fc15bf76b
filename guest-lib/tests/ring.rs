//! The split-ring driver against virtio-queue's device-side `Queue` on the same memory.

mod common;

use slimtcp_guest::ring::{need_event, RingError, Segment};
use virtio_queue::QueueT;

fn rd(gpa: u64, len: u32) -> Segment {
    Segment { gpa, len, writable: false }
}

fn wr(gpa: u64, len: u32) -> Segment {
    Segment { gpa, len, writable: true }
}

#[test]
fn the_device_sees_chains_as_written() {
    let (mem, mut alloc) = common::memory(4 << 20);
    let mut ring = common::ring(&mut alloc, 8, true);
    let mut q = common::device_queue(&ring, true);
    let h1 = ring.add(&[rd(0x1_0010_0000, 40), rd(0x1_0020_0000, 1460)]).expect("add");
    let h2 = ring.add(&[wr(0x1_0030_0000, 2048)]).expect("add");
    assert!(q.pop_descriptor_chain(mem.as_ref()).is_none(), "nothing visible before publish");
    ring.publish();
    let c1 = q.pop_descriptor_chain(mem.as_ref()).expect("chain 1");
    assert_eq!(c1.head_index(), h1);
    let d: Vec<_> = c1.collect();
    assert_eq!(d.len(), 2);
    assert_eq!((d[0].addr().0, d[0].len(), d[0].is_write_only()), (0x1_0010_0000, 40, false));
    assert_eq!((d[1].addr().0, d[1].len(), d[1].is_write_only()), (0x1_0020_0000, 1460, false));
    let c2 = q.pop_descriptor_chain(mem.as_ref()).expect("chain 2");
    assert_eq!(c2.head_index(), h2);
    let d: Vec<_> = c2.collect();
    assert_eq!((d[0].addr().0, d[0].len(), d[0].is_write_only()), (0x1_0030_0000, 2048, true));
}

#[test]
fn out_of_order_completions_free_the_right_descriptors() {
    let (mem, mut alloc) = common::memory(4 << 20);
    let mut ring = common::ring(&mut alloc, 8, true);
    let mut q = common::device_queue(&ring, true);
    let heads: Vec<u16> = (0..4)
        .map(|i| ring.add(&[rd(0x1_0010_0000 + i * 64, 40), rd(0x1_0020_0000, 100)]).expect("add"))
        .collect();
    assert_eq!(ring.num_free(), 0);
    assert_eq!(ring.add(&[rd(0x1_0010_0000, 1)]), Err(RingError::Full(1)));
    ring.publish();
    let mut chains = Vec::new();
    while let Some(c) = q.pop_descriptor_chain(mem.as_ref()) {
        chains.push(c.head_index());
    }
    assert_eq!(chains, heads);
    for &h in [heads[2], heads[0], heads[3], heads[1]].iter() {
        q.add_used(mem.as_ref(), h, 7).expect("add_used");
    }
    let mut back = Vec::new();
    while let Some((h, len)) = ring.pop_used().expect("valid") {
        assert_eq!(len, 7);
        back.push(h);
    }
    assert_eq!(back, vec![heads[2], heads[0], heads[3], heads[1]]);
    assert_eq!(ring.num_free(), 8);
    assert_eq!(ring.outstanding(), 0);
    // The freed descriptors are reusable for a chain as long as the ring.
    let segs: Vec<Segment> = (0..8).map(|i| rd(0x1_0010_0000 + i * 64, 1)).collect();
    let h = ring.add(&segs).expect("a full-length chain");
    ring.publish();
    let c = q.pop_descriptor_chain(mem.as_ref()).expect("chain");
    assert_eq!(c.head_index(), h);
    assert_eq!(c.count(), 8);
}

#[test]
fn indices_wrap_past_65536_with_a_partly_full_ring() {
    let (mem, mut alloc) = common::memory(4 << 20);
    let mut ring = common::ring(&mut alloc, 16, true);
    let mut q = common::device_queue(&ring, true);
    let mut in_device = std::collections::VecDeque::new();
    let mut completed = 0u64;
    // Keep 5 chains outstanding while 70,000 go through: both 16-bit indices wrap.
    for i in 0..70_000u64 {
        ring.add(&[rd(0x1_0010_0000 + (i % 16) * 64, 40)]).expect("room");
        ring.publish();
        let c = q.pop_descriptor_chain(mem.as_ref()).expect("visible");
        in_device.push_back(c.head_index());
        if in_device.len() > 5 {
            // Complete the second-oldest first, then the oldest: never in order.
            let b = in_device.remove(1).expect("b");
            let a = in_device.pop_front().expect("a");
            q.add_used(mem.as_ref(), b, 0).expect("used");
            q.add_used(mem.as_ref(), a, 0).expect("used");
            assert_eq!(ring.pop_used().expect("valid").map(|x| x.0), Some(b));
            assert_eq!(ring.pop_used().expect("valid").map(|x| x.0), Some(a));
            assert_eq!(ring.pop_used().expect("valid"), None);
            completed += 2;
        }
    }
    assert!(completed > 65_536);
    assert_eq!(usize::from(ring.num_free()) + in_device.len(), 16);
}

#[test]
fn event_idx_suppresses_and_requests_notifications() {
    let (mem, mut alloc) = common::memory(4 << 20);
    let mut ring = common::ring(&mut alloc, 8, true);
    let mut q = common::device_queue(&ring, true);
    // The device starts with avail_event 0: the first publish (0 -> 1) crosses it.
    ring.add(&[rd(0x1_0010_0000, 1)]).expect("add");
    assert!(ring.publish(), "first chain notifies");
    // A polling device leaves avail_event behind: no more notifications.
    let c = q.pop_descriptor_chain(mem.as_ref()).expect("chain");
    ring.add(&[rd(0x1_0010_0000, 1)]).expect("add");
    assert!(!ring.publish(), "device did not ask");
    // A device about to sleep asks (enable_notification writes avail_event = next avail).
    let _ = q.pop_descriptor_chain(mem.as_ref()).expect("chain 2");
    q.enable_notification(mem.as_ref()).expect("enable");
    ring.add(&[rd(0x1_0010_0000, 1)]).expect("add");
    assert!(ring.publish(), "device asked");
    assert!(!ring.publish(), "nothing new");

    // Interrupts: used_event parked far away suppresses them; arming asks for the next one.
    ring.disarm_interrupt();
    q.add_used(mem.as_ref(), c.head_index(), 0).expect("used");
    assert!(!q.needs_notification(mem.as_ref()).expect("check"), "disarmed: no interrupt");
    assert!(ring.arm_interrupt(), "a completion is already waiting: do not sleep");
    assert!(ring.pop_used().expect("valid").is_some());
    assert!(!ring.arm_interrupt(), "nothing waiting: sleep");
    let c3 = q.pop_descriptor_chain(mem.as_ref()).expect("chain 3");
    q.add_used(mem.as_ref(), c3.head_index(), 0).expect("used");
    assert!(q.needs_notification(mem.as_ref()).expect("check"), "armed: the device signals");
}

#[test]
fn without_event_idx_the_flags_decide() {
    let (mem, mut alloc) = common::memory(4 << 20);
    let mut ring = common::ring(&mut alloc, 8, false);
    let mut q = common::device_queue(&ring, false);
    ring.add(&[rd(0x1_0010_0000, 1)]).expect("add");
    assert!(ring.publish());
    q.disable_notification(mem.as_ref()).expect("disable");
    ring.add(&[rd(0x1_0010_0000, 1)]).expect("add");
    assert!(!ring.publish(), "VRING_USED_F_NO_NOTIFY");
}

#[test]
fn a_bogus_used_id_is_an_error_not_a_corruption() {
    let (mem, mut alloc) = common::memory(4 << 20);
    let mut ring = common::ring(&mut alloc, 8, true);
    let mut q = common::device_queue(&ring, true);
    let h = ring.add(&[rd(0x1_0010_0000, 1), rd(0x1_0010_0000, 1)]).expect("add");
    ring.publish();
    let _ = q.pop_descriptor_chain(mem.as_ref());
    // Descriptor h+1 is inside the chain, not a head.
    q.add_used(mem.as_ref(), h + 1, 0).expect("device writes it anyway");
    assert_eq!(ring.pop_used(), Err(RingError::BadUsedId(u32::from(h + 1))));
}

#[test]
fn need_event_matches_the_virtio_formula() {
    assert!(need_event(0, 1, 0));
    assert!(!need_event(5, 5, 0), "event 5 not crossed until idx 6");
    assert!(need_event(5, 6, 5));
    assert!(need_event(0xffff, 0, 0xfffe), "wraps");
    assert!(!need_event(10, 3, 2));
}
