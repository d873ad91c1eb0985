//! FlowPolice FCT experiment (thesis §5.2.3, Fig. 5.5) at reduced scale
//! (see the module docs of `sim::scenarios::flowpolice_fct`).

use sim::scenarios::flowpolice_fct::{fct, FctParams, Setting};
use sim::scenarios::RunOpts;

#[test]
fn shipped_file_is_the_default() {
    let p: FctParams =
        toml::from_str(include_str!("../../../config/scenarios/flowpolice_fct.toml")).unwrap();
    assert_eq!(p, FctParams::default());
}

#[test]
fn flowpolice_turns_denial_of_service_into_a_small_fct_increase() {
    // Fewer and smaller transfers on a smaller link; the flood is still
    // non-complying at 2x C, and the transfers start 4 periods after it.
    let p = FctParams {
        capacity_mbps: 10.0,
        attackers: 20,
        legit: 2,
        file_bytes: 200_000,
        trials: 3,
        trial_gap_ms: 200.0,
        first_trial_s: 2.0,
        max_duration_s: 10.0,
        tick_us: 200.0,
        ..FctParams::default()
    };
    let (rep, runs) = fct(&p, &RunOpts::default()).unwrap();
    println!("{}", rep.table());
    let run = |s: Setting| runs.iter().find(|r| r.setting == s).unwrap();
    let (base, fp, fifo) =
        (run(Setting::NoAttack), run(Setting::Flowpolice), run(Setting::NoFlowpolice));
    // 200 kB paced at 5 Mbit/s: ~0.35 s of data plus the window's ramp.
    assert_eq!(base.completed(), 6, "{base:?}");
    assert!(base.mean() > 0.3 && base.mean() < 1.5, "{base:?}");
    // With FlowPolice every transfer finishes under attack, and (measured:
    // 1.02x) no slower than the thesis' ~1.3x.
    assert_eq!(fp.completed(), 6, "{fp:?}");
    let ratio = fp.mean() / base.mean();
    println!("mean FCT under attack with FlowPolice / without attack = {ratio:.3}");
    assert!(ratio <= 1.3, "{ratio}");
    // Without FlowPolice no transfer finishes within the 8 s of transfers
    // (more than 10x the FCT with FlowPolice); they crawl.
    assert_eq!(fifo.completed(), 0, "{fifo:?}");
    assert!(fifo.unfinished_progress < 0.6, "{fifo:?}");
}
