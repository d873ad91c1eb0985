//! FAIR at reduced scale: the violation is proven to every honest transit
//! AS and blamed on the source AS, the honest source is never flagged, a
//! replaying transit AS is localized without framing the source, and the
//! header costs under 2 % of the bandwidth.

use fair::protest::{Culprit, Decision, Reason};
use sim::scenarios::fair::{fair, FairParams};
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
    p
}

#[test]
fn violation_proven_replayer_localized_overhead_small() {
    let r = fair(&params(), &RunOpts::default()).unwrap();
    println!("{}", r.report.table());
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
        (Culprit::SourceAs, vec![1, 2, 3], None)
    );

    let rp = r.replay.expect("the replayed traffic looks like a violation at the destination");
    for a in &rp.verdicts {
        assert_eq!((a.decision, a.reason), (Decision::Reject, Reason::NoViolation), "{a:?}");
        assert!(a.n_dup_groups > 0 && a.signature_ok);
    }
    let at = rp.attribution.unwrap();
    assert_eq!(at.culprit, Culprit::NotProven, "the source is not framed");
    assert_eq!(at.replay, Some(2), "replayer between c2 and c3");

    assert!(r.measured_overhead > 0.01 && r.measured_overhead < 0.02, "{}", r.measured_overhead);
    for o in &r.trace_overheads {
        assert!(*o < 0.02, "{o}");
    }
    assert!(r.report.table().contains("c3 (103)"));
}
