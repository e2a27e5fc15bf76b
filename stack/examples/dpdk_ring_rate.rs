//! Frames per second through two DPDK `net_ring` ports wired back to back, on one core: the
//! sender allocates, fills and transmits a burst, the receiver receives it and gives it back
//! as the stack does (`Nic::release`: one bulk free).
//!
//! `cargo run --release -p slimtcp --features dpdk --example dpdk_ring_rate [seconds] [frames]`
//!
//! With `frames`, each of the three runs ends once that many frames arrived (a whole round of
//! 256 bursts past it) instead of after `seconds`: the same work every time, for counting
//! instructions under callgrind.

use std::time::{Duration, Instant as StdInstant};

use slimtcp::nic::dpdk::{create_ring_pair, DpdkNic, Eal, ExtMemRegion, PortConfig};
use slimtcp::nic::{ExternalFrame, ExternalPayload, Nic};
use slimtcp::time::Instant;

const EAL_ARGS: &[&str] =
    &["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "0", "--log-level=warning"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2);
    let run_for = Duration::from_secs(secs);
    let frames_wanted: Option<u64> = std::env::args().nth(2).and_then(|s| s.parse().ok());
    let going = |start: StdInstant, received: u64| match frames_wanted {
        Some(n) => received < n,
        None => start.elapsed() < run_for,
    };
    let eal = Eal::init(EAL_ARGS)?;
    let (na, nb) = create_ring_pair(eal, "rate_a", "rate_b", 1024)?;
    let mut a = DpdkNic::open(eal, &PortConfig::new(na))?.remove(0);
    let mut b = DpdkNic::open(eal, &PortConfig::new(nb))?.remove(0);
    let burst = a.capabilities().max_burst;

    for &len in &[64usize, 1514] {
        let (mut frames, mut rx) = (Vec::with_capacity(burst), Vec::with_capacity(burst));
        let (mut sent, mut received) = (0u64, 0u64);
        let start = StdInstant::now();
        while going(start, received) {
            for _ in 0..256 {
                for _ in 0..burst {
                    let mut f = a.alloc_tx()?;
                    if let Some(d) = f.append(len) {
                        d[..14].fill(0xee);
                    }
                    frames.push(f);
                }
                sent += a.transmit(Instant::ZERO, &mut frames)? as u64;
                frames.clear();
                received += b.receive(Instant::ZERO, &mut rx, burst)? as u64;
                b.release(&mut rx);
            }
        }
        let el = start.elapsed().as_secs_f64();
        println!(
            "net_ring, {len:4}-byte frames, alloc+fill+tx+rx+free, burst {burst}: {:.2} Mframes/s ({sent} sent, {received} received, {:.1} Gbit/s)",
            received as f64 / el / 1e6,
            received as f64 * len as f64 * 8.0 / el / 1e9
        );
    }

    // External payloads: 1400-byte payload in registered memory behind 42 bytes of headers.
    let len = 4 << 20;
    // SAFETY: anonymous private mapping, checked below, unmapped never (process lifetime).
    let mem = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if mem == libc::MAP_FAILED {
        return Err("mmap failed".into());
    }
    let base = mem.cast::<u8>();
    // SAFETY: the mapping stays for the process lifetime; payloads are never modified.
    let region = unsafe { ExtMemRegion::register(eal, base, len, 4096)? };
    a.attach_region(&region)?;
    let (mut frames, mut rx, mut done) = (Vec::with_capacity(burst), Vec::with_capacity(burst), Vec::new());
    let (mut received, mut completed) = (0u64, 0u64);
    let mut token = 0u64;
    let start = StdInstant::now();
    while going(start, received) {
        for _ in 0..256 {
            for _ in 0..burst {
                let mut headers = a.alloc_tx()?;
                if let Some(h) = headers.append(42) {
                    h.fill(0xee);
                }
                let off = (token as usize % 2048) * 2048;
                // SAFETY: inside the mapping, which lives for the process and is never written.
                let payload = unsafe { ExternalPayload::new(base.add(off), 1400, token) }.ok_or("null")?;
                token += 1;
                frames.push(ExternalFrame { headers, payload });
            }
            a.transmit_external(Instant::ZERO, &mut frames)?;
            frames.clear();
            received += b.receive_mbufs(&mut rx, burst) as u64;
            rx.clear();
            completed += a.poll_tx_completions(&mut done) as u64;
            done.clear();
        }
    }
    let el = start.elapsed().as_secs_f64();
    println!(
        "net_ring, 42-byte headers + 1400-byte external payload (2 segments), zero-copy tx+rx+free+completion: {:.2} Mframes/s ({received} received, {completed} completions, copied bytes {})",
        received as f64 / el / 1e6,
        a.copied_bytes()
    );
    Ok(())
}
