//! FlowPolice Figs. 5.3/5.4 at reduced scale (see the module docs of
//! `sim::scenarios::flowpolice` for the set-up and the router policy).

use sim::scenarios::flowpolice::{fig53, Fig53Params, Strategy};
use sim::scenarios::RunOpts;

/// Mean attack share of the bins ending in `(from, to]` seconds.
fn attack_share(bins: &[(f64, f64, f64)], from: f64, to: f64) -> f64 {
    let v: Vec<f64> = bins.iter().filter(|b| b.0 > from && b.0 <= to).map(|b| b.1).collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[test]
fn flooders_are_throttled_to_almost_nothing_legit_gets_its_demand() {
    let p: Fig53Params =
        toml::from_str(include_str!("../../../config/scenarios/flowpolice_fig53.toml")).unwrap();
    assert_eq!(p, Fig53Params::default(), "the shipped file is the default set-up");
    let (rep, runs) = fig53(&p, &RunOpts::default()).unwrap();
    println!("{}", rep.table());
    let run = |s: Strategy| runs.iter().find(|r| r.strategy == s).unwrap();
    for r in &runs {
        // The bottleneck is never over-delivered and the stage rejects little.
        assert!(r.attack_share + r.legit_share <= 1.01, "{r:?}");
        assert!(r.attack_privileged_share <= r.attack_share + 1e-9, "{r:?}");
        assert!(r.stage_rejects < 100, "{r:?}");
        // Whatever the attackers do, the legitimate senders get (almost)
        // their desired throughput (Fig. 5.4).
        assert!(r.legit_ratio > 0.9, "{:?}: legit / desired = {}", r.strategy, r.legit_ratio);
    }
    // Non-complying flooders: throttled to almost zero (Fig. 5.3), and to
    // nothing at all once their windows have collapsed.
    let nc = run(Strategy::NonComplying);
    assert!(nc.attack_share < 0.06, "{nc:?}");
    assert!(attack_share(&nc.bins, 8.0, 12.0) < 0.04, "{nc:?}");
    // Probing attackers comply: they take what the legitimate senders leave.
    let probing = run(Strategy::Probing);
    assert!(probing.attack_share > 0.4 && probing.attack_share < 0.55, "{probing:?}");
    // The exact attacker complies too: its share grows period by period
    // (+Δ per window) towards what the legitimate senders leave.
    let exact = run(Strategy::Exact);
    let early = attack_share(&exact.bins, 3.0, 5.0);
    let late = attack_share(&exact.bins, 10.0, 12.0);
    assert!(late > early + 0.1 && late > 0.4, "exact: {early} -> {late}");
    assert!(exact.attack_share > 10.0 * nc.attack_share, "{exact:?}");
}
