//! Finding 3 of issue 14, the victim's side: descriptors run out in the process (here the test
//! holds them all; in production a hostile VMM's tenant or anything else may). A tenant whose
//! accept or device set-up fails meanwhile used to end its serving thread for good. Now it
//! backs off and tries again: the VMM that was waiting gets an answer (it is served, or turned
//! away with its connection closed if its set-up ran out of descriptors), never silence, and
//! once descriptors are free the next VMM moves data exactly. Its own test binary: it starves the whole process.

mod e2e;

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

use e2e::Tenant;
use slimtcp_testkit::netns::Netns;
use slimtcp_testkit::require_netns;

/// How long descriptors stay exhausted: long enough for several failed attempts (the first
/// retries come after 10, 20, 40, ... ms).
const STARVED: Duration = Duration::from_millis(500);

/// Takes every free descriptor of the process.
fn exhaust() -> Vec<OwnedFd> {
    let mut held = Vec::new();
    loop {
        // SAFETY: dup of stdin; a valid descriptor or -1.
        let fd = unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EMFILE));
            return held;
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        held.push(unsafe { OwnedFd::from_raw_fd(fd) });
    }
}

#[test]
fn a_tenant_regains_service_after_descriptors_ran_out() {
    require_netns!();
    // A modest limit keeps the exhaustion quick.
    let limit = libc::rlimit { rlim_cur: 4096, rlim_max: 4096 };
    // SAFETY: setrlimit with a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    let t = Tenant::start_serving("fdx", 1, usize::MAX, e2e::tap_nic(Netns::unique_ifname("tfx")));
    // The VMM's socket exists before the descriptors run out; it connects while they are out.
    // SAFETY: socket() with constant arguments.
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(raw >= 0, "socket");
    // SAFETY: a fresh descriptor.
    let vmm = unsafe { OwnedFd::from_raw_fd(raw) };
    let held = exhaust();
    assert!(!held.is_empty());
    let path = t.socket.as_os_str().as_encoded_bytes().to_vec();
    // SAFETY: sockaddr_un is plain data; the path fits (checked).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    assert!(path.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(&path) {
        *d = *s as libc::c_char;
    }
    // SAFETY: connect on our socket with a valid address of the given length.
    let rc = unsafe {
        libc::connect(
            raw,
            (&addr as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
    // The tenant fails to accept (or to set up the connection) for a while.
    std::thread::sleep(STARVED);
    drop(held);
    // The waiting VMM is served or turned away, then leaves.
    let mut stream = std::os::unix::net::UnixStream::from(vmm);
    stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    use std::io::{Read, Write};
    // GET_FEATURES: an answer proves the connection is served.
    let mut get_features = Vec::new();
    get_features.extend_from_slice(&1u32.to_le_bytes());
    get_features.extend_from_slice(&1u32.to_le_bytes());
    get_features.extend_from_slice(&0u32.to_le_bytes());
    let mut reply = [0u8; 20];
    let answered = stream.write_all(&get_features).and_then(|()| stream.read_exact(&mut reply));
    if let Err(e) = answered {
        let turned_away = matches!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::UnexpectedEof
        );
        assert!(turned_away, "the waiting VMM got no answer: {e}");
    }
    drop(stream);
    // The next VMM moves data, exactly.
    let mut api = t.guest();
    e2e::guest_to_linux(&mut api, &t.ns, 20_000_000);
    e2e::linux_to_guest(&mut api, &t.ns, 20_000_000);
    drop(api);
    assert!(!t.stop().is_empty(), "the tenant served again");
}
