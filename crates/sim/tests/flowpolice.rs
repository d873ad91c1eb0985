//! FlowPolice Figs. 5.3/5.4 at reduced scale (see the module docs of
//! `sim::scenarios::flowpolice` for what is and is not reproduced).

use sim::scenarios::flowpolice::{fig53, Fig53Params, Strategy};
use sim::scenarios::RunOpts;

#[test]
fn complying_attackers_leave_legit_its_demand_flooders_are_demoted() {
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
    }
    // Probing (complying) attackers: the legitimate senders get their demand.
    let probing = run(Strategy::Probing);
    assert!(probing.legit_ratio > 0.9, "legit / desired = {}", probing.legit_ratio);
    // Non-complying flooders: Algorithm 1 collapses their windows, so most
    // of what they get through is demoted best effort, and their privileged
    // share stays far below the per-sender fair share.
    let nc = run(Strategy::NonComplying);
    assert!(nc.attack_privileged_share < 0.35 * nc.attack_share, "{nc:?}");
    assert!(nc.attack_privileged_share < 0.3 * nc.attack_fair_share, "{nc:?}");
}
