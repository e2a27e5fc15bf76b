//! Shared by the DPDK integration tests (one test binary per EAL configuration).
#![allow(dead_code)]

use std::ptr::NonNull;

/// EAL arguments common to every DPDK test: no hugepages, no PCI, no shared config, core 0.
pub const EAL_BASE: &[&str] =
    &["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "0", "--log-level=warning"];

/// The EAL arguments of a test: [`EAL_BASE`] plus `extra`.
pub fn eal_args(extra: &[&str]) -> Vec<String> {
    EAL_BASE.iter().chain(extra).map(|s| s.to_string()).collect()
}

/// A memfd-backed MAP_SHARED region (what a VMM gives a vhost-user backend as guest memory).
pub struct MemfdRegion {
    ptr: NonNull<u8>,
    len: usize,
    fd: libc::c_int,
}

// SAFETY: a MemfdRegion owns its mapping and descriptor; the bytes are plain shared memory.
// Writing needs `&mut` (`bytes_mut`); loans only read, so moving or sharing the handle between
// threads is sound.
unsafe impl Send for MemfdRegion {}
// SAFETY: as above: `&MemfdRegion` gives no way to write.
unsafe impl Sync for MemfdRegion {}

impl MemfdRegion {
    pub fn new(len: usize) -> Self {
        // SAFETY: plain syscalls with valid arguments; results checked.
        unsafe {
            let fd = libc::memfd_create(c"slimt-guest-mem".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
            assert_eq!(libc::ftruncate(fd, len as libc::off_t), 0, "ftruncate");
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
            MemfdRegion { ptr: NonNull::new(p.cast()).expect("mmap never returns NULL on success"), len, fd }
        }
    }

    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Writable view (the test plays the guest filling its buffers).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is ours, len bytes, alive while self is.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for MemfdRegion {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping and closing our own fd.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
            libc::close(self.fd);
        }
    }
}

/// RFC 1071 one's-complement sum over `data`, folded, starting from `initial`.
pub fn ones_sum(data: &[u8], initial: u32) -> u32 {
    let mut sum = initial;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

pub fn checksum(data: &[u8]) -> u16 {
    !(ones_sum(data, 0) as u16)
}

pub const ETH_LEN: usize = 14;
pub const IPV4_LEN: usize = 20;
pub const UDP_LEN: usize = 8;
pub const UDP_HEADERS: usize = ETH_LEN + IPV4_LEN + UDP_LEN;

/// How the UDP/IPv4 checksums of a built frame are filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksums {
    /// Computed here over headers and payload.
    Software,
    /// IPv4 checksum left 0, UDP checksum holds the pseudo-header sum (the NIC finishes both).
    Offloaded,
}

/// Writes Ethernet + IPv4 + UDP headers into `hdr` (UDP_HEADERS bytes) for `payload`.
#[allow(clippy::too_many_arguments)]
pub fn write_udp_headers(
    hdr: &mut [u8],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    payload: &[u8],
    sums: Checksums,
) {
    let udp_len = (UDP_LEN + payload.len()) as u16;
    hdr[0..6].copy_from_slice(&dst_mac);
    hdr[6..12].copy_from_slice(&src_mac);
    hdr[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut hdr[ETH_LEN..ETH_LEN + IPV4_LEN];
    ip.copy_from_slice(&[0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    ip[2..4].copy_from_slice(&(IPV4_LEN as u16 + udp_len).to_be_bytes());
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    if sums == Checksums::Software {
        let c = checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let mut pseudo = Vec::with_capacity(12);
    pseudo.extend_from_slice(&src);
    pseudo.extend_from_slice(&dst);
    pseudo.extend_from_slice(&[0, 17]);
    pseudo.extend_from_slice(&udp_len.to_be_bytes());
    let udp = &mut hdr[ETH_LEN + IPV4_LEN..UDP_HEADERS];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
    let c = match sums {
        Checksums::Software => {
            let s = ones_sum(payload, ones_sum(udp, ones_sum(&pseudo, 0)));
            match !(s as u16) {
                0 => 0xffff,
                c => c,
            }
        }
        // The pseudo-header sum, not complemented (what NICs expect with L4 checksum offload).
        Checksums::Offloaded => ones_sum(&pseudo, 0) as u16,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
}

/// An ARP request (42 bytes) from `src_mac`/`src_ip` for `target_ip`, broadcast.
pub fn arp_request(src_mac: [u8; 6], src_ip: [u8; 4], target_ip: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&src_ip);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target_ip);
    f
}

/// Environment variable telling a child test process which role to play.
pub const CHILD_ENV: &str = "SLIMT_DPDK_CHILD";

/// True in a child process started by [`run_child`] for `role`.
pub fn is_child(role: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == role)
}

/// Runs the (ignored) test `test_name` of this test binary in a child process with
/// `CHILD_ENV=role`, inside network namespace `netns` when given; returns its output after
/// echoing it. DPDK's EAL starts once per process, hence the child.
pub fn run_child(test_name: &str, role: &str, netns: Option<&str>) -> std::process::Output {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = std::process::Command::new("ip");
            c.args(["netns", "exec", ns]).arg(&exe);
            c
        }
        None => std::process::Command::new(&exe),
    };
    cmd.args([test_name, "--exact", "--nocapture", "--include-ignored", "--test-threads=1"])
        .env(CHILD_ENV, role);
    let out = cmd.output().expect("spawn child test process");
    eprintln!("--- child {role} stdout ---\n{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("--- child {role} stderr ---\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The lines of a child's output that start with `prefix` (prefix removed).
pub fn tagged_lines(out: &std::process::Output, prefix: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.lines().filter_map(|l| l.strip_prefix(prefix)).map(str::to_string).collect()
}

/// A slice of a [`MemfdRegion`] loaned to the stack as a zero-copy send buffer (the test plays a
/// guest whose memory the backend sends from).
#[derive(Debug)]
pub struct RegionLoan {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: a RegionLoan is an address range in a shared mapping that outlives every loan (the
// tests drop the region last); it is only read, from whichever thread holds the loan.
unsafe impl Send for RegionLoan {}

impl RegionLoan {
    /// `len` bytes at `offset` of `region`.
    pub fn new(region: &MemfdRegion, offset: usize, len: usize) -> Self {
        assert!(offset + len <= region.len(), "loan inside the region");
        // SAFETY: offset + len <= region.len(), so the pointer stays inside the mapping.
        let addr = unsafe { region.as_mut_ptr().add(offset) };
        RegionLoan { addr: NonNull::new(addr).expect("mapping is non-null"), len }
    }
}

impl slimtcp::tcp::TxPayload for RegionLoan {
    fn len(&self) -> usize {
        self.len
    }

    fn copy_to(&self, offset: usize, dst: &mut [u8]) -> usize {
        slimtcp::tcp::copy_from_slice_at(self.bytes(), offset, dst)
    }

    fn as_slice(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }

    fn external_addr(&self) -> Option<NonNull<u8>> {
        Some(self.addr)
    }
}

impl RegionLoan {
    fn bytes(&self) -> &[u8] {
        // SAFETY: the range lies in a live mapping (see `new`) that nobody writes while loaned.
        unsafe { std::slice::from_raw_parts(self.addr.as_ptr(), self.len) }
    }
}

/// The stack side of a transfer from external memory: loans `region[..total]` in `chunk`-byte
/// loans on `h`, half-closes after the last, counts loans handed back. `step` returns true when
/// every loan came back and the connection is closed (TIME-WAIT or CLOSED).
#[derive(Debug)]
pub struct LoanSender {
    h: slimtcp::iface::SocketHandle,
    next: usize,
    total: usize,
    chunk: usize,
    loaned: usize,
    returned: usize,
    fin: bool,
    back: Vec<Box<dyn slimtcp::tcp::TxPayload>>,
}

impl LoanSender {
    pub fn new(h: slimtcp::iface::SocketHandle, total: usize, chunk: usize) -> Self {
        LoanSender { h, next: 0, total, chunk, loaned: 0, returned: 0, fin: false, back: Vec::new() }
    }

    pub fn loaned(&self) -> usize {
        self.loaned
    }

    pub fn returned(&self) -> usize {
        self.returned
    }

    /// One round; `Err` on a connection failure.
    pub fn step<N: slimtcp::nic::Nic>(
        &mut self,
        iface: &mut slimtcp::iface::Interface<N>,
        region: &MemfdRegion,
    ) -> Result<bool, String> {
        use slimtcp::tcp::State;
        let info = iface.tcp_info(self.h).map_err(|e| format!("tcp_info: {e}"))?;
        if let Some(e) = info.error {
            return Err(format!("connection failed: {e}"));
        }
        if matches!(info.state, State::SynSent | State::SynReceived) {
            return Ok(false);
        }
        while self.next < self.total {
            let len = self.chunk.min(self.total - self.next);
            let loan = Box::new(RegionLoan::new(region, self.next, len));
            match iface.tcp_send_loaned(self.h, loan).map_err(|e| format!("send_loaned: {e}"))? {
                Ok(()) => {
                    self.next += len;
                    self.loaned += 1;
                }
                Err(_) => break,
            }
        }
        iface.tcp_take_completed(self.h, &mut self.back).map_err(|e| format!("take_completed: {e}"))?;
        self.returned += self.back.drain(..).count();
        if self.next == self.total && !self.fin {
            iface.tcp_shutdown(self.h).map_err(|e| format!("shutdown: {e}"))?;
            self.fin = true;
        }
        Ok(self.fin
            && self.returned == self.loaned
            && matches!(info.state, State::TimeWait | State::Closed | State::FinWait2))
    }
}
