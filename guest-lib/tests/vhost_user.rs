//! The vhost-user transport's failure paths without a backend (the full handshake is covered
//! by the end-to-end tests against slimtcp-vhost).

use slimtcp_guest::{GuestConfig, GuestError, GuestSockets};

#[test]
fn a_missing_socket_is_a_connect_error() {
    let dir = std::env::temp_dir().join(format!("slimtcp-guest-missing-{}", std::process::id()));
    let err = GuestSockets::connect_vhost_user(dir.join("none.sock"), GuestConfig::default())
        .expect_err("no backend");
    assert!(matches!(err, GuestError::VhostUser { step: "connect", .. }), "{err}");
}

#[test]
fn a_backend_that_hangs_up_during_setup_is_an_error_not_a_hang() {
    let dir = std::env::temp_dir().join(format!("slimtcp-guest-hangup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("b.sock");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    let t = std::thread::spawn(move || {
        let (conn, _) = listener.accept().expect("accept");
        drop(conn);
    });
    let err = GuestSockets::connect_vhost_user(&path, GuestConfig::default()).expect_err("hang-up");
    assert!(matches!(err, GuestError::VhostUser { .. }), "{err}");
    t.join().expect("listener thread");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_settings_are_refused_before_connecting() {
    let cfg = GuestConfig { queue_size: 1000, ..GuestConfig::default() };
    let err = GuestSockets::connect_vhost_user("/nonexistent", cfg).expect_err("bad size");
    assert!(matches!(err, GuestError::Config(_)), "{err}");
}

/// A backend busy with another frontend leaves a new connection unanswered in its listen queue
/// (and vhost's reads retry for ever): attaching gives up after `hello_timeout`, saying why.
#[test]
fn a_backend_that_never_answers_set_up_fails_the_attach_after_the_hello_timeout() {
    let dir = std::env::temp_dir().join(format!("slimtcp-noanswer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("busy.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&path).expect("listen, never accept");
    let cfg = slimtcp_guest::GuestConfig {
        hello_timeout: std::time::Duration::from_millis(300),
        ..Default::default()
    };
    let started = std::time::Instant::now();
    let err = slimtcp_guest::GuestDevice::connect_vhost_user(&path, cfg).expect_err("nobody answers");
    assert!(matches!(err, slimtcp_guest::GuestError::NoAnswer { .. }), "{err}");
    assert!(err.to_string().contains("another process attached"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "it gave up");
    let _ = std::fs::remove_dir_all(&dir);
}
