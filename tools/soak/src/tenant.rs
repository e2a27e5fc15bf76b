//! A tenant of the real backend in this process: `serve_tenant_observed` on its own thread and
//! vhost-user socket (as `slimtcp-vhost` runs each tenant), its worker publishing gauges, its
//! NIC one end of a memwire link built by the soak.

use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use slimtcp::iface::InterfaceConfig;
use slimtcp::nic::Nic;
use slimtcp::wire::EthernetAddress;
use slimtcp_vhost::engine::SessionReport;
use slimtcp_vhost::gauges::TenantGauges;
use slimtcp_vhost::sandbox::Sandbox;
use slimtcp_vhost::server::{serve_tenant_observed, ServerError, StopHandle, TenantConfig};

use crate::error::SoakError;

/// How long a backend may take to listen on its socket.
const LISTEN_WAIT: Duration = Duration::from_secs(20);

/// Addresses of a tenant and of the peer at the other end of its link: `10.N.0.2` and
/// `10.N.0.1`.
#[derive(Debug, Clone, Copy)]
pub struct Addresses {
    /// The subnet's second octet.
    pub net: u8,
}

impl Addresses {
    /// The tenant's (the guest's) address.
    pub fn tenant_ip(self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.net, 0, 2)
    }

    /// The peer's address.
    pub fn peer_ip(self) -> Ipv4Addr {
        Ipv4Addr::new(10, self.net, 0, 1)
    }

    /// The tenant's MAC.
    pub fn tenant_mac(self) -> EthernetAddress {
        EthernetAddress([0x02, 0, 0, self.net, 0, 2])
    }

    /// The peer's MAC.
    pub fn peer_mac(self) -> EthernetAddress {
        EthernetAddress([0x02, 0, 0, self.net, 0, 1])
    }
}

/// One backend tenant, served until [`BackendTenant::stop`].
#[derive(Debug)]
pub struct BackendTenant {
    /// Its vhost-user socket.
    pub socket: PathBuf,
    /// What its worker holds, live.
    pub gauges: Arc<TenantGauges>,
    stop: StopHandle,
    thread: Option<JoinHandle<Result<Vec<SessionReport>, ServerError>>>,
}

/// How a tenant ended: its sessions' reports, or why it failed.
#[derive(Debug)]
pub struct TenantEnd {
    /// The reports of the sessions it served.
    pub reports: Vec<SessionReport>,
    /// Set when the serve loop failed or its thread panicked.
    pub failure: Option<String>,
}

impl BackendTenant {
    /// Starts tenant `name` on `dir/<name>.sock` with `pairs` queue pairs; `make_nic` is called
    /// for each interface the tenant builds (once, unless a worker panic lost it).
    pub fn start<N, F>(
        name: &'static str,
        dir: &Path,
        addrs: Addresses,
        pairs: usize,
        make_nic: F,
    ) -> Result<BackendTenant, SoakError>
    where
        N: Nic + Send + 'static,
        F: FnMut() -> Result<N, String> + Send + 'static,
    {
        let socket = dir.join(format!("{name}.sock"));
        let mut iface = InterfaceConfig::new(addrs.tenant_mac(), addrs.tenant_ip(), 24);
        iface.max_sockets = 16_384;
        let cfg = TenantConfig {
            socket: socket.clone(),
            iface,
            pairs,
            core: None,
            name: format!("soak-{name}"),
            sandbox: Sandbox::default(),
            limits: Default::default(),
        };
        let stop = StopHandle::default();
        let gauges = Arc::new(TenantGauges::default());
        let thread_name = format!("soak-{name}-serve");
        let thread = {
            let (stop, gauges) = (stop.clone(), Arc::clone(&gauges));
            std::thread::Builder::new()
                .name(thread_name.clone())
                .spawn(move || {
                    let mut reports = Vec::new();
                    serve_tenant_observed(&cfg, make_nic, &stop, None, |r| reports.push(r.clone()), &gauges)?;
                    Ok(reports)
                })
                .map_err(|source| SoakError::Spawn { name: thread_name, source })?
        };
        let up = slimtcp_testkit::wait::wait_for(LISTEN_WAIT, || socket.exists() || thread.is_finished());
        if !up || !socket.exists() {
            return Err(SoakError::NotListening { tenant: name, path: socket });
        }
        Ok(BackendTenant { socket, gauges, stop, thread: Some(thread) })
    }

    /// Whether its serve loop is still running.
    pub fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the serve loop (waking its accept with one last connection) and waits for it.
    pub fn stop(mut self) -> TenantEnd {
        self.stop.stop();
        let _ = UnixStream::connect(&self.socket);
        let Some(t) = self.thread.take() else {
            return TenantEnd { reports: Vec::new(), failure: Some("stopped twice".into()) };
        };
        let end = match t.join() {
            Ok(Ok(reports)) => TenantEnd { reports, failure: None },
            Ok(Err(e)) => TenantEnd { reports: Vec::new(), failure: Some(slimtcp_vhost::error_chain(&e)) },
            Err(_) => TenantEnd { reports: Vec::new(), failure: Some("its serve thread panicked".into()) },
        };
        let _ = std::fs::remove_file(&self.socket);
        end
    }
}
