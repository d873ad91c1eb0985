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
    sketch_hash_with(&SketchKeys::new(keys), k)
}

/// [`sketch_hash`]'s keys with the steady flag's word folded in: `hi[s]`
/// is `keys[1] ^ s · C` (`C` the odd constant), looked up by the flag
/// instead of multiplied per packet.
#[derive(Clone, Copy, Debug)]
struct SketchKeys {
    lo: u64,
    hi: [u64; 2],
}

impl SketchKeys {
    fn new(keys: &[u64; 2]) -> Self {
        // The constant is odd, so the steady flag always changes the word.
        SketchKeys { lo: keys[0], hi: [keys[1], keys[1] ^ 0x9E37_79B9_7F4A_7C15] }
    }
}

/// [`sketch_hash`] with the keys prepared ([`SketchKeys`]).
#[inline(always)]
fn sketch_hash_with(keys: &SketchKeys, k: &ResvKey) -> u64 {
    let (lo, hi) = k.id.split_at(8);
    let lo = u64::from_le_bytes(lo.try_into().unwrap_or_default());
    let hi = u64::from_le_bytes(hi.try_into().unwrap_or_default());
    let m = u128::from(lo ^ keys.lo) * u128::from(hi ^ keys.hi[usize::from(k.steady)]);
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

/// Cells of the widest sketch: four rows of 2^16 (see `CoreMonitor::sketch`).
const SKETCH_CELLS: usize = 4 << 16;

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
    /// The cells: row `r`, column `c` at `2^16·r + c`. Sized for the widest
    /// sketch, so that an index made of a 2-bit row and a 16-bit column is
    /// in bounds by its type (no bounds test per row) and a row's start is
    /// a constant offset; only the first `width` cells of each row in use
    /// are ever touched (the allocation is zeroed lazily by the system, so
    /// the rest costs address space only).
    sketch: Box<[u64; SKETCH_CELLS]>,
    /// [`sketch_hash`] keys, prepared for the per-packet hash.
    hash_keys: SketchKeys,
    /// Column mask, `width − 1`.
    mask: u16,
    /// The column mask in each of the four 16-bit lanes of a hash.
    mask4: u64,
    window_start: u64,
    /// `(100 + margin) · (now − window start + burst)` for `allow_ns`: the
    /// per-burst factor of the overuse test (see `allowance`).
    allow: u128,
    allow_ns: u64,
    /// Per bandwidth class (indexed by the class's byte: in bounds by its
    /// type, no mask per packet; classes are ≤ 100): a lower bound of the
    /// largest estimate under the current allowance, a cached form of the
    /// overuse test. With `rhs` = `bps · allow`, an estimate `new` is over
    /// when `new · 8 · 10^11 > rhs`, that is when `new > ⌊rhs / (8 ·
    /// 10^11)⌋`, exactly. Every entry was computed at an
    /// `allow` at most the current one (the table is cleared whenever
    /// `allow` decreases: a new window, a clock step, a retune; or exceeds
    /// `u64`), so it is a lower bound of the current threshold: an estimate
    /// at or under it is under the allowance without the 128-bit products,
    /// and one above it takes the exact test, which then refreshes the
    /// entry. 0 (cleared) is a lower bound of every threshold.
    thresholds: [u64; 256],
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
        let sketch = vec![0; SKETCH_CELLS].into_boxed_slice().try_into().ok();
        Ok(CoreMonitor {
            sketch: sketch.ok_or(Error::Config("core monitor: sketch allocation"))?,
            hash_keys: SketchKeys::new(&sketch_keys(cfg.seed)),
            mask: (cfg.width - 1) as u16,
            mask4: (cfg.width as u64 - 1) * 0x0001_0001_0001_0001,
            window_start: 0,
            allow: 0,
            allow_ns: u64::MAX,
            thresholds: [0; 256],
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

    /// Whether any reservation is on the blacklist (lapsed entries included).
    #[inline]
    pub fn has_blacklist(&self) -> bool {
        !self.blacklist.is_empty()
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
        let allow = self.allowance(now_ns);
        // Thresholds cached under a larger factor would be too high.
        if allow < self.allow || allow > u128::from(u64::MAX) {
            self.thresholds = [0; 256];
        }
        self.allow = allow;
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
        for row in self.sketch.chunks_exact_mut(1 << 16).take(self.cfg.rows) {
            if let Some(used) = row.get_mut(..self.cfg.width) {
                used.fill(0);
            }
        }
        self.window_start = now_ns - now_ns % self.cfg.window_ns;
        // Suspects that behaved for a whole window are released.
        let (w, start) = (self.cfg.window_ns, self.window_start);
        self.suspects.retain(|_, s| s.since_ns.saturating_add(w) > start);
    }

    /// The sketch indices of the four cells of hash `h` with four rows
    /// (the default): row `r` takes the column `(h >> 16·r) & (width − 1)`.
    /// Constant shifts and row offsets; every index is below `4 · 2^16` by
    /// its type.
    #[inline(always)]
    fn cells(&self, h: u64) -> [usize; 4] {
        // One mask for the four columns; the row starts added (not ORed),
        // so that they fold into the cell loads' address displacements.
        let h = h & self.mask4;
        let col = |r: u32| usize::from((h >> (16 * r)) as u16);
        [col(0), (1 << 16) + col(1), (2 << 16) + col(2), (3 << 16) + col(3)]
    }

    /// [`cells`](Self::cells) with fewer than four rows: rows beyond
    /// `cfg.rows` repeat row 0.
    #[inline(never)]
    fn cells_fewer(&self, h: u64) -> [usize; 4] {
        core::array::from_fn(|r| {
            let r = if r < self.cfg.rows { r & 3 } else { 0 };
            r << 16 | usize::from((h >> (16 * r)) as u16 & self.mask)
        })
    }

    /// [`update`] with fewer than four rows (out of line: the usual sketch
    /// has four).
    #[inline(never)]
    fn update_fewer(&mut self, h: u64, bytes: u64) -> u64 {
        let idx = self.cells_fewer(h);
        update(&mut self.sketch, idx, bytes)
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
        self.observe_at::<false>(key, class, exp, bytes, now_ns, now)
    }

    /// [`observe_in_window`](Self::observe_in_window) right after
    /// [`roll_window`](Self::roll_window)`(now_ns)` (a burst's packets, all
    /// at `now_ns`): the same result without the per-packet test whether
    /// the window was rolled to `now_ns`. Only for that case: a later
    /// `now_ns` would be judged against the rolled allowance.
    #[inline(always)]
    pub(crate) fn observe_rolled(
        &mut self,
        key: &ResvKey,
        class: BwClass,
        exp: Tick,
        bytes: usize,
        now_ns: u64,
        now: Tick,
    ) -> CoreVerdict {
        debug_assert_eq!(now_ns, self.allow_ns);
        self.observe_at::<true>(key, class, exp, bytes, now_ns, now)
    }

    /// [`observe_in_window`](Self::observe_in_window); `ROLLED`: the caller
    /// rolled the window to `now_ns` (see [`observe_rolled`](Self::observe_rolled)).
    #[inline(always)]
    fn observe_at<const ROLLED: bool>(
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
        let h = sketch_hash_with(&self.hash_keys, key);
        // Two copies of the update: merged, the four indices went through
        // the stack (measured).
        let new = if self.cfg.rows == 4 {
            let idx = self.cells(h);
            update(&mut self.sketch, idx, bytes as u64)
        } else {
            self.update_fewer(h, bytes as u64)
        };
        // Over the allowance so far this window plus a burst, at the rate plus
        // margin? (`new·8·10^9·100 > bps·(100 + margin)·(window + burst)`, in
        // u128 without a division; the factor is per burst.) Usually decided
        // by the class's cached threshold (see `thresholds`).
        let rolled = ROLLED || now_ns == self.allow_ns;
        let slot = usize::from(class.get());
        if rolled && new <= self.thresholds[slot] {
            // Under a threshold of this class: under the allowance.
            return CoreVerdict::Ok;
        }
        let allow = if rolled { self.allow } else { self.allowance(now_ns) };
        let lhs = u128::from(new) * 800_000_000_000;
        let rhs = u128::from(class.bps()) * allow;
        if lhs > rhs {
            if self.suspects.len() < self.cfg.max_suspects {
                let rate = u128::from(class.bps()) * u128::from(100 + self.cfg.margin_pct) / 100;
                let rate = rate.min(u128::from(u64::MAX)) as u64;
                let bucket = TokenBucket::new(rate, self.cfg.burst_ns, now_ns);
                self.suspects.insert(*key, Suspect { bucket, since_ns: now_ns });
            }
        } else if rolled && allow <= u128::from(u64::MAX) {
            // `rhs` is exact here (a product of two `u64`s): the largest
            // estimate under the allowance at this burst's factor.
            let bytes = (rhs / 800_000_000_000).min(u128::from(u64::MAX)) as u64;
            self.thresholds[slot] = bytes;
        }
        CoreVerdict::Ok
    }
}

/// The conservative update of the cells `idx` by `bytes`: the new
/// estimate (the least cell plus `bytes`, saturating), and every cell below
/// it raised to it. From the values read first: a cell taken twice (a
/// repeated row 0) had the same value both times, so it gets the same
/// result.
#[inline(always)]
fn update(sketch: &mut [u64; SKETCH_CELLS], idx: [usize; 4], bytes: u64) -> u64 {
    let old = idx.map(|i| sketch[i % SKETCH_CELLS]);
    let est = old[0].min(old[1]).min(old[2]).min(old[3]);
    let new = est.saturating_add(bytes);
    for (&i, v) in idx.iter().zip(old) {
        sketch[i % SKETCH_CELLS] = v.max(new);
    }
    new
}

/// What [`CoreMonitor::state`] returns.
#[cfg(test)]
type MonitorState = (Vec<u64>, Vec<(ResvKey, u64)>, Vec<(ResvKey, Tick)>, u64);

#[cfg(test)]
impl CoreMonitor {
    /// The state the monitor decides by, for tests that hold two stages'
    /// monitors equal: the sketch cells in use, the suspects and the
    /// blacklist (sorted), and the count of blacklistings.
    pub(crate) fn state(&self) -> MonitorState {
        let width = self.cfg.width;
        let cells = self
            .sketch
            .chunks_exact(1 << 16)
            .take(self.cfg.rows)
            .flat_map(|row| row[..width].iter().copied())
            .collect();
        let mut suspects: Vec<_> = self.suspects.iter().map(|(k, s)| (*k, s.since_ns)).collect();
        suspects.sort();
        let mut blacklist: Vec<_> = self.blacklist.iter().map(|(k, t)| (*k, *t)).collect();
        blacklist.sort();
        (cells, suspects, blacklist, self.blacklisted_total)
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
            let h = sketch_hash_with(&m.hash_keys, &k);
            for r in 0..rows {
                assert_eq!(m.cell(r, (h >> (16 * r)) as usize & 15), 1000);
            }
            assert_eq!(m.sketch.iter().filter(|&&v| v != 0).count(), rows);
        }
    }

    impl CoreMonitor {
        /// Row `r`, column `c`.
        fn cell(&self, r: usize, c: usize) -> u64 {
            self.sketch[r << 16 | c]
        }
    }

    /// The count-min sketch as specified, row by row (one row after the
    /// other in memory, `width` apart, a loop over the rows): the reference
    /// the monitor's fixed-stride rows, unrolled update and cached overuse
    /// thresholds are checked against.
    struct RefSketch {
        rows: usize,
        width: usize,
        cells: Vec<u64>,
    }

    impl RefSketch {
        fn observe(&mut self, h: u64, bytes: u64) -> u64 {
            let idx: Vec<usize> = (0..self.rows)
                .map(|r| r * self.width + ((h >> (16 * r)) as usize & (self.width - 1)))
                .collect();
            let est = idx.iter().map(|&i| self.cells[i]).min().unwrap();
            let new = est.saturating_add(bytes);
            for &i in &idx {
                self.cells[i] = self.cells[i].max(new);
            }
            new
        }
    }

    /// The monitor against [`RefSketch`] and the overuse test computed
    /// directly (no cached thresholds): cells and new suspects, over
    /// bursts (one roll, several packets, observed with or without the
    /// per-packet roll test), per-packet rolls, observations
    /// at a time not rolled to, window changes and clock steps back.
    #[test]
    fn sketch_matches_the_row_by_row_reference() {
        use proptest::prelude::*;
        use proptest::test_runner::{Config, TestRunner};
        const W: u64 = 1_000_000_000;
        let mut runner = TestRunner::new(Config { cases: 96, ..Config::default() });
        // (flow, steady, bytes, class, time step, how observed)
        let step = prop_oneof![
            6 => Just(0i64),
            6 => 0i64..2_000_000,
            1 => Just(1_500_000_000i64),
            1 => -3_000_000i64..0,
        ];
        let pkt = (0u8..24, any::<bool>(), 1u64..3000, 10u8..16, step, 0u8..4);
        let strategy = (1usize..=4, 0u32..=6, 0u32..50, proptest::collection::vec(pkt, 1..400));
        runner
            .run(&strategy, |(rows, wbits, margin_pct, pkts)| {
                let width = 1 << wbits;
                let cfg = CoreConfig { rows, width, margin_pct, ..Default::default() };
                let mut m = CoreMonitor::new(cfg).unwrap();
                let mut r = RefSketch { rows, width, cells: vec![0; rows * width] };
                let mut ws = 0u64;
                let mut ns = 5_000_000_000u64;
                for &(id, steady, bytes, class, dt, how) in &pkts {
                    let k = ResvKey { id: [id; 16], steady };
                    let c = BwClass::new(class).unwrap();
                    ns = ns.saturating_add_signed(dt);
                    // `observe_in_window` at a time not rolled to: only
                    // inside the current window (its precondition).
                    let unrolled = how == 2 && ns >= ws && ns < ws + W && ns != m.allow_ns;
                    // Otherwise a roll: per burst (1; 3 observes it with
                    // `observe_rolled`) or by `observe` (0).
                    let how = if how == 2 && !unrolled { 0 } else { how };
                    if !unrolled && (ns >= ws + W || ns < ws) {
                        r.cells.fill(0);
                        ws = ns - ns % W;
                    }
                    // A suspect (after a new window released those that
                    // behaved) bypasses the sketch.
                    let known =
                        m.suspects.get(&k).is_some_and(|s| s.since_ns.saturating_add(W) > ws);
                    // (3 at the time last rolled to: a later packet of
                    // the burst, no roll of its own.)
                    if how == 1 || (how == 3 && ns != m.allow_ns) {
                        m.roll_window(ns);
                    }
                    if how == 0 {
                        m.observe(&k, c, Tick(5), bytes as usize, ns, Tick(0));
                    } else if how == 3 {
                        m.observe_rolled(&k, c, Tick(5), bytes as usize, ns, Tick(0));
                    } else {
                        m.observe_in_window(&k, c, Tick(5), bytes as usize, ns, Tick(0));
                    }
                    if known {
                        continue;
                    }
                    let new = r.observe(sketch_hash_with(&m.hash_keys, &k), bytes);
                    let allow = u128::from(100 + margin_pct) * u128::from(ns - ws + cfg.burst_ns);
                    let over = u128::from(new) * 800_000_000_000 > u128::from(c.bps()) * allow;
                    // (A count would not do: a new window releases suspects.)
                    prop_assert_eq!(m.suspects.contains_key(&k), over);
                    for row in 0..rows {
                        for col in 0..width {
                            prop_assert_eq!(m.cell(row, col), r.cells[row * width + col]);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn sketch_hash_is_the_documented_formula() {
        // The multiply-folds of the module docs, written out.
        let formula = |keys: &[u64; 2], k: &ResvKey| {
            let lo = u64::from_le_bytes(k.id[..8].try_into().unwrap());
            let hi = u64::from_le_bytes(k.id[8..].try_into().unwrap());
            let steady = if k.steady { 0x9E37_79B9_7F4A_7C15 } else { 0 };
            let m = u128::from(lo ^ keys[0]) * u128::from(hi ^ keys[1] ^ steady);
            let m = u128::from((m as u64) ^ ((m >> 64) as u64)) * 0x9E37_79B9_7F4A_7C15;
            (m as u64) ^ ((m >> 64) as u64)
        };
        let mut x = 0x0123_4567_89ab_cdefu64;
        for seed in 0..64u64 {
            let keys = sketch_keys(seed);
            for _ in 0..64 {
                let mut id = [0u8; 16];
                for b in id.chunks_mut(8) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    b.copy_from_slice(&x.to_le_bytes());
                }
                for steady in [false, true] {
                    let k = ResvKey { id, steady };
                    assert_eq!(sketch_hash(&keys, &k), formula(&keys, &k));
                    assert_eq!(sketch_hash_with(&SketchKeys::new(&keys), &k), formula(&keys, &k));
                }
            }
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
