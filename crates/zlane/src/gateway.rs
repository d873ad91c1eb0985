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
//! * The rewrite changes bytes covered by the underlay UDP checksum (Q flag
//!   and HVFs); the [`ZlaneGateway`] stage patches that checksum
//!   incrementally (RFC 1624) from the [`Rewrite`] the gateway reports, so no
//!   full recomputation over the payload is needed. A zero IPv4 UDP checksum
//!   ("none") is left zero. The SCION-level L4 checksum does not cover the
//!   path and needs no update.

use std::collections::HashMap;

use mac::{Aes, Cmac, Key};
use packet::checksum::{accumulate, fold, update16};
use packet::scion::epic::{EpicPath, FLAG_Q, HVF_LEN};
use packet::scion::path::{HOP_LEN, INFO_LEN, MAX_HOPS, META_LEN};
use packet::scion::{PathType, RawHostAddr, ScionHeader};
use packet::Ia;
use pipeline::{Batch, DropReason, Element, Now, PacketBuf, Proto, Stage, NO_OFFSET};

use crate::bucket::{rate_units, FixedMap, TokenBucket};
use crate::config::ConfigError;
use crate::hvf::Hvf;

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

/// A hop-field MAC as a map key: its 48 bits with bit 63 set, so that no
/// MAC maps to the empty-slot key 0 of [`FixedMap`].
#[inline]
fn sigma_key(sigma: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    k[..6].copy_from_slice(&sigma[..6]);
    u64::from_le_bytes(k) | 1 << 63
}

/// Initial capacity of the σ → AS-key table (grows by doubling).
const SIGMA_INITIAL: usize = 1024;
/// Hash multiplier seed of that table: σ values are CMAC outputs installed
/// by the control plane, uniform already, so a fixed seed is fine.
const SIGMA_SEED: u64 = 0x51_6d_a5;

/// Bytes of an EPIC-Z path rewritten by the gateway, with the folded
/// one's-complement sums of that span before and after, so the caller can
/// patch any checksum covering the path (RFC 1624) without re-summing the
/// packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrite {
    /// Offset of the span in the SCION packet (even: flags byte onwards).
    pub offset: usize,
    /// Folded sum of the span (16-bit words from `offset`) before the rewrite.
    pub old_sum: u16,
    /// Folded sum after the rewrite.
    pub new_sum: u16,
}

impl Rewrite {
    /// Patches an Internet checksum `ck` covering the span. `odd` says the
    /// span starts at an odd offset from the start of the checksummed data
    /// (its bytes then sit in the other half of each 16-bit word). A zero
    /// checksum (UDP over IPv4: none) stays zero; a result of zero is sent as
    /// `0xffff` (RFC 768).
    #[inline]
    pub fn patch(&self, ck: u16, odd: bool) -> u16 {
        if ck == 0 {
            return 0;
        }
        let (o, n) = if odd {
            (self.old_sum.swap_bytes(), self.new_sum.swap_bytes())
        } else {
            (self.old_sum, self.new_sum)
        };
        match update16(ck, o, n) {
            0 => 0xffff,
            c => c,
        }
    }
}

/// The gateway's decision before MAC work.
enum Admit {
    /// Finished (passed, demoted or nothing to do), with the bytes changed.
    Done(GatewayOutcome, Option<Rewrite>),
    /// Within the rate: HVFs to replace. `path_off`: the EPIC-Z path in the
    /// SCION packet; `n` hops whose hop fields start at `hops_off` in it.
    Authorize { path_off: usize, n: usize, hops_off: usize },
}

/// One AS-level HVF of a burst: the on-path AS key and V_i (then Ṽ_i).
#[derive(Clone, Copy, Debug, Default)]
struct Job {
    key: u32,
    v: Hvf,
}

/// A burst packet waiting for its AS-level HVFs.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    /// Index in the batch.
    idx: u8,
    /// Offset of the SCION header in the frame.
    scion: usize,
    /// Offset of the EPIC-Z path in the SCION packet.
    path_off: usize,
    /// Hops (= jobs from `first`).
    n: usize,
    first: usize,
    /// Underlay UDP header offset, if any.
    udp: Option<usize>,
    old_sum: u16,
}

/// MAC lanes the cipher interleaves (`aesni::LANES`).
const CHUNK: usize = 8;

/// EPIC block offsets the gateway touches.
const FLAGS_OFF: usize = 8;
const HVFS_OFF: usize = 12;

/// The gateway state (one per worker; shard hosts by source address).
pub struct Gateway {
    cfg: GatewayConfig,
    table: Vec<HostEntry>,
    mask: usize,
    prefixes: Vec<(HostPrefix, u16)>,
    default_units: u16,
    hop_to_key: FixedMap<u32>,
    keys: Vec<(Ia, Cmac)>,
    key_index: HashMap<Ia, u32>,
    counters: GatewayCounters,
    /// Fills unused MAC lanes (never authenticates anything).
    placeholder: Cmac,
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
            hop_to_key: FixedMap::with_capacity(SIGMA_INITIAL, SIGMA_SEED),
            keys: Vec::new(),
            key_index: HashMap::new(),
            counters: GatewayCounters::default(),
            placeholder: Cmac::new(&Key::from([0; 16])),
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
                let k = sigma_key(&sigma);
                if !self.hop_to_key.insert(k, i) {
                    // Full: rebuild twice as large (control path, between bursts).
                    let mut bigger =
                        FixedMap::with_capacity(self.hop_to_key.capacity() * 2, SIGMA_SEED);
                    for (k2, v) in self.hop_to_key.iter() {
                        bigger.insert(k2, *v);
                    }
                    bigger.insert(k, i);
                    self.hop_to_key = bigger;
                }
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
        self.slot_probe(host, addr, tl, start, now_s)
    }

    /// Probes past the home slot; inserts (or evicts) for a new host.
    #[cold]
    #[inline(never)]
    fn slot_probe(
        &mut self,
        host: &RawHostAddr,
        addr: [u8; 16],
        tl: u8,
        start: usize,
        now_s: u32,
    ) -> Option<usize> {
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
        self.process_rewrite(pkt, now).map(|(o, _)| o)
    }

    /// [`process`](Self::process), also reporting the bytes it changed (for
    /// checksum updates); `None` when nothing changed.
    pub fn process_rewrite(
        &mut self,
        pkt: &mut [u8],
        now: Now,
    ) -> Result<(GatewayOutcome, Option<Rewrite>), DropReason> {
        match self.admit(pkt, now)? {
            Admit::Done(o, rw) => Ok((o, rw)),
            Admit::Authorize { path_off, n, hops_off } => {
                let path = &mut pkt[path_off..];
                let span = FLAGS_OFF..HVFS_OFF + n * HVF_LEN;
                let old_sum = fold(accumulate(0, &path[span.clone()]));
                let outcome = self.authorize(path, n, hops_off);
                let new_sum = fold(accumulate(0, &path[span]));
                let rw = Rewrite { offset: path_off + FLAGS_OFF, old_sum, new_sum };
                Ok((outcome, Some(rw)))
            }
        }
    }

    /// Parses, validates and polices one packet: everything but the MACs.
    /// Over-rate and non-EPIC-Z packets are finished here (no MAC work).
    #[inline]
    fn admit(&mut self, pkt: &mut [u8], now: Now) -> Result<Admit, DropReason> {
        let (path_range, host, len) = {
            let h = ScionHeader::new_checked(&*pkt)?;
            if h.path_type() != PathType::EPIC_Z {
                self.counters.passed += 1;
                return Ok(Admit::Done(GatewayOutcome::Passed, None));
            }
            (
                h.path_offset()..h.header_len(),
                h.src_host_raw(),
                h.header_len() + usize::from(h.payload_len()),
            )
        };
        let path_off = path_range.start;
        let path = &mut pkt[path_range];
        // Validates the whole path (HVF count vs. SCION meta header, lengths).
        let (n, hops_off) = {
            let e = EpicPath::new_checked(&*path)?;
            (e.num_hvf(), e.path_offset() + META_LEN + e.scion_path().num_inf() * INFO_LEN)
        };
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
        if conform {
            return Ok(Admit::Authorize { path_off, n, hops_off });
        }
        // Only the flags word (Q) may change.
        let old_sum = u16::from_be_bytes([path[FLAGS_OFF], path[FLAGS_OFF + 1]]);
        let outcome = self.overuse(path)?;
        let new_sum = u16::from_be_bytes([path[FLAGS_OFF], path[FLAGS_OFF + 1]]);
        Ok(Admit::Done(outcome, Some(Rewrite { offset: path_off + FLAGS_OFF, old_sum, new_sum })))
    }

    /// The key index of the AS owning the hop field whose MAC is `sigma`.
    #[inline]
    fn key_of(&self, sigma: &[u8]) -> Option<u32> {
        self.hop_to_key.get(sigma_key(sigma)).copied()
    }

    /// Replaces every V_i by Ṽ_i and sets Q; demotes if a hop is unknown.
    /// `path` is a validated EPIC-Z path with `n` hops whose hop fields start
    /// at `hops_off`. The hops' MACs (one block each, under different AS
    /// keys) run interleaved, up to eight at a time.
    #[inline]
    fn authorize(&mut self, path: &mut [u8], n: usize, hops_off: usize) -> GatewayOutcome {
        if n <= CHUNK {
            self.authorize_up_to::<CHUNK>(path, n, hops_off)
        } else {
            self.authorize_up_to::<MAX_HOPS>(path, n, hops_off)
        }
    }

    /// [`authorize`](Self::authorize) for paths of at most `M` hops (sized
    /// so that common paths fill no 64-entry table per packet).
    #[inline]
    fn authorize_up_to<const M: usize>(
        &mut self,
        path: &mut [u8],
        n: usize,
        hops_off: usize,
    ) -> GatewayOutcome {
        let mut keys: [&Cmac; M] = [&self.placeholder; M];
        for (i, slot) in keys.iter_mut().enumerate().take(n) {
            let m = hops_off + i * HOP_LEN + 6;
            let key = self.hop_to_key.get(sigma_key(&path[m..m + 6]));
            let Some((_, k)) = key.and_then(|&k| self.keys.get(k as usize)) else {
                self.counters.unknown_hop += 1;
                path[FLAGS_OFF] &= !FLAG_Q;
                return GatewayOutcome::Demoted;
            };
            *slot = k;
        }
        for c in (0..n).step_by(CHUNK) {
            let len = CHUNK.min(n - c);
            // Ṽ_i = CMAC_K̃(V_i ‖ 0¹²) = AES_K̃((V_i ‖ 0¹²) ⊕ K1): one
            // complete block per hop, K1 folded in before the cipher call.
            let mut blocks = [[0u8; 16]; CHUNK];
            for (h, b) in blocks.iter_mut().enumerate().take(len) {
                let v = HVFS_OFF + (c + h) * HVF_LEN;
                let vi = u32::from_be_bytes([path[v], path[v + 1], path[v + 2], path[v + 3]]);
                let k1 = u128::from_be_bytes(*keys[c + h].subkeys().0);
                *b = ((u128::from(vi) << 96) ^ k1).to_be_bytes();
            }
            Aes::encrypt_each(|h| keys[c + h].aes(), &mut blocks[..len]);
            for (h, b) in blocks.iter().enumerate().take(len) {
                let o = HVFS_OFF + (c + h) * HVF_LEN;
                path[o..o + HVF_LEN].copy_from_slice(&b[..HVF_LEN]);
            }
        }
        path[FLAGS_OFF] |= FLAG_Q;
        self.counters.authorized += 1;
        GatewayOutcome::Authorized
    }

    fn overuse(&mut self, path: &mut [u8]) -> Result<GatewayOutcome, DropReason> {
        match self.cfg.overuse {
            OverusePolicy::Demote => {
                path[FLAGS_OFF] &= !FLAG_Q;
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
///
/// A burst is processed in passes: parse and police every packet (over-rate
/// packets are finished without MAC work), then compute the AS-level HVFs of
/// all authorized packets, eight at a time interleaved whatever their
/// on-path AS keys (one call per burst instead of one per hop and packet),
/// then write HVFs, Q and the patched underlay
/// UDP checksum back. Results are identical to [`Gateway::process`] per packet.
pub struct ZlaneGateway {
    inner: Gateway,
    waiting: Vec<Waiting>,
    jobs: Vec<Job>,
    blocks: Vec<[u8; 16]>,
}

impl ZlaneGateway {
    /// Wraps a gateway (scratch space for a burst of 32 packets × 8 hops is
    /// allocated here; longer paths grow it once).
    pub fn new(inner: Gateway) -> Self {
        const JOBS: usize = pipeline::BURST * 8;
        ZlaneGateway {
            inner,
            waiting: Vec::with_capacity(pipeline::BURST),
            jobs: Vec::with_capacity(JOBS),
            blocks: vec![[0; 16]; JOBS],
        }
    }

    /// The gateway.
    pub fn gateway(&self) -> &Gateway {
        &self.inner
    }

    /// The gateway, mutable (keys, hops between bursts).
    pub fn gateway_mut(&mut self) -> &mut Gateway {
        &mut self.inner
    }

    /// Pass 2: Ṽ_i for every job of the burst, each under its on-path AS
    /// key, eight at a time interleaved (keys may differ per lane, so no
    /// grouping by key is needed).
    fn compute(&mut self) {
        let n = self.jobs.len();
        if self.blocks.len() < n {
            self.blocks.resize(n, [0; 16]);
        }
        let (keys, ph) = (&self.inner.keys, &self.inner.placeholder);
        let key = |k: u32| keys.get(k as usize).map_or(ph, |e| &e.1);
        // CMAC of one complete block: AES_K((V_i ‖ 0¹²) ⊕ K1), with K1
        // folded in here so the cipher call only looks up each lane's key.
        for (b, job) in self.blocks.iter_mut().zip(&self.jobs) {
            let k1 = u128::from_be_bytes(*key(job.key).subkeys().0);
            *b = ((u128::from(u32::from_be_bytes(job.v)) << 96) ^ k1).to_be_bytes();
        }
        let jobs = &self.jobs;
        Aes::encrypt_each(|j| key(jobs[j].key).aes(), &mut self.blocks[..n]);
        for (job, t) in self.jobs.iter_mut().zip(&self.blocks) {
            job.v.copy_from_slice(&t[..HVF_LEN]);
        }
    }
}

impl Element for ZlaneGateway {
    fn name(&self) -> &str {
        "zlane-gateway"
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        Some(self)
    }
}

impl<B: PacketBuf> Stage<B> for ZlaneGateway {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.waiting.clear();
        self.jobs.clear();
        // Pass 1: parse, police, collect the HVFs to replace.
        for i in batch.live() {
            let meta = batch.meta(i);
            let Some(off) = scion::scion_offset(meta) else { continue };
            // The underlay UDP header, if the parser found SCION inside UDP.
            let udp = (meta.proto == Proto::Scion && meta.l4_off != NO_OFFSET)
                .then_some(usize::from(meta.l4_off));
            let data = batch.buf_mut(i).data_mut();
            let Some(pkt) = data.get_mut(off..) else {
                batch.drop_packet(i, DropReason::Truncated);
                continue;
            };
            match self.inner.admit(pkt, now) {
                Ok(Admit::Done(_, rw)) => {
                    if let (Some(u), Some(rw)) = (udp, rw) {
                        patch_udp_checksum(data, u, off + rw.offset, &rw);
                    }
                }
                Ok(Admit::Authorize { path_off, n, hops_off }) => {
                    let path = &mut pkt[path_off..];
                    let first = self.jobs.len();
                    let mut known = true;
                    for h in 0..n {
                        let m = hops_off + h * HOP_LEN + 6;
                        let Some(key) = self.inner.key_of(&path[m..m + 6]) else {
                            known = false;
                            break;
                        };
                        let o = HVFS_OFF + h * HVF_LEN;
                        let mut v = [0u8; HVF_LEN];
                        v.copy_from_slice(&path[o..o + HVF_LEN]);
                        self.jobs.push(Job { key, v });
                    }
                    if !known {
                        // Same as `Gateway::authorize`: best effort, host HVFs kept.
                        self.jobs.truncate(first);
                        let old = u16::from_be_bytes([path[FLAGS_OFF], path[FLAGS_OFF + 1]]);
                        path[FLAGS_OFF] &= !FLAG_Q;
                        self.inner.counters.unknown_hop += 1;
                        let new = u16::from_be_bytes([path[FLAGS_OFF], path[FLAGS_OFF + 1]]);
                        let rw =
                            Rewrite { offset: path_off + FLAGS_OFF, old_sum: old, new_sum: new };
                        if let Some(u) = udp {
                            patch_udp_checksum(data, u, off + rw.offset, &rw);
                        }
                        continue;
                    }
                    let span = FLAGS_OFF..HVFS_OFF + n * HVF_LEN;
                    let old_sum = fold(accumulate(0, &path[span]));
                    self.waiting.push(Waiting {
                        idx: i as u8,
                        scion: off,
                        path_off,
                        n,
                        first,
                        udp,
                        old_sum,
                    });
                }
                Err(reason) => batch.drop_packet(i, reason),
            }
        }
        if self.waiting.is_empty() {
            return;
        }
        // Pass 2: all MACs, interleaved across packets and hops.
        self.compute();
        // Pass 3: write back.
        for w in &self.waiting {
            let data = batch.buf_mut(usize::from(w.idx)).data_mut();
            let path = &mut data[w.scion + w.path_off..];
            for (h, job) in self.jobs[w.first..w.first + w.n].iter().enumerate() {
                let o = HVFS_OFF + h * HVF_LEN;
                path[o..o + HVF_LEN].copy_from_slice(&job.v);
            }
            path[FLAGS_OFF] |= FLAG_Q;
            self.inner.counters.authorized += 1;
            if let Some(u) = w.udp {
                let new_sum = fold(accumulate(0, &path[FLAGS_OFF..HVFS_OFF + w.n * HVF_LEN]));
                let rw = Rewrite { offset: w.path_off + FLAGS_OFF, old_sum: w.old_sum, new_sum };
                patch_udp_checksum(data, u, w.scion + rw.offset, &rw);
            }
        }
    }
}

/// Patches the UDP checksum of the datagram at `udp` after the gateway
/// rewrote the span described by `rw`, which starts at `at` in `frame`.
#[inline]
fn patch_udp_checksum(frame: &mut [u8], udp: usize, at: usize, rw: &Rewrite) {
    if at < udp + 8 {
        // Not inside the datagram's payload (inconsistent metadata): leave it.
        return;
    }
    let c = udp + 6;
    if let Some(field) = frame.get_mut(c..c + 2) {
        let ck = u16::from_be_bytes([field[0], field[1]]);
        let new = rw.patch(ck, (at - udp) % 2 == 1);
        field.copy_from_slice(&new.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::checksum::{checksum, verify};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Patching with the span's old/new sums (at either parity) gives a
        /// checksum that verifies, like a full recomputation.
        #[test]
        fn patch_equals_recompute(
            body in prop::collection::vec(any::<u8>(), 1..80),
            start in 0usize..80,
            new in prop::collection::vec(any::<u8>(), 1..40),
        ) {
            let start = start % body.len();
            let end = (start + new.len()).min(body.len());
            let mut data = vec![0, 0];
            data.extend_from_slice(&body);
            let ck = checksum(&data);
            prop_assume!(ck != 0);
            data[..2].copy_from_slice(&ck.to_be_bytes());
            let at = 2 + start;
            let old_sum = fold(accumulate(0, &data[at..2 + end]));
            data[at..2 + end].copy_from_slice(&new[..end - start]);
            let new_sum = fold(accumulate(0, &data[at..2 + end]));
            let rw = Rewrite { offset: at, old_sum, new_sum };
            let patched = rw.patch(ck, at % 2 == 1);
            data[..2].copy_from_slice(&patched.to_be_bytes());
            prop_assert!(verify(&data));
        }
    }

    #[test]
    fn hop_table_grows_past_its_initial_capacity() {
        let mut g = Gateway::new(GatewayConfig::default()).unwrap();
        let (a, b) = (Ia::new(1, 1), Ia::new(1, 2));
        g.set_as_key(a, &Key::from([1; 16]));
        g.set_as_key(b, &Key::from([2; 16]));
        assert!(!g.register_hop([9; 6], Ia::new(1, 3)), "no key for that AS");
        let sigma = |n: u32| -> [u8; 6] {
            let x = n.wrapping_mul(0x9e37_79b9).to_be_bytes();
            [x[0], x[1], x[2], x[3], n as u8, 0]
        };
        for n in 0..5000u32 {
            assert!(g.register_hop(sigma(n), if n % 2 == 0 { a } else { b }));
        }
        assert!(g.register_hop([0; 6], a), "an all-zero MAC is a valid key too");
        for n in 0..5000u32 {
            assert_eq!(g.key_of(&sigma(n)), Some(n % 2), "{n}");
        }
        assert_eq!(g.key_of(&[0; 6]), Some(0));
        assert_eq!(g.key_of(&[0xee; 6]), None);
    }

    #[test]
    fn zero_checksum_means_none() {
        let rw = Rewrite { offset: 8, old_sum: 1, new_sum: 2 };
        assert_eq!(rw.patch(0, false), 0);
    }
}
