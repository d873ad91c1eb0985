//! Z-Lane scenarios at reduced scale: the papers' qualitative results.

use sim::scenarios::zlane::{fig4, table4, Fig4Params, RouterKind, Table4Params};
use sim::scenarios::RunOpts;

#[test]
fn table4_as_x_keeps_its_guarantee_while_every_class_is_overused() {
    let p = Table4Params {
        scale: 320.0, // 500 Mbit/s egress; AS X at 2.9 Mbit/s = 29 bucket units
        intra_isd_ases: 20,
        isds: 20,
        duration_s: 0.35,
        warmup_s: 0.05,
        ..Default::default()
    };
    let r = table4(&p, &RunOpts::default()).unwrap();
    println!("{}", r.report.table());
    assert!(r.as_x_ratio >= 0.995, "AS X out/in = {}", r.as_x_ratio);
    assert!(r.as_x_of_rate >= 0.99, "AS X out/rate = {}", r.as_x_of_rate);
    let get = |n: &str| r.rows.iter().find(|x| x.0 == n).unwrap();
    let c = p.capacity_gbps;
    // R and N are overused and capped at their bounds (small burst slack).
    assert!(get("R").1 > 0.5 * c && get("R").2 <= 0.5 * c * 1.01, "{:?}", get("R"));
    assert!(get("N").1 > 0.1 * c && get("N").2 <= 0.1 * c * 1.01, "{:?}", get("N"));
    // Only R and N lose traffic (their overuse); A and U fit in what is left.
    for t in ["A", "U"] {
        assert!(get(t).2 >= 0.98 * get(t).1, "{:?}", get(t));
    }
    let total: f64 = r.rows.iter().map(|x| x.2).sum();
    assert!(total <= c * 1.01, "{total}");
}

#[test]
fn fig4_guaranteed_source_survives_eight_attacked_routers_baselines_decay() {
    let p = Fig4Params {
        scale: 500.0, // C = 80 Mbit/s; r_S = 2 Mbit/s, r_I = 8 Mbit/s (whole units)
        source_rates_gbps: vec![2.0],
        duration_s: 0.6,
        warmup_s: 0.15,
        ..Default::default()
    };
    let (rep, runs) = fig4(&p, &RunOpts::default()).unwrap();
    println!("{}", rep.table());
    let run = |k: RouterKind| runs.iter().find(|r| r.kind == k).unwrap();
    let z = run(RouterKind::Zlane);
    assert_eq!(z.s_auth_drops, 0, "S's packets all verify at every router");
    for (n, t) in z.per_hop_gbps.iter().enumerate() {
        assert!(*t >= 0.97 * p.r_s_gbps, "Z-Lane hop {}: {t} < r_S", n + 1);
    }
    for k in [RouterKind::Fifo, RouterKind::Fair, RouterKind::Isolation] {
        let hops = &run(k).per_hop_gbps;
        let last = *hops.last().unwrap();
        assert!(last < 0.25 * p.r_s_gbps, "{k:?} hop 8 = {last}");
        assert!(last < z.per_hop_gbps[7] / 4.0, "{k:?}");
    }
    // FIFO decays geometrically: a hop keeps ~C(μA+μG)/XC of what enters
    // (0.175 here); past hop 3 only single packets are left at this scale.
    let fifo = &run(RouterKind::Fifo).per_hop_gbps;
    assert!(fifo[0] > 0.25 && fifo[0] < 0.45, "FIFO {fifo:?}");
    assert!(fifo[1] < 0.3 * fifo[0] && fifo[2] < 0.5 * fifo[1], "FIFO {fifo:?}");
    assert!(fifo[7] <= fifo[2], "FIFO {fifo:?}");
    // Local isolation protects the first hop only.
    let iso = &run(RouterKind::Isolation).per_hop_gbps;
    assert!(iso[0] > 0.95 * 2.0 && iso[2] < 0.5, "isolation {iso:?}");
}

/// The shipped parameter files name every parameter (no serde defaults).
#[test]
fn shipped_configs_parse() {
    let t: Table4Params =
        toml::from_str(include_str!("../../../config/scenarios/zlane_table4.toml")).unwrap();
    assert_eq!(t.as_x_gbps, 0.928);
    let f: Fig4Params =
        toml::from_str(include_str!("../../../config/scenarios/zlane_fig4.toml")).unwrap();
    assert_eq!(f.routers, 8);
    assert_eq!(f.kinds.len(), 4);
}
