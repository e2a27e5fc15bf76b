//! The Prometheus endpoint, an `event-manager` subscriber: HTTP/1.x `GET /metrics` answered
//! with the tenants' metrics ([`crate::stats::encode_metrics`]), one request per connection.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::time::Duration;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};

use super::tenants::TenantSet;
use super::DaemonError;
use crate::stats::{encode_metrics, METRICS_CONTENT_TYPE};

/// How long a scraper may take to send its request or read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest request head read.
const MAX_HEAD: usize = 8192;

/// The metrics endpoint (see the module documentation).
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
    tenants: Rc<RefCell<TenantSet>>,
}

impl MetricsServer {
    /// Listens on `addr`.
    pub fn bind(addr: SocketAddr, tenants: Rc<RefCell<TenantSet>>) -> Result<Self, DaemonError> {
        let listen = |source| DaemonError::Metrics { addr, source };
        let listener = TcpListener::bind(addr).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        log::info!("Prometheus metrics on http://{}/metrics", listener.local_addr().unwrap_or(addr));
        Ok(MetricsServer { listener, tenants })
    }

    /// Answers one scrape.
    fn serve(&self, mut stream: TcpStream) -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
        stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
        let head = read_head(&mut stream)?;
        let first = head.lines().next().unwrap_or("");
        let mut parts = first.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let (status, content_type, body) = match (method, target.split('?').next().unwrap_or("")) {
            ("GET", "/metrics") => {
                ("200 OK", METRICS_CONTENT_TYPE, encode_metrics(self.tenants.borrow().stats()))
            }
            ("GET", _) => ("404 Not Found", "text/plain", "the metrics are at /metrics\n".to_owned()),
            _ => ("405 Method Not Allowed", "text/plain", "GET only\n".to_owned()),
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes())
    }
}

/// The request's head (up to the blank line, at most [`MAX_HEAD`] bytes).
fn read_head(stream: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

impl MutEventSubscriber for MetricsServer {
    fn process(&mut self, _events: Events, _ops: &mut EventOps) {
        super::serve_pending("metrics", || self.listener.accept().map(|(s, _)| s), |s| self.serve(s));
    }

    fn init(&mut self, ops: &mut EventOps) {
        if let Err(e) = ops.add(Events::new(&self.listener, EventSet::IN)) {
            log::error!("metrics: cannot watch the listener: {e}");
        }
    }
}
