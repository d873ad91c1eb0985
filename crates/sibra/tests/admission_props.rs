//! Admission invariants under random request sequences.

mod common;

use proptest::prelude::*;
use sibra::admission::{
    Admission, AdmissionConfig, Decision, Dir, EphemeralRequest, IfaceConfig, Split, SteadyRequest,
};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, SteadyId, Tick};

const CAP: u64 = 1_000_000_000;

fn admission(t: Tick) -> Admission {
    let cfg = AdmissionConfig {
        interfaces: (1..=3)
            .map(|ifid| IfaceConfig { ifid, capacity_bps: CAP, split: Split::default() })
            .collect(),
        max_steady: 256,
        max_ephemeral: 4096,
        ..Default::default()
    };
    Admission::new(cfg, t).unwrap()
}

fn info(exp: u32, fwd: u8, rev: u8, idx: u8) -> ResvInfo {
    common::resv_info(Tick(exp), fwd, rev, idx)
}

/// Steady paths all enter on 1 and leave on 2; `n` of them with class `class`.
fn with_steady(a: &mut Admission, n: u16, class: u8, t: Tick) -> Vec<SteadyId> {
    (0..n)
        .map(|k| {
            let id = SteadyId::new(u64::from(k) + 100, k);
            let r =
                SteadyRequest { id, ingress: 1, egress: 2, info: info(t.0 + 40, class, class, 0) };
            assert_eq!(a.steady(&r, t).unwrap(), Decision::Granted);
            a.confirm(&id.into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
            id
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A steady path's ephemeral share does not shrink when other steady
    /// paths (fixed bandwidth) admit more ephemeral requests; and what it can
    /// still obtain is unaffected by them.
    #[test]
    fn share_independent_of_others_requests(
        others in 1u16..6,
        reqs in prop::collection::vec((1usize..6, 9u8..24, 1u32..=4), 0..40),
    ) {
        let t = Tick(1000);
        let mut a = admission(t);
        let ids = with_steady(&mut a, others + 1, 10, t);
        let mine = ids[0];
        let share0 = a.ephemeral_share(&mine, 2, Dir::Out);
        prop_assert_eq!(share0, CAP * 80 / 100 / u64::from(others + 1));
        let probe = |a: &mut Admission| {
            let r = EphemeralRequest {
                id: EphemeralId::new(1, [0xAA; 10]),
                steady: Some(mine),
                ingress: 1,
                egress: 2,
                info: info(t.0 + 4, 40, 0, 0),
            };
            a.ephemeral_max(&r, t).unwrap()
        };
        let before = probe(&mut a);
        for (n, (who, class, dur)) in reqs.iter().enumerate() {
            let sid = ids[1 + (who % usize::from(others))];
            let r = EphemeralRequest {
                id: EphemeralId::new(2, [n as u8; 10]),
                steady: Some(sid),
                ingress: 1,
                egress: 2,
                info: info(t.0 + dur, *class, *class, 0),
            };
            let _ = a.ephemeral(&r, t).unwrap();
            prop_assert_eq!(a.ephemeral_share(&mine, 2, Dir::Out), share0);
        }
        prop_assert_eq!(probe(&mut a), before);
    }

    /// Granted ephemeral bandwidth on an interface never exceeds its 80%
    /// share in any tick, whatever steady paths come, go and request.
    #[test]
    fn ephemeral_sum_within_80_percent(
        steps in prop::collection::vec((0u16..8, 0u8..3, 12u8..30, 0u32..=4, 0u32..3), 1..60),
    ) {
        let mut t = Tick(500);
        let mut a = admission(t);
        let steady: Vec<SteadyId> = (0..8u16).map(|k| SteadyId::new(u64::from(k) + 1, k)).collect();
        for (n, (k, kind, class, dur, dt)) in steps.iter().enumerate() {
            t = t.plus(*dt);
            let sid = steady[usize::from(*k)];
            if *kind == 0 {
                let idx = (n % 16) as u8;
                let r = SteadyRequest { id: sid, ingress: 1, egress: 2, info: info(t.0 + 2 + dur, 12 + (*k).min(3) as u8, 10, idx) };
                if a.steady(&r, t) == Ok(Decision::Granted) {
                    let _ = a.confirm(&sid.into(), (1, 2), ResvIdx::new(idx).unwrap());
                }
            } else {
                let r = EphemeralRequest {
                    id: EphemeralId::new(9, [n as u8; 10]),
                    steady: Some(sid),
                    ingress: 1,
                    egress: 2,
                    info: info(t.0 + dur, *class, class / 2, 0),
                };
                let _ = a.ephemeral(&r, t);
            }
            for d in [Dir::In, Dir::Out] {
                for ifid in [1, 2] {
                    for k in 0..=5 {
                        prop_assert!(a.ephemeral_used(ifid, d, t.plus(k)) <= CAP * 80 / 100);
                        prop_assert!(a.steady_used(ifid, d, t.plus(k)) <= CAP * 5 / 100);
                    }
                }
            }
        }
    }

    /// Expired reservations return their bandwidth in the tick after their
    /// expiry tick (the first tick they are no longer valid), exactly.
    #[test]
    fn expiry_returns_bandwidth_exactly(
        resv in prop::collection::vec((10u8..14, 0u32..45), 1..12),
    ) {
        let t0 = Tick(2000);
        let mut a = admission(t0);
        let mut granted = Vec::new();
        for (k, (class, dur)) in resv.iter().enumerate() {
            let id = SteadyId::new(k as u64 + 1, 0);
            let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(t0.0 + dur, *class, 0, 0) };
            if a.steady(&r, t0) == Ok(Decision::Granted) {
                a.confirm(&id.into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
                granted.push((BwClass::new(*class).unwrap().bps(), t0.0 + dur));
            }
        }
        for t in t0.0..t0.0 + 47 {
            a.advance(Tick(t));
            let expect: u64 = granted.iter().filter(|(_, exp)| *exp >= t).map(|(b, _)| b).sum();
            prop_assert_eq!(a.steady_used(1, Dir::In, Tick(t)), expect, "tick {}", t);
            prop_assert_eq!(a.steady_used(2, Dir::Out, Tick(t)), expect);
        }
        prop_assert!(a.is_empty());
    }
}

#[test]
fn ephemeral_expiry_frees_share_in_the_next_tick() {
    let t = Tick(100);
    let mut a = admission(t);
    let ids = with_steady(&mut a, 1, 10, t);
    let class = BwClass::floor_from_bps(CAP * 80 / 100);
    let r = |n: u8, t: Tick| EphemeralRequest {
        id: EphemeralId::new(1, [n; 10]),
        steady: Some(ids[0]),
        ingress: 1,
        egress: 2,
        info: info(t.0 + 2, class.get(), 0, 0),
    };
    assert_eq!(a.ephemeral(&r(1, t), t).unwrap(), Decision::Granted);
    a.confirm(&EphemeralId::new(1, [1; 10]).into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
    // Full until its expiry tick 102 ...
    for dt in 0..=2 {
        assert!(matches!(
            a.ephemeral(&r(2 + dt as u8, t.plus(dt)), t.plus(dt)).unwrap(),
            Decision::Denied { .. }
        ));
    }
    // ... and free again in tick 103.
    assert_eq!(a.ephemeral(&r(9, t.plus(3)), t.plus(3)).unwrap(), Decision::Granted);
}
