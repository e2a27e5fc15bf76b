//! [`GuestDevice`]: one set-up device (one vhost-user connection, one guest memory) whose queue
//! pairs become [`GuestSockets`], one per application thread.
//!
//! ```text
//!  GuestDevice ── take(0) ─▶ GuestSockets ─▶ thread 0   (TX 1 / RX 0)
//!      │       ── take(1) ─▶ GuestSockets ─▶ thread 1   (TX 3 / RX 2)
//!      └ transport (connection + memory, shared with every pair: Arc)
//! ```
//!
//! Each [`GuestSockets`] owns its queue pair outright (rings, buffer memory, socket table): no
//! locks between threads, and a socket lives on the pair it was created on (protocol.md §3).
//! Every pair holds the connection and the memory mapping, so the device may be dropped as soon
//! as the pairs are taken; the backend sees the guest leave when the last of them drops. A dead
//! backend turns every call on every pair into `ENETDOWN`; to re-attach, drop them all and
//! connect again ([`GuestDevice::connect_vhost_user_within`] waits for a restarting backend).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::spec::DeviceSpec;
use crate::transport::Transport;
use crate::{GuestConfig, GuestError, GuestSockets, VhostUserTransport};

/// How long [`GuestDevice::connect_vhost_user_within`] sleeps between attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// A set-up device handing out one [`GuestSockets`] per queue pair (see the module docs).
#[derive(Debug)]
pub struct GuestDevice {
    transport: Box<dyn Transport + Send>,
    cfg: GuestConfig,
}

impl GuestDevice {
    /// Connects to a `slimtcp-vhost` backend at `path` (this process plays the VMM) and sets up
    /// `cfg.queue_pairs` queue pairs (0: all the device has). No hello is said yet: each pair
    /// says its own when taken.
    pub fn connect_vhost_user(path: impl AsRef<Path>, cfg: GuestConfig) -> Result<GuestDevice, GuestError> {
        let t = VhostUserTransport::connect(path, &cfg)?;
        Ok(GuestDevice::new(Box::new(t), cfg))
    }

    /// [`connect_vhost_user`](Self::connect_vhost_user), retrying for up to `wait` while the
    /// backend's socket is missing or refuses connections (a backend starting or restarting).
    /// Other errors are returned at once.
    pub fn connect_vhost_user_within(
        path: impl AsRef<Path>,
        cfg: GuestConfig,
        wait: Duration,
    ) -> Result<GuestDevice, GuestError> {
        let deadline = Instant::now() + wait;
        loop {
            match GuestDevice::connect_vhost_user(path.as_ref(), cfg.clone()) {
                Err(e) if not_listening(&e) && Instant::now() < deadline => std::thread::sleep(RETRY_PAUSE),
                other => return other,
            }
        }
    }

    /// Attaches to the device `spec` names ([`DeviceSpec`]: `pci`, `pci:ADDR` inside a VM,
    /// `vhost-user:SOCKET` on the host) and sets up `cfg.queue_pairs` queue pairs (0: all).
    pub fn open(spec: &DeviceSpec, cfg: GuestConfig) -> Result<GuestDevice, GuestError> {
        match spec {
            DeviceSpec::VhostUser(path) => GuestDevice::connect_vhost_user(path, cfg),
            DeviceSpec::Pci(addr) => {
                let t = crate::pci::PciTransport::open(*addr, &cfg)?;
                Ok(GuestDevice::new(Box::new(t), cfg))
            }
        }
    }

    /// A device over any transport (the PCI transport, a test's fake device).
    pub fn new(transport: Box<dyn Transport + Send>, cfg: GuestConfig) -> GuestDevice {
        GuestDevice { transport, cfg }
    }

    /// How many queue pairs were set up (taken or not).
    pub fn queue_pairs(&self) -> usize {
        self.transport.queue_pairs()
    }

    /// Whether the backend is still there.
    pub fn alive(&self) -> bool {
        self.transport.alive()
    }

    /// The socket API over queue pair `pair` (each once): posts its receive buffers and says
    /// hello on it. The result is `Send`; move it to the thread that will use it.
    pub fn take(&mut self, pair: usize) -> Result<GuestSockets, GuestError> {
        let qp = self.transport.take_queue_pair(pair)?;
        GuestSockets::new(qp, &self.cfg)
    }

    /// Queue pair `pair` itself (each once), for tools and tests that speak the protocol on the
    /// rings themselves: no receive buffers are posted and no hello is said.
    pub fn take_queue_pair(&mut self, pair: usize) -> Result<crate::QueuePair, GuestError> {
        self.transport.take_queue_pair(pair)
    }

    /// Every queue pair not yet taken, in pair order.
    pub fn take_all(&mut self) -> Result<Vec<GuestSockets>, GuestError> {
        let mut out = Vec::with_capacity(self.queue_pairs());
        for pair in 0..self.queue_pairs() {
            match self.take(pair) {
                Ok(s) => out.push(s),
                Err(GuestError::NoSuchQueuePair(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// Whether connecting failed only because nobody listens on the path (yet).
fn not_listening(e: &GuestError) -> bool {
    let GuestError::VhostUser {
        step: "connect",
        source: vhost::Error::VhostUserProtocol(vhost::vhost_user::Error::SocketConnect(io)),
    } = e
    else {
        return false;
    };
    matches!(io.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send<T: Send>() {}

    #[test]
    fn pairs_and_the_device_can_move_to_other_threads() {
        is_send::<GuestSockets>();
        is_send::<GuestDevice>();
    }

    #[test]
    fn waiting_for_a_backend_gives_up_with_the_connect_error() {
        let path = std::env::temp_dir().join(format!("slimtcp-guest-absent-{}.sock", std::process::id()));
        let started = Instant::now();
        let err =
            GuestDevice::connect_vhost_user_within(&path, GuestConfig::default(), Duration::from_millis(100))
                .expect_err("nobody listens");
        assert!(not_listening(&err), "{err}");
        assert!(started.elapsed() >= Duration::from_millis(100));
    }
}
