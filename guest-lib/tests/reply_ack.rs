//! REPLY_ACK: once negotiated, every set-up message without a reply of its own asks for an
//! acknowledgement and the guest library waits for it, so a backend that refuses a message is
//! an error at connect time naming that message (not a hello that later times out).
//!
//! The backend here is scripted by hand on the raw vhost-user wire format (12-byte header:
//! request, flags, size; then the body), so it can refuse exactly one message and stay
//! connected, which slimtcp-vhost never does.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slimtcp_guest::{GuestConfig, GuestDevice, GuestError};

/// vhost-user request codes (the vhost-user specification's numbering).
mod code {
    pub const GET_FEATURES: u32 = 1;
    pub const SET_FEATURES: u32 = 2;
    pub const SET_MEM_TABLE: u32 = 5;
    pub const SET_VRING_NUM: u32 = 8;
    pub const SET_VRING_ADDR: u32 = 9;
    pub const SET_VRING_BASE: u32 = 10;
    pub const SET_VRING_KICK: u32 = 12;
    pub const SET_VRING_CALL: u32 = 13;
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    pub const GET_QUEUE_NUM: u32 = 17;
    pub const SET_VRING_ENABLE: u32 = 18;
}

const VERSION_1: u32 = 0x1;
const FLAG_REPLY: u32 = 0x4;
const FLAG_NEED_REPLY: u32 = 0x8;
/// VIRTIO_F_VERSION_1 | VHOST_USER_F_PROTOCOL_FEATURES | MQ | EVENT_IDX | MRG_RXBUF.
const DEVICE_FEATURES: u64 = (1 << 32) | (1 << 30) | (1 << 22) | (1 << 29) | (1 << 15);
const PROTO_MQ: u64 = 1 << 0;
const PROTO_REPLY_ACK: u64 = 1 << 3;

/// What the scripted backend does.
#[derive(Clone, Copy)]
struct Script {
    /// Protocol features it offers.
    protocol_features: u64,
    /// The request it refuses: a failure ack when asked for one, else it hangs up.
    refuse: Option<u32>,
}

/// One request as the backend saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    code: u32,
    flags: u32,
}

struct ScriptedBackend {
    path: PathBuf,
    seen: Arc<Mutex<Vec<Seen>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedBackend {
    fn start(tag: &str, script: Script) -> ScriptedBackend {
        let path = std::env::temp_dir().join(format!("slimtcp-guest-ack-{tag}-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).expect("bind");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let thread = std::thread::spawn(move || {
            let (conn, _) = listener.accept().expect("accept");
            serve(conn, script, &log);
        });
        ScriptedBackend { path, seen, thread: Some(thread) }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl Drop for ScriptedBackend {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(t) = self.thread.take() {
            // The guest side has hung up by now, which ends `serve`.
            let _ = t.join();
        }
    }
}

fn reply(conn: &mut UnixStream, code: u32, value: u64) -> std::io::Result<()> {
    let mut msg = Vec::with_capacity(20);
    for w in [code, VERSION_1 | FLAG_REPLY, 8] {
        msg.extend_from_slice(&w.to_le_bytes());
    }
    msg.extend_from_slice(&value.to_le_bytes());
    conn.write_all(&msg)
}

/// Answers requests until the guest hangs up (or the script says to hang up).
fn serve(mut conn: UnixStream, script: Script, log: &Mutex<Vec<Seen>>) {
    let mut hdr = [0u8; 12];
    let mut body = vec![0u8; 4096];
    while conn.read_exact(&mut hdr).is_ok() {
        let word = |i: usize| u32::from_le_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
        let (code, flags, size) = (word(0), word(4), word(8) as usize);
        if size > body.len() || conn.read_exact(&mut body[..size]).is_err() {
            return;
        }
        log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Seen { code, flags });
        let answered = match code {
            code::GET_FEATURES => reply(&mut conn, code, DEVICE_FEATURES),
            code::GET_PROTOCOL_FEATURES => reply(&mut conn, code, script.protocol_features),
            // One queue pair plus the control queue.
            code::GET_QUEUE_NUM => reply(&mut conn, code, 3),
            _ => {
                let refused = script.refuse == Some(code);
                if flags & FLAG_NEED_REPLY != 0 {
                    reply(&mut conn, code, u64::from(refused))
                } else if refused {
                    return; // what slimtcp-vhost does: it closes the connection
                } else {
                    Ok(())
                }
            }
        };
        if answered.is_err() {
            return;
        }
    }
}

fn small() -> GuestConfig {
    GuestConfig { memory_size: 4 << 20, queue_size: 64, rx_buffer_size: 2048, ..GuestConfig::default() }
}

#[test]
fn every_setup_message_asks_for_an_ack_once_reply_ack_is_negotiated() {
    let b =
        ScriptedBackend::start("all", Script { protocol_features: PROTO_MQ | PROTO_REPLY_ACK, refuse: None });
    let dev = GuestDevice::connect_vhost_user(&b.path, small()).expect("set-up acknowledged");
    assert_eq!(dev.queue_pairs(), 1);
    let seen = b.seen();
    let after = seen.iter().position(|s| s.code == code::SET_PROTOCOL_FEATURES).expect("negotiated");
    let acked = [
        code::SET_FEATURES,
        code::SET_MEM_TABLE,
        code::SET_VRING_NUM,
        code::SET_VRING_BASE,
        code::SET_VRING_ADDR,
        code::SET_VRING_KICK,
        code::SET_VRING_CALL,
        code::SET_VRING_ENABLE,
    ];
    for c in acked {
        let msgs: Vec<_> = seen[after..].iter().filter(|s| s.code == c).collect();
        assert!(!msgs.is_empty(), "request {c} was sent");
        assert!(msgs.iter().all(|s| s.flags & FLAG_NEED_REPLY != 0), "request {c} asks for an ack: {msgs:?}");
    }
    drop(dev);
}

#[test]
fn a_refused_message_fails_connect_at_once_naming_it() {
    let b = ScriptedBackend::start(
        "refuse",
        Script { protocol_features: PROTO_MQ | PROTO_REPLY_ACK, refuse: Some(code::SET_VRING_ADDR) },
    );
    let started = Instant::now();
    let err = GuestDevice::connect_vhost_user(&b.path, small()).expect_err("refused");
    assert!(matches!(err, GuestError::Refused { step: "set_vring_addr" }), "{err}");
    assert_eq!(err.to_string(), "the backend refused vhost-user set_vring_addr");
    assert!(started.elapsed() < Duration::from_secs(5), "no waiting for a hello that cannot come");
    // The connection was still up: the failure came from the ack, not from a hang-up.
    assert!(b.seen().iter().all(|s| s.code != code::SET_VRING_ENABLE), "set-up stopped at the refusal");
}

#[test]
fn without_reply_ack_a_refusal_shows_as_the_backend_hanging_up() {
    let b = ScriptedBackend::start(
        "noack",
        Script { protocol_features: PROTO_MQ, refuse: Some(code::SET_VRING_ADDR) },
    );
    let err = GuestDevice::connect_vhost_user(&b.path, small()).expect_err("hung up");
    assert!(matches!(err, GuestError::VhostUser { .. } | GuestError::Disconnected), "{err}");
    assert!(b.seen().iter().all(|s| s.flags & FLAG_NEED_REPLY == 0), "nothing asks for an ack");
}
