//! The ARP cache: IPv4 -> MAC with expiry, plus the per-address state of outstanding requests.
//!
//! Memory is bounded: resolved and pending entries together never exceed
//! [`ArpConfig::capacity`]; making room evicts the entry touched longest ago (inserted, refreshed
//! or first requested), whichever kind it is. A pending entry evicted that way is reported by
//! [`ArpCache::take_evicted_pending`], so that whatever waited for it is released (it would
//! otherwise wait forever: no retry is due for an address the cache forgot). The cache never
//! sends anything: [`ArpCache::resolve`] tells the caller when to send a request, and
//! [`ArpCache::next_deadline`] when to ask again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use crate::time::Instant;
use crate::wire::{EthernetAddress, Ipv4Addr};

/// Tunables of an [`ArpCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpConfig {
    /// How long a learned mapping stays valid after it was inserted or refreshed.
    pub entry_ttl: Duration,
    /// How long to wait for a reply before requesting again (or giving up).
    pub request_interval: Duration,
    /// Unanswered requests after which resolution fails.
    pub max_requests: u32,
    /// Maximum number of entries, resolved and pending together (at least 1 is used).
    pub capacity: usize,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            entry_ttl: Duration::from_secs(60),
            request_interval: Duration::from_secs(1),
            max_requests: 3,
            capacity: 1024,
        }
    }
}

/// What the caller should do to get a frame to an IPv4 neighbour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The neighbour's MAC is known: send now.
    Known(EthernetAddress),
    /// Broadcast an ARP request for the address now (first try or a retry).
    SendRequest,
    /// A request is outstanding and its interval has not elapsed: keep the frame or drop it.
    Wait,
    /// `max_requests` requests went unanswered; the pending state is forgotten, so the next
    /// `resolve` starts over with [`Resolution::SendRequest`].
    Failed,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Resolved { mac: EthernetAddress, expires: Instant },
    Pending { sent: u32, retry_at: Instant },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    state: State,
    /// Position in the age order: larger = touched more recently.
    stamp: u64,
}

/// A bounded IPv4 neighbour cache with request tracking.
#[derive(Debug)]
pub struct ArpCache {
    config: ArpConfig,
    entries: HashMap<Ipv4Addr, Entry>,
    /// stamp -> address, oldest first: the eviction order.
    by_age: BTreeMap<u64, Ipv4Addr>,
    /// (retry time, address) of every pending entry, earliest first.
    retries: BTreeSet<(Instant, Ipv4Addr)>,
    next_stamp: u64,
    /// Pending entries evicted to make room, not yet taken.
    evicted_pending: Vec<Ipv4Addr>,
}

impl ArpCache {
    /// An empty cache.
    pub fn new(config: ArpConfig) -> Self {
        let config = ArpConfig { capacity: config.capacity.max(1), ..config };
        ArpCache {
            config,
            entries: HashMap::new(),
            by_age: BTreeMap::new(),
            retries: BTreeSet::new(),
            next_stamp: 0,
            evicted_pending: Vec::new(),
        }
    }

    /// The configuration in use (capacity raised to at least 1).
    pub fn config(&self) -> &ArpConfig {
        &self.config
    }

    /// The MAC of `ip` if known and not expired at `now`.
    pub fn lookup(&self, ip: Ipv4Addr, now: Instant) -> Option<EthernetAddress> {
        match self.entries.get(&ip)?.state {
            State::Resolved { mac, expires } if now < expires => Some(mac),
            _ => None,
        }
    }

    /// Learns (or refreshes) `ip -> mac` at `now`, answering any pending request for `ip`.
    ///
    /// When the cache is full and `ip` is new, the oldest entry is evicted first.
    pub fn insert(&mut self, ip: Ipv4Addr, mac: EthernetAddress, now: Instant) {
        let expires = now + self.config.entry_ttl;
        self.put(ip, State::Resolved { mac, expires });
    }

    /// Installs a static entry (operator-given): it never expires. It can still be evicted when
    /// the cache is full, like any entry, so keep static entries below the capacity.
    pub fn insert_static(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        self.put(ip, State::Resolved { mac, expires: Instant::from_micros(u64::MAX) });
    }

    /// Decides how to reach `ip` at `now`, tracking outstanding requests (see [`Resolution`]).
    pub fn resolve(&mut self, ip: Ipv4Addr, now: Instant) -> Resolution {
        match self.entries.get(&ip).map(|e| e.state) {
            Some(State::Resolved { mac, expires }) if now < expires => Resolution::Known(mac),
            Some(State::Pending { retry_at, .. }) if now < retry_at => Resolution::Wait,
            Some(State::Pending { sent, .. }) if sent >= self.config.max_requests => {
                self.remove(ip);
                Resolution::Failed
            }
            Some(State::Pending { sent, retry_at }) => {
                let next = now + self.config.request_interval;
                self.retries.remove(&(retry_at, ip));
                self.retries.insert((next, ip));
                if let Some(entry) = self.entries.get_mut(&ip) {
                    entry.state = State::Pending { sent: sent + 1, retry_at: next };
                }
                Resolution::SendRequest
            }
            // Unknown or expired: start a new resolution.
            Some(State::Resolved { .. }) | None => {
                if self.config.max_requests == 0 {
                    self.remove(ip);
                    return Resolution::Failed;
                }
                let retry_at = now + self.config.request_interval;
                self.put(ip, State::Pending { sent: 1, retry_at });
                Resolution::SendRequest
            }
        }
    }

    /// Addresses whose resolution was in progress when they were evicted to make room (each
    /// once), for the caller to release what waited for them.
    pub fn take_evicted_pending(&mut self) -> Vec<Ipv4Addr> {
        std::mem::take(&mut self.evicted_pending)
    }

    /// True when a resolution of `ip` is in progress.
    pub fn is_pending(&self, ip: Ipv4Addr) -> bool {
        matches!(self.entries.get(&ip), Some(Entry { state: State::Pending { .. }, .. }))
    }

    /// True when [`take_evicted_pending`](Self::take_evicted_pending) has something.
    pub fn has_evicted_pending(&self) -> bool {
        !self.evicted_pending.is_empty()
    }

    /// The earliest time at which a pending request is due for a retry (or failure), if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.retries.first().map(|&(at, _)| at)
    }

    /// Number of entries, resolved (expired ones not yet evicted included) and pending.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Sets `ip`'s state, making it the newest entry and evicting the oldest if room is needed.
    fn put(&mut self, ip: Ipv4Addr, state: State) {
        if self.entries.contains_key(&ip) {
            self.remove(ip);
        }
        while self.entries.len() >= self.config.capacity {
            let Some((_, oldest)) = self.by_age.first_key_value() else {
                break;
            };
            let oldest = *oldest;
            if self.is_pending(oldest) {
                self.evicted_pending.push(oldest);
            }
            self.remove(oldest);
        }
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.by_age.insert(stamp, ip);
        if let State::Pending { retry_at, .. } = state {
            self.retries.insert((retry_at, ip));
        }
        self.entries.insert(ip, Entry { state, stamp });
    }

    fn remove(&mut self, ip: Ipv4Addr) {
        if let Some(entry) = self.entries.remove(&ip) {
            self.by_age.remove(&entry.stamp);
            if let State::Pending { retry_at, .. } = entry.state {
                self.retries.remove(&(retry_at, ip));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xa]);
    const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0xb]);

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, 0, last)
    }

    fn secs(s: u64) -> Instant {
        Instant::from_millis(s * 1000)
    }

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    fn cache() -> ArpCache {
        ArpCache::new(ArpConfig::default())
    }

    #[test]
    fn defaults_are_60s_ttl_1s_interval_3_requests_1024_entries() {
        let c = ArpConfig::default();
        assert_eq!(c.entry_ttl, Duration::from_secs(60));
        assert_eq!(c.request_interval, Duration::from_secs(1));
        assert_eq!(c.max_requests, 3);
        assert_eq!(c.capacity, 1024);
    }

    #[test]
    fn a_static_mapping_never_expires_and_needs_no_request() {
        let mut c = cache();
        c.insert_static(ip(9), MAC_A);
        assert_eq!(c.lookup(ip(9), secs(1_000_000)), Some(MAC_A));
        assert_eq!(c.resolve(ip(9), secs(1_000_000)), Resolution::Known(MAC_A));
    }

    #[test]
    fn an_inserted_mapping_is_found_until_its_ttl_runs_out() {
        let mut c = cache();
        c.insert(ip(1), MAC_A, secs(0));
        assert_eq!(c.lookup(ip(1), secs(59)), Some(MAC_A));
        assert_eq!(c.lookup(ip(1), secs(60)), None);
        assert_eq!(c.lookup(ip(2), secs(0)), None);
    }

    #[test]
    fn insert_refreshes_the_mac_and_the_ttl() {
        let mut c = cache();
        c.insert(ip(1), MAC_A, secs(0));
        c.insert(ip(1), MAC_B, secs(50));
        assert_eq!(c.lookup(ip(1), secs(100)), Some(MAC_B));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn an_evicted_pending_entry_is_reported_once() {
        let mut c = ArpCache::new(ArpConfig { capacity: 2, ..ArpConfig::default() });
        assert_eq!(c.resolve(ip(1), ms(0)), Resolution::SendRequest);
        c.insert(ip(2), MAC_A, ms(1));
        assert!(!c.has_evicted_pending());
        assert_eq!(c.resolve(ip(3), ms(2)), Resolution::SendRequest);
        assert_eq!(c.take_evicted_pending(), vec![ip(1)], "the oldest, pending, made room");
        assert!(!c.is_pending(ip(1)));
        assert_eq!(c.resolve(ip(4), ms(3)), Resolution::SendRequest);
        assert!(c.take_evicted_pending().is_empty(), "a resolved entry's eviction is not reported");
        assert!(c.is_pending(ip(3)) && c.is_pending(ip(4)));
    }

    #[test]
    fn resolve_of_a_known_address_needs_no_request() {
        let mut c = cache();
        c.insert(ip(1), MAC_A, secs(0));
        assert_eq!(c.resolve(ip(1), secs(1)), Resolution::Known(MAC_A));
        assert_eq!(c.next_deadline(), None);
    }

    #[test]
    fn resolve_requests_then_waits_for_the_interval_then_requests_again() {
        let mut c = cache();
        assert_eq!(c.resolve(ip(1), ms(0)), Resolution::SendRequest);
        assert_eq!(c.next_deadline(), Some(ms(1000)));
        assert_eq!(c.resolve(ip(1), ms(500)), Resolution::Wait);
        assert_eq!(c.resolve(ip(1), ms(999)), Resolution::Wait);
        assert_eq!(c.resolve(ip(1), ms(1000)), Resolution::SendRequest);
        assert_eq!(c.next_deadline(), Some(ms(2000)));
    }

    #[test]
    fn resolution_fails_after_max_requests_unanswered_and_then_starts_over() {
        let mut c = cache();
        assert_eq!(c.resolve(ip(1), ms(0)), Resolution::SendRequest);
        assert_eq!(c.resolve(ip(1), ms(1000)), Resolution::SendRequest);
        assert_eq!(c.resolve(ip(1), ms(2000)), Resolution::SendRequest);
        assert_eq!(c.resolve(ip(1), ms(2500)), Resolution::Wait);
        assert_eq!(c.resolve(ip(1), ms(3000)), Resolution::Failed);
        assert_eq!(c.len(), 0, "failed state is forgotten");
        assert_eq!(c.next_deadline(), None);
        assert_eq!(c.resolve(ip(1), ms(3001)), Resolution::SendRequest);
    }

    #[test]
    fn a_reply_clears_the_pending_request() {
        let mut c = cache();
        assert_eq!(c.resolve(ip(1), ms(0)), Resolution::SendRequest);
        c.insert(ip(1), MAC_A, ms(300));
        assert_eq!(c.next_deadline(), None);
        assert_eq!(c.resolve(ip(1), ms(5000)), Resolution::Known(MAC_A));
    }

    #[test]
    fn an_expired_mapping_is_resolved_afresh() {
        let mut c = cache();
        c.insert(ip(1), MAC_A, secs(0));
        assert_eq!(c.resolve(ip(1), secs(60)), Resolution::SendRequest);
        assert_eq!(c.lookup(ip(1), secs(60)), None);
    }

    #[test]
    fn next_deadline_is_the_earliest_pending_retry() {
        let mut c = cache();
        assert_eq!(c.resolve(ip(1), ms(200)), Resolution::SendRequest);
        assert_eq!(c.resolve(ip(2), ms(100)), Resolution::SendRequest);
        assert_eq!(c.next_deadline(), Some(ms(1100)));
    }

    #[test]
    fn a_full_cache_evicts_the_oldest_entry() {
        let mut c = ArpCache::new(ArpConfig { capacity: 2, ..ArpConfig::default() });
        c.insert(ip(1), MAC_A, secs(0));
        c.insert(ip(2), MAC_A, secs(1));
        c.insert(ip(1), MAC_A, secs(2)); // refresh: ip 2 is now the oldest
        c.insert(ip(3), MAC_B, secs(3));
        assert_eq!(c.len(), 2);
        assert_eq!(c.lookup(ip(2), secs(3)), None);
        assert_eq!(c.lookup(ip(1), secs(3)), Some(MAC_A));
        assert_eq!(c.lookup(ip(3), secs(3)), Some(MAC_B));
    }

    #[test]
    fn pending_requests_count_toward_capacity() {
        let mut c = ArpCache::new(ArpConfig { capacity: 3, ..ArpConfig::default() });
        for last in 1..=100 {
            assert_eq!(c.resolve(ip(last), ms(u64::from(last))), Resolution::SendRequest);
            assert!(c.len() <= 3);
        }
        assert_eq!(c.len(), 3);
        // The survivors are the three newest; their retries are the only deadlines left.
        assert_eq!(c.next_deadline(), Some(ms(98 + 1000)));
        c.insert(ip(200), MAC_A, ms(200));
        assert_eq!(c.len(), 3);
        assert_eq!(c.next_deadline(), Some(ms(99 + 1000)));
    }
}
