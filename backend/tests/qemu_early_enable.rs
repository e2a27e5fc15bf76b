//! QEMU's vhost-user **net** sends `SET_VRING_ENABLE` before `SET_FEATURES`: when the netdev
//! connects, virtio-net attaches its first queue pair (`peer_attach` -> `vhost_set_vring_enable`),
//! right after SET_OWNER and the per-ring SET_VRING_CALL / SET_VRING_ERR, long before the guest
//! driver has negotiated features. Observed with QEMU 10.0.2 (strace of its socket):
//!
//! ```text
//! GET_FEATURES, GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM, GET_MAX_MEM_SLOTS,
//! SET_OWNER, GET_FEATURES, SET_VRING_CALL 0, SET_VRING_ERR 0, SET_VRING_CALL 1, SET_VRING_ERR 1,
//! (the same for pair 1, rings 2 and 3), SET_VRING_ENABLE(ring 0, 1)
//! ```
//!
//! The vhost crate's `Frontend` refuses to send that order (it checks PROTOCOL_FEATURES among
//! the acked features itself), so this test speaks raw vhost-user on the socket. The backend
//! must keep the connection: a real QEMU is dropped otherwise and its device is dead
//! (`tests/tests/vm_qemu.rs`).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use slimtcp::iface::InterfaceConfig;
use slimtcp::nic::memwire::{link, LinkConfig, MemwireNic};
use slimtcp::wire::EthernetAddress;
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant, StopHandle, TenantConfig};

const GET_FEATURES: u32 = 1;
const SET_OWNER: u32 = 3;
const GET_PROTOCOL_FEATURES: u32 = 15;
const SET_PROTOCOL_FEATURES: u32 = 16;
const GET_QUEUE_NUM: u32 = 17;
const SET_VRING_ENABLE: u32 = 18;
/// Header flags: protocol version 1; replies add 0x4.
const VERSION_1: u32 = 0x1;
const REPLY: u32 = 0x4;
/// VHOST_USER_PROTOCOL_F_MQ only: no REPLY_ACK, so SET_* messages get no answer.
const PROTOCOL_F_MQ: u64 = 1;
const PROTOCOL_FEATURES_BIT: u64 = 1 << 30;

/// A raw vhost-user frontend: header (request, flags, size), then the body; no fds needed here.
struct Raw(UnixStream);

impl Raw {
    fn send(&mut self, request: u32, body: &[u8]) -> std::io::Result<()> {
        let mut msg = Vec::with_capacity(12 + body.len());
        msg.extend_from_slice(&request.to_le_bytes());
        msg.extend_from_slice(&VERSION_1.to_le_bytes());
        msg.extend_from_slice(&(body.len() as u32).to_le_bytes());
        msg.extend_from_slice(body);
        self.0.write_all(&msg)
    }

    /// Reads a reply to `request` carrying a u64.
    fn reply_u64(&mut self, request: u32) -> std::io::Result<u64> {
        let mut hdr = [0u8; 12];
        self.0.read_exact(&mut hdr)?;
        let field = |i: usize| u32::from_le_bytes(hdr[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        assert_eq!((field(0), field(1) & REPLY, field(2)), (request, REPLY, 8), "reply header {hdr:?}");
        let mut body = [0u8; 8];
        self.0.read_exact(&mut body)?;
        Ok(u64::from_le_bytes(body))
    }

    fn get_u64(&mut self, request: u32) -> std::io::Result<u64> {
        self.send(request, &[])?;
        self.reply_u64(request)
    }
}

#[test]
fn qemu_net_enables_ring_0_before_set_features_and_the_connection_survives() {
    let path = std::env::temp_dir().join(format!("slimtcp-vhost-{}-early-enable.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let stop = StopHandle::default();
    let cfg = TenantConfig {
        socket: path.clone(),
        iface: InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 1]), "10.0.0.1".parse().expect("ip"), 24),
        pairs: 2,
        core: None,
        name: "early".into(),
        sandbox: Sandbox::default(),
        limits: Default::default(),
    };
    let s = stop.clone();
    let daemon = std::thread::spawn(move || {
        let make = || -> Result<MemwireNic, String> {
            Ok(link(LinkConfig::default()).map_err(|e| e.to_string())?.0)
        };
        serve_tenant(&cfg, make, &s, Some(1)).expect("serve");
    });
    let _cleanup = Cleanup(path.clone(), stop);

    let deadline = Instant::now() + Duration::from_secs(5);
    let stream = loop {
        match UnixStream::connect(&path) {
            Ok(s) => break s,
            Err(e) => {
                assert!(Instant::now() < deadline, "cannot connect: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let mut f = Raw(stream);

    // QEMU's order up to the early enable (the fd-carrying SET_VRING_CALL/ERR are left out: they
    // are not what the backend trips over).
    let features = f.get_u64(GET_FEATURES).expect("GET_FEATURES");
    assert_ne!(features & PROTOCOL_FEATURES_BIT, 0, "PROTOCOL_FEATURES offered");
    let protocol = f.get_u64(GET_PROTOCOL_FEATURES).expect("GET_PROTOCOL_FEATURES");
    assert_ne!(protocol & PROTOCOL_F_MQ, 0);
    f.send(SET_PROTOCOL_FEATURES, &PROTOCOL_F_MQ.to_le_bytes()).expect("SET_PROTOCOL_FEATURES");
    assert_eq!(f.get_u64(GET_QUEUE_NUM).expect("GET_QUEUE_NUM"), 5);
    f.send(SET_OWNER, &[]).expect("SET_OWNER");
    assert_eq!(f.get_u64(GET_FEATURES).expect("GET_FEATURES again"), features);

    // virtio-net's peer_attach: enable ring 0, before any SET_FEATURES.
    let mut state = Vec::new();
    state.extend_from_slice(&0u32.to_le_bytes()); // ring index
    state.extend_from_slice(&1u32.to_le_bytes()); // enable
    f.send(SET_VRING_ENABLE, &state).expect("SET_VRING_ENABLE");

    // The connection must still be served.
    match f.get_u64(GET_FEATURES) {
        Ok(v) => assert_eq!(v, features),
        Err(e) => panic!(
            "the backend closed the connection after QEMU's early SET_VRING_ENABLE ({e}); \
             vhost-user-backend rejects it with InactiveFeature(PROTOCOL_FEATURES) because \
             SET_FEATURES has not come yet"
        ),
    }
    drop(f);
    daemon.join().expect("daemon thread");
}

/// Stops the daemon and removes the socket, also when the test fails.
struct Cleanup(PathBuf, StopHandle);

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.1.stop();
        let _ = std::fs::remove_file(&self.0);
    }
}
