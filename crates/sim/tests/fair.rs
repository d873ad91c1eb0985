//! FAIR at reduced scale: the violation is proven to every honest transit
//! AS and blamed on the source AS, the honest source is never flagged, a
//! replaying transit AS is localized without framing the source, tampering
//! and collusion limit the proof to the ASes after the culprit, and the
//! header overhead measured on the trace stand-ins matches the paper's
//! Fig. 5 within 5 %.

use fair::protest::{Culprit, Decision, Reason};
use sim::scenarios::fair::{fair, FairParams, Misbehavior};
use sim::scenarios::RunOpts;

fn params() -> FairParams {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../config/scenarios/fair_protest.toml"),
    )
    .unwrap();
    let mut p: FairParams = toml::from_str(&text).unwrap();
    // Reduced scale: fewer packets and coarser ticks.
    p.duration_s = 4.0;
    p.tick_us = 1000.0;
    p.cir_bytes_per_s = 40_000;
    p.cbs_bytes = 10_000;
    p.overhead_packets = 4000;
    p.overhead_sweep = vec![2, 4];
    p
}

#[test]
fn default_path_is_the_papers() {
    let text = include_str!("../../../config/scenarios/fair_protest.toml");
    let p: FairParams = toml::from_str(text).unwrap();
    assert_eq!(p.transit_ases, 4, "the paper's 5-hop AS path");
    assert_eq!(p.traces.len(), 3);
}

#[test]
fn violation_proven_misbehaving_transits_localized_overhead_as_paper() {
    let p = params();
    let r = fair(&p, &RunOpts::default()).unwrap();
    println!("{}\n{}", r.report.table(), r.report.headline_table());
    assert!(r.honest_delivered > 100, "{}", r.honest_delivered);
    assert_eq!(r.honest_violations, 0, "a conforming source is never flagged");

    let v = r.violation.expect("the monitor flags the unpoliced source");
    assert!(v.records > 0);
    for a in &v.verdicts {
        assert_eq!(
            (a.decision, a.reason, a.n_failed, a.n_dup_groups),
            (Decision::Ack, Reason::None, 0, 0),
            "{a:?}"
        );
        assert!(a.signature_ok);
    }
    let at = v.attribution.unwrap();
    assert_eq!(
        (at.culprit, at.proven_to.clone(), at.replay),
        (Culprit::SourceAs, vec![1, 2, 3, 4], None)
    );

    let rp = r.replay.expect("the replayed traffic looks like a violation at the destination");
    for a in &rp.verdicts {
        assert_eq!((a.decision, a.reason), (Decision::Reject, Reason::NoViolation), "{a:?}");
        assert!(a.n_dup_groups > 0 && a.signature_ok);
    }
    let at = rp.attribution.unwrap();
    assert_eq!(at.culprit, Culprit::NotProven, "the source is not framed");
    assert_eq!(at.replay, Some(2), "replayer between c2 and c3");

    // c3 corrupts c1's and c2's marks: they cannot be convinced; c3, c4 can.
    let tp = r.tampering.expect("tampering run protested");
    assert_eq!(tp.verdicts[0].reason, Reason::MarkFailures, "{:?}", tp.verdicts[0]);
    assert_eq!(tp.verdicts[1].reason, Reason::MarkFailures, "{:?}", tp.verdicts[1]);
    assert_eq!(tp.verdicts[2].decision, Decision::Ack);
    let at = tp.attribution.unwrap();
    assert_eq!(
        (at.culprit, at.proven_to.clone(), at.tampering),
        (Culprit::UpstreamOf(3), vec![3, 4], Some(2))
    );

    // c2 colludes: corrupts c1's marks and withholds its verdict.
    let cp = r.collusion.expect("collusion run protested");
    assert!(cp.verdicts[1].withheld);
    let at = cp.attribution.unwrap();
    assert_eq!((at.culprit, at.proven_to.clone()), (Culprit::UpstreamOf(3), vec![3, 4]));
    assert!(at.inconsistent, "a verdict is missing");

    // Overhead: measured on the stand-ins, within 5 % of Fig. 5.
    for t in &r.traces {
        assert_eq!(t.delivered.0, t.delivered.1, "{}: every packet accepted", t.name);
        assert!(
            (t.overhead / t.paper - 1.0).abs() < 0.05,
            "{}: {} vs {}",
            t.name,
            t.overhead,
            t.paper
        );
        assert!(t.overhead < 0.02);
    }
    assert!(r.report.headlines.iter().all(|h| h.pass()), "{}", r.report.headline_table());
    assert!(r.report.table().contains("c4 (104)"));
}

#[test]
fn overhead_grows_with_the_path_and_shrinks_with_packet_size() {
    let mut p = params();
    p.runs = vec![Misbehavior::Honest];
    p.transit_ases = 2;
    let short = fair(&p, &RunOpts::default()).unwrap();
    p.transit_ases = 6;
    let long = fair(&p, &RunOpts::default()).unwrap();
    for (s, l) in short.trace_overheads.iter().zip(&long.trace_overheads) {
        assert!(l > s, "{l} <= {s}");
    }
    // Trace 2 has the largest packets, hence the smallest overhead.
    let o = &long.trace_overheads;
    assert!(o[1] < o[0] && o[1] < o[2], "{o:?}");
}
