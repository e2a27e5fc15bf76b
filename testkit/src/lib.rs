//! Test helpers shared by the integration tests of every SlimTCP crate.
//!
//! - [`netns`]: throw-away network namespaces (`slimt-*`), threads and commands inside them.
//! - [`skip`]: [`require_netns!`] for tests that need root and `/dev/net/tun`.
//! - [`capture`]: packet captures inside a namespace; [`check`]: tshark well-formedness checks.
//! - [`data`]: deterministic byte streams and SHA-256 digests; [`wait`]: polling with a deadline.
//! - [`linux_peer`]: Linux TCP senders and receivers running inside a namespace.
//! - [`lossnet`]: a router namespace that drops forwarded frames with nftables (random loss,
//!   burst drops), with Linux peers behind it.
//!
//! Every name this crate creates starts with [`PREFIX`], so `scripts/cleanup-netns.sh` can remove
//! leftovers of crashed runs.

pub mod capture;
pub mod check;
pub mod data;
pub mod hostile_vmm;
pub mod linux_peer;
pub mod lossnet;
pub mod netns;
pub mod skip;
pub mod wait;

pub use netns::Netns;
pub use skip::{is_root_with_netns, skip_unless_netns};
pub use wait::{wait_for, wait_until};

/// The prefix of every namespace and interface name the tests create.
pub const PREFIX: &str = "slimt";
