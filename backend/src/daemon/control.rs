//! The control socket, an `event-manager` subscriber: each connection gets one request
//! ([`super::protocol`]) answered at once (stats), or a capture streamed by a thread of its own
//! until its limit, its deadline or the client's hang-up.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};
use slimtcp::nic::pcap::PcapWriter;

use super::protocol::{Reply, Request, MAX_REQUEST};
use super::tenants::TenantSet;
use super::DaemonError;
use crate::capture::{Capture, CaptureLimits, CaptureTap};

/// How long a client may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a capture waits between drains when its queue was empty.
const CAPTURE_DRAIN_WAIT: Duration = Duration::from_millis(10);

/// The control socket (see the module documentation).
#[derive(Debug)]
pub struct ControlServer {
    listener: UnixListener,
    path: PathBuf,
    tenants: Rc<RefCell<TenantSet>>,
}

impl ControlServer {
    /// Listens on `path` (an existing socket file is replaced).
    pub fn bind(path: &Path, tenants: Rc<RefCell<TenantSet>>) -> Result<Self, DaemonError> {
        let _ = std::fs::remove_file(path);
        let listen = |source| DaemonError::Control { path: path.to_path_buf(), source };
        let listener = UnixListener::bind(path).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        log::info!("control socket on {}", path.display());
        Ok(ControlServer { listener, path: path.to_path_buf(), tenants })
    }

    /// Serves one client: reads its request and answers it.
    fn serve(&self, stream: UnixStream) -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
        stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        let mut line = String::new();
        BufReader::new((&stream).take(MAX_REQUEST as u64)).read_line(&mut line)?;
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::Error(format!("not a request: {e}")),
            Ok(Request::Stats) => Reply::Stats(self.tenants.borrow().stats()),
            Ok(Request::Capture { tenant, seconds, count }) => {
                match self.start_capture(&tenant, seconds, count) {
                    Ok(capture) => {
                        write_reply(&stream, &Reply::Capturing)?;
                        return spawn_capture(&tenant, capture, stream);
                    }
                    Err(why) => Reply::Error(why),
                }
            }
        };
        write_reply(&stream, &reply)
    }

    fn start_capture(
        &self,
        tenant: &str,
        seconds: Option<f64>,
        count: Option<u64>,
    ) -> Result<Capture, String> {
        let tap: Arc<CaptureTap> =
            self.tenants.borrow().capture_tap(tenant).ok_or_else(|| format!("no tenant {tenant:?}"))?;
        let duration = match seconds {
            Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => Some(Duration::from_secs_f64(s)),
            Some(s) => return Err(format!("--seconds {s}: between 0 and 86400")),
            None => None,
        };
        if duration.is_none() && count.is_none() {
            return Err("a capture needs --seconds or --count".into());
        }
        let limits = CaptureLimits { max_frames: count, duration, ..CaptureLimits::default() };
        tap.arm(limits).map_err(|e| format!("{tenant}: {}", crate::error_chain(&e)))
    }
}

/// Writes `reply` as one JSON line.
fn write_reply(mut stream: &UnixStream, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_string(reply).map_err(std::io::Error::other)?;
    line.push('\n');
    stream.write_all(line.as_bytes())
}

/// Streams `capture` to the client on a thread of its own, until the capture ends or the
/// client hangs up (then the capture stops).
fn spawn_capture(tenant: &str, mut capture: Capture, stream: UnixStream) -> std::io::Result<()> {
    let tenant = tenant.to_owned();
    std::thread::Builder::new().name(format!("{tenant}-capture")).spawn(move || {
        let mut out = match PcapWriter::new(BufWriter::new(stream), format!("the capture of {tenant}")) {
            Ok(out) => out,
            Err(e) => {
                log::warn!("{tenant}: capture: {}", crate::error_chain(&e));
                return;
            }
        };
        let streamed = (|| {
            while !capture.is_finished() {
                if capture.drain(&mut out)? == 0 {
                    out.flush().map_err(crate::capture::CaptureError::Write)?;
                    std::thread::sleep(CAPTURE_DRAIN_WAIT);
                }
            }
            capture.finish(&mut out)
        })();
        match streamed {
            Ok(report) => log::info!("{tenant}: capture: {report}"),
            Err(e) => log::warn!("{tenant}: capture ended: {}", crate::error_chain(&e)),
        }
    })?;
    Ok(())
}

impl MutEventSubscriber for ControlServer {
    fn process(&mut self, _events: Events, _ops: &mut EventOps) {
        super::serve_pending("control socket", || self.listener.accept().map(|(s, _)| s), |s| self.serve(s));
    }

    fn init(&mut self, ops: &mut EventOps) {
        if let Err(e) = ops.add(Events::new(&self.listener, EventSet::IN)) {
            log::error!("control socket: cannot watch {}: {e}", self.path.display());
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
