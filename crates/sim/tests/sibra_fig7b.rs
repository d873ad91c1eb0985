//! SIBRA Fig. 7(b), the inter-ISD DoC attack, against the paper's
//! statements and against Fig. 7(a) at the same attacker counts, in the
//! short variants (scale 100, 1 s) that run in debug builds.

use sim::scenarios::sibra::{fig7, fig7_run, Baselines, Fig7Params, Isd};
use sim::scenarios::RunOpts;

fn baselines(p: &Fig7Params, n: u32) -> (f64, Baselines) {
    let r = fig7_run(p, n, &RunOpts::default()).unwrap();
    (r.legit_success(), r.baselines.unwrap())
}

#[test]
fn shipped_file_is_the_paper_set_up() {
    let p: Fig7Params =
        toml::from_str(include_str!("../../../config/scenarios/sibra_fig7b.toml")).unwrap();
    assert_eq!(p, Fig7Params::inter_isd());
    // §V-B: source in ISD1, destination in ISD2, 500 contaminated ASes in
    // each ISD; the attacker counts of Fig. 7(a).
    assert_eq!((p.isd, p.contaminated_ases), (Isd::Inter, 500));
    assert_eq!(p.attacker_counts, Fig7Params::default().attacker_counts);
    assert_eq!(Fig7Params::short_inter_isd().simulated_ases(), 5);
}

/// Fig. 7(b): SIBRA delivers every legitimate request from ISD1 (its
/// steady paths keep their share of the request channel on both core
/// links), while STRIDE, whose ISD2 core serves ISD2's own requests first,
/// loses clearly more than in Fig. 7(a); TVA and Portcullis do as in 7(a).
#[test]
fn fig7b_sibra_delivers_all_and_stride_falls_below_7a() {
    let p =
        Fig7Params { attacker_counts: vec![0, 100_000, 200_000], ..Fig7Params::short_inter_isd() };
    let (rep, pts) = fig7(&p, &RunOpts::default()).unwrap();
    println!("{}\n{}", rep.table(), rep.headline_table());
    assert_eq!(rep.name, "sibra_fig7b");
    assert!(rep.plots.iter().any(|pl| pl.name == "sibra_fig7b_success"));
    assert!(rep.headlines.iter().all(|h| h.pass()), "{}", rep.headline_table());
    for r in &pts {
        assert!(r.legit_sent >= 1500, "{r:?}");
        assert_eq!(r.legit_delivered, r.legit_sent, "{r:?}");
        assert!(r.legit_channel_bps > r.legit_demand_bps, "{r:?}");
    }
    let intra = Fig7Params::short();
    for (i, &n) in [100_000u32, 200_000].iter().enumerate() {
        let b = pts[i + 1].baselines.as_ref().unwrap();
        let (sibra_a, a) = baselines(&intra, n);
        assert_eq!(sibra_a, 1.0);
        // Most requests from ISD1 are dropped once ISD2's core link is
        // congested by ISD2's own requests.
        assert!(a.stride.success() > 0.15, "7(a) n={n}: {a:?}");
        assert!(b.stride.success() < 0.5 * a.stride.success(), "n={n}: {b:?} vs 7(a) {a:?}");
        assert!(b.stride.success() < 0.05, "n={n}: {b:?}");
        // TVA: per-source-AS fair queuing, the same share as in 7(a).
        assert!((b.tva.success() - a.tva.success()).abs() < 0.1, "n={n}: {b:?} vs {a:?}");
        assert!(b.tva.success() > 0.25 && b.tva.success() < 0.5, "n={n}: {b:?}");
        // Portcullis: the puzzle takes longer than the 4-s timeout.
        assert!(b.puzzle_s > p.request_timeout_s, "{b:?}");
        assert_eq!((b.portcullis.success(), a.portcullis.success()), (0.0, 0.0));
    }
    let none = pts[0].baselines.as_ref().unwrap();
    for s in [&none.tva, &none.portcullis, &none.stride] {
        assert_eq!(s.success(), 1.0, "no attack: {none:?}");
    }
}

/// More attackers never raise a baseline's success, in either variant
/// (within 0.02: at the plateau the Poisson draws of two counts differ).
#[test]
fn more_attackers_never_raise_a_baselines_success() {
    let counts = [0u32, 25_000, 50_000, 100_000, 200_000];
    for p in [Fig7Params::short(), Fig7Params::short_inter_isd()] {
        let pts: Vec<Baselines> = counts.iter().map(|&n| baselines(&p, n).1).collect();
        for (w, n) in pts.windows(2).zip(&counts[1..]) {
            let (a, b) = (&w[0], &w[1]);
            for (x, y) in [(&a.tva, &b.tva), (&a.portcullis, &b.portcullis), (&a.stride, &b.stride)]
            {
                assert!(y.success() <= x.success() + 0.02, "{:?} n={n}: {a:?} -> {b:?}", p.isd);
            }
            assert!(b.puzzle_s >= a.puzzle_s, "{a:?} -> {b:?}");
        }
        // And the attack does bite every baseline at the largest count.
        let top = pts.last().unwrap();
        assert!(top.tva.success() < 0.5 && top.stride.success() < 0.3, "{top:?}");
    }
}
