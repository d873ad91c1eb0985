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
}
