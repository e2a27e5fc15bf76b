//! Raw-binding smoke test: EAL start, mempool, mbuf operations through the shim, and two
//! `net_ring` ports wired back to back. One EAL per process, so one test in this binary.

use std::ffi::{CStr, CString};
use std::ptr;

use dpdk_sys::*;

const EAL_ARGS: &[&str] = &[
    "dpdk-sys-smoke",
    "--no-huge",
    "-m",
    "256",
    "--no-pci",
    "--no-shconf",
    "-l",
    "0",
    "--log-level=warning",
];

fn eal_init() {
    let args: Vec<CString> = EAL_ARGS.iter().map(|a| CString::new(*a).expect("no NUL")).collect();
    let mut argv: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    let argc = i32::try_from(argv.len()).expect("few args");
    // SAFETY: argv holds argc valid NUL-terminated strings that outlive the call (EAL may
    // permute the pointer array, which we own, and keeps no reference to the strings it parsed
    // that we free: `args` lives until the end of the test).
    let rc = unsafe { rte_eal_init(argc, argv.as_mut_ptr()) };
    assert!(rc >= 0, "rte_eal_init: {}", strerror(errno()));
    std::mem::forget(args);
}

fn port_by_name(name: &str) -> u16 {
    let c = CString::new(name).expect("no NUL");
    let mut port = u16::MAX;
    // SAFETY: valid C string and out pointer.
    let rc = unsafe { rte_eth_dev_get_port_by_name(c.as_ptr(), &mut port) };
    assert_eq!(rc, 0, "port {name}");
    port
}

fn start_port(port: u16, pool: *mut rte_mempool) {
    // SAFETY: port exists; NULL queue configs select driver defaults; pool is a live pktmbuf pool.
    unsafe {
        assert_eq!(shim_port_configure(port, 1, 1, 0, 0), 0);
        assert_eq!(rte_eth_rx_queue_setup(port, 0, 256, rte_socket_id(), ptr::null(), pool), 0);
        assert_eq!(rte_eth_tx_queue_setup(port, 0, 256, rte_socket_id(), ptr::null()), 0);
        assert_eq!(rte_eth_dev_start(port), 0);
    }
}

#[test]
fn eal_mbufs_and_ring_pair() {
    eal_init();

    let name = CString::new("smoke_pool").expect("no NUL");
    // SAFETY: EAL is up; name is a valid C string.
    let pool = unsafe {
        rte_pktmbuf_pool_create(name.as_ptr(), 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY)
    };
    assert!(!pool.is_null(), "pool: {}", strerror(errno()));

    // mbuf operations through the shim.
    // SAFETY: pool is live; every mbuf pointer used below was just allocated and is freed once.
    unsafe {
        let m = shim_pktmbuf_alloc(pool);
        assert!(!m.is_null());
        assert_eq!(shim_pktmbuf_headroom(m), RTE_PKTMBUF_HEADROOM);
        let p = shim_pktmbuf_append(m, 4).cast::<u8>();
        assert!(!p.is_null());
        ptr::copy_nonoverlapping(b"data".as_ptr(), p, 4);
        let h = shim_pktmbuf_prepend(m, 2).cast::<u8>();
        ptr::copy_nonoverlapping(b"hd".as_ptr(), h, 2);
        assert_eq!(shim_pktmbuf_data_len(m), 6);
        let d = std::slice::from_raw_parts(shim_pktmbuf_mtod(m).cast::<u8>(), 6);
        assert_eq!(d, b"hddata");
        assert!(!shim_pktmbuf_adj(m, 2).is_null());
        assert_eq!(shim_pktmbuf_trim(m, 2), 0);
        assert_eq!(shim_pktmbuf_pkt_len(m), 2);
        let tail = shim_pktmbuf_alloc(pool);
        let t = shim_pktmbuf_append(tail, 3).cast::<u8>();
        ptr::copy_nonoverlapping(b"xyz".as_ptr(), t, 3);
        assert_eq!(shim_pktmbuf_chain(m, tail), 0);
        let mut info = shim_mbuf_info::default();
        shim_mbuf_info(m, &mut info);
        assert_eq!((info.nb_segs, info.pkt_len, info.data_len, info.exclusive), (2, 5, 2, 1));
        assert_eq!(shim_pktmbuf_next(m), tail);
        assert_eq!(rte_mempool_in_use_count(pool), 2);
        shim_pktmbuf_free(m);
        assert_eq!(rte_mempool_in_use_count(pool), 0);
    }

    // Two ports back to back: a's tx ring is b's rx ring and vice versa.
    let ra = CString::new("smoke_r0").expect("no NUL");
    let rb = CString::new("smoke_r1").expect("no NUL");
    // SAFETY: EAL is up; names are valid C strings.
    let (r0, r1) = unsafe {
        let flags = RING_F_SP_ENQ | RING_F_SC_DEQ;
        (
            rte_ring_create(ra.as_ptr(), 1024, SOCKET_ID_ANY, flags),
            rte_ring_create(rb.as_ptr(), 1024, SOCKET_ID_ANY, flags),
        )
    };
    assert!(!r0.is_null() && !r1.is_null());
    let (na, nb) = (CString::new("smoke_a").expect("no NUL"), CString::new("smoke_b").expect("no NUL"));
    // SAFETY: the ring arrays hold one live ring each, as the counts say.
    let (a, b) = unsafe {
        (
            rte_eth_from_rings(na.as_ptr(), &r0, 1, &r1, 1, 0),
            rte_eth_from_rings(nb.as_ptr(), &r1, 1, &r0, 1, 0),
        )
    };
    let (a, b) = (u16::try_from(a).expect("port a"), u16::try_from(b).expect("port b"));

    let mut info = shim_dev_info::default();
    // SAFETY: port a exists, info is a valid out pointer.
    assert_eq!(unsafe { shim_dev_info(a, &mut info) }, 0);
    // SAFETY: the shim NUL-terminates the name.
    let driver = unsafe { CStr::from_ptr(info.driver_name.as_ptr()) };
    assert_eq!(driver.to_str(), Ok("net_ring"));
    // SAFETY: the shim NUL-terminates the name.
    let device = unsafe { CStr::from_ptr(info.device_name.as_ptr()) };
    assert_eq!(port_by_name(device.to_str().expect("utf8")), a);
    assert!(info.caps & SHIM_CAP_TX_MULTI_SEGS != 0);

    start_port(a, pool);
    start_port(b, pool);

    // SAFETY: mbufs come from the live pool; the burst arrays hold as many valid pointers as
    // passed; received mbufs are freed once.
    unsafe {
        let mut tx = [ptr::null_mut::<rte_mbuf>(); 8];
        assert_eq!(shim_pktmbuf_alloc_bulk(pool, tx.as_mut_ptr(), 8), 0);
        for (i, m) in tx.iter().enumerate() {
            let p = shim_pktmbuf_append(*m, 64).cast::<u8>();
            ptr::write_bytes(p, u8::try_from(i).expect("small"), 64);
        }
        let sent_ptrs: Vec<*mut u8> = tx.iter().map(|m| shim_pktmbuf_mtod(*m).cast::<u8>()).collect();
        assert_eq!(shim_tx_burst(a, 0, tx.as_mut_ptr(), 8), 8);
        let mut rx = [ptr::null_mut::<rte_mbuf>(); 16];
        let n = shim_rx_burst(b, 0, rx.as_mut_ptr(), 16);
        assert_eq!(n, 8);
        for (i, m) in rx[..8].iter().enumerate() {
            let p = shim_pktmbuf_mtod(*m).cast::<u8>();
            assert_eq!(p, sent_ptrs[i], "zero copy: the receiver gets the sender's mbuf");
            assert_eq!(std::slice::from_raw_parts(p, 64), &[u8::try_from(i).expect("small"); 64][..]);
        }
        rte_pktmbuf_free_bulk(rx.as_mut_ptr(), 8);
        assert_eq!(rte_mempool_in_use_count(pool), 0);
        assert_eq!(rte_eth_dev_stop(a), 0);
        assert_eq!(rte_eth_dev_stop(b), 0);
    }
}
