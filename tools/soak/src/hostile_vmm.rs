//! A hostile VMM on its own tenant ("c") of the same process, attacking connection after
//! connection for the whole soak, while tenants a and b carry data. Each round runs these
//! attacks (the scenarios of tests/tests/hostile_vmm.rs and tenants_isolated.rs), each on a new
//! connection, and checks that the backend ends that connection (and only it):
//!
//! - `big-region`: a 1 GiB memory region over a 4 KiB memfd, rings in the unbacked part;
//! - `early-enables`: SET_VRING_ENABLE before SET_FEATURES for ever more rings;
//! - `slots`: ADD_MEM_REG one region past the announced limit;
//! - `truncate`: a valid memory table, rings polled by the worker, then the memfd truncated to
//!   nothing under the backend's mapping (SIGBUS, recovered);
//! - `partial`: half a message carrying 8 descriptors, never completed (closed after the relay's
//!   timeout, and the descriptors with it);
//! - `bad-chains`: a properly attached guest whose transmit queue gets only bad chains for a
//!   while (every chain must come back);
//!
//! then a well-behaved guest attaches and says hello (the tenant still serves). Every
//! connection costs the backend a daemon, threads, descriptors and mappings: thousands of them
//! over a soak make any per-connection leak visible in the process's fds, threads and RSS.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use slimtcp_guest::ring::Segment;
use slimtcp_guest::transport::Transport;
use slimtcp_guest::{GuestConfig, GuestSockets, VhostUserTransport};
use slimtcp_testkit::hostile_vmm::{
    closed_within, memfd, message, negotiate, peer_closed, pipe, region, start_rings,
};
use slimtcp_vhost::relay::{MAX_DEFERRED_RINGS, MAX_MEM_REGIONS};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::VhostBackend;
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::error::SoakError;

/// How long the backend may take to end an attacked connection.
const CLOSE_WAIT: Duration = Duration::from_secs(15);
/// How long the bad-chains guest floods.
const FLOOD: Duration = Duration::from_millis(500);
/// Findings kept as text.
const FINDINGS_KEPT: usize = 8;

/// The attacks, in the order a round runs them.
pub const ATTACKS: [&str; 6] = ["big-region", "early-enables", "slots", "truncate", "partial", "bad-chains"];

/// Counters of the hostile VMM.
#[derive(Debug, Default)]
pub struct VmmStats {
    /// Rounds completed.
    pub rounds: AtomicU64,
    /// Attacks run, per [`ATTACKS`] entry.
    pub attacks: [AtomicU64; 6],
    /// Attacks whose connection the backend ended as expected, per entry.
    pub refused: [AtomicU64; 6],
    /// Bad chains sent and given back by the bad-chains guest.
    pub chains_sent: AtomicU64,
    /// See `chains_sent`.
    pub chains_returned: AtomicU64,
    /// Good guests that attached after a round.
    pub good_guests: AtomicU64,
    /// What went wrong (an attacked connection left open, a good guest refused).
    pub findings: Mutex<Vec<String>>,
    /// Findings in all.
    pub finding_count: AtomicU64,
}

impl VmmStats {
    fn finding(&self, text: String) {
        self.finding_count.fetch_add(1, Ordering::Relaxed);
        let mut f = self.findings.lock().unwrap_or_else(PoisonError::into_inner);
        if f.len() < FINDINGS_KEPT {
            f.push(text);
        }
    }

    /// The kept findings.
    pub fn findings(&self) -> Vec<String> {
        self.findings.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// Attacks `socket` round after round until `stop`.
pub fn spawn(
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    stats: Arc<VmmStats>,
) -> Result<JoinHandle<()>, SoakError> {
    let name = "soak-c-hostile-vmm".to_string();
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            while !stop.load(Ordering::Acquire) {
                for (i, attack) in ATTACKS.iter().enumerate() {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    if !selected(attack) {
                        continue;
                    }
                    stats.attacks[i].fetch_add(1, Ordering::Relaxed);
                    match run_attack(&socket, attack, &stats) {
                        Ok(()) => {
                            stats.refused[i].fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => stats.finding(format!("tenant c, {attack}: {e}")),
                    }
                }
                match good_guest(&socket) {
                    Ok(()) => {
                        stats.good_guests.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        stats.finding(format!("tenant c: a good guest could not attach after a round: {e}"))
                    }
                }
                stats.rounds.fetch_add(1, Ordering::Relaxed);
            }
        })
        .map_err(|source| SoakError::Spawn { name, source })
}

/// Whether `SOAK_ATTACKS` (a comma-separated list of [`ATTACKS`]; unset: all) selects `attack`:
/// for finding which attack a leak comes from.
fn selected(attack: &str) -> bool {
    std::env::var("SOAK_ATTACKS").map_or(true, |list| list.split(',').any(|a| a.trim() == attack))
}

fn run_attack(socket: &Path, attack: &str, stats: &VmmStats) -> Result<(), String> {
    match attack {
        "big-region" => big_region(socket),
        "early-enables" => early_enables(socket),
        "slots" => slots(socket),
        "truncate" => truncate(socket),
        "partial" => partial(socket),
        _ => bad_chains(socket, stats),
    }
}

fn frontend(socket: &Path) -> Result<Frontend, String> {
    let deadline = Instant::now() + CLOSE_WAIT;
    loop {
        match Frontend::connect(socket, 3) {
            Ok(f) => return Ok(f),
            Err(e) if Instant::now() >= deadline => return Err(format!("cannot connect: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn raw(socket: &Path) -> Result<UnixStream, String> {
    let deadline = Instant::now() + CLOSE_WAIT;
    let s = loop {
        match UnixStream::connect(socket) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => return Err(format!("cannot connect: {e}")),
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    s.set_read_timeout(Some(CLOSE_WAIT)).map_err(|e| format!("read timeout: {e}"))?;
    Ok(s)
}

fn eventfds() -> Result<Vec<EventFd>, String> {
    (0..4).map(|_| EventFd::new(0).map_err(|e| format!("eventfd: {e}"))).collect()
}

fn expect_closed(f: &mut Frontend) -> Result<(), String> {
    if closed_within(f, CLOSE_WAIT) {
        Ok(())
    } else {
        Err(format!("the connection was still served after {CLOSE_WAIT:?}"))
    }
}

fn big_region(socket: &Path) -> Result<(), String> {
    let mut f = frontend(socket)?;
    negotiate(&mut f).map_err(|e| format!("negotiating: {e}"))?;
    let file = memfd(4096).map_err(|e| format!("memfd: {e}"))?;
    let _ = f.set_mem_table(&[region(0, 1 << 30, &file)]);
    let events = eventfds()?;
    let _ = start_rings(&mut f, &events);
    expect_closed(&mut f)
}

fn truncate(socket: &Path) -> Result<(), String> {
    let mut f = frontend(socket)?;
    negotiate(&mut f).map_err(|e| format!("negotiating: {e}"))?;
    let file = memfd(1 << 20).map_err(|e| format!("memfd: {e}"))?;
    f.set_mem_table(&[region(0, 1 << 20, &file)])
        .map_err(|e| format!("a valid memory table was refused: {e}"))?;
    let events = eventfds()?;
    start_rings(&mut f, &events).map_err(|e| format!("valid rings were refused: {e}"))?;
    if closed_within(&mut f, Duration::from_millis(200)) {
        return Err("a valid set-up was not served".into());
    }
    file.set_len(0).map_err(|e| format!("truncating: {e}"))?;
    expect_closed(&mut f)
}

fn slots(socket: &Path) -> Result<(), String> {
    let mut f = frontend(socket)?;
    negotiate(&mut f).map_err(|e| format!("negotiating: {e}"))?;
    let file = memfd(4096).map_err(|e| format!("memfd: {e}"))?;
    for i in 0..MAX_MEM_REGIONS as u64 {
        f.add_mem_region(&region(i * 0x10_0000, 4096, &file))
            .map_err(|e| format!("region {i} refused: {e}"))?;
    }
    let _ = f.add_mem_region(&region(1 << 40, 4096, &file));
    expect_closed(&mut f)
}

fn early_enables(socket: &Path) -> Result<(), String> {
    const SET_VRING_ENABLE: u32 = 18;
    let mut s = raw(socket)?;
    for ring in 0..(MAX_DEFERRED_RINGS as u32 + 1000) {
        let body = [ring.to_le_bytes(), 1u32.to_le_bytes()].concat();
        if s.write_all(&message(SET_VRING_ENABLE, 1, &body)).is_err() {
            break;
        }
    }
    if peer_closed(&mut s) {
        Ok(())
    } else {
        Err("the connection was not closed".into())
    }
}

fn partial(socket: &Path) -> Result<(), String> {
    const GET_FEATURES: u32 = 1;
    let mut s = raw(socket)?;
    let (read_end, write_end) = pipe().map_err(|e| format!("pipe2: {e}"))?;
    let mut m = message(GET_FEATURES, 1, &[0u8; 8]);
    m.truncate(16);
    let fds = [write_end.as_raw_fd(); 8];
    s.send_with_fds(&[&m[..]], &fds).map_err(|e| format!("sendmsg: {e}"))?;
    drop(write_end);
    if !peer_closed(&mut s) {
        return Err("the connection was not closed".into());
    }
    // Every copy of the write end the backend received must be closed with the connection.
    let mut r = File::from(read_end);
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut b = [0u8; 1];
    match r.read(&mut b) {
        Ok(0) => Ok(()),
        other => Err(format!("the descriptors it carried are still open ({other:?})")),
    }
}

fn bad_chains(socket: &Path, stats: &VmmStats) -> Result<(), String> {
    let cfg = GuestConfig { memory_size: 4 << 20, queue_size: 256, ..GuestConfig::default() };
    let mut t = VhostUserTransport::connect(socket, &cfg).map_err(|e| format!("attach: {e}"))?;
    let mut qp = t.take_queue_pair(0).map_err(|e| format!("queue pair: {e}"))?;
    let (base, size) = (qp.memory.gpa(), qp.memory.len() as u64);
    let seg = |gpa: u64, len: u32, writable: bool| Segment { gpa, len, writable };
    let chains = [
        vec![seg(base + size + 4096, 64, false)],
        vec![seg(u64::MAX - 16, 64, false)],
        vec![seg(base, 64, true)],
        vec![seg(base + 4096, 48, false)],
        vec![seg(base + 12288, 48, false), seg(base + size * 4, 1 << 20, false)],
    ];
    let (mut sent, mut back) = (0u64, 0u64);
    let until = Instant::now() + FLOOD;
    while Instant::now() < until {
        for c in &chains {
            if qp.tx.ring.add(c).is_ok() {
                sent += 1;
            }
        }
        qp.tx.flush().map_err(|e| format!("kick: {e}"))?;
        while let Ok(Some(_)) = qp.tx.ring.pop_used() {
            back += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let deadline = Instant::now() + CLOSE_WAIT;
    while back < sent && Instant::now() < deadline {
        while let Ok(Some(_)) = qp.tx.ring.pop_used() {
            back += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    stats.chains_sent.fetch_add(sent, Ordering::Relaxed);
    stats.chains_returned.fetch_add(back, Ordering::Relaxed);
    if back == sent {
        Ok(())
    } else {
        Err(format!("{back} of {sent} bad chains came back"))
    }
}

fn good_guest(socket: &Path) -> Result<(), String> {
    let deadline = Instant::now() + CLOSE_WAIT;
    let cfg = GuestConfig { memory_size: 4 << 20, queue_size: 256, ..GuestConfig::default() };
    loop {
        match GuestSockets::connect_vhost_user(socket, cfg.clone()) {
            Ok(g) => {
                drop(g);
                return Ok(());
            }
            // The tenant may still be ending the last attacked connection.
            Err(e) if Instant::now() >= deadline => return Err(e.to_string()),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}
