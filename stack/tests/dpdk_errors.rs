//! DPDK error cases: each is an error value with one clear line, never a panic or an abort.
//!
//! One EAL per process: the rejected-arguments case runs in a child process (a failed start
//! cannot be retried in the same process); the port cases share this process's EAL.

mod dpdk_common;

use dpdk_common::*;
use slimtcp::nic::dpdk::{
    create_ring_pair, create_vdev, remove_vdev, DpdkNic, Eal, EalError, Mempool, MempoolConfig, PortConfig,
    PortError,
};

fn one_line(e: &dyn std::error::Error) -> String {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    eprintln!("ERROR-LINE: {msg}");
    msg
}

#[test]
fn bad_eal_arguments_are_an_error_not_an_exit() {
    let out = run_child("child_bad_eal_arguments", "bad-eal-args", None);
    assert!(out.status.success(), "the child process ends normally: {:?}", out.status);
    let lines = tagged_lines(&out, "ERROR-LINE: ");
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("invalid EAL arguments"), "{}", lines[0]);
    assert!(lines[1].starts_with("an earlier EAL start in this process failed"), "{}", lines[1]);
}

#[test]
#[ignore = "child process of bad_eal_arguments_are_an_error_not_an_exit"]
fn child_bad_eal_arguments() {
    if !is_child("bad-eal-args") {
        return;
    }
    let e = Eal::init(["--no-huge\0"]).expect_err("NUL in an argument");
    assert!(matches!(e, EalError::ArgumentHasNul(_)), "{e:?}");
    let e = Eal::init(eal_args(&["--no-such-option"])).expect_err("unknown option");
    assert!(matches!(e, EalError::InvalidArguments { .. }), "{e:?}");
    one_line(&e);
    let e = Eal::init(eal_args(&[])).expect_err("no second start");
    assert!(matches!(e, EalError::EarlierStartFailed(_)), "{e:?}");
    one_line(&e);
    let e = Eal::init(eal_args(&["-l", "999"])).expect_err("no second start");
    one_line(&e);
}

#[test]
fn port_errors_are_values_with_clear_messages() {
    let eal = Eal::init(eal_args(&[])).expect("EAL starts");
    assert_eq!(
        Eal::init(eal_args(&[])).expect("same arguments: the running EAL") as *const Eal,
        eal as *const Eal
    );
    let e = Eal::init(eal_args(&["--vdev=net_null0"])).expect_err("different arguments");
    assert!(matches!(e, EalError::AlreadyInitialised { .. }), "{e:?}");
    assert!(one_line(&e).starts_with("EAL already initialised with different arguments"));

    // Missing port: the message lists what exists.
    let (ra, rb) = create_ring_pair(eal, "slimt_err_a", "slimt_err_b", 256).expect("ring pair");
    let e = DpdkNic::open(eal, &PortConfig::new("0000:3b:00.0")).expect_err("no such port");
    assert!(matches!(e, PortError::NotFound { .. }), "{e:?}");
    assert!(one_line(&e).contains(&ra));
    let e = DpdkNic::open(eal, &PortConfig::new("17")).expect_err("no port 17");
    assert!(matches!(e, PortError::NotFound { .. }), "{e:?}");

    // Ports that cannot be configured as asked.
    let mut cfg = PortConfig::new(&ra);
    cfg.queues = 64;
    let e = DpdkNic::open(eal, &cfg).expect_err("too many queues");
    assert!(matches!(e, PortError::TooManyQueues { .. }), "{e:?}");
    one_line(&e);

    let mut cfg = PortConfig::new(&ra);
    cfg.mtu = 40; // below the Ethernet minimum: DPDK refuses it
    let e = DpdkNic::open(eal, &cfg).expect_err("bad MTU");
    assert!(matches!(&e, PortError::Setup { step, .. } if step == "rte_eth_dev_configure"), "{e:?}");
    one_line(&e);

    let mut cfg = PortConfig::new(&ra);
    cfg.mempool = Some(MempoolConfig { mbufs: 1 << 20, cache_size: 256, data_room: 2176 }); // 2+ GiB > -m 256
    let e = DpdkNic::open(eal, &cfg).expect_err("pool too large");
    assert!(matches!(e, PortError::Mempool(_)), "{e:?}");
    one_line(&e);

    let mut cfg = PortConfig::new(&ra);
    cfg.queues = 0;
    assert!(matches!(DpdkNic::open(eal, &cfg), Err(PortError::InvalidConfig { .. })));

    // After all that, the port still works, and only one owner may hold it.
    let nic = DpdkNic::open(eal, &PortConfig::new(&ra)).expect("port opens after failed attempts");
    let e = DpdkNic::open(eal, &PortConfig::new(&ra)).expect_err("in use");
    assert!(matches!(e, PortError::InUse { .. }), "{e:?}");
    one_line(&e);
    let _b = DpdkNic::open(eal, &PortConfig::new(&rb)).expect("the other end opens");
    drop(nic);

    // A device made, opened, closed and removed again and again (a tenant whose VMM keeps
    // reconnecting): its queue's pool is made once and reused (pools are never freed).
    let pools = Mempool::created();
    for round in 0..20 {
        create_vdev(eal, "net_null_reopen", "").expect("null device");
        drop(DpdkNic::open(eal, &PortConfig::new("net_null_reopen")).expect("port opens"));
        remove_vdev(eal, "net_null_reopen").expect("removed");
        assert_eq!(Mempool::created(), pools + 1, "round {round}: one pool for the one queue");
    }
}

/// A VMM may declare a huge (sparse) guest memory region: registering it would make DPDK keep a
/// descriptor per page. Past `MAX_PAGES` it is refused before anything is allocated (the
/// backend then copies that region's payload instead of sending it by reference).
#[test]
fn oversized_external_memory_is_refused_before_dpdk_sees_it() {
    use slimtcp::nic::dpdk::extmem::{checked_pages, MAX_PAGES};
    use slimtcp::nic::dpdk::ExtMemError;
    assert_eq!(checked_pages(0x20_0000, 1 << 30, 2 << 20), Ok(512));
    assert_eq!(checked_pages(0x1000, MAX_PAGES * 4096, 4096), Ok(MAX_PAGES));
    let tib = 1usize << 40;
    let e = checked_pages(0x4000_0000, tib, 4096).expect_err("1 TiB of 4 KiB pages");
    assert_eq!(e, ExtMemError::TooManyPages { pages: tib / 4096, max: MAX_PAGES });
    assert!(one_line(&e).contains("hugepages"));
    assert!(matches!(checked_pages(0x1001, 4096, 4096), Err(ExtMemError::Layout(_))));
    assert_eq!(checked_pages(0x4000_0000, tib, 1 << 30), Ok(1024), "1 TiB of 1 GiB pages is fine");
}
