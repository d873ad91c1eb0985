//! SIBRA Fig. 7(a/b) (Denial-of-Capability: request success vs number of
//! attackers) and Fig. 8(a) (reservable ephemeral bandwidth per steady path
//! as attackers grow).
//!
//! Drives the real `sibra::stage::SibraControl` (admission with per-tick
//! accounting, SOF insertion) and `sibra::stage::SibraTransit` (token
//! verification, monitoring) of the bottleneck AS B; the hosts build their
//! requests with `sibra::host`.
//!
//! # Set-up (choices where the paper is silent)
//! * Only B, the AS owning the bottleneck link (interface 3 towards the
//!   destination AS), is simulated; the source and destination ASes are
//!   uncongested. Requests enter B with CurrHop at B's hop, as if the source
//!   AS had processed its own hop; "success" is the accepted flag of a
//!   request that reached the destination.
//! * The legitimate AS A (interface 1) and `attack_ases` bot ASes (behind
//!   interface 2) hold steady paths over B, set up through the stage before
//!   the run (setup request, then the reply back through B to confirm).
//! * Each of `n` attackers, spread over the bot ASes, sends ephemeral setup
//!   requests over its AS's steady path (fresh IDs) and floods best-effort
//!   SCION packets (empty path) towards the bottleneck.
//! * B's bottleneck egress is strict priority: SIBRA class R
//!   (`stage::CLASS_R`: reservation traffic, requests included) over best
//!   effort.
//! * The legitimate source sends one ephemeral setup per `legit_interval_ms`
//!   for `legit_bw_kbps`, each with a new ephemeral ID.
//!
//! # Scaling
//! Admission sees paper-size interfaces (`capacity_gbps`); the simulated
//! bottleneck link runs at `capacity_gbps / scale`, and the flood is
//! divided by `scale` with it. Request rates are simulated rates (each
//! request is admitted against the paper-size interfaces, so they are not
//! scaled); attack request templates are rebuilt every 200 ms with fresh
//! ephemeral IDs (a repeated request would be granted without a new charge).
//!
//! # Result (default parameters, `sibra_fig7.toml`)
//! 0–200 attackers (flood up to 10× the link, up to ~4000 requests/s that
//! use up to 92 % of the bot ASes' ephemeral shares): the legitimate source's
//! 40 requests all succeed at every count, and its steady path's reservable
//! ephemeral bandwidth stays at `E·W/ΣW` = 1.6 Gbit/s (8 Gbit/s × 50/250),
//! because bots add hosts, not steady paths.
//!
//! Fig. 8(b) ([`fig8b`], `sibra_fig8b.toml`): waste grows linearly with the
//! loss rate and is zero without loss: about 0.25 × the loss rate (1.5 %
//! at 6 % loss; the paper: ≤ 1.4 % at 5 %, about 0.28 ×).
//!
//! What the waste counts (the paper, §V-D): "unused bandwidth reservation
//! on the routers that had already processed the packet, until bandwidth
//! reclaim occurs", divided by all reserved bandwidth, with RTT = 1 s. The
//! RTT only matters if the source reacts to a loss: without a reply within
//! its timeout it re-sends the request, and since B grants a repeated
//! request on the index it already holds (the largest overlapping index
//! counts once), the lost attempt's bandwidth is wasted for one timeout out
//! of the reservation's ≈ 14 s remaining life: waste ≈ (loss events per
//! request ≈ 2 × loss) × timeout / 14 s. The paper does not state the
//! timeout; it must exceed the RTT, and the shipped file uses 2 × RTT =
//! 2 s (≈ 0.25 × loss). With a timeout of one RTT the waste is ≈ 0.13 ×
//! loss. The first version of this scenario did not re-send at all: a
//! reply lost after B then wasted its index until expiry and a request lost
//! after B until the 4-s reclaim, ≈ 1.1 × loss — the cause of the earlier
//! mismatch. `reply_timeout_s`, `max_retries` and `confirm_ticks` are in
//! the TOML.
//!
//! # Modules
//! * `params`: the parameters of both figures, as in their TOML files;
//! * `as_b`: the topology: AS B with the real stages, and the packets hosts
//!   send through it;
//! * `fig7` and `fig8b`: each figure's run and report.

mod as_b;
mod fig7;
mod fig8b;
mod params;

pub use fig7::{fig7, fig7_run, Fig7Point};
pub use fig8b::fig8b;
pub use params::{Fig7Params, Fig8bParams};
