//! Plain protocol values: bandwidth classes, ticks, indices, path IDs,
//! reservation info and SIBRA opaque fields.

use crate::Error;

/// Highest bandwidth class this crate accepts.
///
/// **Decision:** the class formula overflows 64-bit bit rates above class 100
/// (≈ 13 Ebit/s), so classes 101..=255 are invalid on the wire.
pub const MAX_CLASS: u8 = 100;

/// Bit rate of class `c` rounded down to whole bits per second:
/// `16384 · 2^((c−1)/2)`, `0` for class 0. Exact for odd `c`, the floor of an
/// irrational value for even `c` (computed with an integer square root).
const fn class_bps(c: u8) -> u64 {
    if c == 0 {
        return 0;
    }
    let e = (c - 1) as u32;
    let base = 16_384u128 << (e / 2);
    if e.is_multiple_of(2) {
        base as u64
    } else {
        // floor(base·√2) = floor(√(2·base²)); 2·base² < 2^128 for c ≤ 100.
        (2 * base * base).isqrt() as u64
    }
}

const fn class_table() -> [u64; MAX_CLASS as usize + 1] {
    let mut t = [0u64; MAX_CLASS as usize + 1];
    let mut c = 0;
    while c <= MAX_CLASS as usize {
        t[c] = class_bps(c as u8);
        c += 1;
    }
    t
}

/// Bit rates of all valid classes (strictly increasing).
static CLASS_BPS: [u64; MAX_CLASS as usize + 1] = class_table();

/// A SIBRA bandwidth class (`u8` on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BwClass(u8);

impl BwClass {
    /// Class 0: no bandwidth.
    pub const ZERO: BwClass = BwClass(0);
    /// The highest valid class.
    pub const MAX: BwClass = BwClass(MAX_CLASS);

    /// A class after checking it is at most [`MAX_CLASS`].
    pub const fn new(c: u8) -> Result<Self, Error> {
        if c > MAX_CLASS {
            Err(Error::ClassRange(c))
        } else {
            Ok(BwClass(c))
        }
    }

    /// The wire value.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The class's bit rate (bits per second, rounded down).
    #[inline]
    pub fn bps(self) -> u64 {
        CLASS_BPS[usize::from(self.0)]
    }

    /// The highest class whose rate is at most `bps` (grants round down).
    pub fn floor_from_bps(bps: u64) -> BwClass {
        // partition_point: number of classes with rate ≤ bps (class 0 always).
        let n = CLASS_BPS.partition_point(|&r| r <= bps);
        BwClass((n - 1) as u8)
    }

    /// The lowest class whose rate is at least `bps` (requests round up), or
    /// `None` if no class is that fast.
    pub fn ceil_from_bps(bps: u64) -> Option<BwClass> {
        let n = CLASS_BPS.partition_point(|&r| r < bps);
        (n <= usize::from(MAX_CLASS)).then_some(BwClass(n as u8))
    }

    /// Bytes this class may send in `ns` nanoseconds (rounded down).
    #[inline]
    pub fn bytes_in_ns(self, ns: u64) -> u64 {
        (u128::from(self.bps()) * u128::from(ns) / 8_000_000_000).min(u128::from(u64::MAX)) as u64
    }
}

/// Length of a SIBRA tick in seconds.
pub const TICK_SECS: u64 = 4;
/// Most ticks ahead a steady reservation may expire.
pub const STEADY_HORIZON: u32 = 45;
/// Most ticks ahead an ephemeral reservation may expire.
pub const EPHEMERAL_HORIZON: u32 = 4;

/// SIBRA time: `floor(unix_seconds / 4)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tick(pub u32);

impl Tick {
    /// The tick containing Unix second `secs` (saturating past 2^32 ticks).
    pub const fn from_unix_secs(secs: u64) -> Tick {
        let t = secs / TICK_SECS;
        Tick(if t > u32::MAX as u64 { u32::MAX } else { t as u32 })
    }

    /// The tick of a pipeline time (its wall clock).
    pub const fn of(now: pipeline::Now) -> Tick {
        Tick::from_unix_secs(now.unix_secs())
    }

    /// Unix second at which this tick starts.
    pub const fn start_unix_secs(self) -> u64 {
        self.0 as u64 * TICK_SECS
    }

    /// This tick plus `n` (saturating).
    pub const fn plus(self, n: u32) -> Tick {
        Tick(self.0.saturating_add(n))
    }
}

/// A reservation index (4 bits, 0..16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResvIdx(u8);

impl ResvIdx {
    /// Number of indices.
    pub const COUNT: usize = 16;

    /// An index after checking it fits in 4 bits.
    pub const fn new(i: u8) -> Result<Self, Error> {
        if i > 0x0f {
            Err(Error::IndexRange(i))
        } else {
            Ok(ResvIdx(i))
        }
    }

    /// The index taken from the low 4 bits of `i`.
    pub const fn from_low_bits(i: u8) -> Self {
        ResvIdx(i & 0x0f)
    }

    /// The numeric value.
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The next index (wrapping 15 → 0), used for renewals.
    pub const fn next(self) -> Self {
        ResvIdx((self.0 + 1) & 0x0f)
    }
}

/// Mask of an AS number (48 bits).
const AS_MASK: u64 = (1 << 48) - 1;

/// A steady path ID (8 bytes). **Decision** (sheet): owner AS (48 bits) ‖
/// 16-bit local suffix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SteadyId(pub [u8; 8]);

impl SteadyId {
    /// The ID of the `suffix`-th steady path of AS `owner` (low 48 bits used).
    pub const fn new(owner: u64, suffix: u16) -> Self {
        let v = ((owner & AS_MASK) << 16) | suffix as u64;
        SteadyId(v.to_be_bytes())
    }

    /// The owner AS number.
    pub const fn owner(&self) -> u64 {
        u64::from_be_bytes(self.0) >> 16
    }

    /// The local suffix.
    pub const fn suffix(&self) -> u16 {
        u16::from_be_bytes([self.0[6], self.0[7]])
    }
}

/// An ephemeral path ID (16 bytes). **Decision** (sheet): source AS (48 bits)
/// ‖ 80 random bits (the caller supplies the randomness; this crate is sans-IO).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EphemeralId(pub [u8; 16]);

impl EphemeralId {
    /// The ID for source AS `src` with `random` as its 80-bit suffix.
    pub fn new(src: u64, random: [u8; 10]) -> Self {
        let mut b = [0u8; 16];
        b[..6].copy_from_slice(&(src & AS_MASK).to_be_bytes()[2..]);
        b[6..].copy_from_slice(&random);
        EphemeralId(b)
    }

    /// The source AS number.
    pub fn source(&self) -> u64 {
        let mut a = [0u8; 8];
        a[2..].copy_from_slice(&self.0[..6]);
        u64::from_be_bytes(a)
    }
}

/// A reservation's identity in monitoring and revocation tables: the path ID
/// (steady IDs zero-padded) and its kind, so the two ID spaces never collide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResvKey {
    /// The ID bytes (a steady ID fills the first 8).
    pub id: [u8; 16],
    /// Whether this is a steady reservation.
    pub steady: bool,
}

impl From<SteadyId> for ResvKey {
    fn from(s: SteadyId) -> Self {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&s.0);
        ResvKey { id, steady: true }
    }
}

impl From<EphemeralId> for ResvKey {
    fn from(e: EphemeralId) -> Self {
        ResvKey { id: e.0, steady: false }
    }
}

/// Reservation info (8 bytes on the wire):
/// `exp_tick u32 | bw_fwd u8 | bw_rev u8 | idx(4) F(1) rsv(3) | fail_hop u8`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResvInfo {
    /// Last tick in which the reservation is valid (`exp_tick ≥ now_tick`).
    pub exp_tick: Tick,
    /// Forward bandwidth class.
    pub bw_fwd: BwClass,
    /// Reverse bandwidth class.
    pub bw_rev: BwClass,
    /// Reservation index.
    pub index: ResvIdx,
    /// F: the direction a registered steady path is used in.
    pub fwd: bool,
    /// 1-based hop that denied a request (0: none).
    pub fail_hop: u8,
}

impl ResvInfo {
    /// The wire bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let e = self.exp_tick.0.to_be_bytes();
        [
            e[0],
            e[1],
            e[2],
            e[3],
            self.bw_fwd.0,
            self.bw_rev.0,
            (self.index.0 << 4) | if self.fwd { 0x08 } else { 0 },
            self.fail_hop,
        ]
    }

    /// The form covered by SOF MACs: F and fail_hop zeroed (reserved bits too).
    pub fn mac_bytes(&self) -> [u8; 8] {
        ResvInfo { fwd: false, fail_hop: 0, ..*self }.to_bytes()
    }

    /// Decodes a packet's ResvInfo view (classes above [`MAX_CLASS`] are rejected).
    pub fn from_view<T: AsRef<[u8]>>(v: &packet::scion::sibra::ResvInfo<T>) -> Result<Self, Error> {
        Ok(ResvInfo {
            exp_tick: Tick(v.exp_tick()),
            bw_fwd: BwClass::new(v.bw_fwd())?,
            bw_rev: BwClass::new(v.bw_rev())?,
            index: ResvIdx::from_low_bits(v.index()),
            fwd: v.fwd(),
            fail_hop: v.fail_hop(),
        })
    }

    /// Writes this info into a packet's ResvInfo view.
    pub fn write<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut packet::scion::sibra::ResvInfo<T>) {
        v.set_exp_tick(self.exp_tick.0);
        v.set_bw_fwd(self.bw_fwd.0);
        v.set_bw_rev(self.bw_rev.0);
        v.set_index_fwd(self.index.0, self.fwd);
        v.set_fail_hop(self.fail_hop);
    }

    /// The equivalent owned packet representation.
    pub fn to_repr(&self) -> packet::scion::sibra::ResvInfoRepr {
        packet::scion::sibra::ResvInfoRepr {
            exp_tick: self.exp_tick.0,
            bw_fwd: self.bw_fwd.0,
            bw_rev: self.bw_rev.0,
            index: self.index.0,
            fwd: self.fwd,
            fail_hop: self.fail_hop,
        }
    }
}

/// A SIBRA opaque field: `ingress u16 | egress u16 | mac[4]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Sof {
    /// Ingress interface (0: the AS itself, i.e. the path starts here).
    pub ingress: u16,
    /// Egress interface (0: the path ends here).
    pub egress: u16,
    /// Truncated CBC-MAC.
    pub mac: [u8; 4],
}

impl Sof {
    /// The wire bytes.
    pub fn to_bytes(&self) -> [u8; 8] {
        let (i, e, m) = (self.ingress.to_be_bytes(), self.egress.to_be_bytes(), self.mac);
        [i[0], i[1], e[0], e[1], m[0], m[1], m[2], m[3]]
    }

    /// Decodes the wire bytes.
    pub fn from_bytes(b: &[u8; 8]) -> Self {
        Sof {
            ingress: u16::from_be_bytes([b[0], b[1]]),
            egress: u16::from_be_bytes([b[2], b[3]]),
            mac: [b[4], b[5], b[6], b[7]],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The class examples of the sheet, in Kibit/s (1024 bit/s).
    #[test]
    fn class_examples() {
        let kib = |c: u8| BwClass::new(c).unwrap().bps() / 1024;
        assert_eq!(BwClass::ZERO.bps(), 0);
        assert_eq!(kib(1), 16);
        assert_eq!(BwClass::new(1).unwrap().bps(), 16_384);
        assert_eq!(kib(9), 256);
        assert_eq!(BwClass::new(9).unwrap().bps(), 262_144);
        assert_eq!(kib(10), 362); // 16384·2^4.5 = 370727.6
        assert_eq!(BwClass::new(10).unwrap().bps(), 370_727);
        assert_eq!(kib(12), 724);
        assert_eq!(BwClass::new(12).unwrap().bps(), 741_455);
        // ≈ 11.6 "Mibit/s" in the sheet = 11585 Kibit/s.
        assert_eq!(kib(20), 11_585);
        assert_eq!(BwClass::new(20).unwrap().bps(), 11_863_283);
        assert!(BwClass::new(101).is_err());
        assert_eq!(BwClass::MAX.bps(), 13_043_817_825_332_782_212);
    }

    #[test]
    fn class_rounding() {
        let c10 = BwClass::new(10).unwrap();
        // Exact rates map to themselves both ways.
        for c in 0..=MAX_CLASS {
            let k = BwClass::new(c).unwrap();
            assert_eq!(BwClass::floor_from_bps(k.bps()), k);
            assert_eq!(BwClass::ceil_from_bps(k.bps()), Some(k));
        }
        // Between classes: grants round down, requests round up.
        assert_eq!(BwClass::floor_from_bps(c10.bps() + 1), c10);
        assert_eq!(BwClass::ceil_from_bps(c10.bps() + 1), BwClass::new(11).ok());
        assert_eq!(BwClass::floor_from_bps(c10.bps() - 1), BwClass::new(9).unwrap());
        assert_eq!(BwClass::ceil_from_bps(1), BwClass::new(1).ok());
        assert_eq!(BwClass::floor_from_bps(16_383), BwClass::ZERO);
        assert_eq!(BwClass::floor_from_bps(u64::MAX), BwClass::MAX);
        assert_eq!(BwClass::ceil_from_bps(u64::MAX), None);
    }

    #[test]
    fn ids_and_info_bytes() {
        let s = SteadyId::new(0xff00_0000_0110, 7);
        assert_eq!(s.0, [0xff, 0, 0, 0, 0x01, 0x10, 0, 7]);
        assert_eq!((s.owner(), s.suffix()), (0xff00_0000_0110, 7));
        let e = EphemeralId::new(0x1_0000_0002, [9; 10]);
        assert_eq!(&e.0[..6], &[0, 1, 0, 0, 0, 2]);
        assert_eq!(e.source(), 0x1_0000_0002);
        let info = ResvInfo {
            exp_tick: Tick(0x0102_0304),
            bw_fwd: BwClass::new(12).unwrap(),
            bw_rev: BwClass::new(3).unwrap(),
            index: ResvIdx::new(5).unwrap(),
            fwd: true,
            fail_hop: 2,
        };
        assert_eq!(info.to_bytes(), [1, 2, 3, 4, 12, 3, 0x58, 2]);
        assert_eq!(info.mac_bytes(), [1, 2, 3, 4, 12, 3, 0x50, 0]);
        let sof = Sof { ingress: 0x0102, egress: 0x0304, mac: [5, 6, 7, 8] };
        assert_eq!(Sof::from_bytes(&sof.to_bytes()), sof);
        assert_eq!(Tick::from_unix_secs(4_000_000_003), Tick(1_000_000_000));
        assert_eq!(ResvIdx::new(15).unwrap().next(), ResvIdx::new(0).unwrap());
    }
}
