//! Fig. 8(a): the ephemeral bandwidth a new request could still reserve over
//! the legitimate source's steady up-path, second by second, while attackers
//! on other up-paths request ephemeral paths over the same bottleneck
//! (§V-C: all requests share one steady down-path, SIBRA's worst case).
//!
//! # Set-up (choices where the paper is silent)
//! * AS B joins the up-paths to the bottleneck interface towards the
//!   down-path; its real [`Admission`] decides every request (no packets:
//!   Fig. 7 exercises the packet path, this figure the sharing rule).
//! * The legitimate up-path (362 kbit/s) and `up_paths_after` attackers'
//!   up-paths (classes drawn from 16–724 kbit/s) are set up before the run,
//!   as the paper's steady paths are; `up_paths_before` of them carry
//!   attackers' requests until `change_at_s`, all of them afterwards.
//! * Every request asks for a class drawn uniformly from 256 kbit/s to
//!   11.6 Mbit/s and lives for the ephemeral horizon (4 ticks); the source
//!   takes a denial as final (no retry at the offer).
//! * The plotted bandwidth is the legitimate path's reservable remainder at
//!   the bottleneck, `share(P) − used(P)` (exact, not rounded to a class),
//!   sampled at the end of every step.
//! * The bottleneck's capacity is not in the paper; `capacity_mbps` is
//!   chosen so the remainder settles where the paper's does (≈ 2.5 Mbit/s).

use sibra::admission::{
    Admission, AdmissionConfig, Decision, Dir, EphemeralRequest, IfaceConfig, Split, SteadyRequest,
};
use sibra::host;
use sibra::{BwClass, EphemeralId, ResvKey, SteadyId, Tick, EPHEMERAL_HORIZON};

use super::as_b::{sibra_err, AS_LEGIT, EPOCH_UNIX_NS, IF_ATTACK, IF_LEGIT, IF_OUT};
use super::params::Fig8aParams;
use crate::report::{Plot, Report, Series};
use crate::rng::Rng;
use crate::scenarios::{RunOpts, ScenarioError};

/// One sample of the Fig. 8(a) series.
#[derive(Clone, Debug, PartialEq)]
pub struct Fig8aSample {
    /// End of the step (s).
    pub t_s: f64,
    /// Ephemeral bandwidth a new request over the legitimate up-path could
    /// still obtain at the bottleneck (bit/s).
    pub reservable_bps: u64,
    /// The legitimate up-path's ephemeral share there (bit/s).
    pub share_bps: u64,
    /// Attackers' up-paths carrying requests.
    pub up_paths: u32,
    /// Attackers.
    pub attackers: u32,
    /// Legitimate requests sent so far.
    pub legit_sent: u64,
    /// Legitimate requests granted so far.
    pub legit_granted: u64,
    /// Attack requests sent so far.
    pub attack_sent: u64,
    /// Attack requests granted so far.
    pub attack_granted: u64,
}

/// Sets up steady path `sid` from `ingress` to the bottleneck for `class`,
/// confirmed, valid for the steady horizon.
fn steady(
    a: &mut Admission,
    sid: SteadyId,
    ingress: u16,
    class: BwClass,
    t: Tick,
) -> Result<(), ScenarioError> {
    let info = host::request_info(t, sibra::STEADY_HORIZON, class, class);
    let q = SteadyRequest { id: sid, ingress, egress: IF_OUT, info };
    match a.steady(&q, t).map_err(sibra_err)? {
        Decision::Granted => {
            a.confirm(&ResvKey::from(sid), (ingress, IF_OUT), info.index).map_err(sibra_err)
        }
        Decision::Denied { .. } => Err(ScenarioError::Param(format!(
            "fig8a: steady path {sid:?} denied; capacity too small"
        ))),
    }
}

/// Runs Fig. 8(a): the series and its report.
pub fn fig8a(p: &Fig8aParams, opts: &RunOpts) -> Result<(Report, Vec<Fig8aSample>), ScenarioError> {
    p.validate()?;
    let t0 = Tick::of(pipeline::Now::from_unix_ns(EPOCH_UNIX_NS));
    let cap = (p.capacity_mbps * 1e6) as u64;
    let mut cfg = AdmissionConfig { max_ephemeral: 1 << 20, ..Default::default() };
    for ifid in [IF_LEGIT, IF_ATTACK, IF_OUT] {
        cfg.interfaces.push(IfaceConfig { ifid, capacity_bps: cap, split: Split::default() });
    }
    let mut a = Admission::new(cfg, t0).map_err(sibra_err)?;
    let mut rng = Rng::new(p.seed ^ 0x8a);
    let legit = SteadyId::new(AS_LEGIT, 1);
    steady(
        &mut a,
        legit,
        IF_LEGIT,
        BwClass::floor_from_bps((p.legit_steady_kbps * 1e3) as u64),
        t0,
    )?;
    let [lo, hi] = p.bot_steady_classes;
    let mut bots = Vec::new();
    for k in 0..p.up_paths_after {
        let sid = SteadyId::new(0xb0_0000 + u64::from(k), 1);
        let c = lo + rng.below(u64::from(hi - lo) + 1) as u8;
        steady(&mut a, sid, IF_ATTACK, BwClass::new(c).map_err(sibra_err)?, t0)?;
        bots.push(sid);
    }
    let eph_lo = BwClass::ceil_from_bps((p.eph_kbps[0] * 1e3) as u64).unwrap_or(BwClass::MAX).get();
    let eph_hi = BwClass::floor_from_bps((p.eph_kbps[1] * 1e3) as u64).get().max(eph_lo);

    let steps = (p.duration_s / p.step_s).round() as u64;
    let step_ns = (p.step_s * 1e9) as u64;
    let mut serial = 0u64;
    let mut out = Vec::new();
    let (mut legit_sent, mut legit_granted, mut attack_sent, mut attack_granted) = (0, 0, 0, 0);
    let mut progress =
        opts.progress.then(|| crate::report::stderr_progress("sibra fig8a".to_string()));
    // Requests of one step: (time, up-path, ingress).
    let mut due: Vec<(u64, usize)> = Vec::new();
    for s in 0..steps {
        let start = s * step_ns;
        let active =
            if (start as f64) < p.change_at_s * 1e9 { p.up_paths_before } else { p.up_paths_after };
        due.clear();
        // Index 0: the legitimate path; k + 1: attackers' up-path k.
        let arrivals = |rate: f64, who: usize, rng: &mut Rng, due: &mut Vec<(u64, usize)>| {
            if rate <= 0.0 {
                return;
            }
            let mut t = rng.exp(1e9 / rate);
            while t < step_ns as f64 {
                due.push((start + t as u64, who));
                t += rng.exp(1e9 / rate);
            }
        };
        arrivals(p.legit_requests_per_s, 0, &mut rng, &mut due);
        let per_path = f64::from(p.attackers_per_path) * p.attack_requests_per_s;
        for k in 0..active as usize {
            arrivals(per_path, k + 1, &mut rng, &mut due);
        }
        due.sort_unstable();
        for &(t, who) in &due {
            let tick = Tick::of(pipeline::Now::from_unix_ns(EPOCH_UNIX_NS + t));
            let (sid, ingress) =
                if who == 0 { (legit, IF_LEGIT) } else { (bots[who - 1], IF_ATTACK) };
            let class = BwClass::new(eph_lo + rng.below(u64::from(eph_hi - eph_lo) + 1) as u8)
                .map_err(sibra_err)?;
            serial += 1;
            let mut r = [0u8; 10];
            r[..8].copy_from_slice(&serial.to_be_bytes());
            let q = EphemeralRequest {
                id: EphemeralId::new(sid.owner(), r),
                steady: Some(sid),
                ingress,
                egress: IF_OUT,
                info: host::request_info(tick, EPHEMERAL_HORIZON, class, class),
            };
            let ok = matches!(a.ephemeral(&q, tick).map_err(sibra_err)?, Decision::Granted);
            if who == 0 {
                legit_sent += 1;
                legit_granted += u64::from(ok);
            } else {
                attack_sent += 1;
                attack_granted += u64::from(ok);
            }
        }
        let end = start + step_ns;
        let tick = Tick::of(pipeline::Now::from_unix_ns(EPOCH_UNIX_NS + end));
        a.advance(tick);
        let share = a.ephemeral_share(&legit, IF_OUT, Dir::Out);
        let used = a.ephemeral_used_on(&legit, true, tick);
        out.push(Fig8aSample {
            t_s: end as f64 / 1e9,
            reservable_bps: share.saturating_sub(used),
            share_bps: share,
            up_paths: active,
            attackers: active * p.attackers_per_path,
            legit_sent,
            legit_granted,
            attack_sent,
            attack_granted,
        });
        if let Some(f) = progress.as_mut() {
            f((s + 1) as f64 / steps as f64);
        }
    }

    let mut rep = Report::new(
        "sibra_fig8a",
        &[
            "t_s",
            "reservable_mbps",
            "share_mbps",
            "up_paths",
            "attackers",
            "legit_granted/sent",
            "attack_granted/sent",
        ],
    );
    for r in &out {
        rep.row(vec![
            format!("{:.0}", r.t_s),
            format!("{:.3}", r.reservable_bps as f64 / 1e6),
            format!("{:.3}", r.share_bps as f64 / 1e6),
            r.up_paths.to_string(),
            r.attackers.to_string(),
            format!("{}/{}", r.legit_granted, r.legit_sent),
            format!("{}/{}", r.attack_granted, r.attack_sent),
        ]);
    }
    let series = |f: &dyn Fn(&Fig8aSample) -> f64| -> Vec<(f64, f64)> {
        out.iter().map(|r| (r.t_s, f(r))).collect()
    };
    rep.plots.push(Plot {
        name: "sibra_fig8a_reservable".into(),
        title: "SIBRA Fig. 8(a): reservable ephemeral bandwidth over time".into(),
        x_label: "time (s)".into(),
        y_label: "count / Mbit/s x 20".into(),
        log_y: false,
        series: vec![
            Series { name: "# of up-paths".into(), points: series(&|r| f64::from(r.up_paths)) },
            Series {
                name: "# of attackers / 100".into(),
                points: series(&|r| f64::from(r.attackers) / 100.0),
            },
            Series {
                name: "BW x 20 [Mbit/s]".into(),
                points: series(&|r| r.reservable_bps as f64 / 1e6 * 20.0),
            },
        ],
    });
    let (before, after) = stable_means(p, &out);
    rep.notes.push(format!(
        "fig8a: bottleneck {} Mbit/s; reservable settles at {:.3} Mbit/s (mean from 20 s); {:.3} Mbit/s before and {:.3} Mbit/s after the change at {} s (the paper: stable around 2.5 Mbit/s)",
        p.capacity_mbps,
        settled_mean(&out) / 1e6,
        before / 1e6,
        after / 1e6,
        p.change_at_s
    ));
    Ok((rep, out))
}

/// Mean reservable bandwidth (bit/s) over the second half of the time
/// before the change and over the time after it (once the old requests'
/// reservations could have expired, 20 s).
pub fn stable_means(p: &Fig8aParams, s: &[Fig8aSample]) -> (f64, f64) {
    let mean = |lo: f64, hi: f64| {
        let v: Vec<f64> = s
            .iter()
            .filter(|r| r.t_s > lo && r.t_s <= hi)
            .map(|r| r.reservable_bps as f64)
            .collect();
        v.iter().sum::<f64>() / (v.len().max(1)) as f64
    };
    (mean(p.change_at_s / 2.0, p.change_at_s), mean(p.change_at_s + 20.0, p.duration_s))
}

/// Mean reservable bandwidth (bit/s) from 20 s on (once the first
/// reservations could have expired): the level the series settles at.
pub fn settled_mean(s: &[Fig8aSample]) -> f64 {
    let v: Vec<f64> = s.iter().filter(|r| r.t_s > 20.0).map(|r| r.reservable_bps as f64).collect();
    v.iter().sum::<f64>() / (v.len().max(1)) as f64
}
