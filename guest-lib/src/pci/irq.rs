//! Notifications both ways on a PCI function: the driver's kick is a store of the queue index
//! to the queue's notify address; the device's interrupt arrives (without MSI-X, as under
//! uio_pci_generic) as legacy INTx, which `/dev/uioN` turns into a readable counter.
//!
//! uio_pci_generic masks INTx in its handler (the command register's Interrupt Disable bit)
//! and has no `irqcontrol`: the driver unmasks by clearing that bit through the configuration
//! space file, as the kernel's UIO documentation describes.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::regs::Window;
use crate::transport::{Interrupt, Notify};

/// The kick of one queue: its index written to its notify address.
#[derive(Debug)]
pub struct PciNotify {
    /// The notify address (two bytes).
    pub window: Window,
    /// The queue index.
    pub queue: u16,
}

impl Notify for PciNotify {
    fn notify(&self) -> std::io::Result<()> {
        self.window.write16(0, self.queue);
        Ok(())
    }
}

/// High byte of the PCI command register, and its Interrupt Disable bit (bit 10 overall).
const PCI_COMMAND_HIGH: u64 = 0x05;
const INTX_DISABLE_HIGH: u8 = 1 << 2;

/// The function's INTx interrupt through uio, shared by every queue (one line for all).
#[derive(Debug)]
pub struct UioInterrupt {
    uio: Mutex<File>,
    /// The function's configuration space (sysfs `config`, read-write).
    config: File,
    /// Reading the ISR status byte acknowledges the interrupt (the line drops).
    isr: Window,
}

impl UioInterrupt {
    /// The interrupt of the function whose uio node is `uio` and configuration file `config`.
    pub fn new(uio: File, config: File, isr: Window) -> Arc<UioInterrupt> {
        Arc::new(UioInterrupt { uio: Mutex::new(uio), config, isr })
    }

    /// Clears the Interrupt Disable bit uio_pci_generic's handler set.
    fn unmask(&self) -> std::io::Result<()> {
        let mut high = [0u8; 1];
        self.config.read_exact_at(&mut high, PCI_COMMAND_HIGH)?;
        if high[0] & INTX_DISABLE_HIGH != 0 {
            self.config.write_all_at(&[high[0] & !INTX_DISABLE_HIGH], PCI_COMMAND_HIGH)?;
        }
        Ok(())
    }
}

/// One queue's view of the shared interrupt.
#[derive(Debug)]
pub struct QueueInterrupt(pub Arc<UioInterrupt>);

impl Interrupt for QueueInterrupt {
    /// Unmasks INTx, then sleeps until the interrupt counter moves or `timeout` passes. Another
    /// thread's queue may take the wake-up: waits are short (the caller re-checks its ring), so
    /// that costs at most one timeout.
    fn wait(&self, timeout: Duration) -> std::io::Result<()> {
        let irq = &self.0;
        let _ = irq.isr.read8(0);
        let mut uio = irq.uio.lock().unwrap_or_else(PoisonError::into_inner);
        irq.unmask()?;
        let mut pfd =
            libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&*uio), events: libc::POLLIN, revents: 0 };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc > 0 {
            let mut count = [0u8; 4];
            uio.read_exact(&mut count)?;
            log::trace!("INTx: interrupt {}", u32::from_ne_bytes(count));
        }
        Ok(())
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        let uio = self.0.uio.lock().unwrap_or_else(PoisonError::into_inner);
        Some(std::os::fd::AsRawFd::as_raw_fd(&*uio))
    }

    fn prepare(&self) -> std::io::Result<()> {
        let _ = self.0.isr.read8(0);
        self.0.unmask()
    }

    /// Reads the interrupt count if one is there (a read of `/dev/uioN` blocks otherwise).
    fn acknowledge(&self) {
        let mut uio = self.0.uio.lock().unwrap_or_else(PoisonError::into_inner);
        let mut pfd =
            libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&*uio), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the duration of the call; a zero timeout never blocks.
        if unsafe { libc::poll(&mut pfd, 1, 0) } > 0 {
            let mut count = [0u8; 4];
            let _ = uio.read_exact(&mut count);
        }
    }
}
