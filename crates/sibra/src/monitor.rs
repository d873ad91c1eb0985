//! Monitoring: deterministic per-reservation policing at the source AS's
//! edge, probabilistic overuse detection in transit and core ASes.
//!
//! * [`EdgeMonitor`]: one token bucket per reservation (rate = the packet's
//!   bandwidth class, burst = 2 ms at that rate by default).
//! * [`CoreMonitor`]: a count-min sketch (conservative update) of bytes per
//!   reservation ID over a measurement window, in fixed memory. A reservation
//!   whose estimate exceeds its allowance by the configured margin becomes a
//!   *suspect*: it gets an exact token bucket (multistage-filter style, so
//!   hash collisions alone never blacklist a flow), and a suspect that
//!   overdraws its bucket is blacklisted until its reservation expires.
//!   Blacklisted packets are dropped before any MAC work.
//!
//! Hashing is keyed (seed from configuration) so that flows cannot choose
//! colliding sketch cells without knowing the seed. The sketch takes one
//! keyed 64-bit hash per packet ([`sketch_hash`]: the two ID halves XORed
//! with two secret words and multiplied 64 × 64 → 128, the halves folded,
//! then mixed by a second multiply-fold) and splits it into four 16-bit
//! row indices. That is not a PRF, but an attacker only ever sees whether
//! a flow is blacklisted, never a cell position, and the exact suspect
//! stage means a collision can at worst make a conforming flow a
//! (released) suspect, never blacklist it.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use crate::types::{BwClass, ResvKey, Tick};
use crate::Error;

/// A fast keyed hasher for reservation keys (not cryptographic).
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyedHasher {
    state: u64,
}

impl Hasher for KeyedHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.state = (self.state ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Builds [`KeyedHasher`]s from a secret seed.
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyedState(pub u64);

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;
    #[inline]
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher { state: self.0 }
    }
}

/// Hash of a reservation key under `seed`.
#[inline]
pub fn key_hash(seed: u64, k: &ResvKey) -> u64 {
    let mut h = KeyedHasher { state: seed ^ u64::from(k.steady) };
    h.write_u64(u64::from_le_bytes(k.id[..8].try_into().unwrap_or_default()));
    h.write_u64(u64::from_le_bytes(k.id[8..].try_into().unwrap_or_default()));
    h.finish()
}

/// The two secret words of [`sketch_hash`], derived from the seed once.
#[inline]
fn sketch_keys(seed: u64) -> [u64; 2] {
    // Chained: two separate derivations whose constants differed in the
    // low bits gave seeds 1 and 2 each other's words, swapped.
    let mut h = KeyedHasher { state: seed };
    h.write_u64(0x736b_6574_6368_0001);
    let a = h.finish();
    h.write_u64(a);
    [a, h.finish()]
}

/// The count-min sketch's per-packet hash of `k` under keys `keys` (see
/// the module docs): a 64 × 64 → 128 multiply of the key-masked ID
/// halves, high and low words folded, then one more multiply-fold by a
/// constant to spread the bits. The steady flag flips a key word so a
/// steady ID and the ephemeral ID with the same bytes differ.
#[inline]
pub fn sketch_hash(keys: &[u64; 2], k: &ResvKey) -> u64 {
    let (lo, hi) = k.id.split_at(8);
    let lo = u64::from_le_bytes(lo.try_into().unwrap_or_default());
    let hi = u64::from_le_bytes(hi.try_into().unwrap_or_default());
    // The constant is odd, so the steady flag always changes the word.
    let steady = u64::from(k.steady).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let m = u128::from(lo ^ keys[0]) * u128::from(hi ^ keys[1] ^ steady);
    // A second (unkeyed) multiply-fold: after one, the low word's low bits
    // depend only on the inputs' low bits, which left sequential IDs lumpy
    // over a row (measured by the spread test below).
    let m = u128::from((m as u64) ^ ((m >> 64) as u64)) * 0x9E37_79B9_7F4A_7C15;
    (m as u64) ^ ((m >> 64) as u64)
}

/// A token bucket in exact integer arithmetic (unit: bit·ns/10^9 = 1 bit, scaled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    /// Tokens in bit·nanoseconds per second (bits × 10^9).
    tokens: u128,
    last_ns: u64,
    rate_bps: u64,
    burst: u128,
}

const NS: u128 = 1_000_000_000;

impl TokenBucket {
    /// A full bucket of rate `rate_bps` and a burst of `burst_ns` at that rate.
    pub fn new(rate_bps: u64, burst_ns: u64, now_ns: u64) -> Self {
        let burst = u128::from(rate_bps) * u128::from(burst_ns);
        TokenBucket { tokens: burst, last_ns: now_ns, rate_bps, burst }
    }

    /// Changes the rate (and burst time) keeping the current fill, capped.
    pub fn set_rate(&mut self, rate_bps: u64, burst_ns: u64) {
        self.rate_bps = rate_bps;
        self.burst = u128::from(rate_bps) * u128::from(burst_ns);
        self.tokens = self.tokens.min(self.burst);
    }

    /// The configured rate.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Takes `bytes` if they fit after refilling to `now_ns`.
    #[inline]
    pub fn take(&mut self, bytes: usize, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        self.tokens = (self.tokens + u128::from(self.rate_bps) * u128::from(dt)).min(self.burst);
        let cost = bytes as u128 * 8 * NS;
        if cost <= self.tokens {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }

    /// Current fill in bytes (rounded down).
    pub fn fill_bytes(&self) -> u64 {
        (self.tokens / (8 * NS)) as u64
    }

    /// Burst size in bytes (rounded down).
    pub fn burst_bytes(&self) -> u64 {
        (self.burst / (8 * NS)) as u64
    }
}

/// What to do with traffic above its reservation at the edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OveruseAction {
    /// Drop it (`DropReason::OverRate`).
    #[default]
    Drop,
    /// Forward it as best effort.
    Demote,
}

/// Edge policing configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeConfig {
    /// Bucket depth as time at the reserved rate (default 2 ms).
    pub burst_ns: u64,
    /// Most reservations policed at once.
    pub capacity: usize,
    /// Overuse action.
    pub action: OveruseAction,
}

impl Default for EdgeConfig {
    fn default() -> Self {
        EdgeConfig { burst_ns: 2_000_000, capacity: 65_536, action: OveruseAction::Drop }
    }
}

/// Edge result for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeVerdict {
    /// Within the reservation.
    Conform,
    /// Above it; apply the configured [`OveruseAction`].
    Exceed,
    /// No room to track the reservation.
    TableFull,
}

#[derive(Clone, Copy, Debug)]
struct EdgeEntry {
    bucket: TokenBucket,
    class: BwClass,
    exp: Tick,
}

/// Per-reservation token buckets at the source AS's egress.
#[derive(Debug)]
pub struct EdgeMonitor {
    cfg: EdgeConfig,
    map: HashMap<ResvKey, EdgeEntry, KeyedState>,
}

impl EdgeMonitor {
    /// An empty monitor; `seed` keys the table hash.
    pub fn new(cfg: EdgeConfig, seed: u64) -> Self {
        EdgeMonitor {
            map: HashMap::with_capacity_and_hasher(cfg.capacity.min(1 << 20), KeyedState(seed)),
            cfg,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EdgeConfig {
        &self.cfg
    }

    /// Polices a `bytes`-long packet of reservation `key` (class `class`,
    /// valid through `exp`) at time `now_ns` / tick `now`.
    #[inline]
    pub fn check(
        &mut self,
        key: &ResvKey,
        class: BwClass,
        exp: Tick,
        bytes: usize,
        now_ns: u64,
        now: Tick,
    ) -> EdgeVerdict {
        if let Some(e) = self.map.get_mut(key) {
            if e.class != class {
                // A renewal changed the class: keep the fill, change the rate.
                e.bucket.set_rate(class.bps(), self.cfg.burst_ns);
                e.class = class;
            }
            e.exp = e.exp.max(exp);
            return if e.bucket.take(bytes, now_ns) {
                EdgeVerdict::Conform
            } else {
                EdgeVerdict::Exceed
            };
        }
        if self.map.len() >= self.cfg.capacity {
            self.map.retain(|_, e| e.exp >= now);
            if self.map.len() >= self.cfg.capacity {
                return EdgeVerdict::TableFull;
            }
        }
        let mut bucket = TokenBucket::new(class.bps(), self.cfg.burst_ns, now_ns);
        let ok = bucket.take(bytes, now_ns);
        self.map.insert(*key, EdgeEntry { bucket, class, exp });
        if ok {
            EdgeVerdict::Conform
        } else {
            EdgeVerdict::Exceed
        }
    }

    /// Reservations tracked.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none are tracked.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Transit/core monitoring configuration (the `monitor` table of
/// `sibra-transit`: every field optional, the times in milliseconds there,
/// `window_ms` and `burst_ms`). `Debug` leaves out the secret seed.
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct CoreConfig {
    /// Sketch rows (hash functions), 1..=4.
    pub rows: usize,
    /// Counters per row (a power of two).
    pub width: usize,
    /// Measurement window (the sketch is reset at each window boundary).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "window_ms", deserialize_with = "crate::config::ms_as_ns")
    )]
    pub window_ns: u64,
    /// Tolerated excess over the reserved rate, in percent.
    pub margin_pct: u32,
    /// Burst allowance as time at the reserved rate.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "burst_ms", deserialize_with = "crate::config::ms_as_ns")
    )]
    pub burst_ns: u64,
    /// Most suspects with exact buckets.
    pub max_suspects: usize,
    /// Most blacklisted reservations.
    pub max_blacklist: usize,
    /// Hash seed (secret).
    pub seed: u64,
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig {
            rows: 4,
            width: 4096,
            window_ns: 1_000_000_000,
            margin_pct: 10,
            burst_ns: 10_000_000,
            max_suspects: 4096,
            max_blacklist: 65_536,
            seed: 0x5eed_51b7_a000_0001,
        }
    }
}

impl core::fmt::Debug for CoreConfig {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CoreConfig")
            .field("rows", &self.rows)
            .field("width", &self.width)
            .field("window_ns", &self.window_ns)
            .field("margin_pct", &self.margin_pct)
            .field("burst_ns", &self.burst_ns)
            .field("max_suspects", &self.max_suspects)
            .field("max_blacklist", &self.max_blacklist)
            .finish_non_exhaustive()
    }
}

/// Result of observing one packet in transit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreVerdict {
    /// Nothing suspicious (or a suspect still within its bucket).
    Ok,
    /// The reservation was blacklisted by this packet.
    Blacklisted,
}

#[derive(Clone, Copy, Debug)]
struct Suspect {
    bucket: TokenBucket,
    since_ns: u64,
}

/// Count-min sketch overuse detection with exact confirmation and a blacklist.
/// `Debug` shows the configuration and table sizes (no sketch cells, no
/// hash keys).
pub struct CoreMonitor {
    cfg: CoreConfig,
    sketch: Vec<u64>,
    /// [`sketch_hash`] keys.
    keys: [u64; 2],
    /// Per row: (start of the row, shift of its 16 hash bits). Rows beyond
    /// `cfg.rows` repeat row 0, so the four-row loop needs no row test (a
    /// repeated cell changes neither the minimum nor the update).
    rows: [(usize, u32); 4],
    window_start: u64,
    /// `(100 + margin) · (now − window start + burst)` for `allow_ns`: the
    /// per-burst factor of the overuse test (see `allowance`).
    allow: u128,
    allow_ns: u64,
    suspects: HashMap<ResvKey, Suspect, KeyedState>,
    blacklist: HashMap<ResvKey, Tick, KeyedState>,
    blacklisted_total: u64,
}

impl CoreMonitor {
    /// Allocates the sketch and tables once.
    pub fn new(cfg: CoreConfig) -> Result<Self, Error> {
        if !(1..=4).contains(&cfg.rows) || !cfg.width.is_power_of_two() || cfg.width > 1 << 16 {
            return Err(Error::Config("core monitor: rows 1..=4, width a power of two ≤ 65536"));
        }
        if cfg.window_ns == 0 {
            return Err(Error::Config("core monitor: window_ns must be positive"));
        }
        let rows = core::array::from_fn(|r| {
            if r < cfg.rows {
                (r * cfg.width, 16 * r as u32)
            } else {
                (0, 0)
            }
        });
        Ok(CoreMonitor {
            sketch: vec![0; cfg.rows * cfg.width],
            keys: sketch_keys(cfg.seed),
            rows,
            window_start: 0,
            allow: 0,
            allow_ns: u64::MAX,
            suspects: HashMap::with_capacity_and_hasher(
                cfg.max_suspects.min(1 << 20),
                KeyedState(cfg.seed ^ 1),
            ),
            blacklist: HashMap::with_capacity_and_hasher(
                cfg.max_blacklist.min(1 << 20),
                KeyedState(cfg.seed ^ 2),
            ),
            blacklisted_total: 0,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// Changes the configuration in place: the window, margin and burst
    /// allowance. The sketch, suspects and blacklist are kept (suspects keep
    /// the bucket they were given; new suspects get the new margin and
    /// burst). `rows`, `width`, `max_suspects` and `max_blacklist` size the
    /// tables and `seed` keys them: a change of any of them is refused with
    /// [`Error::Fixed`] naming it, and nothing changes.
    pub fn retune(&mut self, cfg: CoreConfig) -> Result<(), Error> {
        let c = &self.cfg;
        let fixed = [
            ("rows", c.rows == cfg.rows),
            ("width", c.width == cfg.width),
            ("max_suspects", c.max_suspects == cfg.max_suspects),
            ("max_blacklist", c.max_blacklist == cfg.max_blacklist),
            ("seed", c.seed == cfg.seed),
        ];
        if let Some((key, _)) = fixed.iter().find(|(_, same)| !same) {
            return Err(Error::Fixed(key));
        }
        if cfg.window_ns == 0 {
            return Err(Error::Config("core monitor: window_ns must be positive"));
        }
        self.cfg = cfg;
        // The next burst recomputes its allowance factor.
        self.allow_ns = u64::MAX;
        Ok(())
    }

    /// Whether `key` is blacklisted at tick `now` (entries lapse after expiry).
    #[inline]
    pub fn is_blacklisted(&self, key: &ResvKey, now: Tick) -> bool {
        !self.blacklist.is_empty() && self.blacklist.get(key).is_some_and(|&exp| exp >= now)
    }

    /// Blacklists `key` until tick `exp` (inclusive).
    pub fn blacklist(&mut self, key: ResvKey, exp: Tick, now: Tick) -> Result<(), Error> {
        if self.blacklist.len() >= self.cfg.max_blacklist && !self.blacklist.contains_key(&key) {
            self.blacklist.retain(|_, e| *e >= now);
            if self.blacklist.len() >= self.cfg.max_blacklist {
                return Err(Error::TableFull {
                    what: "blacklist",
                    capacity: self.cfg.max_blacklist,
                });
            }
        }
        let e = self.blacklist.entry(key).or_insert(exp);
        *e = (*e).max(exp);
        self.blacklisted_total += 1;
        Ok(())
    }

    /// Number of reservations blacklisted so far.
    pub fn blacklisted_total(&self) -> u64 {
        self.blacklisted_total
    }

    /// Current number of suspects.
    pub fn suspects(&self) -> usize {
        self.suspects.len()
    }

    /// Starts a new measurement window if `now_ns` is past the current one
    /// (or before it: a clock step). [`observe`](Self::observe) does this
    /// itself; a caller that observes a whole burst at one time calls it
    /// once and then uses [`observe_in_window`](Self::observe_in_window).
    #[inline]
    pub fn roll_window(&mut self, now_ns: u64) {
        if now_ns >= self.window_start.saturating_add(self.cfg.window_ns)
            || now_ns < self.window_start
        {
            self.reset_window(now_ns);
        }
        self.allow = self.allowance(now_ns);
        self.allow_ns = now_ns;
    }

    /// `(100 + margin) · (now − window start + burst)`: a packet's flow is
    /// over its allowance when `bytes · 8 · 10^9 · 100 > bps · allowance`.
    #[inline]
    fn allowance(&self, now_ns: u64) -> u128 {
        let window = now_ns - self.window_start;
        (100 + u128::from(self.cfg.margin_pct))
            * u128::from(window.saturating_add(self.cfg.burst_ns))
    }

    /// The once-per-window part of [`roll_window`](Self::roll_window), out
    /// of line: inlined, its `retain` made every `observe` save and restore
    /// registers (≈ 29 instructions per packet, measured).
    #[cold]
    #[inline(never)]
    fn reset_window(&mut self, now_ns: u64) {
        self.sketch.fill(0);
        self.window_start = now_ns - now_ns % self.cfg.window_ns;
        // Suspects that behaved for a whole window are released.
        let (w, start) = (self.cfg.window_ns, self.window_start);
        self.suspects.retain(|_, s| s.since_ns.saturating_add(w) > start);
    }

    /// Accounts a `bytes`-long packet of reservation `key` (class `class`,
    /// valid through `exp`) at `now_ns` / tick `now`.
    #[inline]
    pub fn observe(
        &mut self,
        key: &ResvKey,
        class: BwClass,
        exp: Tick,
        bytes: usize,
        now_ns: u64,
        now: Tick,
    ) -> CoreVerdict {
        self.roll_window(now_ns);
        self.observe_in_window(key, class, exp, bytes, now_ns, now)
    }

    /// [`observe`](Self::observe) without the window check: the same result
    /// when [`roll_window`](Self::roll_window) was called with this `now_ns`
    /// (a burst's packets share one time, so one call per burst suffices).
    #[inline]
    pub fn observe_in_window(
        &mut self,
        key: &ResvKey,
        class: BwClass,
        exp: Tick,
        bytes: usize,
        now_ns: u64,
        now: Tick,
    ) -> CoreVerdict {
        // Usually no suspects: skip hashing for the table.
        if let Some(s) = (!self.suspects.is_empty()).then(|| self.suspects.get_mut(key)).flatten() {
            if s.bucket.take(bytes, now_ns) {
                return CoreVerdict::Ok;
            }
            self.suspects.remove(key);
            // A full blacklist still drops this packet's flow now via the verdict.
            let _ = self.blacklist(*key, exp, now);
            return CoreVerdict::Blacklisted;
        }
        let h = sketch_hash(&self.keys, key);
        let mask = self.cfg.width - 1;
        let mut idx = [0usize; 4];
        let mut est = u64::MAX;
        // A fixed four-row loop (unrolled, no row test: see `rows`).
        for (i, &(off, shift)) in idx.iter_mut().zip(&self.rows) {
            *i = off + ((h >> shift) as usize & mask);
            est = est.min(self.sketch[*i]);
        }
        let new = est.saturating_add(bytes as u64);
        // Conservative update: raise only the cells below the new estimate.
        for &i in &idx {
            self.sketch[i] = self.sketch[i].max(new);
        }
        // Over the allowance so far this window plus a burst, at the rate plus
        // margin? (`new·8·10^9·100 > bps·(100 + margin)·(window + burst)`, in
        // u128 without a division; the factor is per burst.)
        let allow = if now_ns == self.allow_ns { self.allow } else { self.allowance(now_ns) };
        let lhs = u128::from(new) * 800_000_000_000;
        let rhs = u128::from(class.bps()) * allow;
        if lhs > rhs && self.suspects.len() < self.cfg.max_suspects {
            let rate = u128::from(class.bps()) * u128::from(100 + self.cfg.margin_pct) / 100;
            let rate = rate.min(u128::from(u64::MAX)) as u64;
            let bucket = TokenBucket::new(rate, self.cfg.burst_ns, now_ns);
            self.suspects.insert(*key, Suspect { bucket, since_ns: now_ns });
        }
        CoreVerdict::Ok
    }
}

impl core::fmt::Debug for CoreMonitor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CoreMonitor")
            .field("cfg", &self.cfg)
            .field("window_start", &self.window_start)
            .field("suspects", &self.suspects.len())
            .field("blacklist", &self.blacklist.len())
            .field("blacklisted_total", &self.blacklisted_total)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EphemeralId, SteadyId};

    #[test]
    fn bucket_never_exceeds_burst_and_refills_at_rate() {
        // 8 Mbit/s = 1 byte/ns·10^-3; burst 2 ms = 2000 bytes.
        let mut b = TokenBucket::new(8_000_000, 2_000_000, 0);
        assert_eq!(b.burst_bytes(), 2000);
        assert!(b.take(2000, 0));
        assert!(!b.take(1, 0));
        assert!(b.take(1000, 1_000_000)); // 1 ms refills 1000 bytes
        assert!(!b.take(1, 1_000_000));
        assert!(b.take(2000, 10_000_000_000));
        assert!(!b.take(1, 10_000_000_000));
    }

    #[test]
    fn edge_polices_per_reservation() {
        let mut m = EdgeMonitor::new(EdgeConfig { capacity: 2, ..Default::default() }, 7);
        let c = BwClass::new(20).unwrap(); // 11.86 Mbit/s: 2 ms burst = 2965 bytes
        let k1: ResvKey = EphemeralId([1; 16]).into();
        let k2: ResvKey = SteadyId([1; 8]).into();
        let mut ok = 0;
        for _ in 0..10 {
            if m.check(&k1, c, Tick(5), 1000, 0, Tick(0)) == EdgeVerdict::Conform {
                ok += 1;
            }
        }
        assert_eq!(ok, 2);
        assert_eq!(m.check(&k2, c, Tick(5), 1000, 0, Tick(0)), EdgeVerdict::Conform);
        let k3: ResvKey = EphemeralId([3; 16]).into();
        assert_eq!(m.check(&k3, c, Tick(5), 1000, 0, Tick(0)), EdgeVerdict::TableFull);
        // After the others expire, there is room.
        assert_eq!(m.check(&k3, c, Tick(9), 1000, 0, Tick(6)), EdgeVerdict::Conform);
    }

    #[test]
    fn sketch_hash_is_keyed_and_spreads_rows() {
        let (k1, k2) = (sketch_keys(1), sketch_keys(2));
        let e: ResvKey = EphemeralId([7; 16]).into();
        let s = ResvKey { id: [7; 16], steady: true };
        assert_ne!(sketch_hash(&k1, &e), sketch_hash(&k1, &s));
        assert_ne!(sketch_hash(&k1, &e), sketch_hash(&k2, &e));
        // Sequential IDs (as an attacker might pick them): each 16-bit row
        // index, masked to 64 cells, fills its row about evenly.
        let mut hist = [[0u32; 64]; 4];
        for n in 0..64 * 256u64 {
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&n.to_le_bytes());
            let h = sketch_hash(&k1, &EphemeralId(id).into());
            for (r, row) in hist.iter_mut().enumerate() {
                row[(h >> (16 * r)) as usize & 63] += 1;
            }
        }
        for row in &hist {
            assert!(row.iter().all(|&c| (160..=352).contains(&c)), "{row:?}");
        }
    }

    #[test]
    fn fewer_rows_keep_an_upper_bound() {
        // Rows beyond `rows` repeat row 0: with one row the estimate is that
        // row's cell, so one flow's bytes add up exactly.
        for rows in 1..=4 {
            let cfg = CoreConfig { rows, width: 16, ..Default::default() };
            let mut m = CoreMonitor::new(cfg).unwrap();
            let k: ResvKey = EphemeralId([3; 16]).into();
            let c = BwClass::new(60).unwrap();
            for _ in 0..10 {
                m.observe(&k, c, Tick(5), 100, 1_000, Tick(0));
            }
            assert_eq!(m.sketch.len(), rows * 16);
            let h = sketch_hash(&m.keys, &k);
            for r in 0..rows {
                assert_eq!(m.sketch[r * 16 + ((h >> (16 * r)) as usize & 15)], 1000);
            }
            assert_eq!(m.sketch.iter().filter(|&&v| v != 0).count(), rows);
        }
    }

    #[test]
    fn core_blacklists_overuser_not_conforming_flows() {
        let mut m = CoreMonitor::new(CoreConfig { width: 64, ..Default::default() }).unwrap();
        let c = BwClass::new(10).unwrap(); // 370 kbit/s ≈ 46 kB/s
        let bad: ResvKey = EphemeralId([0xEE; 16]).into();
        let good: Vec<ResvKey> = (0..200u8).map(|i| EphemeralId([i; 16]).into()).collect();
        let mut blacklisted = false;
        // 3 seconds, packets of 500 bytes every ms: the bad flow sends 500 kB/s,
        // the good ones 1 packet every 20 ms (25 kB/s).
        for ms in 0..3000u64 {
            let ns = 5_000_000_000 + ms * 1_000_000;
            if m.observe(&bad, c, Tick(10), 500, ns, Tick(1)) == CoreVerdict::Blacklisted {
                blacklisted = true;
            }
            if ms % 20 == 0 {
                for g in &good {
                    assert_eq!(m.observe(g, c, Tick(10), 500, ns, Tick(1)), CoreVerdict::Ok);
                }
            }
        }
        assert!(blacklisted);
        assert!(m.is_blacklisted(&bad, Tick(10)));
        assert!(!m.is_blacklisted(&bad, Tick(11)));
        assert!(good.iter().all(|g| !m.is_blacklisted(g, Tick(1))));
    }

    #[test]
    fn retune_keeps_the_blacklist_and_refuses_table_sizes() {
        let mut m = CoreMonitor::new(CoreConfig { width: 64, ..Default::default() }).unwrap();
        let k: ResvKey = EphemeralId([9; 16]).into();
        m.blacklist(k, Tick(10), Tick(1)).unwrap();
        let cfg = CoreConfig { window_ns: 500_000_000, margin_pct: 50, ..*m.config() };
        m.retune(cfg).unwrap();
        assert_eq!(*m.config(), cfg);
        assert!(m.is_blacklisted(&k, Tick(5)));
        for (bad, key) in [
            (CoreConfig { rows: 2, ..cfg }, "rows"),
            (CoreConfig { width: 128, ..cfg }, "width"),
            (CoreConfig { seed: 1, ..cfg }, "seed"),
            (CoreConfig { max_blacklist: 1, ..cfg }, "max_blacklist"),
        ] {
            assert_eq!(m.retune(bad), Err(Error::Fixed(key)));
        }
        assert_eq!(m.retune(CoreConfig { window_ns: 0, ..cfg }).map_err(|_| ()), Err(()));
        assert_eq!(*m.config(), cfg);
        assert!(!format!("{m:?}").contains("sketch"));
    }
}
