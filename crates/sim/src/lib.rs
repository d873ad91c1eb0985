//! Virtual-time, packet-level, deterministic simulation of the papers'
//! attack scenarios, driving the **real** data-plane stages and egress
//! schedulers of the project (no models of the stages).
//!
//! * [`net`]: the engine — [`net::Node`]s run a `pipeline::Pipeline` over
//!   bursts of `pipeline::Frame`s and hand forwarded packets to a
//!   `pipeline::Egress` per port; [`net::Link`]s serialize at their capacity
//!   and add a propagation delay; sources ([`net::TemplateSource`] open loop,
//!   [`net::AimdSource`] TCP-like) emit tagged packets; meters count bytes per
//!   statistics group inside a measurement window.
//! * [`baselines`]: plain routers the papers compare against (per-flow and
//!   per-ingress deficit round robin).
//! * [`scenarios`]: the papers' experiments with their parameters.
//! * [`report`]: tables, CSV, plot data.
//! * [`rng`]: the seeded generator; a run is a pure function of its
//!   parameters and seed.
//!
//! # Scenarios
//! | scenario | paper | status at the paper's parameters |
//! |---|---|---|
//! | [`scenarios::zlane::table4`] | Z-Lane Table 4 (also drawn as a figure; AS X may send above its guarantee) | done |
//! | [`scenarios::zlane::fig4`] | Z-Lane Fig. 4 (Z-Lane vs FIFO, per-flow fairness, local isolation; mixed router kinds per hop) | done; baselines deep in the path composed from per-hop pass ratios measured on thousands of packets, the paper's equations drawn beside them; Z-Lane ≥ 30× the baselines after 3 hops (FIFO 184×, local isolation 33×, the paper's per-flow model 1282×; the paper "up to 30×"); a simulated max-min per-flow router levels off after hop 1 (12×, reported as a note); see the module docs |
//! | [`scenarios::flowpolice::fig53`] | FlowPolice Figs. 5.3/5.4 (exact, probing, non-complying, on/off attackers; λ, β, L↓, L↑, Δ, S_Th, D_p, RTT; the three attack cases of Fig. 5.2, default (c): two remote bottlenecks behind plain routers) | done at D_p = 3 s, RTT 100 ms, 60 s in cases (a), (b) and (c): exact attackers ≈ the fair share, non-complying and on/off ≈ 0, legit senders their full demand; a flood at 1 × C stays within Algorithm 1's L↓ margin (see the module docs) |
//! | [`scenarios::flowpolice_fct::fct`] | FlowPolice §5.2.3 / Fig. 5.5 (FCT of 2 MB transfers: no attack, attack with FlowPolice, attack through a drop-tail FIFO) | done with TCP NewReno senders (pacing jittered ±10 %); 1.34 × the no-attack FCT with FlowPolice (thesis ≈ 1.3 ×; 1.28–1.37 × over 20 seeds), none of 50 transfers finish through the FIFO (thesis: none finish); see the module docs |
//! | [`scenarios::sibra::fig7`] | SIBRA Fig. 7(a) intra-ISD and 7(b) inter-ISD DoC (request success vs attackers, up to the paper's 2 × 10⁵ in 1000 ASes, 5 % request cap, per-steady-path fairness; TVA, Portcullis and STRIDE beside SIBRA) | done: SIBRA 100 % in both; at 2 × 10⁵ TVA 45 % / 43 %, Portcullis 0, STRIDE 22 % / 0 |
//! | [`scenarios::sibra::fig8a`] | SIBRA Fig. 8(a) over time | done; the bottleneck capacity is calibrated (the paper does not give it) |
//! | [`scenarios::sibra::fig8b`] | SIBRA Fig. 8(b) (waste vs request/reply loss, paths of 5–10 admitting ASes) | done |
//! | [`scenarios::fair::fair`] | FAIR: violation proven to every honest AS, replayer localized, tampering and collusion, measured header overhead (4 transit ASes) | done; overhead within 0.2 % of the paper on each trace's stand-in |
//!
//! `scenario all --out DIR` runs every scenario at its defaults and writes
//! `DIR/index.html` and `DIR/index.md`: every plot beside the paper's points
//! and a paper | ours | relative error table ([`report::Headline`]).
//!
//! The `scenario` binary runs them from `config/scenarios/<name>.toml`.
//!
//! # Time and scaling
//! Time advances in fixed ticks (tens of µs); within a tick, packets are
//! processed in bursts at the tick's end, while links keep exact
//! (picosecond) serialization across ticks, so throughput is exact and
//! delays are quantized to one tick. Paper rates (tens to hundreds of
//! Gbit/s) are divided by a per-scenario `scale` so that a run takes
//! seconds on two cores; packet sizes stay realistic, so packet counts —
//! and therefore statistical noise — shrink by the same factor. Every
//! report states its scale and prints rates multiplied back to paper units.
//!
//! ```
//! use pipeline::{Fifo, Pipeline};
//! use sim::net::{Endpoint, Link, Node, Pattern, Sim, TemplateSource};
//!
//! // A 10 Mbit/s bottleneck offered 20 Mbit/s delivers 10 Mbit/s.
//! let mut sim = Sim::new(20_000, 0, 7);
//! let r = sim.add_node(Node::new("r", Pipeline::new()));
//! sim.connect(r, 0, Box::new(Fifo::new(64)), Link::new("out", 10_000_000, 0, Endpoint::Sink));
//! sim.add_source(r, 0, Box::new(TemplateSource::new(vec![vec![0; 1000]], 20e6,
//!     Pattern::Poisson, 1, 0, u64::MAX)));
//! sim.window = (100_000_000, 600_000_000);
//! sim.run(600_000_000);
//! let bps = sim.links[0].delivered.get(1).win_bytes as f64 * 8.0 / 0.5;
//! assert!((bps - 10e6).abs() < 1e5);
//! ```
#![forbid(unsafe_code)]

pub mod baselines;
pub mod net;
pub mod report;
pub mod rng;
pub mod scenarios;

pub use net::{Endpoint, Link, Node, Sim};
pub use report::Report;
pub use rng::Rng;
