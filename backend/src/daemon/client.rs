//! The control socket's client side: `slimtcp-vhost stats` and `slimtcp-vhost capture`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::protocol::{Reply, Request};
use crate::stats::{table, TenantStats};

/// Errors of a control-socket client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The daemon's socket could not be reached.
    #[error("cannot reach the daemon on {}", .path.display())]
    Connect {
        /// The control socket.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Talking to the daemon failed.
    #[error("talking to the daemon")]
    Io(#[from] std::io::Error),
    /// The daemon refused the request.
    #[error("the daemon refused: {0}")]
    Refused(String),
    /// The daemon's answer made no sense.
    #[error("unexpected answer from the daemon: {0}")]
    BadReply(String),
    /// The capture file could not be written.
    #[error("writing {}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The capture written is not a pcap file.
    #[error("the capture")]
    Pcap(#[from] slimtcp::nic::pcap::PcapError),
}

/// Sends `request` and reads the reply line; the rest of the stream follows in the reader.
fn ask(control: &Path, request: &Request) -> Result<(Reply, BufReader<UnixStream>), ClientError> {
    let mut stream = UnixStream::connect(control)
        .map_err(|source| ClientError::Connect { path: control.to_path_buf(), source })?;
    let mut line = serde_json::to_string(request).map_err(|e| ClientError::BadReply(e.to_string()))?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut answer = String::new();
    reader.read_line(&mut answer)?;
    let reply =
        serde_json::from_str(&answer).map_err(|e| ClientError::BadReply(format!("{e}: {answer:?}")))?;
    match reply {
        Reply::Error(why) => Err(ClientError::Refused(why)),
        r => Ok((r, reader)),
    }
}

/// Every tenant's stats, from the daemon on `control`.
pub fn fetch_stats(control: &Path) -> Result<Vec<TenantStats>, ClientError> {
    match ask(control, &Request::Stats)? {
        (Reply::Stats(t), _) => Ok(t),
        (other, _) => Err(ClientError::BadReply(format!("{other:?}"))),
    }
}

/// `slimtcp-vhost stats`: prints a table (or JSON, one line per refresh), refreshed every
/// `interval` until interrupted with `watch`.
pub fn stats(control: &Path, json: bool, watch: bool, interval: Duration) -> Result<(), ClientError> {
    let mut out = std::io::stdout().lock();
    loop {
        let tenants = fetch_stats(control)?;
        if json {
            let line = serde_json::to_string(&tenants).map_err(|e| ClientError::BadReply(e.to_string()))?;
            writeln!(out, "{line}")?;
        } else {
            if watch {
                // Home and clear, as top(1) does.
                write!(out, "\x1b[H\x1b[2J")?;
            }
            write!(out, "{}", table(&tenants))?;
        }
        out.flush()?;
        if !watch {
            return Ok(());
        }
        std::thread::sleep(interval);
    }
}

/// `slimtcp-vhost capture`: writes tenant `tenant`'s traffic to `file` as pcap until the
/// daemon ends the capture (its duration or frame count); returns the frames written.
pub fn capture(
    control: &Path,
    tenant: &str,
    file: &Path,
    seconds: Option<f64>,
    count: Option<u64>,
) -> Result<usize, ClientError> {
    let request = Request::Capture { tenant: tenant.to_owned(), seconds, count };
    let (reply, mut rest) = ask(control, &request)?;
    if reply != Reply::Capturing {
        return Err(ClientError::BadReply(format!("{reply:?}")));
    }
    let to_file = |source| ClientError::File { path: file.to_path_buf(), source };
    let mut out = std::io::BufWriter::new(std::fs::File::create(file).map_err(to_file)?);
    std::io::copy(&mut rest, &mut out)?;
    out.flush().map_err(to_file)?;
    Ok(slimtcp::nic::pcap::read_pcap(file)?.len())
}
