//! Epochs (the validity periods of secret values) and the grace period.
//!
//! All times are Unix time in **nanoseconds** (`u64`), as the pipeline's
//! `Now::unix_ns` carries them; epoch bounds are whole Unix seconds (`u32`), as
//! SCION encodes them. Nothing here reads a clock.

use crate::Error;

/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;
/// Shortest allowed epoch (6 minutes).
pub const MIN_EPOCH_SECS: u32 = 6 * 60;
/// Longest allowed epoch (3 days).
pub const MAX_EPOCH_SECS: u32 = 3 * 24 * 60 * 60;
/// Default grace period: a key of the previous epoch is still accepted for 5 s
/// after that epoch ends.
pub const DEFAULT_GRACE_NS: u64 = 5 * NS_PER_SEC;

/// The validity period `[begin, end)` of one secret value, in Unix seconds.
///
/// `end` is exclusive so that back-to-back epochs (`next.begin == prev.end`)
/// never both *contain* a time; the previous epoch stays *acceptable* during
/// the grace period instead (see [`Epoch::accepts`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Epoch {
    begin: u32,
    end: u32,
}

impl Epoch {
    /// An epoch `[begin, end)`; its length must lie in
    /// [`MIN_EPOCH_SECS`]..=[`MAX_EPOCH_SECS`].
    pub const fn new(begin: u32, end: u32) -> Result<Self, Error> {
        if end <= begin {
            return Err(Error::EpochOrder { begin, end });
        }
        let secs = end - begin;
        if secs < MIN_EPOCH_SECS || secs > MAX_EPOCH_SECS {
            return Err(Error::EpochLength { secs });
        }
        Ok(Epoch { begin, end })
    }

    /// First second of the epoch (inclusive).
    pub const fn begin(self) -> u32 {
        self.begin
    }

    /// End of the epoch (exclusive).
    pub const fn end(self) -> u32 {
        self.end
    }

    /// Length in seconds.
    pub const fn len_secs(self) -> u32 {
        self.end - self.begin
    }

    /// Whether `begin <= t < end`.
    #[inline]
    pub const fn contains(self, unix_ns: u64) -> bool {
        unix_ns >= self.begin as u64 * NS_PER_SEC && unix_ns < self.end as u64 * NS_PER_SEC
    }

    /// Whether a key of this epoch is acceptable at `t`: `begin <= t < end + grace`.
    #[inline]
    pub const fn accepts(self, unix_ns: u64, grace_ns: u64) -> bool {
        unix_ns >= self.begin as u64 * NS_PER_SEC
            && unix_ns < self.end as u64 * NS_PER_SEC + grace_ns
    }

    /// Whether `t` lies in the grace period right after this epoch:
    /// `end <= t < end + grace`.
    #[inline]
    pub const fn in_grace(self, unix_ns: u64, grace_ns: u64) -> bool {
        let end = self.end as u64 * NS_PER_SEC;
        unix_ns >= end && unix_ns < end + grace_ns
    }
}

/// The epochs whose keys are acceptable at one instant: the one containing it
/// and, during the grace period, the one that just ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Selection {
    /// The epoch containing the instant, if known.
    pub current: Option<Epoch>,
    /// The previous epoch, if the instant is within its grace period.
    pub previous: Option<Epoch>,
}

impl Selection {
    /// Picks, among `epochs` (pairwise non-overlapping, e.g. the installed
    /// secret values), the one containing `t` and the one whose grace period
    /// covers `t`.
    pub fn among(epochs: impl IntoIterator<Item = Epoch>, unix_ns: u64, grace_ns: u64) -> Self {
        let mut s = Selection::default();
        for e in epochs {
            if e.contains(unix_ns) {
                s.current = Some(e);
            } else if e.in_grace(unix_ns, grace_ns) {
                s.previous = Some(e);
            }
        }
        s
    }

    /// The acceptable epochs, current first (try the current key first: after
    /// the grace period's first few milliseconds almost all traffic uses it).
    pub fn iter(&self) -> impl Iterator<Item = Epoch> {
        self.current.into_iter().chain(self.previous)
    }

    /// Whether no epoch is acceptable.
    pub fn is_empty(&self) -> bool {
        self.current.is_none() && self.previous.is_none()
    }

    /// Whether `epoch` is acceptable.
    pub fn contains(&self, epoch: Epoch) -> bool {
        self.current == Some(epoch) || self.previous == Some(epoch)
    }
}

/// A regular epoch schedule as SCION's control service uses it: epochs of a
/// fixed duration aligned to multiples of that duration since the Unix epoch
/// (`begin = ⌊t / d⌋ · d`), plus a grace period.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct EpochSchedule {
    duration_secs: u32,
    grace_ns: u64,
}

impl EpochSchedule {
    /// A schedule of `duration_secs`-long epochs (which must be a valid epoch
    /// length) with the given grace period (default [`DEFAULT_GRACE_NS`]).
    pub const fn new(duration_secs: u32, grace_ns: u64) -> Result<Self, Error> {
        if duration_secs < MIN_EPOCH_SECS || duration_secs > MAX_EPOCH_SECS {
            return Err(Error::EpochLength { secs: duration_secs });
        }
        Ok(EpochSchedule { duration_secs, grace_ns })
    }

    /// Epoch duration in seconds.
    pub const fn duration_secs(&self) -> u32 {
        self.duration_secs
    }

    /// Grace period in nanoseconds.
    pub const fn grace_ns(&self) -> u64 {
        self.grace_ns
    }

    /// The epoch containing `t`, or `None` when it would end after 2106
    /// (beyond SCION's 32-bit seconds).
    pub const fn epoch_at(&self, unix_ns: u64) -> Option<Epoch> {
        let d = self.duration_secs as u64;
        let begin = unix_ns / NS_PER_SEC / d * d;
        let end = begin + d;
        if end > u32::MAX as u64 {
            return None;
        }
        Some(Epoch { begin: begin as u32, end: end as u32 })
    }

    /// The epochs acceptable at `t`: the current one and, within the grace
    /// period after an epoch change, the previous one.
    pub const fn select(&self, unix_ns: u64) -> Selection {
        let current = self.epoch_at(unix_ns);
        let previous = match current {
            Some(c)
                if c.begin >= self.duration_secs
                    && unix_ns < c.begin as u64 * NS_PER_SEC + self.grace_ns =>
            {
                Some(Epoch { begin: c.begin - self.duration_secs, end: c.begin })
            }
            _ => None,
        };
        Selection { current, previous }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = NS_PER_SEC;

    #[test]
    fn length_limits() {
        assert!(Epoch::new(0, MIN_EPOCH_SECS).is_ok());
        assert!(Epoch::new(0, MAX_EPOCH_SECS).is_ok());
        assert_eq!(Epoch::new(0, MIN_EPOCH_SECS - 1), Err(Error::EpochLength { secs: 359 }));
        assert_eq!(
            Epoch::new(10, 10 + MAX_EPOCH_SECS + 1),
            Err(Error::EpochLength { secs: MAX_EPOCH_SECS + 1 })
        );
        assert_eq!(Epoch::new(5, 5), Err(Error::EpochOrder { begin: 5, end: 5 }));
        assert_eq!(Epoch::new(9, 5), Err(Error::EpochOrder { begin: 9, end: 5 }));
        assert!(EpochSchedule::new(MIN_EPOCH_SECS - 1, 0).is_err());
    }

    #[test]
    fn half_open_and_grace() {
        let e = Epoch::new(1000, 2000).unwrap();
        assert!(!e.contains(1000 * S - 1));
        assert!(e.contains(1000 * S));
        assert!(e.contains(2000 * S - 1));
        assert!(!e.contains(2000 * S));
        assert!(e.accepts(2000 * S + 5 * S - 1, DEFAULT_GRACE_NS));
        assert!(!e.accepts(2005 * S, DEFAULT_GRACE_NS));
        assert!(!e.accepts(999 * S, DEFAULT_GRACE_NS));
        assert!(e.in_grace(2000 * S, DEFAULT_GRACE_NS));
        assert!(!e.in_grace(1999 * S, DEFAULT_GRACE_NS));
    }

    #[test]
    fn schedule_select_at_boundaries() {
        let s = EpochSchedule::new(86_400, DEFAULT_GRACE_NS).unwrap();
        let day = 86_400u64;
        let t0 = 19_675 * day; // an epoch boundary
        let prev = Epoch::new((t0 - day) as u32, t0 as u32).unwrap();
        let cur = Epoch::new(t0 as u32, (t0 + day) as u32).unwrap();
        assert_eq!(s.select(t0 * S - 1), Selection { current: Some(prev), previous: None });
        assert_eq!(s.select(t0 * S), Selection { current: Some(cur), previous: Some(prev) });
        assert_eq!(
            s.select(t0 * S + 5 * S - 1),
            Selection { current: Some(cur), previous: Some(prev) }
        );
        assert_eq!(s.select(t0 * S + 5 * S), Selection { current: Some(cur), previous: None });
        // The first epoch has no predecessor; beyond 2106 there is no epoch.
        assert_eq!(s.select(0).previous, None);
        assert!(s.select(u64::MAX).is_empty());
    }

    #[test]
    fn selection_among_installed() {
        let a = Epoch::new(0, 1000).unwrap();
        let b = Epoch::new(1000, 2000).unwrap();
        let c = Epoch::new(3000, 4000).unwrap();
        let sel = Selection::among([a, b, c], 1002 * S, DEFAULT_GRACE_NS);
        assert_eq!(sel.iter().collect::<std::vec::Vec<_>>(), [b, a]);
        // A gap between epochs: only the grace period of `b` applies.
        let sel = Selection::among([a, b, c], 2004 * S, DEFAULT_GRACE_NS);
        assert_eq!((sel.current, sel.previous), (None, Some(b)));
        assert!(Selection::among([a, b, c], 2500 * S, DEFAULT_GRACE_NS).is_empty());
    }
}
