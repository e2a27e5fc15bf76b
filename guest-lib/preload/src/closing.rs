//! `close` of a connected stream as Linux does it: the call returns at once and the connection
//! finishes in the background (FIN after the queued data, then the peer's FIN).
//!
//! The backend finishes a closed connection only while this process stays attached: when the
//! process goes away it resets everything still open. So the library closes a connected
//! stream by shutting down its sending side and keeping the socket on its queue pair's
//! lingering list until the peer's end of stream (or an error) arrives; only then is the
//! socket released. Exit waits (up to `SLIMTCP_LINGER_MS`) for the lists to empty.
//!
//! A socket with unread data is released at once (the library resets it, as Linux does);
//! bytes that arrive on a lingering socket are discarded (Linux would reset the connection).

use slimtcp_api::{Fd, Proto, Ready, Shutdown, SocketApi};
use slimtcp_guest::GuestSockets;

/// Lingering sockets past this many are released at once (oldest first).
const MAX_LINGERING: usize = 4096;

/// One queue pair's lingering sockets.
#[derive(Debug, Default)]
pub struct Lingering {
    fds: Vec<Fd>,
    calls: u32,
}

impl Lingering {
    /// Closes `fd` (see the module documentation).
    pub fn close(&mut self, api: &mut GuestSockets, fd: Fd, proto: Proto) {
        let _ = api.progress();
        let connected = proto == Proto::Tcp
            && api.peer_addr(fd).is_ok()
            && api.readable_bytes(fd).is_ok_and(|n| n == 0)
            && api
                .readiness(fd)
                .is_ok_and(|r| !r.intersects(Ready(Ready::ERR.0 | Ready::HUP.0 | Ready::RDHUP.0)));
        if connected && api.shutdown(fd, Shutdown::Write).is_ok() {
            self.fds.push(fd);
            if self.fds.len() > MAX_LINGERING {
                let oldest = self.fds.remove(0);
                release(api, oldest);
            }
            return;
        }
        release(api, fd);
    }

    /// Releases the sockets whose connection ended. Cheap when nothing is lingering; with a
    /// long list, looks only every 64th call.
    pub fn sweep(&mut self, api: &mut GuestSockets) {
        if self.fds.is_empty() {
            return;
        }
        self.calls = self.calls.wrapping_add(1);
        if self.fds.len() > 64 && self.calls % 64 != 0 {
            return;
        }
        let mut scratch = [0u8; 4096];
        self.fds.retain(|&fd| loop {
            match api.readiness(fd) {
                Err(_) => return false,
                Ok(r) if !r.intersects(Ready(Ready::IN.0 | Ready::ERR.0 | Ready::HUP.0)) => return true,
                Ok(_) => {}
            }
            match api.recv(fd, &mut scratch) {
                Ok(n) if n > 0 => continue,
                Err(slimtcp_api::SocketError::WouldBlock) => return true,
                Ok(_) | Err(_) => {
                    release(api, fd);
                    return false;
                }
            }
        });
    }

    /// Nothing lingers.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

fn release(api: &mut GuestSockets, fd: Fd) {
    if let Err(e) = api.close(fd) {
        log::debug!("close: {e}");
    }
}
