//! Packet captures of one interface inside a namespace, written with `dumpcap` (tshark's
//! capture engine) as classic pcap.
//!
//! [`Capture::start`] returns only once dumpcap reports "Capturing on" and the file header is on
//! disk, so no packet sent afterwards is missed; [`Capture::stop`] lets the kernel hand dumpcap
//! its last, partly filled capture block ([`BLOCK_RETIRE`]), then sends SIGINT and waits, so the
//! file is complete. Check the result with [`crate::check::check_wellformed`].

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use crate::netns::{describe, ChildGuard, Netns};
use crate::wait::wait_until;

/// How long dumpcap may take to start capturing.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long dumpcap may take to finish the file after SIGINT.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Size of a pcap file header.
const PCAP_HEADER_LEN: u64 = 24;
/// libpcap hands dumpcap a block of the kernel's capture ring (TPACKET_V3) only once it is full
/// or this long after its first packet (dumpcap's read timeout, 250 ms, plus a margin); a block
/// still open when dumpcap stops never reaches the file. A stop waits this long first ...
const BLOCK_RETIRE: Duration = Duration::from_millis(400);
/// ... and then until the file has not grown for this long (dumpcap wrote what it was given) ...
const WRITE_QUIET: Duration = Duration::from_millis(100);
/// ... but no longer than this in all.
const SETTLE_MAX: Duration = Duration::from_secs(3);

/// Why a capture could not be started, stopped or checked.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The capture or check tool could not be started.
    #[error("could not start `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// dumpcap exited before it started capturing.
    #[error("dumpcap exited before capturing on {iface}: {stderr}")]
    Exited {
        /// The interface.
        iface: String,
        /// dumpcap's standard error.
        stderr: String,
    },
    /// dumpcap did not start capturing in time.
    #[error("dumpcap did not start capturing on {iface} within {timeout:?}: {stderr}")]
    StartTimeout {
        /// The interface.
        iface: String,
        /// The limit.
        timeout: Duration,
        /// dumpcap's standard error so far.
        stderr: String,
    },
    /// dumpcap did not exit after SIGINT in time (it was then killed).
    #[error("dumpcap did not stop within {0:?} (killed; the file may be incomplete)")]
    StopTimeout(Duration),
    /// Waiting for or signalling dumpcap failed.
    #[error("could not control dumpcap")]
    Control(#[source] std::io::Error),
    /// The checker (tshark) could not read the file at all.
    #[error("`{command}` failed: {stderr}")]
    CheckFailed {
        /// The command line.
        command: String,
        /// tshark's standard error.
        stderr: String,
    },
}

/// A running capture; stopped (SIGINT, then kill) when dropped.
#[derive(Debug)]
pub struct Capture {
    child: Option<ChildGuard>,
    path: PathBuf,
    stderr: Receiver<String>,
}

impl Capture {
    /// Starts capturing every frame of `iface` (inside `netns`) into the pcap file `path`,
    /// returning once the capture is running.
    pub fn start(netns: &Netns, iface: &str, path: &Path) -> Result<Capture, CaptureError> {
        // A stale file would satisfy the header check below.
        let _ = std::fs::remove_file(path);
        let path_str = path.to_string_lossy();
        let mut cmd = netns.command(&["dumpcap", "-i", iface, "-P", "-w", &path_str]);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child =
            cmd.spawn().map_err(|source| CaptureError::Spawn { command: describe(&cmd), source })?;
        let (tx, rx) = mpsc::channel();
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut guard = ChildGuard::new(child);
        let mut seen = Vec::new();
        let mut exited = false;
        let started = wait_until(Instant::now() + START_TIMEOUT, || {
            seen.extend(rx.try_iter());
            if matches!(guard.child().try_wait(), Ok(Some(_))) {
                exited = true;
                return true;
            }
            seen.iter().any(|l| l.contains("Capturing on"))
                && std::fs::metadata(path).map(|m| m.len() >= PCAP_HEADER_LEN).unwrap_or(false)
        });
        if exited {
            // Let the reader thread drain what dumpcap said before it died.
            wait_until(Instant::now() + Duration::from_secs(1), || loop {
                match rx.try_recv() {
                    Ok(line) => seen.push(line),
                    Err(mpsc::TryRecvError::Empty) => return false,
                    Err(mpsc::TryRecvError::Disconnected) => return true,
                }
            });
            return Err(CaptureError::Exited { iface: iface.to_owned(), stderr: seen.join("\n") });
        }
        if !started {
            return Err(CaptureError::StartTimeout {
                iface: iface.to_owned(),
                timeout: START_TIMEOUT,
                stderr: seen.join("\n"),
            });
        }
        Ok(Capture { child: Some(guard), path: path.to_owned(), stderr: rx })
    }

    /// The pcap file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the capture (SIGINT, so dumpcap completes the file) and returns the file's path.
    pub fn stop(mut self) -> Result<PathBuf, CaptureError> {
        self.finish()?;
        Ok(self.path.clone())
    }

    fn finish(&mut self) -> Result<(), CaptureError> {
        let Some(mut guard) = self.child.take() else {
            return Ok(());
        };
        let pid = libc::pid_t::try_from(guard.id())
            .map_err(|_| CaptureError::Control(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
        if matches!(guard.child().try_wait(), Ok(None)) {
            settle(&self.path);
        }
        if matches!(guard.child().try_wait(), Ok(None)) {
            // SAFETY: `pid` is our own child, not yet reaped (try_wait said it is running), so
            // the id cannot have been reused; kill only sends a signal.
            let rc = unsafe { libc::kill(pid, libc::SIGINT) };
            if rc != 0 {
                return Err(CaptureError::Control(std::io::Error::last_os_error()));
            }
        }
        let mut wait_error = None;
        let exited = wait_until(Instant::now() + STOP_TIMEOUT, || match guard.child().try_wait() {
            Ok(status) => status.is_some(),
            Err(e) => {
                wait_error = Some(e);
                true
            }
        });
        // Dropping the guard kills (if needed) and reaps.
        drop(guard);
        let _ = self.stderr.try_iter().count();
        if let Some(e) = wait_error {
            return Err(CaptureError::Control(e));
        }
        if !exited {
            return Err(CaptureError::StopTimeout(STOP_TIMEOUT));
        }
        Ok(())
    }
}

/// Waits until what the kernel captured so far is in the file at `path` (see [`BLOCK_RETIRE`]).
/// Without it a short exchange (a handshake and a megabyte, a few milliseconds on a veth) can
/// lie whole in the open block and the file stays empty: seen once in a few hundred runs.
fn settle(path: &Path) {
    let start = Instant::now();
    let size = || std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let (mut last, mut since) = (size(), Instant::now());
    wait_until(start + SETTLE_MAX, || {
        let now = size();
        if now != last {
            (last, since) = (now, Instant::now());
        }
        start.elapsed() >= BLOCK_RETIRE && since.elapsed() >= WRITE_QUIET
    });
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("warning: stopping the capture of {} failed: {e}", self.path.display());
        }
    }
}
