//! The analytical model of Figure 4: the paper's equations (1) and (2) for
//! Z-Lane routers and its FIFO equation, the paper's per-flow fairness
//! abstraction ([`fig4_per_flow_model`]), plus max-min models of the
//! simulated baselines the paper describes only in words (per-flow DRR with
//! a fixed set of source flows, local isolation), on the same traffic
//! decomposition as the simulation.
//!
//! # Two models of per-flow fairness
//! The paper states only that "the attacker ... creates twice the number of
//! flows per traffic volume than the benign parties". Its per-flow
//! abstraction counts flows in proportion to the volume that arrives at a
//! router, for the source too: `k` flows per Gbit/s of benign traffic, `2k`
//! per Gbit/s of attack. Under the attack every flow is above the fair
//! share, so at router n
//!
//! `t_S = min{ C·(μ_A + μ_G) / (f_benign + f_S + 2·D), 1 } × f_S`
//!
//! (the FIFO equation with the attack volume counted twice): the same
//! fraction is taken again at every hop and the source's throughput decays
//! exponentially along the path, as the paper's Figure 4 shows for every
//! baseline. A max-min router with a *fixed* set of source flows behaves
//! differently: the source's `round(F / flow_gbps)` flows each get the fair
//! share at router 1, and that thinned rate is below the fair share at
//! every later router, so after hop 1 nothing more is lost (the
//! `RouterKind::Fair` model below, which the simulated DRR router follows).
//!
//! At router n the source's arrival is what router n − 1 delivered
//! (`f_1 = F`); all other traffic at the router adds up to `X·C − F`
//! (the simulation's cross traffic), split as in [`AttackMix`](super::AttackMix):
//! the other guaranteed origins use `μ_G·C − r` (r = r_S inside the source's
//! ISD, r_I outside, where T of it is the rest of the source's ISD), the rest
//! is attack. Rates are in Gbit/s (paper units).

use super::params::{Fig4Params, RouterKind};

/// The source's throughput after each router of a path of `hops` (Gbit/s).
pub fn fig4_model(p: &Fig4Params, hops: &[RouterKind], f: f64) -> Vec<f64> {
    let mut t = f;
    hops.iter()
        .enumerate()
        .map(|(n, kind)| {
            t = hop(p, *kind, n, f, t);
            t
        })
        .collect()
}

/// The paper's per-flow fairness abstraction over all `p.routers` routers:
/// the source's throughput after each router (Gbit/s) when every router
/// shares `C·baseline_capacity_share` max-min fairly among flows whose
/// number is proportional to the traffic volume, the attack's at twice the
/// flows per volume of the benign traffic (see the module docs). Same
/// traffic decomposition and parameters as the FIFO model.
pub fn fig4_per_flow_model(p: &Fig4Params, f: f64) -> Vec<f64> {
    let mut t = f;
    (0..p.routers)
        .map(|n| {
            t = per_flow_hop(p, n, f, t);
            t
        })
        .collect()
}

/// Throughput of the source out of router `n` (0-based) under the paper's
/// per-flow abstraction, given its arrival `fs` there and its original
/// rate `f`: flows of `flow_gbps` for the benign traffic and the source
/// (their number follows the arriving volume), of half that for the attack.
fn per_flow_hop(p: &Fig4Params, n: usize, f: f64, fs: f64) -> f64 {
    if fs <= 0.0 {
        return 0.0;
    }
    let (others, peers, d) = cross(p, n, f);
    let phi = p.flow_gbps;
    let mut flows = vec![(others + peers, phi), (d, phi / 2.0), (fs, phi)];
    flows.retain(|x| x.0 > 0.0 && x.1 > 0.0);
    let level = water_level(p.capacity_gbps * p.baseline_capacity_share, &flows);
    fs * (level / phi).min(1.0)
}

/// Traffic at router `n` (0-based) besides the source: (other guaranteed
/// origins' rate within their guarantees, rest of the source's ISD, attack
/// volume D).
fn cross(p: &Fig4Params, n: usize, f: f64) -> (f64, f64, f64) {
    let c = p.capacity_gbps;
    let external = n >= p.internal_routers;
    let own = if external { p.r_i_gbps } else { p.r_s_gbps };
    let others = (c * p.bounds.g - own).max(0.0);
    let peers = if external { p.t_gbps } else { 0.0 };
    let d = (p.intensity * c - f - others - peers).max(0.0);
    (others, peers, d)
}

/// Throughput of the source out of router `n` (0-based) of kind `kind`,
/// given its arrival `fs` there and its original rate `f`.
fn hop(p: &Fig4Params, kind: RouterKind, n: usize, f: f64, fs: f64) -> f64 {
    let c = p.capacity_gbps;
    let (others, peers, d) = cross(p, n, f);
    let external = n >= p.internal_routers;
    let mix = p.attack_mix;
    let mix_sum = (mix.q_overuse + mix.auth + mix.unauth).max(1e-12);
    // Attack traffic landing in queue A (overuse and host-authenticated).
    let attack_a = d * (mix.q_overuse + mix.auth) / mix_sum;
    let baseline_cap = c * p.baseline_capacity_share;
    match kind {
        RouterKind::Zlane | RouterKind::ZlaneUnconfigured => {
            let configured = kind == RouterKind::Zlane;
            if !external {
                // Equation (1): t = g + b.
                let r = if configured { p.r_s_gbps } else { 0.0 };
                let g = fs.min(r);
                let u = p.r_s_gbps - g;
                let o_s = (fs - r).max(0.0);
                let l = c * p.bounds.a + u;
                let b = share(l, attack_a + o_s) * o_s;
                g + b
            } else {
                // Equation (2): the ISD's guarantee, split by volume.
                let r = if configured { p.r_i_gbps } else { 0.0 };
                let f_i = peers + fs;
                if f_i <= 0.0 {
                    return 0.0;
                }
                let g_i = f_i.min(r);
                let u = p.r_i_gbps - g_i;
                let o_i = (f_i - r).max(0.0);
                let l = c * p.bounds.a + u;
                let b_i = share(l, attack_a + o_i) * o_i;
                (g_i + b_i) * fs / f_i
            }
        }
        RouterKind::Fifo => {
            // The paper's FIFO equation.
            let total = others + peers + d + fs;
            share(baseline_cap, total) * fs
        }
        RouterKind::Fair => {
            // Max-min over flows: benign flows carry flow_gbps, attack flows
            // half of it; the source keeps its round(f / flow_gbps) flows,
            // each carrying fs / (its flow count) (the simulated DRR router;
            // the paper's abstraction is `fig4_per_flow_model`).
            let phi = p.flow_gbps;
            let n_s = (f / phi).round().max(1.0);
            let mut flows = vec![(others + peers, phi), (d, phi / 2.0), (fs, fs / n_s)];
            flows.retain(|x| x.0 > 0.0 && x.1 > 0.0);
            let level = water_level(baseline_cap, &flows);
            n_s * (fs / n_s).min(level)
        }
        RouterKind::Isolation => {
            // Max-min over ingress interfaces: the upstream one carries the
            // source (and, from router 2 on, `upstream_cross_share` of the
            // cross traffic); the attack ports share the rest evenly.
            let rest = others + peers + d;
            let ports = f64::from(p.attack_ports.max(1));
            let up_cross = if n == 0 { 0.0 } else { rest * p.upstream_cross_share };
            let per_port = (rest - up_cross) / ports;
            let up = fs + up_cross;
            let mut loads = vec![(up, up)];
            loads.extend((0..p.attack_ports.max(1)).map(|_| (per_port, per_port)));
            loads.retain(|x| x.0 > 0.0);
            let level = water_level(baseline_cap, &loads);
            if up <= 0.0 {
                0.0
            } else {
                up.min(level) / up * fs
            }
        }
    }
}

/// `min(capacity / load, 1)`.
fn share(capacity: f64, load: f64) -> f64 {
    if load <= capacity {
        1.0
    } else {
        capacity / load
    }
}

/// Max-min fair level for groups of equal flows `(volume, per-flow rate)`
/// sharing `capacity`: the λ with `Σ volume·min(1, λ/rate) = capacity`
/// (infinite if everything fits).
fn water_level(capacity: f64, groups: &[(f64, f64)]) -> f64 {
    let total: f64 = groups.iter().map(|g| g.0).sum();
    if total <= capacity {
        return f64::INFINITY;
    }
    let mut rates: Vec<f64> = groups.iter().map(|g| g.1).collect();
    rates.sort_by(f64::total_cmp);
    // Walk the per-flow rates upwards; between two rates the served volume
    // is linear in λ.
    let mut lo = 0.0;
    for &r in &rates {
        let served = |l: f64| -> f64 { groups.iter().map(|g| g.0 * (l / g.1).min(1.0)).sum() };
        if served(r) >= capacity {
            // Linear on [lo, r].
            let (s0, s1) = (served(lo), served(r));
            return lo + (capacity - s0) / (s1 - s0).max(1e-300) * (r - lo);
        }
        lo = r;
    }
    f64::INFINITY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_keeps_the_paper_fraction_per_hop() {
        let p = Fig4Params::default();
        let t = fig4_model(&p, &[RouterKind::Fifo; 3], 2.0);
        // C(μA+μG) / XC = 14 / 80 = 0.175 per hop (the source's own share
        // shrinks the total slightly after hop 1).
        assert!((t[0] - 0.35).abs() < 1e-9, "{t:?}");
        assert!(t[2] < 2.0 * 0.18f64.powi(3) && t[2] > 2.0 * 0.17f64.powi(3), "{t:?}");
    }

    #[test]
    fn zlane_keeps_the_guarantee_and_below_it_everything() {
        let p = Fig4Params::default();
        let hops = [RouterKind::Zlane; 8];
        for f in [0.5, 1.0] {
            let t = fig4_model(&p, &hops, f);
            assert!(t.iter().all(|x| (x - f).abs() < 1e-9), "{f}: {t:?}");
        }
        let t = fig4_model(&p, &hops, 2.0);
        assert!(t.iter().all(|x| *x >= 1.0 - 1e-9), "{t:?}");
        assert!(t[0] > 1.0 && t[7] < t[0], "{t:?}");
    }

    #[test]
    fn water_level_splits_max_min() {
        // Two flows of 10 and one of 1 on 11: the small one keeps 1, the
        // big ones get 5 each.
        let l = water_level(11.0, &[(20.0, 10.0), (1.0, 1.0)]);
        assert!((l - 5.0).abs() < 1e-9, "{l}");
        assert!(water_level(100.0, &[(20.0, 10.0)]).is_infinite());
    }

    #[test]
    fn paper_per_flow_model_counts_the_attack_twice() {
        let p = Fig4Params::default();
        let t = fig4_per_flow_model(&p, 2.0);
        assert_eq!(t.len(), p.routers);
        // Router 1 (inside): others 8 - 1 = 7, attack 80 - 2 - 7 = 71, so
        // 14 / (7 + 2 + 2 * 71) of the source passes.
        let want = 2.0 * 14.0 / (7.0 + 2.0 + 142.0);
        assert!((t[0] - want).abs() < 1e-9, "{t:?}");
        // Without congestion nothing is lost.
        let calm = Fig4Params { intensity: 0.2, ..Fig4Params::default() };
        assert!(fig4_per_flow_model(&calm, 1.0).iter().all(|x| (x - 1.0).abs() < 1e-9));
        // The max-min model with a fixed set of source flows stops losing
        // after router 1; the paper's abstraction keeps losing.
        let fixed = fig4_model(&p, &[RouterKind::Fair; 8], 2.0);
        assert!((fixed[7] / fixed[0] - 1.0).abs() < 0.05, "{fixed:?}");
        assert!(t[7] < t[0] * 1e-6, "{t:?}");
    }

    #[test]
    fn isolation_protects_the_first_hop_only() {
        let p = Fig4Params::default();
        let t = fig4_model(&p, &[RouterKind::Isolation; 3], 2.0);
        assert!((t[0] - 2.0).abs() < 1e-9, "{t:?}");
        assert!(t[1] < 0.5 && t[2] < t[1], "{t:?}");
    }
}
