//! `slimtcp-vhost`: SlimTCP as a vhost-user-net backend. Each tenant (one vhost-user socket, one
//! VM) gets a worker thread, pinned to the operator's core, that owns the tenant's SlimTCP
//! [`Interface`](slimtcp::iface::Interface) and NIC and busy-polls its virtqueues, which carry
//! the SlimTCP guest protocol (`docs/protocol.md`, crate `slimtcp-abi`) instead of Ethernet.
//!
//! - [`config`]: command line (clap) and its validated form.
//! - [`device`]: the vhost-user control plane (features, rings, memory), on its own thread.
//! - [`engine`]: the data path: requests, completions, events, zero-copy sends, receive copies.
//! - [`guest_mem`]: range-checked translation of guest addresses; guest-memory payloads.
//! - [`guest_dma`]: guest memory announced to the NIC (DPDK registration) for zero copy.
//! - [`queues`]: ring access for the engine (live vrings or plain queues in tests).
//! - [`ring_stop`]: GET_VRING_BASE handed from the control thread to the worker.
//! - [`server`]: a tenant's connection loop (reconnects, resets); [`worker`]: thread spawning.

pub mod config;
pub mod device;
pub mod engine;
pub mod guest_dma;
pub mod guest_mem;
pub mod queues;
pub mod ring_stop;
pub mod server;
pub mod worker;

use config::{Config, NicConfig};
use server::{serve_tenant, ServerError, StopHandle, TenantConfig};

/// Serves the configured tenant until `stop` (or forever).
pub fn start_backend(config: &Config, stop: &StopHandle) -> Result<(), ServerError> {
    let tenant = TenantConfig::from_config(config);
    match &config.nic {
        NicConfig::Tap { name } => {
            let name = name.clone();
            let host_ip = config.host_ip;
            serve_tenant(
                &tenant,
                move || {
                    let tap = slimtcp::nic::tap::TapNic::open(&name).map_err(|e| error_chain(&e))?;
                    tap.set_up().map_err(|e| error_chain(&e))?;
                    if let Some(h) = host_ip {
                        tap.set_host_address(h.addr, h.prefix_len).map_err(|e| error_chain(&e))?;
                    }
                    Ok(tap)
                },
                stop,
                None,
            )
        }
        #[cfg(feature = "dpdk")]
        NicConfig::Dpdk { eal_args } => {
            use slimtcp::nic::dpdk::{DpdkNic, Eal, PortConfig};
            let eal_args = eal_args.clone();
            let host_ip = config.host_ip;
            serve_tenant(
                &tenant,
                move || {
                    let eal = Eal::init(&eal_args).map_err(|e| error_chain(&e))?;
                    let mut port = PortConfig::new("0");
                    port.promiscuous = true;
                    let nic = DpdkNic::open(eal, &port)
                        .map_err(|e| error_chain(&e))?
                        .pop()
                        .ok_or("DPDK port 0 has no queue")?;
                    if let Some(h) = host_ip {
                        let iface = eal_args
                            .iter()
                            .filter(|v| v.contains("net_tap"))
                            .find_map(|v| {
                                v.split(',').find_map(|kv| kv.strip_prefix("iface=")).map(str::to_string)
                            })
                            .ok_or(
                                "--host-ip needs a net_tap vdev with iface=NAME in the --dpdk arguments",
                            )?;
                        slimtcp::nic::tap::configure_host_side(&iface, h.addr, h.prefix_len)
                            .map_err(|e| error_chain(&e))?;
                    }
                    Ok(nic)
                },
                stop,
                None,
            )
        }
        #[cfg(not(feature = "dpdk"))]
        NicConfig::Dpdk { .. } => Err(ServerError::Nic("built without the dpdk feature".into())),
    }
}

/// An error and its sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
