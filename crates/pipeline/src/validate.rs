//! [`Validate`]: the checks a typed configuration runs beyond its syntax.
//!
//! Protocol crates own the configuration types of their stages (serde
//! derives behind their `serde` feature) and check them here, without
//! knowing the router's file format: an error names the key path inside the
//! stage's table and the reason; the runtime adds the file, line and the
//! stage's position (`pipeline[2].beta`).

use core::fmt;

/// A configuration value that is not acceptable: which key, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Dotted key path inside the element's table (`rates[1].bps`); empty
    /// for the table as a whole.
    pub key: String,
    /// What is wrong, with the allowed range or alternatives.
    pub reason: String,
}

impl Invalid {
    /// An error about `key`.
    pub fn at(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Invalid { key: key.into(), reason: reason.into() }
    }

    /// Prefixes the key path with `prefix` (a table or an array element).
    #[must_use]
    pub fn under(mut self, prefix: &str) -> Self {
        self.key = nest(prefix, &self.key);
        self
    }
}

/// The key path `key` inside the table or array element at `prefix`:
/// `nest("rates", "[1].bps")` is `rates[1].bps`, `nest("a", "b")` is `a.b`.
pub fn nest(prefix: &str, key: &str) -> String {
    if key.is_empty() || key == "." {
        prefix.to_string()
    } else if key.starts_with('[') {
        format!("{prefix}{key}")
    } else {
        format!("{prefix}.{key}")
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "`{}`: {}", self.key, self.reason)
        }
    }
}

impl std::error::Error for Invalid {}

/// A typed configuration that checks itself: ranges, finiteness,
/// duplicates, orderings, anything serde's types cannot say.
pub trait Validate {
    /// `Ok` if every value is acceptable; otherwise the first offending key.
    fn validate(&self) -> Result<(), Invalid>;

    /// Bytes an element built from this configuration allocates up front
    /// (tables, queues, caches), per worker: the router adds these up and
    /// refuses a configuration the machine cannot hold before allocating
    /// anything. Small, fixed-size elements keep the default, 0.
    fn footprint(&self) -> u64 {
        0
    }

    /// Turns the configured totals into one worker's share, for a router
    /// that runs an instance on each of `workers` workers: every rate the
    /// configuration holds (link capacities, policer, bucket and shaper
    /// rates) is a property of the link, AS or host, so each instance gets
    /// `1 / workers` of it ([`share`], [`share_f64`]). Bursts, queue and
    /// table sizes stay as configured. Called once, after
    /// [`Validate::validate`] succeeded; configurations without rates keep
    /// the default, which changes nothing.
    fn split_rates(&mut self, workers: usize) {
        let _ = workers;
    }
}

/// One worker's share of the integer rate `total` among `workers`, rounded
/// up so that a non-zero rate never becomes 0 (which often means "never");
/// the instances together exceed `total` by less than `workers` units.
pub fn share(total: u64, workers: usize) -> u64 {
    let n = workers.max(1) as u64;
    total.div_ceil(n)
}

/// One worker's share of the rate `total` among `workers`.
pub fn share_f64(total: f64, workers: usize) -> f64 {
    total / workers.max(1) as f64
}

/// Checks that `value` (at `key`) is finite and within `[lo, hi]`.
pub fn in_range(key: &str, value: f64, lo: f64, hi: f64) -> Result<(), Invalid> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(Invalid::at(key, format!("{value} is not in [{lo}, {hi}]")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_nest_and_ranges_reject_nan() {
        let e = Invalid::at("bps", "must be positive").under("rates[1]").under("pipeline[2]");
        assert_eq!(e.key, "pipeline[2].rates[1].bps");
        assert_eq!(Invalid::at("[0]", "x").under("queues").key, "queues[0]");
        assert_eq!(Invalid::at("", "x").under("bounds").key, "bounds");
        assert!(in_range("f", f64::NAN, 0.0, 1.0).is_err());
        assert!(in_range("f", 1.5, 0.0, 1.0).is_err());
        assert!(in_range("f", 1.0, 0.0, 1.0).is_ok());
    }

    #[test]
    fn shares_round_up_and_never_reach_zero() {
        assert_eq!(share(1_000_000, 2), 500_000);
        assert_eq!(share(1_000_001, 2), 500_001);
        assert_eq!(share(1, 4), 1);
        assert_eq!(share(0, 4), 0);
        assert_eq!(share(u64::MAX, 1), u64::MAX);
        assert_eq!(share(7, 0), 7, "no workers counts as one");
        assert_eq!(share_f64(3.0, 2), 1.5);
    }
}
