//! The Z-Lane gateway of a source AS: per-host token buckets, the Q flag, and
//! the HVF replacement V_i → Ṽ_i for every on-path AS.
//!
//! # Choices
//! * Hosts are keyed by their SCION source address (type/length + bytes) in
//!   a fixed-capacity open-addressing table (linear probing, probe window
//!   [`PROBE`]). A new host gets the rate of the longest matching configured
//!   prefix (or the default rate); hosts configured individually are pinned.
//!   When the probe window is full, the least recently seen unpinned host idle
//!   for at least `idle_evict_s` is replaced; otherwise the packet is treated
//!   as overuse (counted as `table_full`).
//! * The EPIC-Z path names no ASes, so the gateway maps each hop field to its
//!   AS by the hop field's MAC σ_i (unique per hop field and segment); the
//!   control plane registers σ → IA for the segments the AS's path service
//!   hands out, together with the level-1 keys K_{A_i,A_0} fetched via DRKey.
//!   A packet with a hop the gateway cannot map is sent as best effort (Q
//!   cleared, host HVFs kept) and counted as `unknown_hop`.
//! * The gateway does not verify host HVFs: a wrong V_i yields a wrong Ṽ_i,
//!   which every on-path router rejects.
//! * Rate accounting uses the SCION packet length (header + payload).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use mac::{Cmac, Key};
use packet::scion::{epic::EpicPath, PathType, RawHostAddr, ScionHeader};
use packet::Ia;
use pipeline::{Batch, DropReason, Now, PacketBuf, Stage};

use crate::bucket::{rate_units, TokenBucket};
use crate::config::ConfigError;
use crate::hvf::{as_hvf, Hvf};

/// Longest probe sequence in the host table.
pub const PROBE: usize = 16;

/// What to do with packets over their host's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OverusePolicy {
    /// Clear Q and forward with the host HVFs (best effort).
    #[default]
    Demote,
    /// Drop (`OverRate`).
    Drop,
}

/// A host-address prefix (IPv4 or IPv6, by SCION type/length code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostPrefix {
    /// Type/length code (0 = IPv4, 3 = IPv6).
    pub type_len: u8,
    /// Address bytes (zero-padded).
    pub addr: [u8; 16],
    /// Prefix length in bits.
    pub len: u8,
}

impl HostPrefix {
    /// An IPv4 prefix.
    pub fn v4(a: [u8; 4], len: u8) -> Self {
        let mut addr = [0; 16];
        addr[..4].copy_from_slice(&a);
        HostPrefix { type_len: 0, addr, len }
    }

    /// An IPv6 prefix.
    pub fn v6(addr: [u8; 16], len: u8) -> Self {
        HostPrefix { type_len: 3, addr, len }
    }

    fn matches(&self, host: &RawHostAddr) -> bool {
        if host.type_len() != self.type_len {
            return false;
        }
        let h = host.padded();
        let full = usize::from(self.len / 8);
        let rem = self.len % 8;
        if h[..full] != self.addr[..full] {
            return false;
        }
        rem == 0 || {
            let m = 0xffu8 << (8 - rem);
            h[full] & m == self.addr[full] & m
        }
    }
}

/// Gateway configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayConfig {
    /// Hosts the table must hold (≥ 32 000 in production).
    pub host_capacity: usize,
    /// Burst of every host bucket, bytes.
    pub burst: u16,
    /// Rate of hosts no prefix matches, bit/s (0: such hosts never get Q).
    pub default_rate_bps: u64,
    /// Per-prefix default rates (longest prefix wins).
    pub prefixes: Vec<(HostPrefix, u64)>,
    /// Per-host rates (pinned entries).
    pub hosts: Vec<(RawHostAddr, u64)>,
    /// Overuse policy.
    pub overuse: OverusePolicy,
    /// Idle time after which an unpinned host entry may be replaced, seconds.
    pub idle_evict_s: u32,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            host_capacity: 32_768,
            burst: 3000,
            default_rate_bps: 1_000_000,
            prefixes: Vec::new(),
            hosts: Vec::new(),
            overuse: OverusePolicy::Demote,
            idle_evict_s: 60,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct HostEntry {
    addr: [u8; 16],
    type_len: u8,
    used: bool,
    pinned: bool,
    last_s: u32,
    bucket: TokenBucket,
}

/// Counters of the gateway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewayCounters {
    /// Packets given Q and AS-level HVFs.
    pub authorized: u64,
    /// Packets over their host's rate sent as best effort.
    pub demoted: u64,
    /// Packets over their host's rate dropped.
    pub dropped: u64,
    /// Packets whose path has a hop with no known AS key (sent best effort).
    pub unknown_hop: u64,
    /// Packets of a new host that found no room in the table.
    pub table_full: u64,
    /// Non-EPIC-Z packets passed through untouched.
    pub passed: u64,
}

/// What the gateway did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayOutcome {
    /// Q set, HVFs replaced by AS-level HVFs.
    Authorized,
    /// Q cleared, host HVFs kept.
    Demoted,
    /// Not an EPIC-Z packet; untouched.
    Passed,
}

/// Hasher for hop-field MACs: they are CMAC outputs installed by the control
/// plane, already uniform, so folding their bytes is enough (no SipHash per hop).
#[derive(Default)]
struct SigmaHasher(u64);

impl Hasher for SigmaHasher {
    fn finish(&self) -> u64 {
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
}

/// The gateway state (one per worker; shard hosts by source address).
pub struct Gateway {
    cfg: GatewayConfig,
    table: Vec<HostEntry>,
    mask: usize,
    prefixes: Vec<(HostPrefix, u16)>,
    default_units: u16,
    hop_to_key: HashMap<[u8; 6], u32, BuildHasherDefault<SigmaHasher>>,
    keys: Vec<(Ia, Cmac)>,
    key_index: HashMap<Ia, u32>,
    counters: GatewayCounters,
}

impl Gateway {
    /// A gateway for a validated configuration.
    pub fn new(cfg: GatewayConfig) -> Result<Self, ConfigError> {
        if cfg.burst < 1500 {
            return Err(ConfigError::BurstTooSmall { bytes: cfg.burst.into() });
        }
        let units = |what: String, bps: u64| {
            rate_units(bps).ok_or(ConfigError::RateTooHigh { origin: what, bps })
        };
        let default_units = units("default".into(), cfg.default_rate_bps)?;
        let mut prefixes = Vec::new();
        for (p, bps) in &cfg.prefixes {
            let max = if p.type_len == 0 { 32 } else { 128 };
            if p.len > max || (p.type_len != 0 && p.type_len != 3) {
                return Err(ConfigError::BadPrefix { what: "length or address type" });
            }
            prefixes.push((*p, units(format!("{p:?}"), *bps)?));
        }
        prefixes.sort_by_key(|p| core::cmp::Reverse(p.0.len));
        let cap = (cfg.host_capacity.max(1) * 2).next_power_of_two();
        let mut g = Gateway {
            table: vec![HostEntry::default(); cap],
            mask: cap - 1,
            prefixes,
            default_units,
            hop_to_key: HashMap::default(),
            keys: Vec::new(),
            key_index: HashMap::new(),
            counters: GatewayCounters::default(),
            cfg,
        };
        for (h, bps) in g.cfg.hosts.clone() {
            let u = units(format!("{h:?}"), bps)?;
            let slot = g.slot_for(&h, 0).ok_or(ConfigError::TableFull { what: "gateway hosts" })?;
            let e = &mut g.table[slot];
            e.pinned = true;
            e.bucket = TokenBucket::new(u, g.cfg.burst, 0);
        }
        Ok(g)
    }

    /// Counters.
    pub fn counters(&self) -> &GatewayCounters {
        &self.counters
    }

    /// Installs (or replaces, at an epoch change) K_{A_i,A_0} for on-path AS `ia`.
    pub fn set_as_key(&mut self, ia: Ia, key: &Key) {
        let cmac = Cmac::new(key);
        match self.key_index.get(&ia) {
            Some(&i) => self.keys[i as usize].1 = cmac,
            None => {
                self.key_index.insert(ia, self.keys.len() as u32);
                self.keys.push((ia, cmac));
            }
        }
    }

    /// Registers that the hop field with MAC `sigma` belongs to AS `ia`.
    /// Returns `false` if no key is installed for `ia` yet.
    pub fn register_hop(&mut self, sigma: [u8; 6], ia: Ia) -> bool {
        match self.key_index.get(&ia) {
            Some(&i) => {
                self.hop_to_key.insert(sigma, i);
                true
            }
            None => false,
        }
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
    fn slot_for(&mut self, host: &RawHostAddr, now_s: u32) -> Option<usize> {
        let addr = host.padded();
        let tl = host.type_len();
        let start = Self::hash(&addr, tl) as usize;
        let mut free = None;
        let mut oldest: Option<(usize, u32)> = None;
        for p in 0..PROBE {
            let i = (start + p) & self.mask;
            let e = &self.table[i];
            if !e.used {
                free = Some(i);
                break;
            }
            if e.type_len == tl && e.addr == addr {
                return Some(i);
            }
            if !e.pinned && oldest.is_none_or(|(_, s)| e.last_s < s) {
                oldest = Some((i, e.last_s));
            }
        }
        let idle = self.cfg.idle_evict_s;
        let slot =
            free.or(oldest.filter(|(_, s)| now_s.wrapping_sub(*s) >= idle).map(|(i, _)| i))?;
        let units = self
            .prefixes
            .iter()
            .find(|(p, _)| p.matches(host))
            .map_or(self.default_units, |(_, u)| *u);
        self.table[slot] = HostEntry {
            addr,
            type_len: tl,
            used: true,
            pinned: false,
            last_s: now_s,
            bucket: TokenBucket::new(units, self.cfg.burst, 0),
        };
        Some(slot)
    }

    /// Processes one SCION packet (starting at its common header) in place.
    pub fn process(&mut self, pkt: &mut [u8], now: Now) -> Result<GatewayOutcome, DropReason> {
        let (path, host, len) = {
            let h = ScionHeader::new_checked(&*pkt)?;
            if h.path_type() != PathType::EPIC_Z {
                self.counters.passed += 1;
                return Ok(GatewayOutcome::Passed);
            }
            (
                h.path_offset()..h.header_len(),
                h.src_host_raw(),
                h.header_len() + usize::from(h.payload_len()),
            )
        };
        let mut e = EpicPath::new_checked(&mut pkt[path])?;
        // Overuse is decided before any MAC work.
        let now_s = now.unix_secs() as u32;
        let conform = match self.slot_for(&host, now_s) {
            Some(slot) => {
                let burst = self.cfg.burst;
                let entry = &mut self.table[slot];
                entry.last_s = now_s;
                entry.bucket.take(len, burst, now.mono_ns)
            }
            None => {
                self.counters.table_full += 1;
                false
            }
        };
        if !conform {
            return self.overuse(&mut e);
        }
        let n = e.num_hvf();
        let mut new = [[0u8; 4]; packet::scion::path::MAX_HOPS];
        for (i, slot) in new.iter_mut().enumerate().take(n) {
            let sigma = e.scion_path().hop_field(i).ok_or(DropReason::Malformed)?.mac();
            let v: Hvf = e.hvf(i).ok_or(DropReason::Malformed)?;
            let Some(&k) = self.hop_to_key.get(&sigma) else {
                self.counters.unknown_hop += 1;
                e.set_q(false);
                return Ok(GatewayOutcome::Demoted);
            };
            *slot = as_hvf(&self.keys[k as usize].1, &v);
        }
        for (i, v) in new.iter().enumerate().take(n) {
            e.set_hvf(i, *v)?;
        }
        e.set_q(true);
        self.counters.authorized += 1;
        Ok(GatewayOutcome::Authorized)
    }

    fn overuse(&mut self, e: &mut EpicPath<&mut [u8]>) -> Result<GatewayOutcome, DropReason> {
        match self.cfg.overuse {
            OverusePolicy::Demote => {
                e.set_q(false);
                self.counters.demoted += 1;
                Ok(GatewayOutcome::Demoted)
            }
            OverusePolicy::Drop => {
                self.counters.dropped += 1;
                Err(DropReason::OverRate)
            }
        }
    }
}

/// The gateway as a pipeline stage (class and port are left as they are).
pub struct ZlaneGateway {
    inner: Gateway,
}

impl ZlaneGateway {
    /// Wraps a gateway.
    pub fn new(inner: Gateway) -> Self {
        ZlaneGateway { inner }
    }

    /// The gateway.
    pub fn gateway(&self) -> &Gateway {
        &self.inner
    }

    /// The gateway, mutable (keys, hops between bursts).
    pub fn gateway_mut(&mut self) -> &mut Gateway {
        &mut self.inner
    }
}

impl<B: PacketBuf> Stage<B> for ZlaneGateway {
    fn name(&self) -> &str {
        "zlane-gateway"
    }

    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        for i in batch.live() {
            let Some(off) = scion::scion_offset(batch.meta(i)) else { continue };
            let r = match batch.buf_mut(i).data_mut().get_mut(off..) {
                Some(pkt) => self.inner.process(pkt, now),
                None => Err(DropReason::Truncated),
            };
            if let Err(reason) = r {
                batch.drop_packet(i, reason);
            }
        }
    }
}
