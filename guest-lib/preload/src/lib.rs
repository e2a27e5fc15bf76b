//! `libslimtcp_preload.so`: SlimTCP for applications that were never written for it.
//!
//! ```text
//! LD_PRELOAD=target/release/libslimtcp_preload.so SLIMTCP_DEVICE=vhost-user:/run/slimtcp/t0.sock iperf3 -c 10.0.0.1
//! ```
//!
//! The library defines the C library's socket calls; the dynamic linker binds the
//! application's calls to them first. `AF_INET` TCP and UDP sockets are served by the guest
//! library ([`slimtcp_guest`]) over the device named by `SLIMTCP_DEVICE` (vhost-user on the
//! host, `pci` inside a VM); every other descriptor goes to the C library unchanged.
//!
//! - [`config`]: the environment variables.
//! - [`device`]: attaching, queue pairs per thread, `fork` and exit.
//! - [`socket`]: a socket's number (an eventfd) and its state; where it goes (kernel or
//!   SlimTCP) is decided at `bind`/`connect`.
//! - [`net`], [`io`], [`options`], [`poll`], [`epoll`]: the calls' meaning.
//! - [`wait`]: blocking without holding a queue pair.
//! - [`closing`]: `close` finishing connections in the background, as Linux does.
//! - `calls`: the exported C symbols (absent from unit-test builds).
//! - [`real`]: the C library's own functions.

pub mod addr;
#[cfg(not(test))]
mod calls;
pub mod closing;
pub mod config;
pub mod device;
pub mod epoll;
pub mod errno;
pub mod io;
pub mod logger;
pub mod net;
pub mod options;
pub mod poll;
pub mod real;
pub mod socket;
pub mod table;
pub mod wait;
