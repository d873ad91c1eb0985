//! The request channel: ephemeral setup requests travel over steady paths,
//! and together they may use at most a configured share of an interface
//! (5% by default, the rate limit for reservation requests that SIBRA shares
//! with TVA and Portcullis). Within that cap every steady path is entitled
//! to a part weighted by its steady bandwidth (the same weight as its
//! ephemeral share, [`Admission::ephemeral_share`]), so how many requests
//! other paths send (how many bots their ASes contain) does not change what
//! a path's own requests get through.
//!
//! [`RequestLimiter`] is a policer: one token bucket per (steady path,
//! egress interface), refilled at `cap(x) · W(P) / ΣW(x)`, with a burst of
//! `burst_ns` at that rate. The rate follows the current weights (read from
//! the admission state at each request), so a path set up or expired changes
//! the others' rates at once. Requests over their path's rate are dropped
//! before admission, which is what keeps a flood of requests cheap.
//!
//! With `per_path = false` a single bucket per interface enforces only the
//! aggregate cap (first come, first served), the set-up related designs use;
//! it exists to measure what the per-path weighting adds.

use std::collections::HashMap;

use super::ledger::muldiv;
use super::{Admission, Dir};
use crate::types::SteadyId;
use crate::Error;

/// Configuration of the request channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimitConfig {
    /// Share of each interface's capacity for requests, in percent (default 5).
    pub share_pct: u8,
    /// Burst each bucket may save up, in ns of its rate (default 1 s).
    pub burst_ns: u64,
    /// Weight the cap by steady path (default) or enforce only the aggregate.
    pub per_path: bool,
    /// Most buckets held (one per steady path and egress interface).
    pub max_paths: usize,
}

impl Default for RequestLimitConfig {
    fn default() -> Self {
        RequestLimitConfig {
            share_pct: 5,
            burst_ns: 1_000_000_000,
            per_path: true,
            max_paths: 65_536,
        }
    }
}

/// A token bucket in bit·ns units (bits × 10⁹), exact in integers.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: u128,
    last_ns: u64,
}

impl Bucket {
    /// Refills at `rate_bps` up to `burst_ns` worth, then takes `bits` if
    /// they are there.
    fn take(&mut self, rate_bps: u64, burst_ns: u64, bits: u64, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        let cap = u128::from(rate_bps) * u128::from(burst_ns);
        self.tokens = (self.tokens + u128::from(rate_bps) * u128::from(dt)).min(cap);
        let need = u128::from(bits) * 1_000_000_000;
        if self.tokens >= need {
            self.tokens -= need;
            true
        } else {
            false
        }
    }
}

/// Counters of the request channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestCounters {
    /// Requests let through to admission.
    pub passed: u64,
    /// Requests dropped over their path's (or the channel's) rate.
    pub dropped: u64,
}

/// Per-steady-path policer of the request channel (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct RequestLimiter {
    cfg: RequestLimitConfig,
    buckets: HashMap<(SteadyId, u16), Bucket>,
    aggregate: HashMap<u16, Bucket>,
    counters: RequestCounters,
}

impl Default for RequestLimiter {
    /// A limiter with the default configuration (5%, 1 s, per path).
    fn default() -> Self {
        RequestLimiter {
            cfg: RequestLimitConfig::default(),
            buckets: HashMap::new(),
            aggregate: HashMap::new(),
            counters: RequestCounters::default(),
        }
    }
}

impl RequestLimiter {
    /// A limiter with no buckets yet; refuses a share above 100%.
    pub fn new(cfg: RequestLimitConfig) -> Result<Self, Error> {
        if cfg.share_pct > 100 {
            return Err(Error::Config("request share above 100%"));
        }
        Ok(RequestLimiter {
            cfg,
            buckets: HashMap::new(),
            aggregate: HashMap::new(),
            counters: RequestCounters::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RequestLimitConfig {
        &self.cfg
    }

    /// Changes the configuration in place (a live change), keeping the
    /// counters and, while `per_path` stays, the buckets: their next refill
    /// follows the new share and caps them at the new burst. Switching
    /// `per_path` starts the other kind of buckets afresh. A lower
    /// `max_paths` than the buckets held refuses new paths until
    /// [`RequestLimiter::prune`] has made room. Refuses a share above 100%
    /// (and changes nothing then).
    pub fn set_config(&mut self, cfg: RequestLimitConfig) -> Result<(), Error> {
        if cfg.share_pct > 100 {
            return Err(Error::Config("request share above 100%"));
        }
        if cfg.per_path != self.cfg.per_path {
            self.buckets.clear();
            self.aggregate.clear();
        }
        self.cfg = cfg;
        Ok(())
    }

    /// Buckets held (per path and interface, or per interface without
    /// `per_path`).
    pub fn len(&self) -> usize {
        self.buckets.len() + self.aggregate.len()
    }

    /// Whether no bucket is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Counters so far.
    pub fn counters(&self) -> &RequestCounters {
        &self.counters
    }

    /// The request rate (bit/s) steady path `steady` is entitled to on
    /// `egress` now: the interface's request cap weighted by the path's
    /// steady bandwidth (0 for a path not held here or an unknown interface).
    pub fn path_rate(&self, adm: &Admission, steady: &SteadyId, egress: u16) -> u64 {
        let cap = self.channel_rate(adm, egress);
        match adm.steady_weight(steady, egress, Dir::Out) {
            Some((w, total)) if total > 0 => muldiv(cap, w, total),
            _ => 0,
        }
    }

    /// The whole request channel of `egress` (bit/s).
    pub fn channel_rate(&self, adm: &Admission, egress: u16) -> u64 {
        adm.interfaces()
            .find(|i| i.ifid == egress)
            .map_or(0, |i| i.capacity_bps / 100 * u64::from(self.cfg.share_pct))
    }

    /// Whether a request of `bytes` arriving over steady path `steady` and
    /// leaving on `egress` at `now_ns` fits the channel: `Ok(true)` passes
    /// it on to admission, `Ok(false)` drops it. A path with no rate here
    /// (not held, or not leaving on `egress`) is dropped without taking a
    /// bucket, so such requests cannot fill the table. A full bucket table
    /// is an error (the request should be dropped too).
    pub fn admit(
        &mut self,
        adm: &Admission,
        steady: &SteadyId,
        egress: u16,
        bytes: usize,
        now_ns: u64,
    ) -> Result<bool, Error> {
        let bits = (bytes as u64).saturating_mul(8);
        let burst = self.cfg.burst_ns;
        let ok = if self.cfg.per_path {
            let rate = self.path_rate(adm, steady, egress);
            if rate == 0 {
                self.counters.dropped += 1;
                return Ok(false);
            }
            let full = self.buckets.len() >= self.cfg.max_paths;
            let b = match self.buckets.get_mut(&(*steady, egress)) {
                Some(b) => b,
                None if full => {
                    self.counters.dropped += 1;
                    return Err(Error::TableFull {
                        what: "request bucket",
                        capacity: self.cfg.max_paths,
                    });
                }
                // A new path starts with a full burst, as if it had been idle.
                None => self.buckets.entry((*steady, egress)).or_insert(Bucket {
                    tokens: u128::from(rate) * u128::from(burst),
                    last_ns: now_ns,
                }),
            };
            b.take(rate, burst, bits, now_ns)
        } else {
            let rate = self.channel_rate(adm, egress);
            let b = self.aggregate.entry(egress).or_insert(Bucket {
                tokens: u128::from(rate) * u128::from(burst),
                last_ns: now_ns,
            });
            b.take(rate, burst, bits, now_ns)
        };
        if ok {
            self.counters.passed += 1;
        } else {
            self.counters.dropped += 1;
        }
        Ok(ok)
    }

    /// Forgets the buckets of paths no longer held by `adm` (call now and
    /// then, e.g. once per tick).
    pub fn prune(&mut self, adm: &Admission) {
        self.buckets.retain(|(id, x), _| adm.steady_weight(id, *x, Dir::Out).is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{AdmissionConfig, IfaceConfig, Split, SteadyRequest};
    use crate::types::{BwClass, ResvIdx, ResvInfo, Tick};

    const T0: Tick = Tick(1000);

    /// An AS with interfaces 1, 2 (in) and 3 (out) of 1 Gbit/s, and steady
    /// paths `(owner, ingress, class)` from 1 or 2 to 3.
    fn setup(paths: &[(u64, u16, u8)]) -> Admission {
        let mut cfg = AdmissionConfig::default();
        for i in 1..=3 {
            cfg.interfaces.push(IfaceConfig {
                ifid: i,
                capacity_bps: 1_000_000_000,
                split: Split::default(),
            });
        }
        let mut a = Admission::new(cfg, T0).unwrap();
        for &(owner, ingress, c) in paths {
            let info = ResvInfo {
                exp_tick: Tick(T0.0 + 40),
                bw_fwd: BwClass::new(c).unwrap(),
                bw_rev: BwClass::new(c).unwrap(),
                index: ResvIdx::from_low_bits(0),
                fwd: true,
                fail_hop: 0,
            };
            let q = SteadyRequest { id: SteadyId::new(owner, 1), ingress, egress: 3, info };
            assert_eq!(a.steady(&q, T0).unwrap(), crate::admission::Decision::Granted);
        }
        a
    }

    /// Requests of 125 bytes at `per_s` over `sid` for one second; how many pass.
    fn send(l: &mut RequestLimiter, a: &Admission, sid: SteadyId, per_s: u64, t0: u64) -> u64 {
        let gap = 1_000_000_000 / per_s;
        (0..per_s).filter(|k| l.admit(a, &sid, 3, 125, t0 + k * gap).unwrap()).count() as u64
    }

    #[test]
    fn rates_are_the_cap_weighted_by_steady_bandwidth() {
        let a = setup(&[(1, 1, 10), (2, 2, 10), (3, 2, 12)]);
        let l = RequestLimiter::new(RequestLimitConfig::default()).unwrap();
        let cap = l.channel_rate(&a, 3);
        assert_eq!(cap, 50_000_000);
        let r: Vec<u64> = (1..=3).map(|o| l.path_rate(&a, &SteadyId::new(o, 1), 3)).collect();
        // Class 12 is twice class 10; the rates add up to the cap.
        assert_eq!(r[0], r[1]);
        assert!(r[2].abs_diff(2 * r[0]) <= 2 * r[0] / 100_000, "{r:?}");
        let sum: u64 = r.iter().sum();
        assert!(sum <= cap && sum + 3 >= cap, "{r:?}");
        assert_eq!(l.path_rate(&a, &SteadyId::new(9, 1), 3), 0, "unknown path");
    }

    #[test]
    fn a_flooding_path_does_not_take_another_paths_rate() {
        let a = setup(&[(1, 1, 10), (2, 2, 10)]);
        let cfg = RequestLimitConfig { burst_ns: 10_000_000, ..Default::default() };
        let mut l = RequestLimiter::new(cfg).unwrap();
        let (good, bad) = (SteadyId::new(1, 1), SteadyId::new(2, 1));
        // Each path may send 25 Mbit/s = 25 000 requests of 125 B per second.
        let mut passed_good = 0;
        for s in 0..3u64 {
            let t0 = s * 1_000_000_000;
            passed_good += send(&mut l, &a, good, 20_000, t0);
            send(&mut l, &a, bad, 100_000, t0);
        }
        assert_eq!(passed_good, 60_000, "all of the well-behaved path's requests pass");
        assert!(l.counters().dropped >= 3 * 70_000, "{:?}", l.counters());
    }

    #[test]
    fn the_aggregate_cap_alone_lets_a_flood_crowd_out_others() {
        let a = setup(&[(1, 1, 10), (2, 2, 10)]);
        let cfg =
            RequestLimitConfig { burst_ns: 10_000_000, per_path: false, ..Default::default() };
        let mut l = RequestLimiter::new(cfg).unwrap();
        let (good, bad) = (SteadyId::new(1, 1), SteadyId::new(2, 1));
        let (mut g, mut b) = (0, 0);
        for k in 0..100_000u64 {
            let t = k * 10_000;
            if k % 5 == 0 {
                g += u64::from(l.admit(&a, &good, 3, 125, t).unwrap());
            }
            b += u64::from(l.admit(&a, &bad, 3, 125, t + 1).unwrap());
        }
        // 120 000 requests/s offered against a 50 000/s channel: both lose.
        assert!(g < 20_000 * 3 / 4, "good {g}, bad {b}");
        assert!(b + g <= 50_000 + 500, "good {g}, bad {b}");
    }

    #[test]
    fn bucket_table_is_bounded_and_pruned() {
        let mut a = setup(&[(1, 1, 10), (2, 2, 10)]);
        let cfg = RequestLimitConfig { max_paths: 1, ..Default::default() };
        let mut l = RequestLimiter::new(cfg).unwrap();
        assert!(l.admit(&a, &SteadyId::new(1, 1), 3, 125, 0).unwrap());
        // An unknown path has rate 0: dropped, and it takes no bucket.
        assert_eq!(l.admit(&a, &SteadyId::new(7, 1), 3, 125, 0), Ok(false));
        assert_eq!(l.len(), 1);
        // A second held path finds the table full.
        assert!(matches!(
            l.admit(&a, &SteadyId::new(2, 1), 3, 125, 0),
            Err(Error::TableFull { .. })
        ));
        assert_eq!(l.counters(), &RequestCounters { passed: 1, dropped: 2 });
        l.prune(&a);
        assert_eq!(l.len(), 1, "held paths keep their bucket");
        // Once the paths expire, pruning forgets their buckets.
        a.advance(Tick(T0.0 + 41));
        l.prune(&a);
        assert!(l.is_empty());
        assert!(RequestLimiter::new(RequestLimitConfig { share_pct: 101, ..Default::default() })
            .is_err());
    }

    #[test]
    fn a_live_change_keeps_counters_and_follows_the_new_share() {
        let a = setup(&[(1, 1, 10)]);
        let cfg = RequestLimitConfig { burst_ns: 10_000_000, ..Default::default() };
        let mut l = RequestLimiter::new(cfg).unwrap();
        let sid = SteadyId::new(1, 1);
        // The only path: the whole 50 Mbit/s channel, 50 000 requests/s.
        let passed = send(&mut l, &a, sid, 100_000, 0);
        assert!((50_000..=50_600).contains(&passed), "{passed}");
        let before = *l.counters();
        l.set_config(RequestLimitConfig { share_pct: 1, ..cfg }).unwrap();
        assert_eq!(l.counters(), &before, "counters are kept");
        assert_eq!(l.len(), 1, "so is the bucket");
        // 1% of 1 Gbit/s: 10 000 requests/s (and a burst of 10 ms of that).
        let passed = send(&mut l, &a, sid, 100_000, 1_000_000_000);
        assert!((9_900..=10_100).contains(&passed), "{passed}");
        assert!(l.set_config(RequestLimitConfig { share_pct: 101, ..cfg }).is_err());
        assert_eq!(l.config().share_pct, 1, "a refused change changes nothing");
        // Switching to the aggregate starts its buckets afresh.
        l.set_config(RequestLimitConfig { per_path: false, ..cfg }).unwrap();
        assert!(l.is_empty());
    }
}
