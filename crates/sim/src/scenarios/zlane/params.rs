//! Parameters of the Z-Lane scenarios (every field is read from the
//! scenario's TOML file). The scheduling bounds are the protocol's own
//! [`zlane::Bounds`] (the `bounds` table, all five given).

use serde::Deserialize;
use zlane::Bounds;

/// Offered load per traffic type, as fractions of the egress capacity.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Offered {
    /// Reservation traffic (PathType 200).
    pub r: f64,
    /// Neighbor traffic (BFD over SCION).
    pub n: f64,
    /// Q-marked EPIC-Z from the other ASes and ISDs (AS X excluded).
    pub g: f64,
    /// Host-authenticated EPIC-Z (no Q).
    pub a: f64,
    /// Plain SCION.
    pub u: f64,
}

/// Parameters of the Table 4 scenario.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Table4Params {
    /// RNG seed.
    pub seed: u64,
    /// Divide every paper rate by this.
    pub scale: f64,
    /// Egress capacity (paper units, Gbit/s).
    pub capacity_gbps: f64,
    /// Guaranteed rate of AS X (Gbit/s).
    pub as_x_gbps: f64,
    /// What AS X sends (Gbit/s): the paper's run sends exactly `as_x_gbps`;
    /// above it, the overuse competes in queue A.
    pub as_x_send_gbps: f64,
    /// Other ASes of the router's ISD with a guaranteed rate (equal shares).
    pub intra_isd_ases: u32,
    /// Other ISDs with a guaranteed rate (equal shares).
    pub isds: u32,
    /// Offered load of the attack classes.
    pub offered: Offered,
    /// Scheduling bounds.
    pub bounds: Bounds,
    /// Packet length in bytes (SCION header + payload).
    pub packet_bytes: usize,
    /// Shared burst of the AS/ISD buckets (bytes).
    pub bucket_burst_bytes: u16,
    /// Queue length of A and U (packets); R, N, G get the same.
    pub queue_packets: usize,
    /// Simulated time (s).
    pub duration_s: f64,
    /// Warm-up excluded from the measurement (s).
    pub warmup_s: f64,
    /// Tick (µs).
    pub tick_us: f64,
}

impl Default for Table4Params {
    fn default() -> Self {
        Table4Params {
            seed: 1,
            scale: 80.0,
            capacity_gbps: 160.0,
            as_x_gbps: 0.928,
            as_x_send_gbps: 0.928,
            intra_isd_ases: 100,
            isds: 100,
            offered: Offered { r: 0.55, n: 0.11, g: 0.30, a: 0.02, u: 0.02 },
            bounds: Bounds::default(),
            packet_bytes: 850,
            bucket_burst_bytes: 9000,
            queue_packets: 1024,
            duration_s: 1.0,
            warmup_s: 0.1,
            tick_us: 20.0,
        }
    }
}

/// Router implementations compared in Figure 4.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RouterKind {
    /// Z-Lane classification and five-queue scheduler.
    Zlane,
    /// A Z-Lane router without a guaranteed rate for the source AS (or its
    /// ISD): the source's Q-marked packets land in queue A (partial
    /// deployment).
    ZlaneUnconfigured,
    /// One FIFO queue.
    Fifo,
    /// Deficit round robin per flow (SCION source IA + FlowID).
    Fair,
    /// Deficit round robin per ingress interface.
    Isolation,
}

impl RouterKind {
    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            RouterKind::Zlane => "zlane",
            RouterKind::ZlaneUnconfigured => "zlane_unconfigured",
            RouterKind::Fifo => "fifo",
            RouterKind::Fair => "fair",
            RouterKind::Isolation => "isolation",
        }
    }
}

/// How the attack volume D is split at every router.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AttackMix {
    /// Q-marked by the guaranteed ASes/ISDs beyond their rates (lands in A).
    pub q_overuse: f64,
    /// Host-authenticated EPIC-Z without Q (A).
    pub auth: f64,
    /// Plain SCION (U).
    pub unauth: f64,
}

/// A path whose routers are of different kinds (partial deployment).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MixedPath {
    /// Name in tables and legends.
    pub name: String,
    /// Kind of router 1..=n, one per on-path router.
    pub hops: Vec<RouterKind>,
}

/// Parameters of the Figure 4 scenario.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig4Params {
    /// RNG seed.
    pub seed: u64,
    /// Divide every paper rate by this.
    pub scale: f64,
    /// Egress capacity C of every on-path router (Gbit/s).
    pub capacity_gbps: f64,
    /// Traffic T of the source's ISD without the source (Gbit/s).
    pub t_gbps: f64,
    /// Guaranteed rate r_S of the source AS inside its ISD (Gbit/s).
    pub r_s_gbps: f64,
    /// Guaranteed rate r_I of the source's ISD elsewhere (Gbit/s).
    pub r_i_gbps: f64,
    /// Traffic intensity X = (C + D) / C.
    pub intensity: f64,
    /// Source sending rates F to evaluate (Gbit/s).
    pub source_rates_gbps: Vec<f64>,
    /// Number of on-path routers.
    pub routers: usize,
    /// How many of them are inside the source's ISD (the first ones).
    pub internal_routers: usize,
    /// Router implementations to compare (every router of the path of one kind).
    pub kinds: Vec<RouterKind>,
    /// Further paths mixing router kinds per hop (may be empty).
    pub mixed_paths: Vec<MixedPath>,
    /// ASes (inside) or ISDs (outside) sharing the rest of μ_G·C.
    pub other_origins: u32,
    /// Split of the attack volume.
    pub attack_mix: AttackMix,
    /// Ingress interfaces carrying cross traffic (besides the upstream one).
    pub attack_ports: u16,
    /// Port assignment: the fraction of every cross-traffic component that
    /// enters router 2..=n on the source's upstream interface (the rest is
    /// split evenly over the `attack_ports`). At router 1 the upstream
    /// interface carries the source alone. Only local isolation depends on
    /// it; `1 / (attack_ports + 1)` loads every interface equally.
    pub upstream_cross_share: f64,
    /// At Z-Lane routers, add reservation (R) and neighbor (N) traffic
    /// slightly above their bounds, as the paper's analysis assumes ("R, N
    /// and U fully utilized"); without it, queue A also gets R's and N's
    /// unused capacity.
    pub fill_reserved_queues: bool,
    /// Simulated per-hop throughputs resting on fewer packets of the source
    /// are not plotted (the composed estimate and the model are).
    pub min_resolved_packets: u64,
    /// Packet length in bytes.
    pub packet_bytes: usize,
    /// Rate of one benign flow (Gbit/s); attack flows carry half (per-flow fairness).
    pub flow_gbps: f64,
    /// Fraction of C the baseline routers schedule (paper: μ_A + μ_G).
    pub baseline_capacity_share: f64,
    /// Scheduling bounds for Z-Lane.
    pub bounds: Bounds,
    /// Shared burst of the AS/ISD buckets (bytes).
    pub bucket_burst_bytes: u16,
    /// Queue length (packets) of every queue (per flow / per port for DRR).
    pub queue_packets: usize,
    /// Link propagation delay (µs).
    pub link_delay_us: f64,
    /// Per-packet link delay jitter (µs), uniform.
    pub link_jitter_us: f64,
    /// Simulated time per run (s).
    pub duration_s: f64,
    /// Warm-up (s).
    pub warmup_s: f64,
    /// Tick (µs).
    pub tick_us: f64,
}

impl Default for Fig4Params {
    fn default() -> Self {
        Fig4Params {
            seed: 1,
            scale: 1000.0,
            capacity_gbps: 40.0,
            t_gbps: 3.0,
            r_s_gbps: 1.0,
            r_i_gbps: 4.0,
            intensity: 2.0,
            source_rates_gbps: vec![0.5, 1.0, 1.5, 2.0],
            routers: 8,
            internal_routers: 4,
            kinds: vec![
                RouterKind::Zlane,
                RouterKind::Fifo,
                RouterKind::Fair,
                RouterKind::Isolation,
            ],
            mixed_paths: Vec::new(),
            other_origins: 7,
            attack_mix: AttackMix { q_overuse: 0.5, auth: 0.25, unauth: 0.25 },
            attack_ports: 3,
            upstream_cross_share: 0.25,
            fill_reserved_queues: true,
            min_resolved_packets: 30,
            packet_bytes: 700,
            flow_gbps: 0.25,
            baseline_capacity_share: 0.35,
            bounds: Bounds::default(),
            bucket_burst_bytes: 9000,
            queue_packets: 256,
            link_delay_us: 100.0,
            link_jitter_us: 500.0,
            duration_s: 1.5,
            warmup_s: 0.3,
            tick_us: 50.0,
        }
    }
}
