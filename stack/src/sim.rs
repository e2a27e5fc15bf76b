//! Deterministic simulation: two interfaces wired back to back over a `memwire` link and driven
//! from one thread on a virtual clock. Time jumps straight to the next event (a frame due on the
//! link or a timer), so a test with multi-second timeouts runs in milliseconds, and a given link
//! seed replays exactly.

use std::net::Ipv4Addr;

use crate::iface::{IfaceError, Interface, InterfaceConfig};
use crate::nic::memwire::{self, LinkConfig, MemwireError, MemwireNic};
use crate::time::{Instant, VirtualClock};
use crate::wire::EthernetAddress;

/// Errors setting up or running a simulation.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The link could not be built.
    #[error("building the memwire link")]
    Link(#[from] MemwireError),
    /// An interface failed.
    #[error("polling an interface")]
    Iface(#[from] IfaceError),
}

/// Address of side A (10.0.0.1, 02:00:00:00:00:0a).
pub const A_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Address of side B (10.0.0.2, 02:00:00:00:00:0b).
pub const B_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Two interfaces on one link, and the virtual clock they share.
#[derive(Debug)]
pub struct SimPair {
    /// The clock; only `step` moves it.
    pub clock: VirtualClock,
    /// Side A.
    pub a: Interface<MemwireNic>,
    /// Side B.
    pub b: Interface<MemwireNic>,
}

/// Default configurations of the two sides (10.0.0.1/24 and 10.0.0.2/24).
pub fn default_configs() -> (InterfaceConfig, InterfaceConfig) {
    (
        InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0x0a]), A_IP, 24),
        InterfaceConfig::new(EthernetAddress([2, 0, 0, 0, 0, 0x0b]), B_IP, 24),
    )
}

impl SimPair {
    /// Two interfaces with `a_cfg` and `b_cfg` over a link built from `link`.
    pub fn new(link: LinkConfig, a_cfg: InterfaceConfig, b_cfg: InterfaceConfig) -> Result<Self, SimError> {
        let (na, nb) = memwire::link(link)?;
        Ok(SimPair { clock: VirtualClock::new(), a: Interface::new(na, a_cfg), b: Interface::new(nb, b_cfg) })
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Polls both sides at the current time; when neither had work, advances the clock to the
    /// next event. Returns false when nothing is left to happen (no frames, no timers).
    pub fn step(&mut self) -> Result<bool, SimError> {
        let now = self.clock.now();
        let busy_a = self.a.poll(now)?;
        let busy_b = self.b.poll(now)?;
        if busy_a || busy_b {
            return Ok(true);
        }
        // Nothing could happen at `now` (e.g. the link is full of frames not yet due): jump to
        // the next event. A deadline at or before `now` that did not fire is a conservative
        // bound, so look a tick later.
        let tick = now + std::time::Duration::from_micros(100);
        let next = [self.a.poll_at(), self.b.poll_at()]
            .into_iter()
            .flatten()
            .map(|t| if t <= now { tick } else { t })
            .chain(self.a.nic().next_delivery())
            .chain(self.b.nic().next_delivery())
            .min();
        match next {
            Some(t) => {
                self.clock.advance_to(t.max(now));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Steps until `done` holds (checked between steps) or `max_steps` pass; returns whether
    /// `done` held.
    pub fn run_until(
        &mut self,
        max_steps: u64,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> Result<bool, SimError> {
        for _ in 0..max_steps {
            if done(self) {
                return Ok(true);
            }
            self.step()?;
        }
        Ok(done(self))
    }
}
