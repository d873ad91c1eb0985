//! Typed configuration of the `flowpolice` stage kind: [`Config`], shaped
//! like the stage's table in a router configuration file.
//!
//! ```toml
//! [[pipeline]]
//! kind = "flowpolice"
//! capability_key = "c0ffee00c0ffee00c0ffee00c0ffee00"   # 32 hex digits
//! table_key = "0123456789abcdef0123456789abcdef"
//! slots = 4096
//! seeds = { root = "5eed…(64 hex digits)", first_epoch = 29_453_760, epochs = 1440 }
//! puzzle = { min_level = 4 }
//! params = { period_ms = 3000, over_window = "drop_when_misbehaving" }
//! request_cap = { rate_mbps = 50 }
//! clock = "monotonic"                  # or "unix"
//! ```
//!
//! With feature `serde` the types deserialize from such a table (unknown
//! keys are refused, keys in hex); [`Validate`] checks what the types cannot
//! say and names the offending key (`params.beta`, `request_cap.rate_mbps`).
//! [`crate::FlowPolice::apply_config`] says which keys a running stage takes
//! in place.

use core::net::{Ipv4Addr, Ipv6Addr};

use mac::Key;
use pipeline::{Invalid, Validate, BURST};

use crate::flowkey::FlowKeying;
use crate::params::{Params, ParamsError};
use crate::puzzle::{PuzzlePolicy, SeedChain, MAX_MIN_LEVEL};
use crate::table::{CHUNK_SLOTS, DEFAULT_PROBE_WINDOW, MAX_SLOTS};

/// Largest probe window in slots (the tag scans handle any window up to it).
pub const MAX_PROBE_WINDOW: usize = 256;

/// Highest ingress cap rate, Mbit/s (10 Tbit/s): keeps the token bucket's
/// arithmetic far from overflow.
pub const MAX_CAP_MBPS: f64 = 1e7;

/// Smallest cap burst in bytes: one full Ethernet frame.
pub const MIN_CAP_BURST: u64 = 1518;

/// Largest cap burst in bytes (1 TiB).
pub const MAX_CAP_BURST: u64 = 1 << 40;

/// What the stage sees below IP when no parse stage ran (`"ethernet"`, the
/// default, or `"ip"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum LinkLayer {
    /// Ethernet (optionally one VLAN tag).
    #[default]
    Ethernet,
    /// Raw IP packets (tunnels, tests).
    Ip,
}

/// The time base of Algorithm 1's periods and of capability timestamps
/// (`ts`, milliseconds, 32 bits on the wire). The router alone reads the
/// timestamps it stamps, so any base works; the choice is about steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum Clock {
    /// The router's monotonic clock (default): a wall-clock step (NTP, an
    /// operator) never ends or stretches a period.
    #[default]
    Monotonic,
    /// Unix time: timestamps in captures read as wall-clock milliseconds,
    /// and a replay whose Unix clock is pinned (`[io.dpdk] unix_time_s`)
    /// stands still in its flows' first period, so a looped capture's
    /// capabilities stay valid. A wall-clock step moves every flow's period.
    Unix,
}

/// An ingress channel policer: a byte rate and a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct ChannelCap {
    /// Rate in Mbit/s of frame bytes, in (0, [`MAX_CAP_MBPS`]].
    pub rate_mbps: f64,
    /// Burst in bytes, in [[`MIN_CAP_BURST`], [`MAX_CAP_BURST`]]; default
    /// 10 ms at the rate, at least 2 × 1518.
    pub burst_bytes: Option<u64>,
}

impl ChannelCap {
    /// The rate in bytes per second.
    pub fn bytes_per_sec(&self) -> u64 {
        (self.rate_mbps * 1e6 / 8.0) as u64
    }

    /// The burst in bytes, the default filled in.
    pub fn burst(&self) -> u64 {
        self.burst_bytes.unwrap_or((self.bytes_per_sec() / 100).max(2 * 1518))
    }
}

/// Configuration of a `flowpolice` stage (one per worker; see the module
/// docs for its TOML form).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct Config {
    /// Capability MAC key (router secret).
    pub capability_key: Key,
    /// Key of the flow-table hash and of the IPv6 flow-ID hash (router
    /// secret; both are derived from it, see [`Config::table_hash_key`]).
    pub table_key: Key,
    /// Table size in slots, per worker (48-byte entries + a tag byte,
    /// rounded up to a multiple of 4; in [1, [`MAX_SLOTS`]]; default
    /// 65 536); size it with [`FlowTable::slots_for`](crate::FlowTable::slots_for),
    /// e.g. 125M slots (6.1 GB, 61.25 B per flow) for 100M flows at the
    /// default 80 % load.
    #[cfg_attr(feature = "serde", serde(default = "default_slots"))]
    pub slots: usize,
    /// Slots probed per flow (rounded up to a multiple of 4; in
    /// [1, min([`MAX_PROBE_WINDOW`], `slots`)]; default
    /// [`DEFAULT_PROBE_WINDOW`]).
    #[cfg_attr(feature = "serde", serde(default = "default_probe_window"))]
    pub probe_window: usize,
    /// Published puzzle seeds.
    pub seeds: SeedChain,
    /// Puzzle policy.
    #[cfg_attr(feature = "serde", serde(default))]
    pub puzzle: PuzzlePolicy,
    /// Algorithm 1 parameters.
    #[cfg_attr(feature = "serde", serde(default))]
    pub params: Params,
    /// Protected IPv4 servers: their flows are keyed by source instead of
    /// destination ([`FlowKeying`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub protected_v4: Vec<Ipv4Addr>,
    /// Protected IPv6 servers.
    #[cfg_attr(feature = "serde", serde(default))]
    pub protected_v6: Vec<Ipv6Addr>,
    /// Require `capability.flow_id` to equal the flow ID derived from the packet's
    /// addresses (default `true`); otherwise a capability could be replayed on
    /// another flow's packets.
    #[cfg_attr(feature = "serde", serde(default = "default_true"))]
    pub check_flow_binding: bool,
    /// `Some(true)`: load only the entry a regular packet's flow occupies,
    /// found from the table's tag bytes (≈ 1.5 cache lines per packet plus
    /// the tag line, one dependent on the other). `Some(false)`: load the
    /// whole three-line home chunk without reading the tags (first line in
    /// pass 1, the other two [`Config::hint_lag`] packets later; a flow past
    /// its home chunk costs further, dependent misses). `None` (default):
    /// hints on at every table size (hints naming any slot of the window:
    /// 1M flows ≈ 43 vs 61 ns, 10M ≈ 76 vs 117–137 ns, 100M 126 vs 139 ns
    /// per packet; BENCHMARKS.md).
    pub slot_hints: Option<bool>,
    /// Regular packets between prefetching a packet's tags (pass 1) and
    /// reading them to prefetch its entry (pass 1b), in `1..=`[`BURST`];
    /// `None` (default): [`HINT_LAG`](crate::stage::HINT_LAG) for tables of
    /// at most [`AUTO_HINT_MAX_SLOTS`](crate::stage::AUTO_HINT_MAX_SLOTS)
    /// slots (tags in cache), [`BURST`] above (every tag line of the burst is
    /// requested before the first is read: there each is a DRAM miss).
    pub hint_lag: Option<usize>,
    /// `Some(true)`: a request's insertion prefetches the whole three-line
    /// home chunk; `Some(false)`: its first two lines. `None` (default):
    /// whole for tables of at most [`crate::table::AUTO_WHOLE_CHUNK_MAX_SLOTS`]
    /// slots ([`crate::FlowTable::set_prefetch_whole_chunk`]).
    pub insert_whole_chunk: Option<bool>,
    /// Optional ingress policer for the request channel, applied *before* the
    /// puzzle hash so floods cannot exhaust the CPU (egress caps still apply).
    pub request_cap: Option<ChannelCap>,
    /// Optional ingress policer for legacy packets.
    pub legacy_cap: Option<ChannelCap>,
    /// Link layer when no parse stage set offsets.
    #[cfg_attr(feature = "serde", serde(default))]
    pub link: LinkLayer,
    /// Time base of periods and capability timestamps (default monotonic).
    #[cfg_attr(feature = "serde", serde(default))]
    pub clock: Clock,
}

#[cfg(feature = "serde")]
fn default_slots() -> usize {
    DEFAULT_SLOTS
}

#[cfg(feature = "serde")]
fn default_probe_window() -> usize {
    DEFAULT_PROBE_WINDOW
}

#[cfg(feature = "serde")]
fn default_true() -> bool {
    true
}

/// Table slots of a configuration that does not give `slots`.
pub const DEFAULT_SLOTS: usize = 1 << 16;

impl Config {
    /// Defaults for everything but the secrets (the table key as two words,
    /// see [`Config::table_hash_key`]), the table size and the seeds.
    pub fn new(
        capability_key: Key,
        table_hash_key: [u64; 2],
        slots: usize,
        seeds: SeedChain,
    ) -> Self {
        let mut table_key = [0u8; 16];
        table_key[..8].copy_from_slice(&table_hash_key[0].to_be_bytes());
        table_key[8..].copy_from_slice(&table_hash_key[1].to_be_bytes());
        Config {
            params: Params::default(),
            capability_key,
            table_key: Key::from(table_key),
            slots,
            probe_window: DEFAULT_PROBE_WINDOW,
            protected_v4: Vec::new(),
            protected_v6: Vec::new(),
            puzzle: PuzzlePolicy::default(),
            seeds,
            link: LinkLayer::Ethernet,
            check_flow_binding: true,
            slot_hints: None,
            hint_lag: None,
            insert_whole_chunk: None,
            request_cap: None,
            legacy_cap: None,
            clock: Clock::Monotonic,
        }
    }

    /// The flow-table hash key: [`Config::table_key`] as two big-endian words.
    pub fn table_hash_key(&self) -> [u64; 2] {
        let (hi, lo) = self.table_key.as_bytes().split_at(8);
        let word = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap_or_default());
        [word(hi), word(lo)]
    }

    /// Flow-ID derivation: the protected servers, and an IPv6 hash key
    /// derived from the table key (distinct from the table hash's).
    pub fn flow_keying(&self) -> FlowKeying {
        let k = self.table_hash_key();
        FlowKeying::new(
            &self.protected_v4,
            &self.protected_v6,
            [k[0] ^ 0x5851_f42d_4c95_7f2d, k[1].rotate_left(29)],
        )
    }
}

impl Validate for Config {
    fn validate(&self) -> Result<(), Invalid> {
        if !(1..=MAX_SLOTS).contains(&self.slots) {
            return Err(Invalid::at("slots", format!("{} is not in [1, {MAX_SLOTS}]", self.slots)));
        }
        let max_window = self.slots.min(MAX_PROBE_WINDOW);
        if !(1..=max_window).contains(&self.probe_window) {
            return Err(Invalid::at(
                "probe_window",
                format!(
                    "{} is not in [1, {max_window}] (at most {MAX_PROBE_WINDOW} and `slots`)",
                    self.probe_window
                ),
            ));
        }
        if self.seeds.is_empty() {
            return Err(Invalid::at("seeds.epochs", "the chain covers no epoch"));
        }
        self.puzzle.validate().map_err(|e| e.under("puzzle"))?;
        self.params.validate().map_err(|e| Invalid::from(e).under("params"))?;
        unique("protected_v4", &self.protected_v4)?;
        unique("protected_v6", &self.protected_v6)?;
        if let Some(lag) = self.hint_lag {
            if !(1..=BURST).contains(&lag) {
                return Err(Invalid::at("hint_lag", format!("{lag} is not in [1, {BURST}]")));
            }
        }
        for (key, cap) in [("request_cap", &self.request_cap), ("legacy_cap", &self.legacy_cap)] {
            if let Some(c) = cap {
                c.validate().map_err(|e| e.under(key))?;
            }
        }
        Ok(())
    }

    /// The flow table (entries and tag bytes, slots rounded up to whole
    /// chunks) and the seed chain.
    fn footprint(&self) -> u64 {
        let slots = self.slots.div_ceil(CHUNK_SLOTS).saturating_mul(CHUNK_SLOTS) as u64;
        let table = slots.saturating_mul(crate::table::FlowTable::bytes_per_slot() as u64);
        table.saturating_add(self.seeds.epochs().len() as u64 * 32)
    }

    /// The request and legacy channel caps are rates of the router's
    /// ingress, shared by its workers. Flow state needs no split: RSS
    /// keeps each flow on one worker, and Algorithm 1's windows are per
    /// flow.
    fn split_rates(&mut self, workers: usize) {
        for cap in [&mut self.request_cap, &mut self.legacy_cap].into_iter().flatten() {
            cap.rate_mbps = pipeline::validate::share_f64(cap.rate_mbps, workers);
        }
    }
}

/// Refuses the second occurrence of a value in `list` (at `key[i]`).
fn unique<T: PartialEq + core::fmt::Display>(key: &str, list: &[T]) -> Result<(), Invalid> {
    for (i, a) in list.iter().enumerate() {
        if list[..i].contains(a) {
            return Err(Invalid::at(format!("{key}[{i}]"), format!("{a} is listed twice")));
        }
    }
    Ok(())
}

impl Validate for PuzzlePolicy {
    fn validate(&self) -> Result<(), Invalid> {
        if self.epoch_ms == 0 {
            return Err(Invalid::at("epoch_ms", "must be at least 1"));
        }
        if self.min_level > MAX_MIN_LEVEL {
            return Err(Invalid::at(
                "min_level",
                format!("{} is not in [0, {MAX_MIN_LEVEL}]", self.min_level),
            ));
        }
        Ok(())
    }
}

impl Validate for ChannelCap {
    fn validate(&self) -> Result<(), Invalid> {
        let r = self.rate_mbps;
        if !(r.is_finite() && r > 0.0 && r <= MAX_CAP_MBPS) {
            return Err(Invalid::at("rate_mbps", format!("{r} is not in (0, {MAX_CAP_MBPS}]")));
        }
        match self.burst_bytes {
            Some(b) if !(MIN_CAP_BURST..=MAX_CAP_BURST).contains(&b) => Err(Invalid::at(
                "burst_bytes",
                format!("{b} is not in [{MIN_CAP_BURST}, {MAX_CAP_BURST}] (a full frame at least)"),
            )),
            _ => Ok(()),
        }
    }
}

/// [`Params::validate`]'s verdict with the parameter's key.
impl From<ParamsError> for Invalid {
    fn from(e: ParamsError) -> Self {
        match e {
            ParamsError::OutOfRange { name, value, range } => {
                Invalid::at(name, format!("{value} is not in {range}"))
            }
            ParamsError::ThresholdOrder { l_up, l_down } => {
                Invalid::at("l_up", format!("{l_up} must be below `l_down` ({l_down})"))
            }
        }
    }
}

/// The seed chain from its table: the number of epochs is bounded before
/// the chain is generated (it sizes an allocation).
#[cfg(feature = "serde")]
mod seeds {
    use serde::de::{Deserialize, Deserializer, Error};

    use crate::puzzle::{Seed, SeedChain, MAX_EPOCHS};

    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Spec {
        #[serde(deserialize_with = "root")]
        root: Seed,
        first_epoch: u32,
        #[serde(deserialize_with = "epochs")]
        epochs: usize,
    }

    impl<'de> Deserialize<'de> for SeedChain {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = Spec::deserialize(d)?;
            Ok(SeedChain::generate(s.root, s.first_epoch, s.epochs))
        }
    }

    /// 64 hex digits (the root is a secret: never echoed in errors).
    fn root<'de, D: Deserializer<'de>>(d: D) -> Result<Seed, D::Error> {
        let s = String::deserialize(d)?;
        let digits = s.trim().as_bytes();
        let mut out = [0u8; 32];
        if digits.len() != 64 {
            return Err(Error::custom("needs 64 hex digits (32 bytes)"));
        }
        for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let hex = |c: u8| (c as char).to_digit(16);
            match (hex(pair[0]), hex(pair[1])) {
                (Some(h), Some(l)) => *o = (h * 16 + l) as u8,
                _ => return Err(Error::custom("needs 64 hex digits (32 bytes)")),
            }
        }
        Ok(out)
    }

    fn epochs<'de, D: Deserializer<'de>>(d: D) -> Result<usize, D::Error> {
        let n = usize::deserialize(d)?;
        if (1..=MAX_EPOCHS).contains(&n) {
            Ok(n)
        } else {
            Err(Error::custom(format!("{n} is not in [1, {MAX_EPOCHS}]")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::new(Key::from([7; 16]), [1, 2], 1024, SeedChain::generate([9; 32], 0, 4))
    }

    fn key_of(edit: impl FnOnce(&mut Config)) -> String {
        let mut c = config();
        edit(&mut c);
        c.validate().expect_err("refused").key
    }

    #[test]
    fn each_bad_value_is_refused_with_its_key() {
        config().validate().unwrap();
        assert_eq!(key_of(|c| c.slots = 0), "slots");
        assert_eq!(key_of(|c| c.slots = MAX_SLOTS + 1), "slots");
        assert_eq!(key_of(|c| c.probe_window = 0), "probe_window");
        assert_eq!(key_of(|c| c.probe_window = 257), "probe_window");
        assert_eq!(key_of(|c| (c.slots, c.probe_window) = (8, 9)), "probe_window");
        assert_eq!(key_of(|c| c.seeds = SeedChain::generate([0; 32], 0, 0)), "seeds.epochs");
        assert_eq!(key_of(|c| c.puzzle.epoch_ms = 0), "puzzle.epoch_ms");
        assert_eq!(key_of(|c| c.puzzle.min_level = 65), "puzzle.min_level");
        assert_eq!(key_of(|c| c.params.beta = 1.5), "params.beta");
        assert_eq!(key_of(|c| c.params.lambda = f64::NAN), "params.lambda");
        assert_eq!(key_of(|c| c.params.k_th = 0), "params.k_th");
        assert_eq!(key_of(|c| c.params.l_up = 0.2), "params.l_up");
        let twice = Ipv4Addr::new(192, 0, 2, 1);
        assert_eq!(key_of(|c| c.protected_v4 = vec![twice, twice]), "protected_v4[1]");
        assert_eq!(key_of(|c| c.protected_v6 = vec![Ipv6Addr::LOCALHOST; 2]), "protected_v6[1]");
        assert_eq!(key_of(|c| c.hint_lag = Some(0)), "hint_lag");
        assert_eq!(key_of(|c| c.hint_lag = Some(BURST + 1)), "hint_lag");
        let cap = |rate_mbps, burst_bytes| Some(ChannelCap { rate_mbps, burst_bytes });
        assert_eq!(key_of(|c| c.request_cap = cap(0.0, None)), "request_cap.rate_mbps");
        assert_eq!(key_of(|c| c.legacy_cap = cap(f64::INFINITY, None)), "legacy_cap.rate_mbps");
        assert_eq!(key_of(|c| c.legacy_cap = cap(1e8, None)), "legacy_cap.rate_mbps");
        assert_eq!(key_of(|c| c.request_cap = cap(10.0, Some(100))), "request_cap.burst_bytes");
    }

    #[test]
    fn keys_and_caps_convert() {
        let c = config();
        assert_eq!(c.table_hash_key(), [1, 2]);
        assert!(!format!("{c:?}").contains("0101"), "secrets are redacted");
        let cap = ChannelCap { rate_mbps: 100.0, burst_bytes: None };
        assert_eq!((cap.bytes_per_sec(), cap.burst()), (12_500_000, 125_000));
        let small = ChannelCap { rate_mbps: 0.008, burst_bytes: None };
        assert_eq!((small.bytes_per_sec(), small.burst()), (1000, 3036));
    }

    #[cfg(feature = "serde")]
    mod serde {
        use super::*;

        const ROOT: &str = "5eed000000000000000000000000000000000000000000000000000000000001";

        fn parse(extra: &str) -> Result<Config, String> {
            let t = format!(
                "capability_key = \"c0ffee00c0ffee00c0ffee00c0ffee00\"\n\
                 table_key = \"0123456789abcdef0123456789abcdef\"\n\
                 seeds = {{ root = \"{ROOT}\", first_epoch = 1, epochs = 4 }}\n{extra}"
            );
            typed(&t)
        }

        /// As the router parses a stage: the table first, then the type (so
        /// errors quote no input).
        fn typed(text: &str) -> Result<Config, String> {
            let t: toml::Table = toml::from_str(text).unwrap();
            toml::Value::Table(t).try_into::<Config>().map_err(|e| e.to_string())
        }

        /// The `flowpolice` stage tables of a router configuration file.
        fn stage_tables(path: &str) -> Vec<toml::Table> {
            let text = std::fs::read_to_string(path).unwrap();
            let file: toml::Table = toml::from_str(&text).unwrap();
            let stages = file.get("pipeline").and_then(|p| p.as_array()).cloned();
            let mut out = Vec::new();
            for s in stages.unwrap_or_default() {
                let mut t = s.as_table().cloned().unwrap();
                if t.remove("kind").and_then(|k| k.as_str().map(str::to_string)).as_deref()
                    == Some("flowpolice")
                {
                    out.push(t);
                }
            }
            out
        }

        #[test]
        fn the_example_configuration_parses_and_validates() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/flowpolice-edge.toml");
            let tables = stage_tables(path);
            assert_eq!(tables.len(), 1);
            let c: Config = toml::Value::Table(tables[0].clone()).try_into().unwrap();
            c.validate().unwrap();
            assert_eq!((c.slots, c.puzzle.min_level, c.params.period_ms), (4096, 4, 3000));
            assert_eq!(c.seeds.epochs(), 29_453_760..29_453_760 + 1440);
            assert_eq!(
                c.capability_key,
                Key::from_hex("c0ffee00c0ffee00c0ffee00c0ffee00").unwrap()
            );
            assert_eq!(c.table_hash_key(), [0x0123_4567_89ab_cdef, 0x0123_4567_89ab_cdef]);
            assert_eq!(c.link, LinkLayer::Ethernet);
        }

        #[test]
        fn defaults_and_every_key() {
            let c = parse("").unwrap();
            assert_eq!(
                c,
                Config::new(c.capability_key.clone(), c.table_hash_key(), 65_536, c.seeds.clone())
            );
            let c = parse(
                "slots = 100\nprobe_window = 8\npuzzle = { epoch_ms = 1000, min_level = 2, \
                 accept_previous_epoch = false }\nparams = { beta = 0.25, k_th = 64, \
                 over_window = \"drop\", initial_window = \"delivered\" }\n\
                 protected_v4 = [\"192.0.2.80\"]\nprotected_v6 = [\"2001:db8::80\"]\n\
                 check_flow_binding = false\nslot_hints = false\nhint_lag = 4\n\
                 insert_whole_chunk = false\nrequest_cap = { rate_mbps = 50 }\n\
                 legacy_cap = { rate_mbps = 100, burst_bytes = 20000 }\nlink = \"ip\"",
            )
            .unwrap();
            c.validate().unwrap();
            assert_eq!((c.slots, c.probe_window, c.puzzle.epoch_ms), (100, 8, 1000));
            assert_eq!((c.params.beta, c.params.k_th), (0.25, 64));
            assert_eq!(c.params.over_window, crate::OverWindow::Drop);
            assert_eq!(c.params.initial_window, crate::InitialWindow::Delivered);
            assert_eq!(c.protected_v4, [Ipv4Addr::new(192, 0, 2, 80)]);
            assert_eq!(c.legacy_cap.map(|c| c.burst()), Some(20_000));
            assert_eq!(c.link, LinkLayer::Ip);
        }

        #[test]
        fn types_unknown_keys_and_seed_bounds_are_refused() {
            for (extra, why) in [
                ("slot = 4", "unknown field `slot`"),
                ("params = { betta = 0.5 }", "unknown field `betta`"),
                ("link = \"atm\"", "unknown variant `atm`"),
                ("insert_whole_chunk = 1", "invalid type"),
                ("params = { k_th = 70000 }", "invalid value"),
            ] {
                let e = parse(extra).unwrap_err();
                assert!(e.contains(why), "{extra}: {e}");
            }
            let bad = |seeds: &str| {
                let t = format!(
                    "capability_key = \"c0ffee00c0ffee00c0ffee00c0ffee00\"\n\
                     table_key = \"0123456789abcdef0123456789abcdef\"\nseeds = {seeds}"
                );
                typed(&t).unwrap_err()
            };
            let e = bad(&format!("{{ root = \"{ROOT}\", first_epoch = 1, epochs = 0 }}"));
            assert!(e.contains("0 is not in [1, 100000]"), "{e}");
            let e = bad(&format!("{{ root = \"{ROOT}\", first_epoch = 1, epochs = 100001 }}"));
            assert!(e.contains("100001 is not in"), "{e}");
            let e = bad("{ root = \"5eed\", first_epoch = 1, epochs = 1 }");
            assert!(e.contains("64 hex digits") && !e.contains("5eed"), "{e}");
        }
    }
}
