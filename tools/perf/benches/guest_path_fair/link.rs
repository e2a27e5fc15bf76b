//! The one link both paths use: a memwire pair, the stack under test on one end
//! (10.0.0.1), the peer on the other (10.0.0.2), as deep as slimtcp-perf's memwire link
//! (`slimtcp_perf::host::MEMWIRE_CAPACITY`).

use std::net::Ipv4Addr;

use slimtcp::iface::Interface;
use slimtcp::nic::memwire::{self, LinkConfig, MemwireError, MemwireNic};
use slimtcp::sim::default_configs;
use slimtcp_perf::host::MEMWIRE_CAPACITY;

/// The link could not be made.
#[derive(Debug, thiserror::Error)]
#[error("memwire link")]
pub struct LinkError(#[from] MemwireError);

/// The interface under test and the peer's, over a fresh link.
pub fn interfaces() -> Result<(Interface<MemwireNic>, Interface<MemwireNic>), LinkError> {
    let (a, b) = memwire::link(LinkConfig { capacity: MEMWIRE_CAPACITY, ..LinkConfig::default() })?;
    let (ca, cb) = default_configs();
    Ok((Interface::new(a, ca), Interface::new(b, cb)))
}

/// The peer's address.
pub fn peer_ip() -> Ipv4Addr {
    default_configs().1.ip
}
