//! Parameters of the SIBRA scenarios (every field is read from the
//! scenario's TOML file) and their checks.

use serde::Deserialize;

use crate::scenarios::{positive, ScenarioError};

/// Where the DoC attack of Fig. 7 takes place.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Isd {
    /// Fig. 7(a): source, destination and every contaminated AS in ISD2;
    /// all requests cross one core link.
    #[default]
    Intra,
    /// Fig. 7(b): the legitimate source in ISD1, the destination in ISD2,
    /// `contaminated_ases` in each ISD; requests from ISD1 cross the ISD1
    /// core link and then the ISD2 core link, those from ISD2 the latter.
    Inter,
}

/// Parameters of Fig. 7 (all read from the TOML file).
///
/// Counts and rates are the paper's (§V-B); `scale` divides the link rate,
/// the number of contaminated ASes and the number of attackers together,
/// so every per-AS quantity (hosts per AS, requests per host, steady
/// bandwidth, and so each steady path's share of the request channel) stays
/// as in the paper while the simulated packet count shrinks by `scale`.
/// `isd` selects Fig. 7(a) ([`Fig7Params::default`]) or Fig. 7(b)
/// ([`Fig7Params::inter_isd`]).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig7Params {
    /// RNG seed.
    pub seed: u64,
    /// Intra-ISD (Fig. 7(a), the default when absent) or inter-ISD (Fig. 7(b)).
    #[serde(default)]
    pub isd: Isd,
    /// Divides link rate, contaminated ASes and attackers (1 = paper size).
    pub scale: f64,
    /// Capacity of each core link the requests cross (one in Fig. 7(a), one
    /// per ISD in Fig. 7(b)) and of every interface of the core ASes (Gbit/s).
    pub capacity_gbps: f64,
    /// Attacker counts to run (paper counts; divided by `scale`), spread
    /// uniformly at random over all contaminated ASes.
    pub attacker_counts: Vec<u32>,
    /// Contaminated ASes in each ISD that holds attackers (ISD2 in Fig.
    /// 7(a); ISD1 and ISD2 in Fig. 7(b)), each with its own steady path
    /// (paper count).
    pub contaminated_ases: u32,
    /// ASes of the legitimate sources.
    pub legit_ases: u32,
    /// Legitimate sources per legitimate AS.
    pub legit_sources_per_as: u32,
    /// Requests per second of every source, legitimate or attacker.
    pub requests_per_s: f64,
    /// Request timeout (s): a request delivered later counts as failed.
    pub request_timeout_s: f64,
    /// Share of the link for request packets (percent).
    pub request_share_pct: u8,
    /// Weight the request channel by steady path (`false`: aggregate cap only).
    pub per_path_fairness: bool,
    /// Burst of each steady path's request bucket (ms at its rate).
    pub request_burst_ms: f64,
    /// Steady bandwidth of each legitimate AS's path (kbit/s, rounded down to a class).
    pub legit_steady_kbps: f64,
    /// Steady classes of the contaminated ASes' paths, assigned cyclically
    /// over `[min, max]` (1..12: the paper's 16–724 kbit/s).
    pub bot_steady_classes: [u8; 2],
    /// Ephemeral bandwidth each attack request asks for (kbit/s).
    pub attack_bw_kbps: f64,
    /// Ephemeral bandwidth each legitimate request asks for (kbit/s).
    pub legit_bw_kbps: f64,
    /// Best-effort flood per attacker (Mbit/s, paper units; 0: none).
    pub flood_mbps_per_attacker: f64,
    /// Size of flood packets (bytes).
    pub packet_bytes: usize,
    /// Packets per egress queue.
    pub queue_packets: usize,
    /// Simulated time during which sources send, per attacker count (s).
    pub duration_s: f64,
    /// Simulation tick (µs).
    pub tick_us: f64,
    /// TVA, Portcullis and STRIDE on the same requests (the `[baselines]`
    /// table; defaults if absent).
    #[serde(default)]
    pub baselines: Fig7Baselines,
    /// Fig. 8(a), reported with Fig. 7(a) (the `[fig8a]` table; defaults if
    /// absent; not run for Fig. 7(b)).
    #[serde(default)]
    pub fig8a: Fig8aParams,
}

/// The schemes Fig. 7 compares SIBRA with, run on the same sources, the
/// same attackers per AS and the same request channel (`request_share_pct`
/// of each core link); see the [module docs](super) for what each models.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Fig7Baselines {
    /// Run TVA, Portcullis and STRIDE beside SIBRA.
    pub enabled: bool,
    /// Packets per request queue of the baseline routers (TVA: per path
    /// identifier; STRIDE: per priority class).
    pub queue_packets: usize,
    /// Puzzle hashes per second of every host, legitimate or attacker
    /// (Portcullis; only rounds the puzzle level: the legitimate puzzle time
    /// is about attackers / channel rate either way).
    pub hashes_per_s: f64,
    /// Capacity of the link whose request channel Portcullis' puzzles
    /// compete for (Gbit/s, paper units): the smallest link all requests
    /// cross after the core (the paper's other links: 640 Mbit/s).
    pub puzzle_link_gbps: f64,
}

impl Default for Fig7Baselines {
    fn default() -> Self {
        Fig7Baselines {
            enabled: true,
            queue_packets: 256,
            hashes_per_s: 1e6,
            puzzle_link_gbps: 0.64,
        }
    }
}

impl Default for Fig7Params {
    fn default() -> Self {
        Fig7Params {
            seed: 1,
            scale: 1.0,
            capacity_gbps: 10.0,
            attacker_counts: vec![0, 25_000, 50_000, 100_000, 150_000, 200_000],
            contaminated_ases: 1000,
            legit_ases: 2,
            legit_sources_per_as: 100,
            requests_per_s: 10.0,
            request_timeout_s: 4.0,
            request_share_pct: 5,
            per_path_fairness: true,
            request_burst_ms: 1000.0,
            legit_steady_kbps: 1500.0,
            bot_steady_classes: [1, 12],
            attack_bw_kbps: 256.0,
            legit_bw_kbps: 256.0,
            flood_mbps_per_attacker: 0.0,
            packet_bytes: 1000,
            queue_packets: 256,
            duration_s: 2.0,
            tick_us: 100.0,
            baselines: Fig7Baselines::default(),
            fig8a: Fig8aParams::default(),
            isd: Isd::Intra,
        }
    }
}

impl Fig7Params {
    /// The short variant the tests run in debug builds: the paper's
    /// set-up at `scale` 100 (100 Mbit/s, 10 contaminated ASes, at most
    /// 2000 simulated attackers) for 1 s.
    pub fn short() -> Self {
        Fig7Params {
            scale: 100.0,
            attacker_counts: vec![0, 50_000, 200_000],
            duration_s: 1.0,
            fig8a: Fig8aParams::short(),
            ..Default::default()
        }
    }

    /// Fig. 7(b) at the paper's parameters: 500 contaminated ASes in each
    /// ISD, the legitimate source in ISD1, the destination in ISD2, the
    /// attacker counts of Fig. 7(a).
    pub fn inter_isd() -> Self {
        Fig7Params { isd: Isd::Inter, contaminated_ases: 500, ..Default::default() }
    }

    /// Fig. 7(b) in the short form of [`Fig7Params::short`] (`scale` 100:
    /// 5 contaminated ASes per ISD, at most 2000 simulated attackers, 1 s).
    pub fn short_inter_isd() -> Self {
        Fig7Params { isd: Isd::Inter, contaminated_ases: 500, ..Fig7Params::short() }
    }

    /// The number of contaminated ASes simulated in each ISD that holds
    /// attackers (at least one).
    pub fn simulated_ases(&self) -> u32 {
        ((f64::from(self.contaminated_ases) / self.scale).round() as u32).max(1)
    }

    /// The number of ISDs holding contaminated ASes (1 in Fig. 7(a), 2 in Fig. 7(b)).
    pub fn attacked_isds(&self) -> u32 {
        match self.isd {
            Isd::Intra => 1,
            Isd::Inter => 2,
        }
    }

    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |m: &str| Err(ScenarioError::Param(m.into()));
        if self.scale.is_nan() || self.scale < 1.0 || !positive(self.capacity_gbps) {
            return bad("scale must be >= 1 and capacity_gbps positive");
        }
        if self.attacker_counts.is_empty()
            || self.contaminated_ases == 0
            || self.simulated_ases() * self.attacked_isds() > 4000
            || self.legit_ases == 0
            || self.legit_ases > 16
        {
            return bad("attacker_counts non-empty, contaminated ASes simulated (all ISDs) in [1, 4000], legit_ases in [1, 16]");
        }
        if !positive(self.requests_per_s)
            || !positive(self.request_timeout_s)
            || !positive(self.request_burst_ms)
            || !positive(self.legit_steady_kbps)
            || !positive(self.duration_s)
            || !positive(self.tick_us)
            || self.flood_mbps_per_attacker.is_nan()
            || self.flood_mbps_per_attacker < 0.0
        {
            return bad(
                "rates, timeout, burst, steady bandwidth, duration and tick must be positive",
            );
        }
        let [lo, hi] = self.bot_steady_classes;
        if self.request_share_pct == 0
            || self.request_share_pct > 100
            || lo == 0
            || lo > hi
            || hi > 20
        {
            return bad("request_share_pct in [1, 100], bot_steady_classes 1 <= min <= max <= 20");
        }
        if self.packet_bytes < 64 || self.packet_bytes > 9000 {
            return bad("packet_bytes must lie in [64, 9000]");
        }
        let b = &self.baselines;
        if b.queue_packets == 0 || !positive(b.hashes_per_s) || !positive(b.puzzle_link_gbps) {
            return bad(
                "baselines: queue_packets >= 1, hashes_per_s and puzzle_link_gbps positive",
            );
        }
        Ok(())
    }
}

/// Parameters of Fig. 8(a): the ephemeral bandwidth reservable over the
/// legitimate source's steady up-path over time, while attackers on other
/// up-paths request ephemeral paths over the same bottleneck (§V-C).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Fig8aParams {
    /// RNG seed.
    pub seed: u64,
    /// Capacity of the bottleneck interface (Mbit/s; the paper does not
    /// state it).
    pub capacity_mbps: f64,
    /// Simulated time (s).
    pub duration_s: f64,
    /// Sampling step of the series (s).
    pub step_s: f64,
    /// When more attackers and up-paths start requesting (s).
    pub change_at_s: f64,
    /// Attackers' up-paths used for requests before `change_at_s`.
    pub up_paths_before: u32,
    /// ... and from `change_at_s` on (all are set up before the run).
    pub up_paths_after: u32,
    /// Attackers on every up-path in use.
    pub attackers_per_path: u32,
    /// Requests per second of each attacker.
    pub attack_requests_per_s: f64,
    /// Requests per second over the legitimate up-path.
    pub legit_requests_per_s: f64,
    /// Steady bandwidth of the legitimate up-path (kbit/s, rounded down to a class).
    pub legit_steady_kbps: f64,
    /// Steady classes of the attackers' up-paths, drawn uniformly (1..12:
    /// 16–724 kbit/s).
    pub bot_steady_classes: [u8; 2],
    /// Smallest and largest ephemeral bandwidth requested (kbit/s); classes
    /// drawn uniformly between them (256 kbit/s – 11.6 Mbit/s: 9..20).
    pub eph_kbps: [f64; 2],
}

impl Default for Fig8aParams {
    fn default() -> Self {
        Fig8aParams {
            seed: 1,
            capacity_mbps: 8000.0,
            duration_s: 150.0,
            step_s: 1.0,
            change_at_s: 100.0,
            up_paths_before: 100,
            up_paths_after: 300,
            attackers_per_path: 50,
            attack_requests_per_s: 1.0,
            legit_requests_per_s: 5.0,
            legit_steady_kbps: 362.0,
            bot_steady_classes: [1, 12],
            eph_kbps: [256.0, 11_600.0],
        }
    }
}

impl Fig8aParams {
    /// The short variant the tests run in debug builds: 60 s, the change at
    /// 30 s, 10 attackers per path (every other quantity as by default).
    pub fn short() -> Self {
        Fig8aParams {
            duration_s: 60.0,
            change_at_s: 30.0,
            attackers_per_path: 10,
            ..Default::default()
        }
    }

    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
        let [lo, hi] = self.bot_steady_classes;
        if !positive(self.capacity_mbps)
            || !positive(self.step_s)
            || self.duration_s < self.step_s
            || self.duration_s > 176.0
            || !(0.0..=self.duration_s).contains(&self.change_at_s)
            || self.up_paths_after < self.up_paths_before
            || self.up_paths_after > 4000
            || self.attack_requests_per_s.is_nan()
            || self.attack_requests_per_s < 0.0
            || !positive(self.legit_requests_per_s)
            || !positive(self.legit_steady_kbps)
            || lo == 0
            || lo > hi
            || hi > 20
            || !positive(self.eph_kbps[0])
            || self.eph_kbps[1] < self.eph_kbps[0]
        {
            return Err(ScenarioError::Param(
                "fig8a: positive capacity, rates and step; duration_s <= 176 (the steady paths' horizon); change_at_s within the run; up_paths_before <= up_paths_after <= 4000; 1 <= class min <= max <= 20; eph_kbps ascending".into(),
            ));
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
    /// Shortest and longest path (admitting ASes per request), drawn
    /// uniformly per request (the paper: 5–10).
    pub path_len: [u32; 2],
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
            path_len: [5, 10],
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
            || self.path_len[0] == 0
            || self.path_len[0] > self.path_len[1]
            || self.path_len[1] > 32
        {
            return Err(ScenarioError::Param(
                "fig8b: rates positive, min_kbps <= max_kbps, warmup_s < duration_s, reply_timeout_s >= 0, losses in [0, 1), 1 <= path_len min <= max <= 32"
                    .into(),
            ));
        }
        Ok(())
    }
}
