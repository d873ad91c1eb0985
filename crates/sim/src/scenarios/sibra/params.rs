//! Parameters of the SIBRA scenarios (every field is read from the
//! scenario's TOML file) and their checks.

use serde::Deserialize;

use crate::scenarios::{positive, ScenarioError};

/// Parameters of the Fig. 7/8(a) scenario (all read from the TOML file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig7Params {
    /// RNG seed.
    pub seed: u64,
    /// Divide paper rates by this for the simulated link.
    pub scale: f64,
    /// Capacity of every interface of B (paper units, Gbit/s).
    pub capacity_gbps: f64,
    /// Attacker counts to run.
    pub attacker_counts: Vec<u32>,
    /// Bot ASes holding a steady path each (attackers are spread over them).
    pub attack_ases: u32,
    /// Steady bandwidth requested by the legitimate AS and every bot AS (Mbit/s).
    pub steady_mbps: f64,
    /// Best-effort flood per attacker (paper units, Mbit/s).
    pub flood_mbps_per_attacker: f64,
    /// Ephemeral requests per second per attacker (simulated time, not
    /// scaled: admission runs at paper size).
    pub attack_requests_per_s: f64,
    /// Ephemeral bandwidth each attack request asks for (kbit/s).
    pub attack_bw_kbps: f64,
    /// Interval between the legitimate source's requests (ms of simulated time).
    pub legit_interval_ms: f64,
    /// Ephemeral bandwidth each legitimate request asks for (kbit/s).
    pub legit_bw_kbps: f64,
    /// Size of flood packets (bytes).
    pub packet_bytes: usize,
    /// Packets per egress queue.
    pub queue_packets: usize,
    /// Simulated time per attacker count (s).
    pub duration_s: f64,
    /// Simulation tick (µs).
    pub tick_us: f64,
}

impl Default for Fig7Params {
    fn default() -> Self {
        Fig7Params {
            seed: 1,
            scale: 1000.0,
            capacity_gbps: 10.0,
            attacker_counts: vec![0, 10, 50, 100, 200],
            attack_ases: 4,
            steady_mbps: 50.0,
            flood_mbps_per_attacker: 500.0,
            attack_requests_per_s: 20.0,
            attack_bw_kbps: 1000.0,
            legit_interval_ms: 50.0,
            legit_bw_kbps: 500.0,
            packet_bytes: 1000,
            queue_packets: 256,
            duration_s: 2.0,
            tick_us: 100.0,
        }
    }
}

impl Fig7Params {
    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: &str| Err(ScenarioError::Param(m.into()));
        if self.scale.is_nan() || self.scale < 1.0 || !positive(self.capacity_gbps) {
            return bad("scale must be >= 1 and capacity_gbps positive");
        }
        if self.attacker_counts.is_empty() || self.attack_ases == 0 || self.attack_ases > 200 {
            return bad("attacker_counts must be non-empty and attack_ases in [1, 200]");
        }
        if !positive(self.legit_interval_ms)
            || !positive(self.duration_s)
            || !positive(self.tick_us)
        {
            return bad("legit_interval_ms, duration_s and tick_us must be positive");
        }
        if self.packet_bytes < 64 || self.packet_bytes > 9000 {
            return bad("packet_bytes must lie in [64, 9000]");
        }
        Ok(())
    }
}

/// Parameters of Fig. 8(b): bandwidth waste vs request/reply loss.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig8bParams {
    /// RNG seed.
    pub seed: u64,
    /// Capacity of every interface of B (Gbit/s).
    pub capacity_gbps: f64,
    /// Steady bandwidth of the sources' path over B (Mbit/s).
    pub steady_mbps: f64,
    /// Ephemeral setups per second over the steady path.
    pub requests_per_s: f64,
    /// Smallest and largest ephemeral bandwidth asked for (kbit/s),
    /// drawn log-uniformly.
    pub min_kbps: f64,
    /// See `min_kbps`.
    pub max_kbps: f64,
    /// Loss rates applied independently to requests (after B) and replies
    /// (before and after B, half each).
    pub loss_rates: Vec<f64>,
    /// Ticks after which B reclaims an unconfirmed index (the admission's
    /// `confirm_ticks`; its default is the ephemeral horizon, 4).
    pub confirm_ticks: u32,
    /// Reply timeout (s): a source that gets no reply within it re-sends
    /// the same request. The paper gives an RTT of 1 s; a timeout must
    /// exceed the RTT, and 2 × RTT is the usual choice.
    pub reply_timeout_s: f64,
    /// Re-sends of one request before the source gives up.
    pub max_retries: u32,
    /// Time simulated per loss rate (s).
    pub duration_s: f64,
    /// Waste is averaged from this time on (s), after the first reservations expire.
    pub warmup_s: f64,
}

impl Default for Fig8bParams {
    fn default() -> Self {
        Fig8bParams {
            seed: 1,
            capacity_gbps: 10.0,
            steady_mbps: 50.0,
            requests_per_s: 50.0,
            min_kbps: 50.0,
            max_kbps: 6400.0,
            loss_rates: vec![0.0, 0.02, 0.04, 0.06, 0.08, 0.1],
            confirm_ticks: 1,
            reply_timeout_s: 2.0,
            max_retries: 3,
            duration_s: 60.0,
            warmup_s: 20.0,
        }
    }
}

impl Fig8bParams {
    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
        if !positive(self.requests_per_s)
            || !positive(self.min_kbps)
            || self.max_kbps < self.min_kbps
            || !positive(self.duration_s - self.warmup_s)
            || self.reply_timeout_s.is_nan()
            || self.reply_timeout_s < 0.0
            || self.loss_rates.iter().any(|l| !(0.0..1.0).contains(l))
        {
            return Err(ScenarioError::Param(
                "fig8b: rates positive, min_kbps <= max_kbps, warmup_s < duration_s, reply_timeout_s >= 0, losses in [0, 1)"
                    .into(),
            ));
        }
        Ok(())
    }
}
