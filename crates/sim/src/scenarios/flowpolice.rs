//! FlowPolice Figs. 5.3/5.4 (thesis §5.2.2): the attackers' share of a
//! flooded bottleneck under three attack strategies, and the legitimate
//! senders' throughput.
//!
//! Drives the real `flowpolice::FlowPolice` stage (requests with puzzles,
//! capability MACs, the flow table, Algorithm 1) and its strict-priority
//! egress (`flowpolice::egress::build`) on its egress ports; the end
//! hosts use the crate's `host::Sender` / `host::Receiver`: every delivered
//! packet's capability is echoed back to its sender after half an RTT
//! (through [`Source::on_delivered_packet`]).
//!
//! # Topology (thesis Fig. 5.2, [`Fig53Params::topology`])
//! The thesis evaluates three attack cases and plots case (c), "the most
//! general and challenging one"; FlowPolice learns of congestion at a
//! remote link only through the capabilities that do not come back
//! (capability feedback, thesis §2.5 and §3.6.2), and the remote
//! bottleneck router only needs "a simple prioritization mechanism",
//! privileged over best-effort packets (§2.7, §3.1). Every case keeps the
//! one-way delay of a quarter RTT from the FlowPolice router to a server.
//! * `"a"`: the FlowPolice router owns the bottleneck link: its
//!   strict-priority egress feeds the link of C to the server.
//! * `"b"`: the bottleneck is a downstream link. The FlowPolice router's
//!   egress feeds an uncongested access link (twice the offered load, an
//!   eighth of the RTT) to a plain router, whose egress feeds the
//!   bottleneck link of C (an eighth of the RTT) to the server.
//! * `"c"` (the default, what Figs. 5.3/5.4 plot): several remote
//!   bottlenecks. The FlowPolice router routes by destination
//!   ([`crate::baselines::RouteByDst`]) to `remote_bottlenecks` (default
//!   2) plain routers as in `"b"`, each with its own bottleneck link of C
//!   and its own server, attacked by its own `attackers` and used by its
//!   own `legit` senders (host counts and rates per link as in `"a"`, so
//!   every link keeps the thesis' ratios). One FlowPolice stage (one flow
//!   table) polices all of them. The thesis does not give the number of
//!   links or hosts in its text; parallel links behind one router are
//!   the smallest shape with more than one remote bottleneck.
//!
//! The plain routers keep no FlowPolice state and check no MAC.
//! `remote_egress = "priority"` (default, the thesis' assumption) reads
//! the packet type the FlowPolice router wrote into the shim
//! ([`PriorityByMark`]) and queues by it with the layout of
//! `flowpolice::egress::build` (capped request channel by puzzle level,
//! privileged, best effort, capped legacy); `"fifo"` is one drop-tail
//! queue that ignores the marks. With several links, shares and the
//! legitimate senders' desired rate are of all links together
//! ([`Fig53Run::link_finals`] has each link's).
//!
//! # Set-up (choices where the thesis is silent)
//! * Legitimate senders: long-lived TCP-like AIMD flows (window in packets,
//!   loss feedback one RTT/2 after the drop), each paced at its desired rate
//!   `legit_demand · C / legit`.
//! * Attack volume `attack_volume · C` split evenly over `attackers`:
//!   - `exact`: the hypothetical attacker that knows its allowed rate: it
//!     reads its window `W_R` and period start from the router (an oracle)
//!     and sends at most `W_R` packets per period, spread evenly (its
//!     capabilities only come back on later packets of the period); it
//!     also stops at the first best-effort mark after privileged packets;
//!   - `probing`: TCP-like AIMD (it complies, probing for bandwidth), capped
//!     at its flood rate;
//!   - `non_complying`: flat at its flood rate whatever the losses.
//!
//!   All attackers echo capabilities (without them every packet would be
//!   dropped as expired, which is no attack at all).
//! * Every host re-requests when no capability came back for two periods
//!   (its latest one would be expired), and when a request got no answer
//!   within three RTTs.
//! * Puzzles are solved at `puzzle_level` (cheap: the request channel is not
//!   what this figure measures); a legitimate host whose request went
//!   unanswered retries with a harder puzzle (`legit_retry_level_step`), so
//!   it overtakes the attackers' re-request flood in the request
//!   sub-queues, as Portcullis intends.
//! * The victim is a protected server (`FlowKeying`): flows are per source.
//!
//! # Router policy (see `flowpolice::OverWindow`, `flowpolice::InitialWindow`)
//! With the thesis' marking alone (`over_window = "demote"`), strict
//! priority is work-conserving: demoted flood packets take whatever the
//! privileged class leaves, and non-complying attackers kept ~84 % of the
//! link in the first version of this scenario. The crate's default policy
//! drops over-window packets of flows Algorithm 1 classifies as misbehaving
//! (`L_R > L↓`) and counts them as lost capabilities, so a flood's window
//! stays at the floor. The scenario also starts policing at the *delivered*
//! part of the first period (`initial_window = "delivered"`): with `P_R`
//! (the spec default) the attackers' whole first-period flood becomes their
//! privileged window for one period and halves the legitimate windows.
//!
//! # End-host model
//! Algorithm 1 polices every new flow until it has had more than `S_Th`
//! low-loss periods (60 s at the defaults), so a legitimate flow's packets
//! beyond `W_R` are marked best effort for its first minute. The thesis'
//! legitimate senders are plain TCP: the mark is a priority, not a loss,
//! and in an uncongested network best-effort packets are delivered. The
//! legitimate senders here are therefore TCP (`legit_mark_aware = false`)
//! with slow start (`legit_slow_start`) and a retransmission timer
//! (`legit_rto_min_ms`, RFC 6298: when nothing was acknowledged for an RTT,
//! or the window is below four packets so no three duplicate ACKs can
//! arrive, one segment after the timeout, doubling per further timeout).
//! The timer matters: a flow that starts with a flood is classified
//! misbehaving on losses the flood caused, and its over-window packets are
//! dropped; a sender without a timer keeps sending about a packet per RTT,
//! above the router's release volume (`flowpolice::Params::responsive_volume`),
//! and stays locked out (earlier model: 2 of 5 flows at 4×C, 1 of 5 with slow
//! start). With the timer it backs off, is released and ramps up.
//! A mark-aware sender (`legit_mark_aware = true`) halves its window once
//! per period on a best-effort mark.
//!
//! `probing` attackers use the same window (slow start alike) without a
//! retransmission timer. The `exact` attacker sends flat at the analysis'
//! allowed rate, the per-sender fair share `C/(N_L+N_A)` (times
//! `exact_rate_factor`); the window oracle (`exact_window`) complies with
//! `W_R` itself, which grows by Δ = 3 packets per 3 s period, i.e. minutes
//! to reach the fair share.
//!
//! # What is reproduced (`flowpolice_fig53.toml`: D_p 3 s, RTT 100 ms, 60 s)
//! Case (a) first, the other cases after it. Attack 2×C unless stated;
//! shares of C over the last quarter of the run;
//! per-sender fair share of the attackers 0.909, of the legitimate senders
//! 0.091 (their desired rate is 0.5).
//!
//! | strategy | volume | final attack share | legit / fair share | convergence |
//! |---|---|---|---|---|
//! | exact | 0.909 (fair) | 0.880 | 1.31 | 7 s |
//! | probing | 2×C | 0.881 | 1.31 | 2 s |
//! | non_complying | 2×C | 0.003 | 5.5 (= desired) | 14 s |
//! | on_off (3 s on / 3 s off) | 2×C | 0.001 | 5.5 (= desired) | 14 s |
//! | non_complying (30 s runs) | 1×C | 0.84 | 1.8 | — |
//! | non_complying (30 s runs) | 1.5, 2, 4×C | 0.002–0.003 | 5.5 | 14 s |
//! | non_complying (30 s runs) | 8×C | 0.004 | 5.3 | 17 s |
//!
//! A flat flood at 1×C sends 1.1× its per-sender fair share: its packets
//! stay within its window (`W_R` starts at its delivered first period and
//! grows by Δ while the privileged class is not congested), so Algorithm 1
//! sees no loss and cannot tell it from a complying sender (Lemma 2 allows
//! any sender up to `(1 + L↓)` of its fair share). It is held below that
//! bound and the legitimate senders keep more than their fair share; from
//! 1.5×C the flood's excess meets severe loss and it is throttled. The
//! sampled loss only covers the first `K_th` packets of the first half of a
//! period, which for a flow over its window are the privileged ones; the
//! excess is seen only through the router's own counted drops
//! (`flowpolice::OverWindow::DropWhenMisbehaving`).
//!
//! No attack: legitimate senders get 100 % of their desired rate after the
//! ramp.
//!
//! The table above is case (a). The same runs in the other cases (60 s,
//! attack 2×C; final attack share / final legitimate share of C; case (c):
//! both links together, each link within 0.03 of it):
//!
//! | strategy | (a) | (b) | (c) | (b), FIFO | (c), FIFO |
//! |---|---|---|---|---|---|
//! | exact | 0.880 / 0.120 | 0.906 / 0.094 | 0.905 / 0.094 | 0.900 / 0.100 | 0.900 / 0.100 |
//! | probing | 0.881 / 0.119 | 0.902 / 0.098 | 0.886 / 0.114 | 0.910 / 0.090 | 0.904 / 0.096 |
//! | non_complying | 0.003 / 0.500 | 0.003 / 0.500 | 0.003 / 0.500 | 0.003 / 0.500 | 0.003 / 0.500 |
//! | on_off | 0.001 / 0.500 | 0.001 / 0.500 | 0.001 / 0.500 | 0.001 / 0.500 | 0.001 / 0.500 |
//!
//! As the thesis says, the legitimate senders get similar throughput in
//! every case: the router polices from the capabilities that come back,
//! wherever the loss happened. Even a drop-tail remote bottleneck
//! suffices here, because the router drops the over-window packets of
//! misbehaving flows itself (`over_window`).
//!
//! A flood released once its link is no longer congested keeps its rate:
//! it loses nothing, and Algorithm 1 only polices flows that lose packets.
//! Non-complying floods at 4× and 8×C (60 s, seeds 1–8, priority remote
//! routers) ended with some flooders released in 2 to 6 of the 8 runs of
//! every case (taking up to 0.64 of a link between them); the
//! legitimate senders kept their desired rate except in three runs at 8×C,
//! one in (b) and two in (c), where they got 0.35–0.36 of that link (still
//! four times their fair share).
//! Whether a sweep over the attack volume is monotonic therefore depends
//! on the seed, in case (a) too.
//!
//! # Scaling
//! As the thesis (after NetFence) the number of hosts is fixed and the link
//! capacity scaled down: `capacity_mbps` with `attackers` flows stands for
//! `attackers × (paper link / capacity)` attack flows on a 10–100 Gbit/s
//! link. Time is not scaled: D_p, the RTT and the run length are the thesis'.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use ::flowpolice::{FlowPolice, InitialWindow, OverWindow, Params};
use pipeline::Frame;
use serde::Deserialize;

use super::fp_client::{HostPair, Mark, PuzzleLevels};
use super::fp_world::{self, NetworkSpec, World, EPOCH_UNIX_NS};
use super::{positive, RunOpts, ScenarioError};
use crate::net::{Cwnd, EmitCtx, Feedback, Sim, Source};
use crate::report::{Plot, Report, Series};

pub use super::fp_world::{PriorityByMark, RemoteEgress, Topology, GROUP_ATTACK, GROUP_LEGIT};
/// The protocol's types under the names the scenario API gave them when it
/// kept its own copies (the scenario file spells them as the protocol does).
pub use ::flowpolice::{InitialWindow as InitialWindowParam, OverWindow as OverWindowParam};

/// How the attackers behave.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// The thesis' hypothetical attacker that knows its exact allowed rate:
    /// the per-sender fair share `C / (N_L + N_A)` of the analysis
    /// (Lemma 1) times [`Fig53Params::exact_rate_factor`], sent flat.
    Exact,
    /// Probes like TCP (AIMD on losses).
    Probing,
    /// Floods at a flat rate in spite of losses.
    NonComplying,
    /// On/off ("shrew") flood: the flood rate for `onoff_on_ms` of every
    /// `onoff_period_ms`, silent otherwise (thesis ch. 4).
    OnOff,
    /// Reads its window `W_R` from the router (an oracle) and sends exactly
    /// that many packets per period, spread evenly; stops at the first
    /// best-effort mark. Its share grows by Δ per period only.
    ExactWindow,
}

impl Strategy {
    /// Name used in tables and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Exact => "exact",
            Strategy::Probing => "probing",
            Strategy::NonComplying => "non_complying",
            Strategy::OnOff => "on_off",
            Strategy::ExactWindow => "exact_window",
        }
    }
}

/// Parameters of the Figs. 5.3/5.4 scenario (all read from the TOML file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fig53Params {
    /// RNG seed.
    pub seed: u64,
    /// Where the bottleneck links are (thesis Fig. 5.2: `"a"`, `"b"` or
    /// `"c"`; see the module docs).
    pub topology: Topology,
    /// Number of remote bottleneck links in case (c) (at least 2; each has
    /// its own server, `attackers` attackers and `legit` legitimate
    /// senders). Cases (a) and (b) have one bottleneck.
    pub remote_bottlenecks: u32,
    /// How the plain routers in front of the remote bottlenecks of cases
    /// (b) and (c) queue (thesis: prioritizing privileged packets).
    pub remote_egress: RemoteEgress,
    /// When the attack starts (s); the legitimate flows start at 0.
    pub attack_start_s: f64,
    /// Legitimate TCP senders also halve their window when the receiver
    /// reports a best-effort mark after privileged packets of the same
    /// period (an ECN-like reading of the mark); `false`: plain TCP.
    pub legit_mark_aware: bool,
    /// Capacity C of each bottleneck link (Mbit/s, scaled down as in the thesis).
    pub capacity_mbps: f64,
    /// Number of attack flows (one per attacker) per bottleneck link.
    pub attackers: u32,
    /// Number of legitimate flows per bottleneck link (thesis: ~10 % of
    /// the attackers).
    pub legit: u32,
    /// Attack volume as a multiple of C (thesis: 2).
    pub attack_volume: f64,
    /// Aggregate desired rate of the legitimate senders as a fraction of C (thesis: 0.5).
    pub legit_demand: f64,
    /// IP packet size in bytes.
    pub packet_bytes: usize,
    /// Round-trip time (ms).
    pub rtt_ms: f64,
    /// Detection period D_p (ms).
    pub period_ms: u32,
    /// K_th: capabilities per period per flow.
    pub k_th: u16,
    /// Puzzle level of requests (and the router's minimum).
    pub puzzle_level: u8,
    /// Legitimate senders raise their puzzle level by this much on each
    /// unanswered request (attackers keep `puzzle_level` and flood).
    pub legit_retry_level_step: u8,
    /// Highest level a legitimate sender goes to, above `puzzle_level`.
    pub legit_max_extra_level: u8,
    /// Packets per egress queue.
    pub queue_packets: usize,
    /// Simulated time per strategy (s).
    pub duration_s: f64,
    /// Width of a time bin of the plots (ms).
    pub bin_ms: f64,
    /// Simulation tick (µs).
    pub tick_us: f64,
    /// Strategies to run.
    pub strategies: Vec<Strategy>,
    /// The router's `R_W` ([`flowpolice::InitialWindow`]).
    pub initial_window: InitialWindow,
    /// The router's over-window policy ([`flowpolice::OverWindow`]).
    pub over_window: OverWindow,
    /// Legitimate TCP senders start in slow start (RFC 5681) rather than
    /// congestion avoidance.
    pub legit_slow_start: bool,
    /// Algorithm 1's `λ` (weight of the loss history).
    pub lambda: f64,
    /// Algorithm 1's `β` (multiplicative decrease).
    pub beta: f64,
    /// Algorithm 1's `Δ` (additive increase, packets per period).
    pub delta: u32,
    /// Algorithm 1's `L↓` (loss above which the window is cut).
    pub l_down: f64,
    /// Algorithm 1's `L↑` (loss below which a period counts as low loss).
    pub l_up: f64,
    /// Algorithm 1's `S_Th` (low-loss periods before policing stops).
    pub s_th: u32,
    /// `exact` attackers send this multiple of the per-sender fair share
    /// (1: the fair share itself; `1 + L↓`: the thesis' "hypothetical margin").
    pub exact_rate_factor: f64,
    /// `on_off` attackers: length of one on/off cycle (ms).
    pub onoff_period_ms: u32,
    /// `on_off` attackers: the part of each cycle they flood (ms).
    pub onoff_on_ms: u32,
    /// Smallest retransmission timeout of the legitimate TCP senders (ms;
    /// RFC 6298 / Linux: 200). When nothing was acknowledged for an RTT the
    /// timer fires: one segment, then exponential back-off. 0: no timer
    /// (every loss only halves the window; the earlier model).
    #[serde(default = "default_rto_min_ms")]
    pub legit_rto_min_ms: f64,
}

fn default_rto_min_ms() -> f64 {
    200.0
}

impl Default for Fig53Params {
    fn default() -> Self {
        Fig53Params {
            seed: 1,
            topology: Topology::C,
            remote_bottlenecks: 2,
            remote_egress: RemoteEgress::Priority,
            attack_start_s: 0.0,
            legit_mark_aware: false,
            capacity_mbps: 50.0,
            attackers: 50,
            legit: 5,
            attack_volume: 2.0,
            legit_demand: 0.5,
            packet_bytes: 1000,
            rtt_ms: 100.0,
            period_ms: 3000,
            k_th: 128,
            puzzle_level: 2,
            legit_retry_level_step: 4,
            legit_max_extra_level: 12,
            queue_packets: 100,
            duration_s: 60.0,
            bin_ms: 1000.0,
            tick_us: 100.0,
            strategies: vec![
                Strategy::Exact,
                Strategy::Probing,
                Strategy::NonComplying,
                Strategy::OnOff,
            ],
            initial_window: InitialWindow::Delivered,
            over_window: OverWindow::DropWhenMisbehaving,
            legit_slow_start: true,
            lambda: 0.5,
            beta: 0.5,
            delta: 3,
            l_down: 0.05,
            l_up: 0.01,
            s_th: 20,
            exact_rate_factor: 1.0,
            onoff_period_ms: 6000,
            onoff_on_ms: 3000,
            legit_rto_min_ms: default_rto_min_ms(),
        }
    }
}

impl Fig53Params {
    fn validate(&self) -> Result<(), ScenarioError> {
        fp_world::check_load(
            self.capacity_mbps,
            self.attackers,
            self.legit,
            self.attack_volume,
            self.legit_demand,
            self.packet_bytes,
        )?;
        let bad = |m: &str| Err(ScenarioError::Param(m.into()));
        if !positive(self.rtt_ms) || !positive(self.bin_ms) || !positive(self.tick_us) {
            return bad("rtt_ms, bin_ms and tick_us must be positive");
        }
        if !positive(self.duration_s * 1e3 - 2.0 * f64::from(self.period_ms)) {
            return bad("duration_s must cover more than two periods");
        }
        if self.attack_start_s.is_nan()
            || self.attack_start_s < 0.0
            || self.attack_start_s >= self.duration_s
        {
            return bad("attack_start_s must lie in [0, duration_s)");
        }
        if self.strategies.is_empty() {
            return bad("strategies is empty");
        }
        if !positive(self.exact_rate_factor) {
            return bad("exact_rate_factor must be positive");
        }
        if !(self.legit_rto_min_ms == 0.0
            || (self.legit_rto_min_ms >= self.rtt_ms && self.legit_rto_min_ms <= 60_000.0))
        {
            return bad("legit_rto_min_ms must be 0 or lie in [rtt_ms, 60000]");
        }
        if self.onoff_on_ms == 0 || self.onoff_on_ms > self.onoff_period_ms {
            return bad("onoff_on_ms must lie in [1, onoff_period_ms]");
        }
        if self.topology == Topology::C && !(2..=16).contains(&self.remote_bottlenecks) {
            return bad("remote_bottlenecks must lie in [2, 16] in topology \"c\"");
        }
        let hosts =
            (u64::from(self.attackers) + u64::from(self.legit)) * u64::from(self.bottlenecks());
        if hosts > 60_000 {
            return bad("(attackers + legit) x bottlenecks must not exceed 60000 hosts");
        }
        self.router_params().validate().map_err(|e| ScenarioError::Param(e.to_string()))?;
        Ok(())
    }

    /// Number of bottleneck links of the topology.
    pub fn bottlenecks(&self) -> u32 {
        match self.topology {
            Topology::A | Topology::B => 1,
            Topology::C => self.remote_bottlenecks,
        }
    }

    /// The network: bottlenecks of C; the links from the FlowPolice router
    /// to the plain routers of cases (b) and (c) carry twice the offered
    /// load of one bottleneck (never congested).
    fn network(&self) -> NetworkSpec {
        let cap_bps = self.capacity_mbps * 1e6;
        NetworkSpec {
            topology: self.topology,
            remote_bottlenecks: self.remote_bottlenecks as usize,
            cap_bps,
            access_bps: 2.0 * (self.attack_volume + self.legit_demand) * cap_bps,
            queue_packets: self.queue_packets,
            remote_egress: self.remote_egress,
        }
    }

    /// The router's Algorithm 1 parameters (the rest keep the crate's defaults).
    pub fn router_params(&self) -> Params {
        Params {
            period_ms: self.period_ms,
            k_th: self.k_th,
            initial_window: self.initial_window,
            over_window: self.over_window,
            lambda: self.lambda,
            beta: self.beta,
            delta: self.delta,
            l_down: self.l_down,
            l_up: self.l_up,
            s_th: self.s_th,
            ..Params::default()
        }
    }
}

/// One strategy's run.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig53Run {
    /// The attack strategy.
    pub strategy: Strategy,
    /// Where the bottleneck links were.
    pub topology: Topology,
    /// Per bin: (end of bin in s, attackers' share of C, legit throughput / desired).
    /// Here and below, with several bottleneck links (case (c)), "C" is
    /// their total capacity and "desired" the legitimate senders' total.
    pub bins: Vec<(f64, f64, f64)>,
    /// Attackers' share of C after the first period.
    pub attack_share: f64,
    /// Attackers' privileged packets' share of C after the first period.
    pub attack_privileged_share: f64,
    /// Legitimate throughput / desired after the first period.
    pub legit_ratio: f64,
    /// Legitimate share of C after the first period.
    pub legit_share: f64,
    /// The per-sender fair share of the attackers, `attackers / (attackers + legit)`.
    pub attack_fair_share: f64,
    /// Packets dropped by the FlowPolice stage as expired or bad MAC (should be rare).
    pub stage_rejects: u64,
    /// The legitimate senders' per-sender fair share, `legit / (attackers + legit)`.
    pub legit_fair_share: f64,
    /// Attackers' share of C over the last quarter of the run (the level they converged to).
    pub final_attack_share: f64,
    /// Legitimate share of C over the last quarter of the run.
    pub final_legit_share: f64,
    /// Legitimate throughput / desired over the last quarter of the run.
    pub final_legit_ratio: f64,
    /// Per bottleneck link: the attackers' and the legitimate senders'
    /// shares of that link over the last quarter of the run.
    pub link_finals: Vec<(f64, f64)>,
    /// Seconds after the attack start from which the attackers' share
    /// (averaged over one period, or one on/off cycle) stays within 0.05 of
    /// C of `final_attack_share`; `None` if it never settles before the last quarter.
    pub convergence_s: Option<f64>,
}

enum Mode {
    /// TCP-like window, paced at a maximum rate.
    Aimd { max_rate_bps: f64, window: Cwnd },
    /// Flat rate (CBR with ±10 % jitter).
    Flat { rate_bps: f64 },
}

/// A FlowPolice end host pair: the sender at the source, the receiver's
/// echo folded in (capabilities come back half an RTT after delivery).
struct FpHost {
    mode: Mode,
    host: HostPair,
    /// Delivered privileged bytes, by group (shared with the scenario).
    privileged: Rc<RefCell<[u64; 2]>>,
    /// Flat senders only: stop at the first best-effort mark of a period
    /// and resume when the router's next period begins (the `exact` attacker).
    window_exact: bool,
    /// `window_exact`: paused until this time.
    paused_until: u64,
    /// `window_exact`: the router, to read the flow's window from.
    oracle: Option<Arc<Mutex<FlowPolice>>>,
    /// On/off flood: (cycle start, cycle length, on time), ns.
    onoff: Option<(u64, u64, u64)>,
    /// Router period (wire timestamp) whose window-exhausted mark the
    /// mark-aware sender already reacted to.
    cut_ts: Option<u32>,
}

impl FpHost {
    /// The receiver reported (arriving at `at`) a best-effort mark after
    /// privileged packets in the router period starting at `ts` (ms).
    fn on_window_exhausted(&mut self, ts: u32, at: u64) {
        if self.window_exact {
            // Router time is the simulation's virtual time (ms): the period
            // ends D_p after its wire timestamp.
            let resume = u64::from(ts) * 1_000_000 + self.host.fp.period_ns + 1_000_000;
            if resume > self.paused_until {
                self.paused_until = resume;
                if self.host.next.is_some() {
                    self.host.plan(Some(resume.max(at)));
                }
            }
        }
        // Reacts to best-effort marks reported by the receiver (see
        // [`Fig53Params::legit_mark_aware`]): once per router period. The
        // mark says the period's window is used up, which stays true for
        // the rest of the period; cutting on every mark would halve the
        // window every RTT until the period ends.
        if self.host.mark_aware && self.cut_ts != Some(ts) {
            self.cut_ts = Some(ts);
            if let Mode::Aimd { window, .. } = &mut self.mode {
                window.cut(at, self.host.fp.rtt_ns);
            }
        }
    }

    /// `exact` attackers: whether sending now would exceed the flow's
    /// window, spread evenly over the router's period (`W_R / D_p`; evenly,
    /// because capabilities only come back on later packets of the same
    /// period). If so, the host sleeps until its next packet is allowed.
    fn window_used_up(&mut self, now: u64) -> bool {
        let Some(o) = &self.oracle else { return false };
        let fp = o.lock().unwrap_or_else(|e| e.into_inner());
        let flow = fp.router().flow(u64::from(u32::from(self.host.fp.src)));
        let Some(e) = flow else { return false };
        if !(e.completed_first_period() && e.rate_limited()) {
            return false;
        }
        // Router time is the simulation's virtual time (ms, modulo 2^32).
        let period_ns = u64::from(fp.router().params().period_ms) * 1_000_000;
        let t_a = ((now / 1_000_000) & !0xffff_ffff | u64::from(e.t_a)) * 1_000_000;
        let end = t_a + period_ns + 1_000_000;
        let next = if e.w_r == 0 || now >= end {
            end
        } else {
            t_a + period_ns * u64::from(e.p_r) / u64::from(e.w_r)
        };
        if next <= now {
            return false;
        }
        self.host.plan(Some(next.min(end)));
        true
    }

    /// Plans the next emission after one at `now` (or a wake-up at `now`).
    fn reschedule(&mut self, now: u64, gap: u64) {
        let h = &self.host;
        let mut t = match &self.mode {
            Mode::Aimd { max_rate_bps, window } => window
                .open()
                .then(|| (h.last_send + h.pace_ns(*max_rate_bps)).max(now).max(window.resume_at)),
            Mode::Flat { .. } => Some(h.last_send + gap),
        };
        if let Some(w) = h.fp.request_wake(now) {
            // Waiting for the answer to a request.
            t = Some(w);
        }
        self.host.plan(t);
    }
}

impl Source for FpHost {
    fn next_ns(&self) -> Option<u64> {
        self.host.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let now = ctx.now_ns;
        self.host.fp.apply_echoes(now);
        if let Some((start, cycle, on)) = self.onoff {
            let phase = now.saturating_sub(start) % cycle;
            if phase >= on {
                // Off: silent until the next cycle.
                self.host.last_send = now + (cycle - phase);
                self.host.plan(Some(now + (cycle - phase)));
                return None;
            }
        }
        if now < self.paused_until && self.host.fp.sender.has_capability() {
            self.host.plan(Some(self.paused_until));
            return None;
        }
        if self.host.fp.sender.has_capability() && self.window_used_up(now) {
            return None;
        }
        let frame = self.host.next_frame(ctx);
        let gap = match self.mode {
            Mode::Flat { rate_bps } => self.host.flood_gap_ns(rate_bps, ctx.rng),
            Mode::Aimd { .. } => 0,
        };
        let sent = frame.is_some();
        if sent || matches!(self.mode, Mode::Flat { .. }) {
            self.host.last_send = now;
        }
        if let (true, Mode::Aimd { window, .. }) = (sent, &mut self.mode) {
            window.in_flight += 1;
        }
        let out = frame.map(|f| self.host.tag(f, ctx.index));
        self.reschedule(now, gap.max(1));
        out
    }

    fn feedback_delay_ns(&self) -> Option<u64> {
        matches!(self.mode, Mode::Aimd { .. }).then_some(self.host.fp.rtt_ns / 2)
    }

    fn on_feedback(&mut self, fb: Feedback, now_ns: u64) {
        let rtt = self.host.fp.rtt_ns;
        if let Mode::Aimd { window, .. } = &mut self.mode {
            window.in_flight = window.in_flight.saturating_sub(1);
            match fb {
                Feedback::Delivered(_) => window.on_ack(now_ns, 1e5),
                Feedback::Dropped(_) => window.on_loss(now_ns, rtt),
            }
            if self.host.next.is_none() {
                self.reschedule(now_ns, 1);
            }
        }
    }

    fn on_delivered_packet(&mut self, pkt: &[u8], now_ns: u64) {
        let (mark, wake) = self.host.fp.on_delivered(pkt, now_ns);
        match mark {
            Mark::Privileged => {
                let g = usize::from(self.host.group.min(1));
                self.privileged.borrow_mut()[g] += pkt.len() as u64;
            }
            Mark::WindowExhausted(ts) => {
                self.on_window_exhausted(ts, now_ns + self.host.fp.rtt_ns / 2);
            }
            Mark::Other => {}
        }
        self.host.wake(wake);
    }
}

/// Runs one strategy.
pub fn fig53_run(
    p: &Fig53Params,
    strategy: Strategy,
    opts: &RunOpts,
) -> Result<Fig53Run, ScenarioError> {
    p.validate()?;
    let cap_bps = p.capacity_mbps * 1e6;
    let tick_ns = (p.tick_us * 1e3) as u64;
    let bin_ns = (p.bin_ms * 1e6) as u64;
    let attack_start = (p.attack_start_s * 1e9) as u64;
    let levels = PuzzleLevels {
        base: p.puzzle_level,
        step: p.legit_retry_level_step,
        max: p.puzzle_level.saturating_add(p.legit_max_extra_level),
    };
    let w =
        World::new(p.duration_s, p.rtt_ms, p.period_ms, p.packet_bytes, levels, p.legit_mark_aware);
    let (rtt_ns, period_ns, stop_ns) = (w.rtt_ns, w.period_ns, w.stop_ns);

    let mut sim = Sim::new(tick_ns, EPOCH_UNIX_NS, p.seed);
    let net = w.add_network(&mut sim, &p.network(), p.router_params())?;
    let (r, stage) = (net.router, net.stage.clone());

    let n_all = f64::from(p.attackers + p.legit);
    let privileged = Rc::new(RefCell::new([0u64; 2]));
    let mut rng = crate::rng::Rng::new(p.seed ^ 0xf10f);
    let exact = strategy == Strategy::ExactWindow;
    let host = |group: u16, i: u32, dst, mode: Mode, start: u64| {
        let exact_attacker = group == GROUP_ATTACK && exact;
        Box::new(FpHost {
            mode,
            host: w.host_to(group, i, dst, start),
            privileged: privileged.clone(),
            window_exact: exact_attacker,
            paused_until: 0,
            oracle: exact_attacker.then(|| stage.clone()),
            onoff: (group == GROUP_ATTACK && strategy == Strategy::OnOff).then_some((
                attack_start,
                u64::from(p.onoff_period_ms) * 1_000_000,
                u64::from(p.onoff_on_ms) * 1_000_000,
            )),
            cut_ts: None,
        }) as Box<dyn Source>
    };
    let aimd = |max_rate_bps: f64, slow_start: bool, rto_min_ms: f64, start: u64| Mode::Aimd {
        max_rate_bps,
        window: if slow_start { Cwnd::slow_start() } else { Cwnd::default() }
            .with_rto((rto_min_ms * 1e6) as u64, start),
    };
    let mut hosts = Vec::new();
    // Every bottleneck link has its own server, legitimate senders and
    // attackers (host numbers run on across the links).
    for (k, &(_, dst)) in (0u32..).zip(&net.bottlenecks) {
        // Starts spread over the first RTTs so that requests do not collide.
        for i in 0..p.legit {
            let start = rng.below(rtt_ns * 5);
            let mode = aimd(
                p.legit_demand * cap_bps / f64::from(p.legit),
                p.legit_slow_start,
                p.legit_rto_min_ms,
                start,
            );
            hosts.push(host(GROUP_LEGIT, k * p.legit + i, dst, mode, start));
        }
        let flood = p.attack_volume * cap_bps / f64::from(p.attackers);
        // The analysis' allowed rate of one sender: the per-sender fair share.
        let allowed = p.exact_rate_factor * cap_bps / n_all;
        for i in 0..p.attackers {
            let mode = match strategy {
                Strategy::Exact => Mode::Flat { rate_bps: allowed },
                // Probing attackers probe as the legitimate TCP does (slow
                // start alike) but have no retransmission timer: they never
                // stop sending, which only makes them stronger.
                Strategy::Probing => aimd(flood, p.legit_slow_start, 0.0, 0),
                Strategy::NonComplying | Strategy::OnOff | Strategy::ExactWindow => {
                    Mode::Flat { rate_bps: flood }
                }
            };
            let start = attack_start + rng.below(rtt_ns * 5);
            hosts.push(host(GROUP_ATTACK, k * p.attackers + i, dst, mode, start));
        }
    }
    for h in hosts {
        sim.add_source(r, 0, h); // forwarded to the ingress port by default
    }
    if opts.progress {
        sim.progress = Some(crate::report::stderr_progress(format!("fig5.3 {}", strategy.name())));
    }

    // Shares of the bottlenecks' total capacity (each link: C).
    let links = net.bottlenecks.len();
    let total_bps = cap_bps * links as f64;
    let legit_desired = p.legit_demand * total_bps;
    let mut bins = Vec::new();
    let mut link_bins = vec![Vec::new(); links];
    let mut prev = vec![(0u64, 0u64); links];
    let mut prev_pa = 0u64;
    let (mut sum_a, mut sum_l, mut sum_pa, mut span) = (0u64, 0u64, 0u64, 0u64);
    let mut t = 0;
    while t < stop_ns {
        let end = (t + bin_ns).min(stop_ns);
        sim.run(end);
        let secs = (end - t) as f64 / 1e9;
        let (mut da, mut dl) = (0u64, 0u64);
        for (k, &(link, _)) in net.bottlenecks.iter().enumerate() {
            let d = &sim.links[link].delivered;
            let (a, l) = (d.get(GROUP_ATTACK).bytes, d.get(GROUP_LEGIT).bytes);
            let (dak, dlk) = (a - prev[k].0, l - prev[k].1);
            link_bins[k].push((
                end as f64 / 1e9,
                dak as f64 * 8.0 / secs / cap_bps,
                dlk as f64 * 8.0 / secs / (p.legit_demand * cap_bps),
            ));
            prev[k] = (a, l);
            (da, dl) = (da + dak, dl + dlk);
        }
        let pa = privileged.borrow()[1];
        let dpa = pa - prev_pa;
        bins.push((
            end as f64 / 1e9,
            da as f64 * 8.0 / secs / total_bps,
            dl as f64 * 8.0 / secs / legit_desired,
        ));
        // After the attackers' first period (all their traffic best effort).
        if t >= attack_start + period_ns + rtt_ns {
            sum_a += da;
            sum_l += dl;
            sum_pa += dpa;
            span += end - t;
        }
        prev_pa = pa;
        t = end;
    }
    let secs = span.max(1) as f64 / 1e9;
    let legit_fair_share = f64::from(p.legit) / n_all;
    let smooth_ms = match strategy {
        Strategy::OnOff => f64::from(p.onoff_period_ms),
        _ => f64::from(p.period_ms),
    };
    let settled = |bins: &[(f64, f64, f64)]| {
        settle(bins, p.attack_start_s, p.duration_s, smooth_ms / p.bin_ms, p.legit_demand)
    };
    let (final_attack_share, final_legit_share, convergence_s) = settled(&bins);
    let link_finals = link_bins
        .iter()
        .map(|b| {
            let (a, l, _) = settled(b);
            (a, l)
        })
        .collect();
    let node = &sim.nodes[r];
    let stage_rejects =
        node.drops(pipeline::DropReason::Expired) + node.drops(pipeline::DropReason::BadMac);
    Ok(Fig53Run {
        strategy,
        topology: p.topology,
        bins,
        attack_share: sum_a as f64 * 8.0 / secs / total_bps,
        attack_privileged_share: sum_pa as f64 * 8.0 / secs / total_bps,
        legit_ratio: sum_l as f64 * 8.0 / secs / legit_desired,
        legit_share: sum_l as f64 * 8.0 / secs / total_bps,
        attack_fair_share: f64::from(p.attackers) / n_all,
        stage_rejects,
        legit_fair_share,
        final_attack_share,
        final_legit_share,
        final_legit_ratio: final_legit_share / p.legit_demand,
        link_finals,
        convergence_s,
    })
}

/// Tolerance (fraction of C) of [`Fig53Run::convergence_s`].
pub const CONVERGENCE_BAND: f64 = 0.05;

/// From per-bin `(end s, attack share, legit / desired)`: the attackers'
/// and the legitimate senders' shares over the last quarter of the run
/// (legit converted with `legit_demand`), and the time after `attack_start`
/// from which the attack share, averaged over `smooth_bins` bins, stays
/// within [`CONVERGENCE_BAND`] of its final level.
fn settle(
    bins: &[(f64, f64, f64)],
    attack_start: f64,
    duration: f64,
    smooth_bins: f64,
    legit_demand: f64,
) -> (f64, f64, Option<f64>) {
    let last_q = duration - (duration - attack_start) / 4.0;
    let tail: Vec<_> = bins.iter().filter(|b| b.0 > last_q + 1e-9).collect();
    let n = tail.len().max(1) as f64;
    let fa = tail.iter().map(|b| b.1).sum::<f64>() / n;
    let fl = tail.iter().map(|b| b.2).sum::<f64>() / n * legit_demand;
    let k = (smooth_bins.round() as usize).max(1);
    let after: Vec<_> = bins.iter().filter(|b| b.0 > attack_start + 1e-9).collect();
    let mut converged = None;
    for i in (k - 1..after.len()).rev() {
        let avg = after[i + 1 - k..=i].iter().map(|b| b.1).sum::<f64>() / k as f64;
        if (avg - fa).abs() > CONVERGENCE_BAND {
            break;
        }
        converged = Some(after[i + 1 - k].0 - attack_start);
    }
    // A level first reached in the last quarter is not a convergence.
    let converged = converged.filter(|&t| t + attack_start <= last_q);
    (fa, fl, converged)
}

/// Runs every strategy of `p`; the report has one row per strategy and
/// the two figures' plots.
pub fn fig53(p: &Fig53Params, opts: &RunOpts) -> Result<(Report, Vec<Fig53Run>), ScenarioError> {
    p.validate()?;
    let mut rep = Report::new(
        "flowpolice_fig53",
        &[
            "strategy",
            "attack_share",
            "attack_privileged_share",
            "attack_fair_share",
            "legit_share",
            "legit_vs_desired",
            "stage_rejects",
            "legit_vs_fair",
            "final_attack_share",
            "final_legit_share",
            "convergence_s",
        ],
    );
    let mut runs = Vec::new();
    for &s in &p.strategies {
        let run = fig53_run(p, s, opts)?;
        rep.row(vec![
            s.name().into(),
            format!("{:.4}", run.attack_share),
            format!("{:.4}", run.attack_privileged_share),
            format!("{:.4}", run.attack_fair_share),
            format!("{:.4}", run.legit_share),
            format!("{:.4}", run.legit_ratio),
            run.stage_rejects.to_string(),
            format!("{:.4}", run.legit_share / run.legit_fair_share),
            format!("{:.4}", run.final_attack_share),
            format!("{:.4}", run.final_legit_share),
            run.convergence_s.map_or("-".into(), |c| format!("{c:.1}")),
        ]);
        runs.push(run);
    }
    let series = |f: fn(&(f64, f64, f64)) -> (f64, f64)| -> Vec<Series> {
        runs.iter()
            .map(|r| Series {
                name: r.strategy.name().into(),
                points: r.bins.iter().map(f).collect(),
            })
            .collect()
    };
    let mut share = series(|b| (b.0, b.1));
    share.push(Series {
        name: "per-sender fair share".into(),
        points: vec![(0.0, runs[0].attack_fair_share), (p.duration_s, runs[0].attack_fair_share)],
    });
    rep.plots.push(Plot {
        name: "flowpolice_fig53_attack_share".into(),
        title: "FlowPolice Fig. 5.3: attackers' share of the bottleneck".into(),
        x_label: "time (s)".into(),
        y_label: "attack throughput / capacity".into(),
        log_y: false,
        series: share,
    });
    rep.plots.push(Plot {
        name: "flowpolice_fig54_legit".into(),
        title: "FlowPolice Fig. 5.4: legitimate throughput / desired".into(),
        x_label: "time (s)".into(),
        y_label: "legit throughput / desired".into(),
        log_y: false,
        series: series(|b| (b.0, b.2)),
    });
    rep.notes.push(format!(
        "scale: C = {} Mbit/s for {} attackers and {} legitimate flows (the thesis scales the link, not the hosts: 50-500 Mbit/s stand for 100K-1M attackers on 100 Gbit/s); D_p = {} ms, RTT = {} ms",
        p.capacity_mbps, p.attackers, p.legit, p.period_ms, p.rtt_ms
    ));
    rep.notes.push(format!(
        "shares are averages after the first period; offered: attack {}xC, legit desired {}xC",
        p.attack_volume, p.legit_demand
    ));
    let mut topo =
        format!("topology (thesis Fig. 5.2) {}", p.topology.describe(p.bottlenecks() as usize));
    if p.topology != Topology::A {
        topo += &format!(
            "; the plain routers queue by {}",
            match p.remote_egress {
                RemoteEgress::Priority =>
                    "the FlowPolice mark (strict priority: privileged > best effort)",
                RemoteEgress::Fifo => "arrival (drop-tail FIFO)",
            }
        );
    }
    if p.bottlenecks() > 1 {
        topo += "; shares are of the links' total capacity";
    }
    rep.notes.push(topo);
    Ok((rep, runs))
}
