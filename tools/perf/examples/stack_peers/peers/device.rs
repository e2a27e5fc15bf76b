//! smoltcp's `phy::Device` over one end of a memwire link: the very link SlimTCP runs on.
//!
//! Frames are `PacketBuf`s moved through memwire's queues as for SlimTCP. Like SlimTCP's
//! interface, the device talks to the link in bursts: it takes up to [`BURST`] frames per
//! `MemwireNic::receive` and hands smoltcp one at a time, and it collects transmitted frames and
//! passes them to `MemwireNic::transmit` [`BURST`] at a time (and on [`MemwireDevice::flush`]
//! after each `Interface::poll`). Buffers are handled as for SlimTCP's interface: transmit
//! buffers come from `MemwireNic::alloc_tx`, received ones are dropped once read.

use slimtcp::nic::memwire::MemwireNic;
use slimtcp::nic::{Nic, PacketBuf};
use smoltcp::phy::{self, DeviceCapabilities, Medium};

/// Frames per link call, SlimTCP's default burst.
pub const BURST: usize = 32;
/// Ethernet header bytes (smoltcp's MTU for Ethernet counts them).
const ETHERNET_HEADER: usize = 14;
/// IPv4 + TCP header bytes without options.
const IP_TCP_HEADERS: usize = 40;

/// One end of the link as a smoltcp device.
#[derive(Debug)]
pub struct MemwireDevice {
    nic: MemwireNic,
    /// The time passed to the link (memwire without faults delivers at once).
    now: slimtcp::time::Instant,
    /// Received frames not yet handed to smoltcp, in arrival order (taken from the back of a
    /// reversed burst).
    rx: Vec<PacketBuf>,
    /// Frames smoltcp transmitted, not yet given to the link.
    tx: Vec<PacketBuf>,
    /// The IP MTU that makes smoltcp's MSS equal the requested one.
    mtu: usize,
    /// A link error, reported by [`flush`](Self::flush).
    error: Option<slimtcp::nic::NicError>,
}

impl MemwireDevice {
    /// A device over `nic` whose TCP segments carry at most `mss` payload bytes.
    pub fn new(nic: MemwireNic, mss: u16) -> Self {
        MemwireDevice {
            nic,
            now: slimtcp::time::Instant::ZERO,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
            mtu: usize::from(mss) + IP_TCP_HEADERS + ETHERNET_HEADER,
            error: None,
        }
    }

    /// The link end.
    pub fn nic(&self) -> &MemwireNic {
        &self.nic
    }

    /// Sets the time passed to the link.
    pub fn set_now(&mut self, now: slimtcp::time::Instant) {
        self.now = now;
    }

    /// Gives the link the frames transmitted since the last call.
    pub fn flush(&mut self) -> Result<(), slimtcp::nic::NicError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        while !self.tx.is_empty() {
            if self.nic.transmit(self.now, &mut self.tx)? == 0 {
                // The link is full: keep the rest for the next flush (back-pressure).
                break;
            }
        }
        Ok(())
    }

    fn refill(&mut self) {
        if !self.rx.is_empty() {
            return;
        }
        match self.nic.receive(self.now, &mut self.rx, BURST) {
            Ok(_) => self.rx.reverse(),
            Err(e) => self.error = Some(e),
        }
    }
}

/// A received frame.
#[derive(Debug)]
pub struct RxToken {
    frame: PacketBuf,
}

/// Room for one frame to transmit.
#[derive(Debug)]
pub struct TxToken<'a> {
    nic: &'a mut MemwireNic,
    now: slimtcp::time::Instant,
    tx: &'a mut Vec<PacketBuf>,
    error: &'a mut Option<slimtcp::nic::NicError>,
}

impl phy::Device for MemwireDevice {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _timestamp: smoltcp::time::Instant) -> Option<(RxToken, TxToken<'_>)> {
        self.refill();
        let frame = self.rx.pop()?;
        Some((
            RxToken { frame },
            TxToken { nic: &mut self.nic, now: self.now, tx: &mut self.tx, error: &mut self.error },
        ))
    }

    fn transmit(&mut self, _timestamp: smoltcp::time::Instant) -> Option<TxToken<'_>> {
        Some(TxToken { nic: &mut self.nic, now: self.now, tx: &mut self.tx, error: &mut self.error })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = self.mtu;
        caps.max_burst_size = Some(BURST);
        if super::checksum_offload() {
            // The link fills and verifies checksums (memwire's offload): smoltcp skips both.
            caps.checksum = smoltcp::phy::ChecksumCapabilities::ignored();
        }
        caps
    }
}

impl phy::RxToken for RxToken {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        f(self.frame.as_slice())
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut frame = match self.nic.alloc_tx() {
            Ok(b) => b,
            Err(e) => {
                *self.error = Some(e);
                PacketBuf::new_tx()
            }
        };
        if frame.tailroom() < len {
            frame = PacketBuf::with_headroom(len, 0);
        }
        let r = match frame.append(len) {
            Some(bytes) => f(bytes),
            None => unreachable!("the buffer was sized for {len} bytes"),
        };
        self.tx.push(frame);
        if self.tx.len() >= BURST {
            if let Err(e) = self.nic.transmit(self.now, self.tx) {
                *self.error = Some(e);
            }
        }
        r
    }
}
