//! The gateway's per-host rates: one token bucket per source host.
//!
//! Hosts are keyed by their SCION source address (type/length + bytes) in a
//! fixed-capacity open-addressing table (linear probing, probe window
//! [`PROBE`]). A new host gets the rate of the longest matching configured
//! prefix (or the default rate); hosts configured individually are pinned.
//! When the probe window is full, the least recently seen unpinned host idle
//! for at least `idle_evict_s` is replaced; otherwise the packet finds no
//! entry (the gateway treats it as overuse).
//!
//! [`HostTable::retune`] applies new rates in place: every host keeps its
//! bucket level, retuned to the rate its prefix, pin or the default now
//! gives it.

use std::collections::HashMap;
use std::net::IpAddr;

use packet::scion::RawHostAddr;
use packet::HostAddr;
use pipeline::Invalid;

use crate::bucket::{rate_units, TokenBucket};
use crate::config::{GatewayConfig, HostPrefix};

/// Longest probe sequence in the host table.
pub(crate) const PROBE: usize = 16;

#[derive(Clone, Copy, Debug, Default)]
struct HostEntry {
    addr: [u8; 16],
    type_len: u8,
    used: bool,
    pinned: bool,
    last_s: u32,
    bucket: TokenBucket,
}

/// A host as the table keys it: type/length code and zero-padded address.
type HostId = (u8, [u8; 16]);

/// The rates a configuration gives: pinned hosts, prefixes (longest first)
/// and the default, in bucket units.
struct Rates {
    pinned: HashMap<HostId, u16>,
    prefixes: Vec<(HostPrefix, u16)>,
    default_units: u16,
}

impl Rates {
    /// The rates of a validated configuration (rates above the bucket's
    /// maximum are refused by validation; they saturate here).
    fn of(cfg: &GatewayConfig) -> Self {
        let units = |bps| rate_units(bps).unwrap_or(u16::MAX);
        let mut prefixes: Vec<(HostPrefix, u16)> =
            cfg.prefixes.iter().map(|p| (p.prefix, units(p.bps))).collect();
        prefixes.sort_by_key(|p| core::cmp::Reverse(p.0.len));
        let pinned = cfg.hosts.iter().map(|h| (host_id(&raw_host(h.host)), units(h.bps))).collect();
        Rates { pinned, prefixes, default_units: units(cfg.default_rate_bps) }
    }

    /// The rate of an unpinned host.
    fn unpinned(&self, (type_len, addr): &HostId) -> u16 {
        self.prefixes
            .iter()
            .find(|(p, _)| p.matches(*type_len, addr))
            .map_or(self.default_units, |(_, u)| *u)
    }
}

/// The SCION form of a configured host address.
pub(crate) fn raw_host(a: IpAddr) -> RawHostAddr {
    match a {
        IpAddr::V4(v) => RawHostAddr::from(HostAddr::V4(v.octets())),
        IpAddr::V6(v) => RawHostAddr::from(HostAddr::V6(v.octets())),
    }
}

fn host_id(h: &RawHostAddr) -> HostId {
    (h.type_len(), h.padded())
}

/// The per-host buckets of a gateway (one per worker; shard hosts by
/// source address).
pub(crate) struct HostTable {
    table: Vec<HostEntry>,
    mask: usize,
    burst: u16,
    idle_evict_s: u32,
    rates: Rates,
}

impl HostTable {
    /// Bytes the table of a gateway with `host_capacity` hosts allocates.
    pub(crate) fn bytes_for(host_capacity: usize) -> u64 {
        let cap = host_capacity.max(1).saturating_mul(2).checked_next_power_of_two();
        let slots = cap.unwrap_or(usize::MAX) as u64;
        slots.saturating_mul(core::mem::size_of::<HostEntry>() as u64)
    }

    /// A table for a validated configuration, its pinned hosts in place;
    /// `hosts[i]` if a pinned host finds no room in its probe window.
    pub(crate) fn new(cfg: &GatewayConfig) -> Result<Self, Invalid> {
        let cap = (cfg.host_capacity.max(1) * 2).next_power_of_two();
        let mut t = HostTable {
            table: vec![HostEntry::default(); cap],
            mask: cap - 1,
            burst: cfg.burst,
            idle_evict_s: cfg.idle_evict_s,
            rates: Rates::of(cfg),
        };
        let slots = t.plan_pins(cfg, 0)?;
        for (slot, h) in slots.into_iter().zip(&cfg.hosts) {
            t.pin(slot, host_id(&raw_host(h.host)), 0);
        }
        Ok(t)
    }

    /// Polices `len` bytes of `host` at `now`: whether they conform;
    /// `None` if the host has no entry and finds no room.
    #[inline]
    pub(crate) fn take(
        &mut self,
        host: &RawHostAddr,
        len: usize,
        now: pipeline::Now,
    ) -> Option<bool> {
        let now_s = now.unix_secs() as u32;
        let slot = self.slot_for(host, now_s)?;
        let burst = self.burst;
        let entry = &mut self.table[slot];
        entry.last_s = now_s;
        Some(entry.bucket.take(len, burst, now.mono_ns))
    }

    #[inline]
    fn hash(addr: &[u8; 16], type_len: u8) -> u64 {
        let a = u64::from_le_bytes(addr[..8].try_into().unwrap_or_default());
        let b = u64::from_le_bytes(addr[8..].try_into().unwrap_or_default());
        let mut h = (a ^ u64::from(type_len)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h = (h.rotate_left(29) ^ b).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
        h ^ (h >> 31)
    }

    /// Finds or creates the entry of `host`.
    #[inline]
    fn slot_for(&mut self, host: &RawHostAddr, now_s: u32) -> Option<usize> {
        let addr = host.padded();
        let tl = host.type_len();
        let start = Self::hash(&addr, tl) as usize;
        // Common case: the host sits in its home slot.
        let home = start & self.mask;
        let e = &self.table[home];
        if e.used && e.type_len == tl && e.addr == addr {
            return Some(home);
        }
        self.slot_probe((tl, addr), now_s)
    }

    /// Probes past the home slot; inserts (or evicts) for a new host.
    #[cold]
    #[inline(never)]
    fn slot_probe(&mut self, id: HostId, now_s: u32) -> Option<usize> {
        let slot = match self.find(id, now_s, &[]) {
            Found::Present(i) => return Some(i),
            Found::Room(i) => i,
            Found::Full => return None,
        };
        let units = self.rates.unpinned(&id);
        self.table[slot] = HostEntry {
            addr: id.1,
            type_len: id.0,
            used: true,
            pinned: false,
            last_s: now_s,
            bucket: TokenBucket::new(units, self.burst, 0),
        };
        Some(slot)
    }

    /// Where `id` is, or where it would go (a free slot, else the least
    /// recently seen unpinned entry idle long enough), skipping `taken`.
    fn find(&self, (tl, addr): HostId, now_s: u32, taken: &[usize]) -> Found {
        let start = Self::hash(&addr, tl) as usize;
        let mut oldest: Option<(usize, u32)> = None;
        for p in 0..PROBE {
            let i = (start + p) & self.mask;
            let e = &self.table[i];
            if taken.contains(&i) {
                continue;
            }
            if !e.used {
                return Found::Room(i);
            }
            if e.type_len == tl && e.addr == addr {
                return Found::Present(i);
            }
            if !e.pinned && oldest.is_none_or(|(_, s)| e.last_s < s) {
                oldest = Some((i, e.last_s));
            }
        }
        match oldest {
            Some((i, s)) if now_s.wrapping_sub(s) >= self.idle_evict_s => Found::Room(i),
            _ => Found::Full,
        }
    }

    /// The slot of every pinned host of `cfg` (present or to insert), or
    /// the first that finds no room; changes nothing.
    fn plan_pins(&self, cfg: &GatewayConfig, now_s: u32) -> Result<Vec<usize>, Invalid> {
        let mut slots = Vec::with_capacity(cfg.hosts.len());
        for (i, h) in cfg.hosts.iter().enumerate() {
            match self.find(host_id(&raw_host(h.host)), now_s, &slots) {
                Found::Present(s) | Found::Room(s) => slots.push(s),
                Found::Full => {
                    return Err(Invalid::at(
                        format!("hosts[{i}]"),
                        format!("no room for {} in the host table (its probe window holds only pinned or active hosts)", h.host),
                    ))
                }
            }
        }
        Ok(slots)
    }

    /// Pins `id` in `slot`: a fresh full bucket at its pinned rate unless
    /// it is there already (then its bucket is already retuned).
    fn pin(&mut self, slot: usize, id: HostId, now_s: u32) {
        let units = self.rates.pinned.get(&id).copied().unwrap_or(0);
        let burst = self.burst;
        let e = &mut self.table[slot];
        if !(e.used && (e.type_len, e.addr) == id) {
            *e = HostEntry {
                addr: id.1,
                type_len: id.0,
                used: true,
                pinned: true,
                last_s: now_s,
                bucket: TokenBucket::new(units, burst, 0),
            };
        }
        e.pinned = true;
    }

    /// Applies the host rates of a validated `cfg` in place at `now`: every
    /// entry keeps its bucket level, retuned to the rate it now has;
    /// hosts no longer listed are unpinned, new ones pinned. `hosts[i]` (and
    /// nothing changed) if a new pinned host finds no room.
    pub(crate) fn retune(
        &mut self,
        cfg: &GatewayConfig,
        now: pipeline::Now,
    ) -> Result<(), Invalid> {
        let now_s = now.unix_secs() as u32;
        let slots = self.plan_pins(cfg, now_s)?;
        let (old_burst, rates) = (self.burst, Rates::of(cfg));
        for e in self.table.iter_mut().filter(|e| e.used) {
            let id = (e.type_len, e.addr);
            let pinned = rates.pinned.get(&id).copied();
            e.pinned = pinned.is_some();
            let units = pinned.unwrap_or_else(|| rates.unpinned(&id));
            if units != e.bucket.rate_units() || old_burst != cfg.burst {
                e.bucket.retune(units, old_burst, cfg.burst, now.mono_ns);
            }
        }
        self.rates = rates;
        self.burst = cfg.burst;
        self.idle_evict_s = cfg.idle_evict_s;
        for (slot, h) in slots.into_iter().zip(&cfg.hosts) {
            self.pin(slot, host_id(&raw_host(h.host)), now_s);
        }
        Ok(())
    }

    /// The bucket of `host`, if it has an entry (for inspection and tests).
    pub(crate) fn bucket(&self, host: &RawHostAddr) -> Option<TokenBucket> {
        match self.find(host_id(host), 0, &[]) {
            Found::Present(i) => Some(self.table[i].bucket),
            _ => None,
        }
    }
}

/// Where a host is or would go in its probe window.
enum Found {
    Present(usize),
    Room(usize),
    Full,
}
