//! SIBRA Fig. 7, 8(a) and 8(b) against the paper's numbers, in short
//! variants of the paper's set-up that run in debug builds.

use sim::scenarios::sibra::{
    fig7, fig7_run, fig8a, fig8b, settled_mean, stable_means, Fig7Baselines, Fig7Params,
    Fig8aParams, Fig8bParams,
};
use sim::scenarios::RunOpts;

fn shipped_fig7() -> Fig7Params {
    toml::from_str(include_str!("../../../config/scenarios/sibra_fig7.toml")).unwrap()
}

#[test]
fn shipped_files_are_the_paper_defaults() {
    assert_eq!(shipped_fig7(), Fig7Params::default());
    let p = Fig7Params::default();
    // §V-B: 2 x 10^5 attackers, 1000 contaminated ASes, 2 x 100 legitimate
    // sources, 10 requests/s each, 5 % request cap, 4-s timeout.
    assert_eq!(
        (p.scale, p.attacker_counts.last(), p.contaminated_ases),
        (1.0, Some(&200_000), 1000)
    );
    assert_eq!((p.legit_ases, p.legit_sources_per_as, p.request_share_pct), (2, 100, 5));
    assert_eq!((p.requests_per_s, p.request_timeout_s), (10.0, 4.0));
    let b: Fig8bParams =
        toml::from_str(include_str!("../../../config/scenarios/sibra_fig8b.toml")).unwrap();
    assert_eq!(b, Fig8bParams::default());
}

/// Fig. 7: SIBRA delivers every legitimate request up to 2 x 10^5
/// attackers (the paper: 100 %), while the attackers' own requests are
/// throttled to their ASes' part of the 5 % channel.
#[test]
fn fig7_every_legitimate_request_is_delivered() {
    let p = Fig7Params::short();
    let (rep, pts) = fig7(&p, &RunOpts::default()).unwrap();
    println!("{}", rep.table());
    for r in &pts {
        assert!(r.legit_sent >= 1500, "{r:?}");
        assert!((r.legit_success() - 1.0).abs() <= 0.05, "within 5 % of 100 %: {r:?}");
        assert_eq!(r.legit_delivered, r.legit_sent, "{r:?}");
        assert!(r.legit_max_delay_ms < p.request_timeout_s * 1e3, "{r:?}");
        assert!(r.legit_channel_bps > r.legit_demand_bps, "{r:?}");
    }
    let top = pts.last().unwrap();
    assert_eq!(top.attackers, 200_000);
    assert_eq!(top.attackers_simulated, 2000);
    // The attack is real: the attackers offer several times the channel.
    let offered = top.attack_sent as f64 * 140.0 * 8.0 / p.duration_s;
    assert!(offered > 3.0 * top.channel_bps as f64, "{top:?}");
    assert!(top.attack_success() < 0.3, "{top:?}");
    // Fig. 8(a) comes with it, as a time series.
    let f8 = rep.plots.iter().find(|pl| pl.name == "sibra_fig8a_reservable").unwrap();
    assert_eq!(f8.x_label, "time (s)");
}

/// Sweeps: more attackers never improve the legitimate success or the
/// attackers' own success, with or without per-path fairness; without it
/// (the aggregate 5 % cap alone) the legitimate requests lose.
#[test]
fn fig7_more_attackers_never_help_and_fairness_is_what_protects() {
    let counts = [0u32, 50_000, 100_000, 200_000];
    for fair in [true, false] {
        let p = Fig7Params {
            per_path_fairness: fair,
            attacker_counts: counts.to_vec(),
            // Long enough that the buckets' initial burst (1 s) does not hide the rate.
            duration_s: 2.0,
            ..Fig7Params::short()
        };
        let pts: Vec<_> =
            counts.iter().map(|&n| fig7_run(&p, n, &RunOpts::default()).unwrap()).collect();
        for w in pts.windows(2) {
            assert!(w[1].legit_success() <= w[0].legit_success() + 1e-9, "fair={fair}: {w:?}");
            if w[0].attack_sent > 0 {
                let (a, b) = (w[0].attack_success(), w[1].attack_success());
                assert!(b <= a + 0.02, "fair={fair}: {w:?}");
            }
            assert!(w[1].channel_dropped >= w[0].channel_dropped, "fair={fair}: {w:?}");
        }
        let last = pts.last().unwrap();
        if fair {
            assert_eq!(last.legit_success(), 1.0, "{last:?}");
        } else {
            assert!(last.legit_success() < 0.6, "aggregate cap only: {last:?}");
        }
    }
}

/// A larger request cap never lowers the legitimate success; a cap too small
/// for the legitimate AS's own load loses requests even with fairness.
#[test]
fn fig7_request_cap_sweep() {
    let mut last = -1.0;
    for pct in [1u8, 2, 5, 10] {
        // 2 s: long enough that the buckets' initial burst (1 s) does not hide the rate.
        let p = Fig7Params { request_share_pct: pct, duration_s: 2.0, ..Fig7Params::short() };
        let r = fig7_run(&p, 200_000, &RunOpts::default()).unwrap();
        assert!(r.legit_success() >= last - 1e-9, "cap {pct} %: {r:?}");
        last = r.legit_success();
        if pct == 1 {
            assert!(r.legit_channel_bps < r.legit_demand_bps && r.legit_success() < 0.9, "{r:?}");
        }
    }
    assert_eq!(last, 1.0);
}

/// Fig. 8(a): over time, the legitimate up-path's reservable bandwidth
/// settles near 2.5 Mbit/s and the bound it is drawn from does not move
/// when more up-paths and attackers start requesting.
#[test]
fn fig8a_reservable_bandwidth_over_time_is_stable() {
    let p = Fig8aParams::short();
    let (rep, s) = fig8a(&p, &RunOpts::default()).unwrap();
    assert_eq!(s.len(), 60);
    assert!(s.windows(2).all(|w| w[1].t_s > w[0].t_s), "a time series");
    let before = s.iter().find(|r| r.t_s == 30.0).unwrap();
    let after = s.iter().find(|r| r.t_s == 31.0).unwrap();
    assert!(after.up_paths > before.up_paths && after.attackers > before.attackers);
    // The bound is exactly independent of how many paths send requests.
    assert!(s.iter().all(|r| r.share_bps == s[0].share_bps), "{s:?}");
    // The attackers do request, and are granted only within their shares.
    let end = s.last().unwrap();
    assert!(end.attack_sent > 10 * end.legit_sent && end.attack_granted < end.attack_sent);
    let level = settled_mean(&s);
    println!("{}\nsettled at {level}", rep.notes.join("\n"));
    // The paper: ≈ 2.5 Mbit/s (read off the plot as BW x 20 ≈ 50); 60 s
    // average less (the default-length run is held to 5 %, below).
    assert!((level - 2.5e6).abs() <= 0.15 * 2.5e6, "settled at {level}");
    let (b, a) = stable_means(&p, &s);
    assert!(a >= 0.5 * b && a <= 2.0 * b, "before {b}, after {a}");
}

/// Fig. 8(a) at default parameters (150 s, change at 100 s) settles within
/// 5 % of the paper's 2.5 Mbit/s.
#[test]
fn fig8a_default_settles_near_the_paper() {
    let p = shipped_fig7().fig8a;
    let (_, s) = fig8a(&p, &RunOpts::default()).unwrap();
    assert_eq!(s.len(), 150);
    let level = settled_mean(&s);
    assert!((level - 2.5e6).abs() <= 0.05 * 2.5e6, "settled at {level}");
    assert!(s.iter().all(|r| r.share_bps == s[0].share_bps));
}

#[test]
fn waste_grows_linearly_with_loss_and_is_zero_without() {
    let p = Fig8bParams::default();
    let (rep, pts) = fig8b(&p, &RunOpts::default()).unwrap();
    println!("{}", rep.table());
    assert_eq!(pts[0], (0.0, 0.0), "no loss, no waste");
    for w in pts.windows(2) {
        assert!(w[1].1 >= w[0].1 - 0.01, "waste roughly grows with loss: {pts:?}");
    }
    for &(loss, waste) in &pts[1..] {
        // A lost request or reply wastes its bandwidth for one reply timeout
        // (then the re-sent request reuses the index): a fraction of the
        // loss rate, as in the paper (about 0.28 x; <= 1.4 % at 5 % loss).
        assert!(waste > 0.1 * loss && waste < 0.5 * loss, "loss {loss}: waste {waste}");
        if loss <= 0.05 {
            assert!(waste <= 0.014, "loss {loss}: waste {waste}");
        }
    }
    // Linear: the ratio waste/loss varies little across loss rates.
    let ratios: Vec<f64> = pts[1..].iter().map(|(l, w)| w / l).collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0f64), |a, r| (a.0.min(*r), a.1.max(*r)));
    assert!(hi < 2.0 * lo, "{ratios:?}");
}

/// Fig. 7 at the paper's size (2 x 10^5 attackers over 1000 ASes on a
/// 10 Gbit/s link, 4 x 10^6 attack requests in 2 s; about 10 s in a test
/// build). SIBRA alone: the baselines are checked in `sibra_fig7b`.
#[test]
fn fig7_paper_size() {
    let p = Fig7Params {
        attacker_counts: vec![200_000],
        baselines: Fig7Baselines { enabled: false, ..Default::default() },
        ..Fig7Params::default()
    };
    let r = fig7_run(&p, 200_000, &RunOpts::default()).unwrap();
    println!("{r:?}");
    assert_eq!(r.legit_success(), 1.0, "{r:?}");
}
