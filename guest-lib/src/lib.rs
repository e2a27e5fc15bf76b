//! `slimtcp-guest`: the SlimTCP socket API ([`slimtcp_api::SocketApi`]) for applications
//! whose network stack runs in a `slimtcp-vhost` backend, reached over the virtqueues of a
//! vhost-user **net** device (`docs/protocol.md`).
//!
//! ```text
//!  application thread k
//!   └─ GuestSockets (SocketApi)  ── requests ──▶  TX queue 2k+1 ─▶ backend worker
//!        protocol client          ◀─ messages ──  RX queue 2k   ◀─   (SlimTCP)
//!   └─ QueuePair k: two SplitRings (our own driver) + buffer memory (DmaRegion)
//!        from a Transport: vhost-user (memfd, this process plays the VMM) | pci (inside a VM)
//! ```
//!
//! - [`ring`]: the split-ring driver (descriptor free list, Release/Acquire indices,
//!   EVENT_IDX, out-of-order completions).
//! - [`transport`]: the [`Transport`] abstraction; [`vhost_user`] implements it.
//! - [`GuestSockets`]: the protocol client over one queue pair; one per application thread.
//! - [`GuestDevice`]: one device (connection + memory) handing out a [`GuestSockets`] per pair.
//! - [`capi`]: the C ABI (`slim_*` functions, header `include/slimtcp.h`).
//!
//! ```no_run
//! use slimtcp_api::{Proto, SocketApi};
//! use slimtcp_guest::{GuestConfig, GuestSockets};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut api = GuestSockets::connect_vhost_user("/run/slimtcp.sock", GuestConfig::default())?;
//! let fd = api.socket(Proto::Tcp)?;
//! api.connect(fd, "10.0.0.2:5201".parse()?)?;
//! api.send(fd, b"hello")?;
//! # Ok(()) }
//! ```
//!
//! One thread per queue pair, over one connection:
//!
//! ```no_run
//! use slimtcp_api::{Proto, SocketApi};
//! use slimtcp_guest::{GuestConfig, GuestDevice};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cfg = GuestConfig { queue_pairs: 0, ..GuestConfig::default() }; // all the device has
//! let mut dev = GuestDevice::connect_vhost_user("/run/slimtcp.sock", cfg)?;
//! let threads: Vec<_> = dev
//!     .take_all()?
//!     .into_iter()
//!     .map(|mut api| std::thread::spawn(move || api.socket(Proto::Tcp).map(|_| ())))
//!     .collect();
//! drop(dev); // the pairs keep the connection and the memory
//! for t in threads {
//!     t.join().expect("thread")?;
//! }
//! # Ok(()) }
//! ```

pub mod capi;
mod client;
mod device;
mod error;
pub mod features;
pub mod mem;
pub mod pci;
pub mod ring;
pub mod sockaddr;
pub mod spec;
pub mod transport;
pub mod vhost_user;

pub use client::{GuestSockets, RxBuf, TxBuf, LARGE_TX};
pub use device::GuestDevice;
pub use error::GuestError;
pub use spec::{DeviceSpec, PciAddress};
pub use transport::{QueuePair, Transport};
pub use vhost_user::VhostUserTransport;

/// Settings of a guest-library instance.
#[derive(Debug, Clone)]
pub struct GuestConfig {
    /// Bytes of shared memory (rings, receive buffers, transmit buffers), all queue pairs.
    pub memory_size: usize,
    /// Entries per virtqueue (power of two, at most 1024 as with QEMU).
    pub queue_size: u16,
    /// Queue pairs to set up (0: all the device has).
    pub queue_pairs: usize,
    /// Size of each posted receive buffer (at least `MIN_RX_BUFFER`).
    pub rx_buffer_size: usize,
    /// How long `GuestSockets::new` waits for the backend's hello answer.
    pub hello_timeout: std::time::Duration,
}

impl Default for GuestConfig {
    fn default() -> Self {
        GuestConfig {
            memory_size: 64 << 20,
            queue_size: 1024,
            queue_pairs: 1,
            rx_buffer_size: 8192,
            hello_timeout: std::time::Duration::from_secs(10),
        }
    }
}

impl GuestConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), GuestError> {
        if !self.queue_size.is_power_of_two() || self.queue_size > 1024 || self.queue_size < 4 {
            return Err(GuestError::Config("queue_size must be a power of two in 4..=1024"));
        }
        if self.rx_buffer_size < slimtcp_abi::MIN_RX_BUFFER || self.rx_buffer_size > (1 << 20) {
            return Err(GuestError::Config("rx_buffer_size must be in MIN_RX_BUFFER..=1 MiB"));
        }
        if self.memory_size < (4 << 20) || self.memory_size % 4096 != 0 {
            return Err(GuestError::Config("memory_size must be a multiple of 4096, at least 4 MiB"));
        }
        Ok(())
    }
}
