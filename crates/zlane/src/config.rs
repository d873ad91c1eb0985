//! Typed configuration of the Z-Lane stage kinds and egress, and its checks.
//!
//! One type per kind, shaped like the kind's table in a router
//! configuration file (serde derives behind the `serde` feature):
//!
//! | kind | type |
//! |---|---|
//! | stage `zlane-classify` | [`RouterConfig`] |
//! | stage `zlane-gateway` | [`GatewayConfig`] |
//! | egress `zlane` | [`SchedulerConfig`] |
//!
//! Each implements [`pipeline::Validate`]: ranges, zero rates, duplicate
//! origins, prefixes, hosts and hop fields, reversed epochs and bounds that
//! sum to more than the link are refused with their key (`rates[1].bps`)
//! and the allowed range. The constructors ([`crate::Classifier::new`],
//! [`crate::Gateway::new`], [`crate::Scheduler::new`]) validate too, so an
//! embedder building a configuration in code gets the same checks.

use std::collections::HashMap;
use std::net::IpAddr;

use mac::Key;
use packet::Ia;
use pipeline::validate::in_range;
use pipeline::{Invalid, Validate};

use crate::bucket::MAX_RATE_BPS;
use crate::hvf::Freshness;
use crate::keys::{DEFAULT_HOST_KEY_CACHE, EPIC_Z_PROTOCOL};
use crate::replay::ReplayFilter;

/// Smallest rate a bucket can enforce, bit/s (one 100 kbit/s unit).
pub const MIN_RATE_BPS: u64 = 100_000;
/// Smallest burst, quantum or bucket depth, bytes (one MTU).
pub const MIN_BURST_BYTES: u64 = 1500;
/// Largest egress capacity, bit/s (10 Tbit/s).
pub const MAX_CAPACITY_BPS: u64 = 10_000_000_000_000;
/// Largest scheduler queue, packets (each queue is allocated up front).
pub const MAX_QUEUE_PACKETS: usize = 1 << 20;
/// Largest expanded host-key cache, entries (~470 bytes each).
pub const MAX_HOST_KEY_CACHE: usize = 1 << 20;
/// Largest gateway host table, hosts (32 bytes per slot, two slots per host).
pub const MAX_GATEWAY_HOSTS: usize = 1 << 22;
/// Longest freshness bound either way, ns (the sheet's are 2 s and 1 s).
pub const MAX_FRESHNESS_NS: u64 = 60_000_000_000;
/// Largest duplicate-suppression filter, bytes per worker.
pub const MAX_REPLAY_BYTES: usize = 1 << 30;
/// False-positive rate the duplicate-suppression filter is sized for.
pub const REPLAY_FP: f64 = 1e-6;

/// Scheduling bounds as fractions of egress capacity (Table 2 defaults);
/// the table `bounds = { r, n, g, a, u }` of a `zlane` egress, all five given.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct Bounds {
    /// μ_R (lower = upper bound).
    pub r: f64,
    /// μ_N (lower = upper bound).
    pub n: f64,
    /// μ_G (lower = upper bound).
    pub g: f64,
    /// μ_A (lower bound).
    pub a: f64,
    /// μ_U (lower bound).
    pub u: f64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { r: 0.5, n: 0.1, g: 0.2, a: 0.15, u: 0.05 }
    }
}

impl Validate for Bounds {
    /// Each bound in [0, 1] and their sum ≤ 1 (with 1e-9 slack for decimal input).
    fn validate(&self) -> Result<(), Invalid> {
        let all = [("r", self.r), ("n", self.n), ("g", self.g), ("a", self.a), ("u", self.u)];
        for (key, value) in all {
            in_range(key, value, 0.0, 1.0)?;
        }
        let sum: f64 = all.iter().map(|(_, v)| v).sum();
        if sum > 1.0 + 1e-9 {
            return Err(Invalid::at(
                "",
                format!("the bounds sum to {:.3} % of capacity (at most 100 %)", sum * 100.0),
            ));
        }
        Ok(())
    }
}

/// A guaranteed rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Absolute, bit/s.
    Bps(u64),
    /// Relative, percent of μ_G × capacity.
    PercentOfG(f64),
}

/// Whose traffic a router rate applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// One AS of the router's own ISD.
    As(Ia),
    /// A whole other ISD.
    Isd(u16),
}

impl Origin {
    /// Table key: the IA for an AS, a tagged ISD number otherwise.
    pub const fn key(self) -> u64 {
        match self {
            Origin::As(ia) => ia.to_u64(),
            Origin::Isd(isd) => (0xffff << 48) | isd as u64,
        }
    }

    /// The bucket that polices this origin at a router of ISD `local_isd`:
    /// an AS of another ISD is policed with its whole ISD.
    #[inline]
    pub fn policed_at(self, local_isd: u16) -> Origin {
        match self {
            Origin::As(ia) if ia.isd() != local_isd => Origin::Isd(ia.isd()),
            o => o,
        }
    }
}

impl core::fmt::Display for Origin {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Origin::As(ia) => write!(f, "AS {ia}"),
            Origin::Isd(i) => write!(f, "ISD {i}"),
        }
    }
}

/// One guaranteed origin: `{ as = "1-ff00:0:111", bps = 150_000_000 }`,
/// `{ isd = 2, percent_of_g = 10.0 }`, or without a rate (`{ as =
/// "1-ff00:0:112" }`): an equal share of what the explicit rates leave of
/// μ_G × capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(try_from = "de::RateTable"))]
pub struct RateConfig {
    /// The AS or ISD.
    pub origin: Origin,
    /// Its rate; `None`: an equal share.
    pub rate: Option<Rate>,
}

/// `zlane-classify`: the border router's Z-Lane configuration for one
/// egress interface.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct RouterConfig {
    /// The router's own IA (its ISD decides per-AS vs per-ISD buckets).
    pub local_ia: Ia,
    /// The AS's generic DRKey secret value, used for every epoch inside
    /// `epoch` ([`RouterConfig::keys`]); required in a configuration file.
    /// `None` for an embedder that hands its own `RouterKeys` to
    /// [`crate::Classifier::new`].
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::required"))]
    pub sv: Option<Key>,
    /// Validity of `sv`, Unix seconds `[begin, end)`; required with it.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::required"))]
    pub epoch: Option<[u64; 2]>,
    /// Egress capacity in bit/s (μ_G refers to it).
    #[cfg_attr(feature = "serde", serde(default = "defaults::capacity_bps"))]
    pub capacity_bps: u64,
    /// μ_G as a fraction of capacity.
    #[cfg_attr(feature = "serde", serde(default = "defaults::mu_g"))]
    pub mu_g: f64,
    /// Shared burst of all AS/ISD buckets, bytes (≥ 1500).
    #[cfg_attr(feature = "serde", serde(default = "defaults::router_burst"))]
    pub burst: u16,
    /// Origins with a guaranteed rate.
    #[cfg_attr(feature = "serde", serde(default))]
    pub rates: Vec<RateConfig>,
    /// Freshness window of EPIC-Z packet times.
    #[cfg_attr(feature = "serde", serde(default))]
    pub freshness: Freshness,
    /// DRKey protocol id of EPIC-Z.
    #[cfg_attr(feature = "serde", serde(default = "defaults::protocol_id"))]
    pub protocol_id: u16,
    /// Drop EPIC-Z packets whose reserved flag bits (all but Q) are set
    /// (`zlane.md`: "rest zero"); `false` ignores them, as SCION usually
    /// treats reserved bits.
    #[cfg_attr(feature = "serde", serde(default = "defaults::yes"))]
    pub strict_flags: bool,
    /// Entries of the expanded level-2 host-key cache
    /// ([`crate::keys::HostKeyCache`]).
    #[cfg_attr(feature = "serde", serde(default = "defaults::host_key_cache"))]
    pub host_key_cache: usize,
    /// Duplicate suppression sized for this many EPIC-Z packets per second
    /// over the freshness window (false-positive rate [`REPLAY_FP`]); `None`
    /// keeps it off.
    #[cfg_attr(feature = "serde", serde(default))]
    pub replay_pps: Option<u64>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            local_ia: Ia::new(1, 1),
            sv: None,
            epoch: None,
            capacity_bps: defaults::capacity_bps(),
            mu_g: defaults::mu_g(),
            burst: defaults::router_burst(),
            rates: Vec::new(),
            freshness: Freshness::default(),
            protocol_id: defaults::protocol_id(),
            strict_flags: true,
            host_key_cache: defaults::host_key_cache(),
            replay_pps: None,
        }
    }
}

impl RouterConfig {
    /// μ_G × capacity in bit/s.
    pub fn g_bps(&self) -> u64 {
        (self.capacity_bps as f64 * self.mu_g) as u64
    }

    /// The DRKey state `sv` and `epoch` describe: the fixed secret value
    /// installed per epoch inside its validity; without `sv`, no secret
    /// value (they are installed live, `RouterKeys::install`).
    pub fn keys(&self) -> crate::keys::RouterKeys {
        match (&self.sv, self.epoch) {
            (Some(sv), Some([begin, end])) => crate::keys::SvKeys::new(sv, begin, end).into(),
            _ => crate::keys::RouterKeys::new(
                crate::keys::DEFAULT_CACHE_CAPACITY,
                self.local_ia.to_u64() ^ 0x5a1e_5eed,
                drkey::DEFAULT_GRACE_NS,
            ),
        }
    }

    /// The duplicate-suppression filter `replay_pps` asks for.
    pub fn replay_filter(&self) -> Option<ReplayFilter> {
        let seed = self.local_ia.to_u64() ^ 0x5eed;
        self.replay_pps
            .map(|pps| ReplayFilter::for_freshness(&self.freshness, pps, REPLAY_FP, seed))
    }

    /// Every origin's bucket (an AS of another ISD is policed with its
    /// ISD) and rate in bit/s, in `rates` order: explicit rates, percents of
    /// μ_G × capacity, and equal shares of what those leave. Refuses
    /// duplicate buckets, rates a bucket cannot enforce (below one
    /// 100 kbit/s unit or above [`MAX_RATE_BPS`]) and rates that sum to more
    /// than μ_G × capacity.
    pub fn resolve(&self) -> Result<Vec<(Origin, u64)>, Invalid> {
        let g = self.g_bps();
        let (explicit, defaults) = self.explicit_rates(g)?;
        let share = (g - explicit).checked_div(defaults).unwrap_or(0);
        let mut out = Vec::with_capacity(self.rates.len());
        for (i, r) in self.rates.iter().enumerate() {
            let bps = match r.rate {
                Some(Rate::Bps(b)) => b,
                Some(Rate::PercentOfG(p)) => (g as f64 * p / 100.0) as u64,
                None => share,
            };
            within(&format!("rates[{i}]"), bps, MIN_RATE_BPS, MAX_RATE_BPS)
                .map_err(|e| Invalid::at(e.key, format!("its rate resolves to {}", e.reason)))?;
            out.push((r.origin.policed_at(self.local_ia.isd()), bps));
        }
        Ok(out)
    }

    /// Checks each `rates` entry and their sum against `g` (μ_G × capacity
    /// in bit/s): the bit/s the explicit rates and percents take, and how
    /// many entries share the rest.
    fn explicit_rates(&self, g: u64) -> Result<(u64, u64), Invalid> {
        let mut seen: HashMap<u64, usize> = HashMap::with_capacity(self.rates.len());
        let (mut pct, mut explicit, mut defaults) = (0.0, 0u64, 0u64);
        for (i, r) in self.rates.iter().enumerate() {
            let at = |k: &str| format!("rates[{i}]{k}");
            let bucket = r.origin.policed_at(self.local_ia.isd());
            if let Some(j) = seen.insert(bucket.key(), i) {
                let why = format!("rates[{j}] configures the bucket of {bucket} already");
                return Err(Invalid::at(at(""), format!("{} is policed by it: {why}", r.origin)));
            }
            match r.rate {
                Some(Rate::Bps(b)) => {
                    within(&at(".bps"), b, MIN_RATE_BPS, MAX_RATE_BPS)?;
                    explicit = explicit.saturating_add(b);
                }
                Some(Rate::PercentOfG(p)) => {
                    if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                        let why = format!("{p} is not in (0, 100]");
                        return Err(Invalid::at(at(".percent_of_g"), why));
                    }
                    pct += p;
                    explicit = explicit.saturating_add((g as f64 * p / 100.0) as u64);
                }
                None => defaults += 1,
            }
        }
        if pct > 100.0 + 1e-9 {
            let why = format!("percent_of_g sums to {pct:.3} % of mu_G (at most 100 %)");
            return Err(Invalid::at("rates", why));
        }
        if explicit > g {
            return Err(Invalid::at(
                "rates",
                format!("guaranteed rates sum to {explicit} bit/s, more than mu_G x capacity = {g} bit/s"),
            ));
        }
        Ok((explicit, defaults))
    }
}

impl Validate for RouterConfig {
    fn validate(&self) -> Result<(), Invalid> {
        match (&self.sv, self.epoch) {
            (Some(_), None) => return Err(Invalid::at("epoch", "required with `sv`")),
            (None, Some(_)) => return Err(Invalid::at("sv", "required with `epoch`")),
            (_, Some([b, e])) if b >= e => {
                return Err(Invalid::at(
                    "epoch",
                    format!("[{b}, {e}) is empty: the begin must be before the end"),
                ))
            }
            _ => {}
        }
        at_least("capacity_bps", self.capacity_bps, 1)?;
        in_range("mu_g", self.mu_g, 0.0, 1.0)?;
        at_least("burst", self.burst.into(), MIN_BURST_BYTES)?;
        for (key, ns) in
            [("past_ns", self.freshness.past_ns), ("future_ns", self.freshness.future_ns)]
        {
            at_most(key, ns, MAX_FRESHNESS_NS).map_err(|e| e.under("freshness"))?;
        }
        within("host_key_cache", self.host_key_cache as u64, 1, MAX_HOST_KEY_CACHE as u64)?;
        if let Some(pps) = self.replay_pps {
            at_least("replay_pps", pps, 1)?;
            let window = self.freshness.past_ns.saturating_add(self.freshness.future_ns);
            let bytes = ReplayFilter::memory_for(window.max(1), pps, REPLAY_FP);
            if bytes > MAX_REPLAY_BYTES {
                return Err(Invalid::at(
                    "replay_pps",
                    format!(
                        "a filter for {pps} packets/s over the freshness window takes {} MiB (at most {} MiB)",
                        bytes >> 20,
                        MAX_REPLAY_BYTES >> 20
                    ),
                ));
            }
        }
        self.resolve().map(drop)
    }

    /// The egress capacity (and with it μ_G and every `percent_of_g`) and
    /// the absolute AS/ISD rates are the link's: each worker gets its
    /// share. Absolute rates round down (never below 1 bit/s) and the
    /// capacity up, so the shares still fit within μ_G.
    fn split_rates(&mut self, workers: usize) {
        self.capacity_bps = pipeline::validate::share(self.capacity_bps, workers);
        for r in &mut self.rates {
            if let Some(Rate::Bps(b)) = &mut r.rate {
                *b = (*b / workers.max(1) as u64).max(1);
            }
        }
    }

    /// The host-key cache and the duplicate-suppression filter.
    fn footprint(&self) -> u64 {
        let replay = self.replay_pps.map_or(0, |pps| {
            let window = self.freshness.past_ns.saturating_add(self.freshness.future_ns);
            ReplayFilter::memory_for(window.max(1), pps, REPLAY_FP) as u64
        });
        crate::keys::HostKeyCache::bytes_for(self.host_key_cache).saturating_add(replay)
    }
}

/// What to do with packets over their host's rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum OverusePolicy {
    /// Clear Q and forward with the host HVFs (best effort).
    #[default]
    Demote,
    /// Drop (`OverRate`).
    Drop,
}

/// A host-address prefix (IPv4 or IPv6, by SCION type/length code), e.g.
/// `"10.0.0.0/24"` in a configuration file. Bits past the length are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HostPrefix {
    /// Type/length code (0 = IPv4, 3 = IPv6).
    pub type_len: u8,
    /// Address bytes (zero-padded).
    pub addr: [u8; 16],
    /// Prefix length in bits.
    pub len: u8,
}

impl HostPrefix {
    /// An IPv4 prefix (`len` is capped at 32).
    pub fn v4(a: [u8; 4], len: u8) -> Self {
        let mut addr = [0; 16];
        addr[..4].copy_from_slice(&a);
        HostPrefix::masked(0, addr, len.min(32))
    }

    /// An IPv6 prefix (`len` is capped at 128).
    pub fn v6(addr: [u8; 16], len: u8) -> Self {
        HostPrefix::masked(3, addr, len.min(128))
    }

    /// The prefix with the address bits past `len` (≤ 128) cleared.
    fn masked(type_len: u8, addr: [u8; 16], len: u8) -> Self {
        let keep = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        let addr = (u128::from_be_bytes(addr) & keep).to_be_bytes();
        HostPrefix { type_len, addr, len }
    }

    /// Whether the padded address `host` of type/length `type_len` lies in the prefix.
    #[inline]
    pub(crate) fn matches(&self, type_len: u8, host: &[u8; 16]) -> bool {
        if type_len != self.type_len {
            return false;
        }
        let full = usize::from(self.len / 8);
        let rem = self.len % 8;
        if host[..full] != self.addr[..full] {
            return false;
        }
        rem == 0 || {
            let m = 0xffu8 << (8 - rem);
            host[full] & m == self.addr[full] & m
        }
    }
}

impl core::str::FromStr for HostPrefix {
    type Err = String;

    /// `addr/len`, IPv4 or IPv6, with no address bit set past `len`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("`{s}` is not an IPv4 or IPv6 prefix (addr/len)");
        let (a, l) = s.split_once('/').ok_or_else(bad)?;
        let len: u8 = l.parse().map_err(|_| bad())?;
        // The prefix, and its address as written (zero-padded).
        let (p, written) = match a.parse::<IpAddr>().map_err(|_| bad())? {
            IpAddr::V4(v) if len <= 32 => {
                (HostPrefix::v4(v.octets(), len), HostPrefix::v4(v.octets(), 32).addr)
            }
            IpAddr::V6(v) if len <= 128 => (HostPrefix::v6(v.octets(), len), v.octets()),
            _ => return Err(bad()),
        };
        if p.addr != written {
            return Err(format!("`{s}` has host bits set (past its length {len})"));
        }
        Ok(p)
    }
}

/// A rate for every host of a prefix: `{ prefix = "10.0.0.0/24", bps = 1_000_000 }`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct PrefixRate {
    /// The prefix.
    pub prefix: HostPrefix,
    /// Rate of each host in it, bit/s (0: its hosts never get Q).
    pub bps: u64,
}

/// A pinned host with its own rate: `{ host = "10.0.0.7", bps = 5_000_000 }`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct HostRate {
    /// The host.
    pub host: IpAddr,
    /// Its rate, bit/s (0: it never gets Q).
    pub bps: u64,
}

/// K_{A_i,A_0} of one on-path AS, fetched from its DRKey service:
/// `{ ia = "1-ff00:0:110", key = "<32 hex digits>" }`.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct AsKey {
    /// The on-path AS.
    pub ia: Ia,
    /// Its level-1 key towards this AS.
    pub key: Key,
}

/// A hop field of a registered segment: `{ mac = "<12 hex digits>", ia = "1-ff00:0:110" }`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct HopConfig {
    /// The hop field's MAC σ.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "de::hop_mac"))]
    pub mac: [u8; 6],
    /// The AS the hop field belongs to (needs an `as_keys` entry).
    pub ia: Ia,
}

/// `zlane-gateway`: the gateway of a source AS.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct GatewayConfig {
    /// Hosts the table must hold (≥ 32 000 in production).
    pub host_capacity: usize,
    /// Burst of every host bucket, bytes (≥ 1500).
    pub burst: u16,
    /// Rate of hosts no prefix matches, bit/s (0: such hosts never get Q).
    pub default_rate_bps: u64,
    /// Per-prefix host rates (longest prefix wins).
    pub prefixes: Vec<PrefixRate>,
    /// Pinned hosts with their own rates.
    pub hosts: Vec<HostRate>,
    /// Over-rate packets: `demote` (default) or `drop`.
    pub overuse: OverusePolicy,
    /// Idle time after which an unpinned host entry may be replaced, seconds.
    pub idle_evict_s: u32,
    /// On-path ASes' keys.
    pub as_keys: Vec<AsKey>,
    /// Hop fields → ASes (the path service's segments).
    pub hops: Vec<HopConfig>,
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
            as_keys: Vec::new(),
            hops: Vec::new(),
        }
    }
}

impl Validate for GatewayConfig {
    fn validate(&self) -> Result<(), Invalid> {
        within("host_capacity", self.host_capacity as u64, 1, MAX_GATEWAY_HOSTS as u64)?;
        at_least("burst", self.burst.into(), MIN_BURST_BYTES)?;
        at_most("default_rate_bps", self.default_rate_bps, MAX_RATE_BPS)?;
        for (i, p) in self.prefixes.iter().enumerate() {
            at_most(&format!("prefixes[{i}].bps"), p.bps, MAX_RATE_BPS)?;
        }
        for (i, h) in self.hosts.iter().enumerate() {
            at_most(&format!("hosts[{i}].bps"), h.bps, MAX_RATE_BPS)?;
        }
        if self.hosts.len() > self.host_capacity {
            return Err(Invalid::at(
                "hosts",
                format!("{} pinned hosts, more than host_capacity", self.hosts.len()),
            ));
        }
        unique("prefixes", &self.prefixes, "prefix", |p| p.prefix)?;
        unique("hosts", &self.hosts, "host", |h| h.host)?;
        unique("as_keys", &self.as_keys, "ia", |k| k.ia)?;
        unique("hops", &self.hops, "mac", |h| h.mac)?;
        for (i, h) in self.hops.iter().enumerate() {
            if !self.as_keys.iter().any(|k| k.ia == h.ia) {
                return Err(Invalid::at(
                    format!("hops[{i}].ia"),
                    format!("no `as_keys` entry for {}", h.ia),
                ));
            }
        }
        Ok(())
    }

    /// The host table.
    fn footprint(&self) -> u64 {
        crate::host_table::HostTable::bytes_for(self.host_capacity)
    }

    /// Host rates are shared by the workers the host's flows reach (RSS
    /// spreads a host's flows): each worker polices its share, so a host
    /// never exceeds its rate; one whose traffic is a single flow gets
    /// `1 / workers` of it.
    fn split_rates(&mut self, workers: usize) {
        let share = |b: &mut u64| *b = pipeline::validate::share(*b, workers);
        share(&mut self.default_rate_bps);
        self.prefixes.iter_mut().for_each(|p| share(&mut p.bps));
        self.hosts.iter_mut().for_each(|h| share(&mut h.bps));
    }
}

/// The `zlane` egress: the five-queue scheduler of one egress interface.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct SchedulerConfig {
    /// Egress capacity μ refers to, in bit/s.
    pub capacity_bps: u64,
    /// Bounds as fractions of the capacity (Table 2 defaults).
    pub bounds: Bounds,
    /// Queue lengths in packets (R, N, G, A, U).
    pub queue_packets: [usize; 5],
    /// Burst of the R and N policers in bytes.
    pub burst_bytes: u64,
    /// Burst of the G policer in bytes. G traffic is already policed per
    /// AS/ISD; set this to at least the shared bucket burst times the number
    /// of buckets so that simultaneous bucket bursts are not demoted.
    pub g_burst_bytes: u64,
    /// DRR quantum of the smaller of A and U, in bytes (≥ one MTU).
    pub quantum_bytes: u32,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            capacity_bps: defaults::capacity_bps(),
            bounds: Bounds::default(),
            queue_packets: [1024, 1024, 1024, 4096, 4096],
            burst_bytes: 16 * 1500,
            g_burst_bytes: 64 * 1500,
            quantum_bytes: 1514,
        }
    }
}

impl Validate for SchedulerConfig {
    fn validate(&self) -> Result<(), Invalid> {
        within("capacity_bps", self.capacity_bps, 1, MAX_CAPACITY_BPS)?;
        self.bounds.validate().map_err(|e| e.under("bounds"))?;
        for (i, &q) in self.queue_packets.iter().enumerate() {
            within(&format!("queue_packets[{i}]"), q as u64, 1, MAX_QUEUE_PACKETS as u64)?;
        }
        at_least("burst_bytes", self.burst_bytes, MIN_BURST_BYTES)?;
        at_least("g_burst_bytes", self.g_burst_bytes, MIN_BURST_BYTES)?;
        at_least("quantum_bytes", self.quantum_bytes.into(), MIN_BURST_BYTES)
    }

    /// The five queues' slots (a buffer handle each, allocated up front).
    fn footprint(&self) -> u64 {
        self.queue_packets.iter().map(|&q| q as u64).fold(0, u64::saturating_add) * 16
    }

    /// The link's capacity (and with it every bound μ) is shared by the
    /// workers' schedulers.
    fn split_rates(&mut self, workers: usize) {
        self.capacity_bps = pipeline::validate::share(self.capacity_bps, workers);
    }
}

fn at_least(key: &str, v: u64, min: u64) -> Result<(), Invalid> {
    if v < min {
        return Err(Invalid::at(key, format!("{v} is below {min}")));
    }
    Ok(())
}

fn at_most(key: &str, v: u64, max: u64) -> Result<(), Invalid> {
    if v > max {
        return Err(Invalid::at(key, format!("{v} is above {max}")));
    }
    Ok(())
}

fn within(key: &str, v: u64, min: u64, max: u64) -> Result<(), Invalid> {
    if !(min..=max).contains(&v) {
        return Err(Invalid::at(key, format!("{v} is not in [{min}, {max}]")));
    }
    Ok(())
}

/// Refuses the first entry of the list `list` whose `field` (from `f`) an
/// earlier entry has.
fn unique<T, K: core::hash::Hash + Eq>(
    list: &str,
    items: &[T],
    field: &str,
    f: impl Fn(&T) -> K,
) -> Result<(), Invalid> {
    let mut seen = HashMap::with_capacity(items.len());
    for (i, t) in items.iter().enumerate() {
        if let Some(j) = seen.insert(f(t), i) {
            return Err(Invalid::at(
                format!("{list}[{i}].{field}"),
                format!("the same as {list}[{j}].{field}"),
            ));
        }
    }
    Ok(())
}

/// Defaults of keys a configuration file may leave out.
mod defaults {
    pub(super) fn capacity_bps() -> u64 {
        10_000_000_000
    }
    pub(super) fn mu_g() -> f64 {
        super::Bounds::default().g
    }
    pub(super) fn router_burst() -> u16 {
        9000
    }
    pub(super) fn protocol_id() -> u16 {
        super::EPIC_Z_PROTOCOL
    }
    pub(super) fn host_key_cache() -> usize {
        super::DEFAULT_HOST_KEY_CACHE
    }
    #[cfg(feature = "serde")]
    pub(super) fn yes() -> bool {
        true
    }
}

/// Deserialization helpers: file forms that differ from the Rust types.
#[cfg(feature = "serde")]
mod de {
    use serde::{Deserialize, Deserializer};

    use super::{HostPrefix, Origin, Rate, RateConfig};

    /// A key the file must give, held as an `Option` for embedders.
    pub(super) fn required<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<T>, D::Error> {
        T::deserialize(d).map(Some)
    }

    /// A hop-field MAC: 12 hex digits.
    pub(super) fn hop_mac<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 6], D::Error> {
        let s = String::deserialize(d)?;
        let bad = || serde::de::Error::custom(format!("`{s}` is not 12 hex digits"));
        let s = s.trim();
        if s.len() != 12 {
            return Err(bad());
        }
        let mut out = [0u8; 6];
        for (o, pair) in out.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
            let digit = |c: u8| (c as char).to_digit(16).ok_or_else(bad);
            *o = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Ok(out)
    }

    impl<'de> Deserialize<'de> for HostPrefix {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
        }
    }

    /// A `rates` entry as written.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub(super) struct RateTable {
        #[serde(rename = "as")]
        as_: Option<packet::Ia>,
        isd: Option<u16>,
        bps: Option<u64>,
        percent_of_g: Option<f64>,
    }

    impl TryFrom<RateTable> for RateConfig {
        type Error = &'static str;

        fn try_from(t: RateTable) -> Result<Self, Self::Error> {
            let origin = match (t.as_, t.isd) {
                (Some(ia), None) => Origin::As(ia),
                (None, Some(isd)) => Origin::Isd(isd),
                _ => return Err("needs exactly one of `as`, `isd`"),
            };
            let rate = match (t.bps, t.percent_of_g) {
                (Some(b), None) => Some(Rate::Bps(b)),
                (None, Some(p)) => Some(Rate::PercentOfG(p)),
                (None, None) => None,
                _ => return Err("at most one of `bps`, `percent_of_g`"),
            };
            Ok(RateConfig { origin, rate })
        }
    }
}
