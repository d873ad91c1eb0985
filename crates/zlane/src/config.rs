//! Typed configuration and its validation.

use packet::Ia;

use crate::bucket::{rate_units, MAX_RATE_BPS};
use crate::hvf::Freshness;
use crate::keys::EPIC_Z_PROTOCOL;

/// Why a configuration is rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The scheduling bounds add up to more than 100 %.
    #[error("scheduling bounds sum to {sum_percent:.3} % (> 100 %)")]
    BoundsExceed {
        /// Their sum in percent.
        sum_percent: f64,
    },
    /// A bound is negative or not a number.
    #[error("scheduling bound of queue {queue} is invalid: {value}")]
    BadBound {
        /// Queue name.
        queue: &'static str,
        /// The value.
        value: f64,
    },
    /// The egress capacity is zero.
    #[error("egress capacity is zero")]
    ZeroCapacity,
    /// A queue length is zero.
    #[error("a queue length is zero")]
    ZeroQueue,
    /// A burst or quantum is below one MTU (1500 bytes).
    #[error("burst/quantum of {bytes} bytes is below 1500")]
    BurstTooSmall {
        /// The value.
        bytes: u64,
    },
    /// A rate exceeds what the 8-byte bucket can hold (6.5535 Gbit/s).
    #[error("rate {bps} bit/s for {origin} exceeds {MAX_RATE_BPS} bit/s")]
    RateTooHigh {
        /// The AS, ISD or prefix.
        origin: String,
        /// The rate.
        bps: u64,
    },
    /// Relative rates add up to more than 100 % of μ_G.
    #[error("relative rates sum to {sum_percent:.3} % of mu_G (> 100 %)")]
    PercentExceed {
        /// Their sum.
        sum_percent: f64,
    },
    /// Guaranteed rates add up to more than μ_G × capacity.
    #[error("guaranteed rates sum to {sum_bps} bit/s, more than mu_G x capacity = {g_bps} bit/s")]
    RatesExceedG {
        /// Sum of the rates.
        sum_bps: u64,
        /// μ_G × capacity.
        g_bps: u64,
    },
    /// The same origin is configured twice.
    #[error("origin {origin} configured twice")]
    Duplicate {
        /// The origin.
        origin: String,
    },
    /// A table cannot hold the configured entries.
    #[error("table full: {what}")]
    TableFull {
        /// Which table.
        what: &'static str,
    },
    /// A prefix is malformed.
    #[error("bad prefix: {what}")]
    BadPrefix {
        /// Why.
        what: &'static str,
    },
}

/// Scheduling bounds as fractions of egress capacity (Table 2 defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
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

impl Bounds {
    /// Each bound in [0, 1] and their sum ≤ 1 (with 1e-9 slack for decimal input).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let all = [("R", self.r), ("N", self.n), ("G", self.g), ("A", self.a), ("U", self.u)];
        for (queue, value) in all {
            if !(0.0..=1.0).contains(&value) {
                return Err(ConfigError::BadBound { queue, value });
            }
        }
        let sum: f64 = all.iter().map(|(_, v)| v).sum();
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError::BoundsExceed { sum_percent: sum * 100.0 });
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

    fn name(&self) -> String {
        match self {
            Origin::As(ia) => format!("AS {ia}"),
            Origin::Isd(i) => format!("ISD {i}"),
        }
    }
}

/// Border-router Z-Lane configuration for one egress interface.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterConfig {
    /// The router's own IA (its ISD decides per-AS vs per-ISD buckets).
    pub local_ia: Ia,
    /// Egress capacity in bit/s (μ_G refers to it).
    pub capacity_bps: u64,
    /// μ_G as a fraction of capacity.
    pub mu_g: f64,
    /// Shared burst of all AS/ISD buckets, bytes (≥ 1500).
    pub burst: u16,
    /// Origins with a guaranteed rate; `None` = equal share of what the
    /// explicit rates leave of μ_G × capacity.
    pub rates: Vec<(Origin, Option<Rate>)>,
    /// Freshness window.
    pub freshness: Freshness,
    /// DRKey protocol id of EPIC-Z.
    pub protocol_id: u16,
    /// Drop EPIC-Z packets whose reserved flag bits (all but Q) are set
    /// (`zlane.md`: "rest zero"); `false` ignores them, as SCION usually
    /// treats reserved bits.
    pub strict_flags: bool,
    /// Entries of the expanded level-2 host-key cache
    /// ([`crate::keys::HostKeyCache`]).
    pub host_key_cache: usize,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            local_ia: Ia::new(1, 1),
            capacity_bps: 10_000_000_000,
            mu_g: Bounds::default().g,
            burst: 9000,
            rates: Vec::new(),
            freshness: Freshness::default(),
            protocol_id: EPIC_Z_PROTOCOL,
            host_key_cache: crate::keys::DEFAULT_HOST_KEY_CACHE,
            strict_flags: true,
        }
    }
}

impl RouterConfig {
    /// μ_G × capacity in bit/s.
    pub fn g_bps(&self) -> u64 {
        (self.capacity_bps as f64 * self.mu_g) as u64
    }

    /// Resolves every origin's rate to bit/s, validating the whole set.
    pub fn resolve(&self) -> Result<Vec<(Origin, u64)>, ConfigError> {
        if self.burst < 1500 {
            return Err(ConfigError::BurstTooSmall { bytes: self.burst.into() });
        }
        let g = self.g_bps();
        let mut seen = std::collections::HashSet::new();
        let mut pct = 0.0;
        let mut explicit = 0u64;
        let mut defaults = 0u64;
        for (o, r) in &self.rates {
            if !seen.insert(o.key()) {
                return Err(ConfigError::Duplicate { origin: o.name() });
            }
            match r {
                Some(Rate::Bps(b)) => explicit = explicit.saturating_add(*b),
                Some(Rate::PercentOfG(p)) => {
                    pct += p;
                    explicit = explicit.saturating_add((g as f64 * p / 100.0) as u64);
                }
                None => defaults += 1,
            }
        }
        if pct > 100.0 + 1e-9 {
            return Err(ConfigError::PercentExceed { sum_percent: pct });
        }
        if explicit > g {
            return Err(ConfigError::RatesExceedG { sum_bps: explicit, g_bps: g });
        }
        let share = (g - explicit).checked_div(defaults).unwrap_or(0);
        self.rates
            .iter()
            .map(|(o, r)| {
                let bps = match r {
                    Some(Rate::Bps(b)) => *b,
                    Some(Rate::PercentOfG(p)) => (g as f64 * p / 100.0) as u64,
                    None => share,
                };
                rate_units(bps)
                    .map(|_| (*o, bps))
                    .ok_or_else(|| ConfigError::RateTooHigh { origin: o.name(), bps })
            })
            .collect()
    }
}
