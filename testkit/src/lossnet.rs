//! A lossy router between namespaces: random loss and burst drops with nftables, never netem
//! (this kernel has no `sch_netem`).
//!
//! The loss must happen on a *forwarding* hop. A rule in a host's own OUTPUT (or egress) path
//! makes `ip_local_out` fail, and the kernel's TCP then knows the segment never left: it keeps
//! it queued and sends it again at once, which is no loss at all. So the Linux peer lives in a
//! namespace of its own ([`LossyRouter::attach_peer`]) and reaches the SlimTCP stack (or another
//! Linux peer) through the router namespace, whose `forward` chain drops frames by interface:
//!
//! ```text
//!   peer ns (10.92.N.2) --veth-- router ns (10.92.N.1 | 10.91.N.1) --TAP-- SlimTCP (10.91.N.2)
//! ```
//!
//! Rates are in units of 1/10000 (`numgen random mod 10000 < r`), so 0.1% is 10.

use std::net::Ipv4Addr;

use crate::netns::{run_checked, Netns, NetnsError};

/// nftables table of the router (family inet).
const TABLE: &str = "slimloss";

/// A loss rate in parts per ten thousand (10 = 0.1%, 100 = 1%, 500 = 5%).
pub type PerTenThousand = u32;

/// One namespace that forwards between its interfaces and drops what the loss rules say.
#[derive(Debug)]
pub struct LossyRouter {
    /// The router's namespace.
    pub ns: Netns,
}

/// A Linux host behind the router: its namespace, address and the router's interface to it.
#[derive(Debug)]
pub struct Peer {
    /// The peer's namespace (deleted on drop).
    pub ns: Netns,
    /// The peer's address.
    pub ip: Ipv4Addr,
    /// The router's veth end toward the peer.
    pub router_if: String,
}

impl LossyRouter {
    /// A fresh router namespace `slimt-<name>-*` with forwarding on and an empty loss table.
    pub fn new(name: &str) -> Result<LossyRouter, NetnsError> {
        let ns = Netns::create(&format!("slimt-{name}"))?;
        ns.exec_ok(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        let r = LossyRouter { ns };
        r.nft(&format!(
            "add table inet {TABLE}\nadd chain inet {TABLE} lossy {{ type filter hook forward priority 0; policy accept; }}"
        ))?;
        Ok(r)
    }

    /// A peer namespace on `10.<net>.<subnet>.0/24` (router `.1`, peer `.2`, default route via
    /// the router), joined to the router by a veth pair without offloads (real checksums).
    pub fn attach_peer(&self, name: &str, net: u8, subnet: u8) -> Result<Peer, NetnsError> {
        let ns = Netns::create(&format!("slimt-{name}"))?;
        let (outer, inner) = (Netns::unique_ifname("slimtv"), Netns::unique_ifname("slimtv"));
        let router_ip = format!("10.{net}.{subnet}.1/24");
        let peer_ip = Ipv4Addr::new(10, net, subnet, 2);
        let r = self.ns.name();
        self.ns.exec_ok(&["ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner])?;
        self.ns.exec_ok(&["ip", "link", "set", &inner, "netns", ns.name()])?;
        self.ns.exec_ok(&["ip", "addr", "add", &router_ip, "dev", &outer])?;
        self.ns.exec_ok(&["ip", "link", "set", &outer, "up"])?;
        ns.exec_ok(&["ip", "addr", "add", &format!("{peer_ip}/24"), "dev", &inner])?;
        ns.exec_ok(&["ip", "link", "set", &inner, "up"])?;
        ns.exec_ok(&["ip", "route", "add", "default", "via", &format!("10.{net}.{subnet}.1")])?;
        for (space, dev) in [(r, outer.as_str()), (ns.name(), inner.as_str())] {
            // Best effort: without offloads the veth hands over frames with real checksums,
            // like a wire (and like the TAP side).
            let _ = run_checked(std::process::Command::new("ip").args([
                "netns", "exec", space, "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso",
                "off", "gro", "off",
            ]));
        }
        Ok(Peer { ns, ip: peer_ip, router_if: outer })
    }

    /// Random loss of frames the router forwards *out of* `toward_if` (`rate` in 1/10000;
    /// 0 removes the rule). Replaces any earlier loss or burst rule for that interface.
    pub fn set_loss(&self, toward_if: &str, rate: PerTenThousand) -> Result<(), NetnsError> {
        self.clear(toward_if)?;
        if rate == 0 {
            return Ok(());
        }
        self.nft(&format!(
            "add rule inet {TABLE} lossy oifname \"{toward_if}\" numgen random mod 10000 < {rate} counter drop comment \"{toward_if}\""
        ))
    }

    /// Drops every frame forwarded out of `toward_if` until [`clear`](Self::clear)ed.
    pub fn drop_all(&self, toward_if: &str) -> Result<(), NetnsError> {
        self.clear(toward_if)?;
        self.nft(&format!(
            "add rule inet {TABLE} lossy oifname \"{toward_if}\" counter drop comment \"{toward_if}\""
        ))
    }

    /// Removes the loss rules for `toward_if`.
    pub fn clear(&self, toward_if: &str) -> Result<(), NetnsError> {
        for handle in self.rules(toward_if)?.into_iter().map(|(h, _)| h) {
            self.nft(&format!("delete rule inet {TABLE} lossy handle {handle}"))?;
        }
        Ok(())
    }

    /// Frames dropped so far by the current rule for `toward_if` (0 without one).
    pub fn dropped(&self, toward_if: &str) -> Result<u64, NetnsError> {
        Ok(self.rules(toward_if)?.into_iter().map(|(_, n)| n).sum())
    }

    /// (handle, packets dropped) of each rule commented `toward_if`.
    fn rules(&self, toward_if: &str) -> Result<Vec<(u64, u64)>, NetnsError> {
        let text = self.ns.exec_ok(&["nft", "-a", "list", "chain", "inet", TABLE, "lossy"])?;
        let tag = format!("comment \"{toward_if}\"");
        Ok(text
            .lines()
            .filter(|l| l.contains(&tag))
            .filter_map(|l| {
                let handle = word_after(l, "handle")?;
                Some((handle, word_after(l, "packets").unwrap_or(0)))
            })
            .collect())
    }

    fn nft(&self, script: &str) -> Result<(), NetnsError> {
        let mut cmd = self.ns.command(&["nft", "-f", "-"]);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let command = format!("nft -f - <<< {script:?}");
        let mut child =
            cmd.spawn().map_err(|source| NetnsError::Spawn { command: command.clone(), source })?;
        if let Some(mut stdin) = child.stdin.take() {
            use std::io::Write;
            let _ = stdin.write_all(script.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|source| NetnsError::Spawn { command: command.clone(), source })?;
        if !out.status.success() {
            return Err(NetnsError::CommandFailed {
                command,
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(())
    }
}

/// The number after the word `key` in `line`.
fn word_after(line: &str, key: &str) -> Option<u64> {
    let mut words = line.split_whitespace();
    words.by_ref().find(|w| *w == key)?;
    words.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_listing_is_parsed() {
        let l = "\t\toifname \"slimtap1\" numgen random mod 10000 < 100 counter packets 42 bytes 6300 drop comment \"slimtap1\" # handle 7";
        assert_eq!(word_after(l, "handle"), Some(7));
        assert_eq!(word_after(l, "packets"), Some(42));
        assert_eq!(word_after(l, "nothing"), None);
    }
}
