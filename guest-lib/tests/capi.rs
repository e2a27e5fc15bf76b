//! The C entry points called as C would call them: argument and error paths with no backend,
//! then the socket, copy, zero-copy and epoll calls against a scripted device that echoes
//! stream data (the real backend and a C program: tests/tests/c_example.rs).

mod common;

use std::ffi::{c_int, CStr};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ptr::{null, null_mut};

use common::fake::{self, Answer, FakeDevice};
use slimtcp_abi::{Done, Request, RequestBody, RxMessage, SocketId, Version};
use slimtcp_guest::capi::*;
use slimtcp_guest::{GuestConfig, GuestSockets};

const SID: SocketId = SocketId(7);
const LOCAL: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 49152);

fn last_error() -> String {
    // SAFETY: slim_last_error never returns NULL; the string lives until the next failure.
    unsafe { CStr::from_ptr(slim_last_error()) }.to_string_lossy().into_owned()
}

fn errno() -> Option<i32> {
    std::io::Error::last_os_error().raw_os_error()
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

/// A device that says hello, creates socket 7, connects it and echoes what it is sent.
fn echo_device(req: &Request, payload: &[u8]) -> Answer {
    let done = |socket, d| {
        (RxMessage::Complete { cookie: req.cookie, socket, op: req.op().code(), result: Ok(d) }, Vec::new())
    };
    let messages = match req.body {
        RequestBody::Hello { .. } => vec![(
            RxMessage::HelloDone {
                cookie: req.cookie,
                version: Version::CURRENT,
                result: Ok(common::hello_info(64)),
            },
            Vec::new(),
        )],
        RequestBody::Socket { .. } => vec![done(SID, Done::value(0))],
        RequestBody::Connect { .. } => vec![done(SID, Done { value: 0, addr: LOCAL })],
        RequestBody::Send { .. } => payload
            .chunks(2048 - 40)
            .map(|c| (RxMessage::Data { socket: req.socket, len: c.len() as u32 }, c.to_vec()))
            .collect(),
        RequestBody::Credit { .. } => vec![],
        _ if req.flags.is_quiet() => vec![],
        _ => vec![done(req.socket, Done::value(0))],
    };
    Answer { messages, hold: false }
}

/// A context over the scripted device (the device stops when the returned guard drops).
fn context() -> (*mut SlimCtx, FakeDevice) {
    let (qp, dev) = fake::start(64, Box::new(echo_device));
    let cfg = GuestConfig { queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() };
    let api = GuestSockets::new(qp, &cfg).expect("hello");
    (SlimCtx::into_raw(api), dev)
}

#[test]
fn null_arguments_are_einval_and_say_which() {
    // SAFETY: every pointer is NULL or valid; NULL ones are what is tested.
    unsafe {
        assert_eq!(slim_socket(null_mut(), libc::AF_INET, libc::SOCK_STREAM, 0), -libc::EINVAL);
        assert_eq!(last_error(), "slim_socket: argument `ctx` is NULL");
        assert_eq!(slim_config_init(null_mut()), -libc::EINVAL);
        assert!(slim_open(null(), null()).is_null());
        assert_eq!(errno(), Some(libc::EINVAL));
        assert_eq!(last_error(), "slim_open: argument `device` is NULL");
        assert!(slim_tx_data(null_mut()).is_null());
        assert_eq!(slim_rx_len(null()), 0);
        assert_eq!(slim_device_queue_pairs(null()), -libc::EINVAL);
        // Releases take NULL as C's free() does.
        slim_tx_free(null_mut());
        slim_rx_release(null_mut());
        slim_ctx_close(null_mut());
        slim_device_close(null_mut());
    }
}

#[test]
fn bad_device_strings_are_einval_with_the_expected_forms() {
    for bad in [c"", c"tap:x", c"pci:zz:03.0", c"vhost-user:"] {
        // SAFETY: a NUL-terminated string and a NULL config.
        let ctx = unsafe { slim_open(bad.as_ptr(), null()) };
        assert!(ctx.is_null(), "{bad:?}");
        assert_eq!(errno(), Some(libc::EINVAL), "{bad:?}");
        let msg = last_error();
        assert!(msg.starts_with("slim_open: bad device string: ") && msg.contains("DDDD:BB:DD.F"), "{msg}");
    }
}

#[test]
fn a_missing_backend_socket_is_enoent() {
    let path = std::env::temp_dir().join(format!("slimtcp-capi-absent-{}.sock", std::process::id()));
    let device = std::ffi::CString::new(format!("vhost-user:{}", path.display())).expect("no NUL");
    // SAFETY: a NUL-terminated string and a NULL config.
    let dev = unsafe { slim_device_open(device.as_ptr(), null()) };
    assert!(dev.is_null());
    assert_eq!(errno(), Some(libc::ENOENT));
    assert!(last_error().starts_with("slim_device_open: cannot open device vhost-user:"), "{}", last_error());
}

#[test]
fn a_bad_config_is_refused_before_connecting() {
    let mut cfg = std::mem::MaybeUninit::<SlimConfig>::uninit();
    // SAFETY: `cfg` is writable; slim_config_init fills every field.
    let mut cfg = unsafe {
        assert_eq!(slim_config_init(cfg.as_mut_ptr()), 0);
        cfg.assume_init()
    };
    assert_eq!((cfg.queue_pairs, cfg.queue_size), (1, 1024));
    cfg.queue_size = 1000;
    // SAFETY: a NUL-terminated string and a valid config.
    let ctx = unsafe { slim_open(c"vhost-user:/nonexistent".as_ptr(), &cfg) };
    assert!(ctx.is_null());
    assert_eq!(errno(), Some(libc::EINVAL));
    assert!(last_error().contains("queue_size must be a power of two"), "{}", last_error());
}

#[test]
fn unknown_descriptors_are_ebadf() {
    let (ctx, _dev) = context();
    let mut buf = [0u8; 8];
    let mut value = 0i64;
    let ev = SlimEpollEvent { events: SLIM_EPOLLIN, data: 0 };
    // SAFETY: `ctx` is live and used by this thread only; buffers are valid.
    unsafe {
        assert_eq!(slim_recv(ctx, 99, buf.as_mut_ptr().cast(), buf.len()), -(libc::EBADF as isize));
        assert_eq!(last_error(), "slim_recv: recv failed: bad socket handle");
        assert_eq!(slim_send(ctx, -1, buf.as_ptr().cast(), buf.len()), -(libc::EBADF as isize));
        assert_eq!(slim_close(ctx, 5), -libc::EBADF);
        assert_eq!(slim_getsockopt(ctx, 5, SLIM_OPT_NONBLOCK, &mut value), -libc::EBADF);
        assert_eq!(slim_epoll_ctl(ctx, 3, SLIM_EPOLL_CTL_ADD, 5, &ev), -libc::EBADF);
        assert_eq!(slim_epoll_close(ctx, 3), -libc::EBADF);
        slim_ctx_close(ctx);
    }
}

#[test]
fn a_connection_echoes_through_copy_zero_copy_and_epoll() {
    let (ctx, _dev) = context();
    let peer = sockaddr(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7));
    // SAFETY: `ctx` is live and used by this thread only; every pointer passed is valid.
    unsafe {
        let fd = slim_socket(ctx, libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0, "{}", last_error());
        assert_eq!(slim_connect(ctx, fd, &peer), 0, "{}", last_error());
        let mut local = sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
        assert_eq!(slim_getsockname(ctx, fd, &mut local), 0);
        assert_eq!(
            (u16::from_be(local.sin_port), local.sin_addr.s_addr.to_ne_bytes()),
            (49152, [10, 0, 0, 1])
        );

        // Copy path.
        let msg = b"hello from C";
        assert_eq!(slim_send(ctx, fd, msg.as_ptr().cast(), msg.len()), msg.len() as isize);
        let mut back = [0u8; 64];
        let n = slim_recv(ctx, fd, back.as_mut_ptr().cast(), back.len());
        assert_eq!(&back[..n as usize], msg);

        // Zero-copy send; epoll says the echo is there; zero-copy receive.
        let mut tx = null_mut();
        assert_eq!(slim_alloc_tx(ctx, 100, &mut tx), 0);
        assert!(slim_tx_capacity(tx) >= 100);
        let data = slim_tx_data(tx);
        for i in 0..100 {
            *data.add(i) = i as u8;
        }
        assert_eq!(slim_tx_set_len(tx, slim_tx_capacity(tx) + 1), -libc::EINVAL);
        assert_eq!(slim_tx_set_len(tx, 100), 0);
        assert_eq!(slim_send_zc(ctx, fd, &mut tx), 100, "{}", last_error());
        assert!(tx.is_null(), "the library owns the buffer now");

        let ep = slim_epoll_create(ctx);
        assert!(ep >= 0);
        let ev = SlimEpollEvent { events: SLIM_EPOLLIN, data: 77 };
        assert_eq!(slim_epoll_ctl(ctx, ep, SLIM_EPOLL_CTL_ADD, fd, &ev), 0);
        let mut got = [SlimEpollEvent::default(); 4];
        assert_eq!(slim_epoll_wait(ctx, ep, got.as_mut_ptr(), got.len() as c_int, 5000), 1);
        assert_eq!(got[0], SlimEpollEvent { events: SLIM_EPOLLIN, data: 77 });

        let mut rx = null_mut();
        let n = slim_recv_zc(ctx, fd, &mut rx);
        assert_eq!(n, 100);
        let payload = std::slice::from_raw_parts(slim_rx_data(rx), slim_rx_len(rx));
        assert!(payload.iter().enumerate().all(|(i, b)| *b == i as u8));
        slim_rx_release(rx);

        // Options.
        assert_eq!(slim_setsockopt(ctx, fd, SLIM_OPT_NONBLOCK, 1), 0);
        let mut v = 0i64;
        assert_eq!(slim_getsockopt(ctx, fd, SLIM_OPT_NONBLOCK, &mut v), 0);
        assert_eq!(v, 1);
        assert_eq!(slim_recv(ctx, fd, back.as_mut_ptr().cast(), back.len()), -(libc::EAGAIN as isize));
        assert_eq!(slim_setsockopt(ctx, fd, 1234, 1), -libc::EINVAL);

        // The context's send budget: read, set, refused when negative, raised to its least.
        let (mut used, mut limit) = (-1i64, -1i64);
        assert_eq!(slim_send_budget(ctx, &mut used, &mut limit), 0);
        assert_eq!(limit, 512 * 1024, "the default");
        assert!((0..=limit).contains(&used), "{used} of {limit}");
        assert_eq!(slim_set_send_budget(ctx, 1 << 20), 0);
        assert_eq!(slim_send_budget(ctx, &mut used, &mut limit), 0);
        assert_eq!(limit, 1 << 20);
        assert_eq!(slim_set_send_budget(ctx, -1), -libc::EINVAL);
        assert!(last_error().contains("bytes"), "{}", last_error());
        assert_eq!(slim_send_budget(ctx, null_mut(), &mut limit), -libc::EINVAL);
        assert_eq!(slim_set_send_budget(ctx, 1), 0);
        assert_eq!(slim_send_budget(ctx, &mut used, &mut limit), 0);
        assert_eq!(limit, 64 * 1024, "at least the largest buffer a send hands over whole");

        assert_eq!(slim_epoll_ctl(ctx, ep, SLIM_EPOLL_CTL_DEL, fd, null()), 0);
        assert_eq!(slim_epoll_close(ctx, ep), 0);
        assert_eq!(slim_close(ctx, fd), 0);
        assert_eq!(slim_close(ctx, fd), -libc::EBADF, "a closed descriptor is gone");
        slim_ctx_close(ctx);
    }
}

#[test]
fn a_sent_buffer_handle_cannot_be_used_and_an_unsent_one_is_freed() {
    let (ctx, _dev) = context();
    // SAFETY: `ctx` is live and used by this thread only; every pointer passed is valid.
    unsafe {
        let mut tx = null_mut();
        assert_eq!(slim_alloc_tx(ctx, 10, &mut tx), 0);
        // No such socket: the buffer stays the caller's.
        assert_eq!(slim_send_zc(ctx, 42, &mut tx), -(libc::EBADF as isize));
        assert!(!tx.is_null());
        slim_tx_free(tx);
        let mut none: *mut SlimTxBuf = null_mut();
        assert_eq!(slim_send_zc(ctx, 42, &mut none), -(libc::EINVAL as isize));
        assert_eq!(last_error(), "slim_send_zc: argument `*tx` is NULL");
        slim_ctx_close(ctx);
    }
}
