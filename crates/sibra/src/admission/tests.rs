use super::*;

/// Shared with the integration tests. `stage/tests.rs` loads it too: two
/// copies in the unit-test build, on purpose.
#[allow(clippy::duplicate_mod)]
#[path = "../../tests/common/mod.rs"]
mod common;

fn cfg() -> AdmissionConfig {
    AdmissionConfig {
        interfaces: vec![
            IfaceConfig { ifid: 1, capacity_bps: 100_000_000, split: Split::default() },
            IfaceConfig { ifid: 2, capacity_bps: 100_000_000, split: Split::default() },
        ],
        ..Default::default()
    }
}

fn info(exp: u32, fwd: u8, rev: u8, idx: u8) -> ResvInfo {
    common::resv_info(Tick(exp), fwd, rev, idx)
}

/// An admission of [`cfg`] at tick 100 that granted steady reservation
/// `id` (interface 1 → 2, `info`), and the request.
fn granted_at_100(id: SteadyId, info: ResvInfo) -> (Admission, SteadyRequest) {
    let mut a = Admission::new(cfg(), Tick(100)).unwrap();
    let r = SteadyRequest { id, ingress: 1, egress: 2, info };
    assert_eq!(a.steady(&r, Tick(100)).unwrap(), Decision::Granted);
    (a, r)
}

#[test]
fn listing_revocation_and_split() {
    let id = SteadyId::new(10, 7);
    let (mut a, r) = granted_at_100(id, info(110, 8, 8, 3));
    let v: Vec<SteadyView> = a.steady_reservations().collect();
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].id, v[0].ingress, v[0].egress), (id, 1, 2));
    let ix = v[0].indices[3].unwrap();
    assert_eq!((ix.exp_tick, ix.bw_fwd.get(), ix.pending), (Tick(110), 8, true));
    assert!(v[0].indices.iter().enumerate().all(|(i, x)| x.is_some() == (i == 3)));
    // A split of 0% steady denies the next request; granted bandwidth stays.
    a.set_split(Split { ephemeral_pct: 90, best_effort_pct: 10, steady_pct: 0 }).unwrap();
    assert!(a.interfaces().all(|i| i.split.steady_pct == 0));
    let r2 = SteadyRequest { id: SteadyId::new(11, 1), ..r };
    assert!(matches!(a.steady(&r2, Tick(100)).unwrap(), Decision::Denied { .. }));
    assert!(a.set_split(Split { ephemeral_pct: 90, best_effort_pct: 10, steady_pct: 1 }).is_err());
    // Revocation frees the bandwidth and removes the entry.
    assert!(a.steady_used(1, Dir::In, Tick(100)) > 0);
    assert_eq!(a.revoke_steady(&id, Tick(100)).unwrap(), vec![ResvIdx::new(3).unwrap()]);
    assert_eq!(a.steady_used(1, Dir::In, Tick(100)), 0);
    assert_eq!(a.steady_reservations().count(), 0);
    assert_eq!(a.revoke_steady(&id, Tick(100)), Err(Error::UnknownSteady));
}

#[test]
fn steady_grant_accounting_and_expiry() {
    let id = SteadyId::new(10, 1);
    let (mut a, r) = granted_at_100(id, info(110, 12, 10, 0));
    let c12 = BwClass::new(12).unwrap().bps();
    let c10 = BwClass::new(10).unwrap().bps();
    assert_eq!(a.steady_used(1, Dir::In, Tick(100)), c12);
    assert_eq!(a.steady_used(2, Dir::Out, Tick(110)), c12);
    assert_eq!(a.steady_used(2, Dir::In, Tick(105)), c10);
    assert_eq!(a.steady_used(1, Dir::Out, Tick(105)), c10);
    assert_eq!(a.steady_used(1, Dir::In, Tick(111)), 0);
    // Retransmission is idempotent; the same index with other classes is not.
    assert_eq!(a.steady(&r, Tick(100)).unwrap(), Decision::Granted);
    let bad = SteadyRequest { info: info(110, 11, 10, 0), ..r };
    assert_eq!(a.steady(&bad, Tick(100)), Err(Error::IndexInUse(ResvIdx::new(0).unwrap())));
    // Renewal with a larger class on index 1 overlapping index 0: counted once (max).
    let c14 = BwClass::new(14).unwrap().bps();
    let ren = SteadyRequest { info: info(120, 14, 10, 1), ..r };
    assert_eq!(a.steady(&ren, Tick(101)).unwrap(), Decision::Granted);
    assert_eq!(a.steady_used(1, Dir::In, Tick(105)), c14);
    a.confirm(&id.into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
    a.confirm(&id.into(), (1, 2), ResvIdx::new(1).unwrap()).unwrap();
    assert_eq!(a.steady_used(1, Dir::In, Tick(120)), c14);
    a.advance(Tick(121));
    assert_eq!(a.steady_used(1, Dir::In, Tick(121)), 0);
    assert!(a.is_empty());
}

#[test]
fn unconfirmed_indices_are_reclaimed() {
    let mut a = Admission::new(cfg(), Tick(0)).unwrap();
    let id = SteadyId::new(10, 1);
    let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(40, 12, 0, 0) };
    a.steady(&r, Tick(0)).unwrap();
    a.advance(Tick(4));
    assert!(a.steady_used(1, Dir::In, Tick(4)) > 0);
    a.advance(Tick(5));
    assert_eq!(a.steady_used(1, Dir::In, Tick(5)), 0);
    assert!(a.is_empty());
}

#[test]
fn steady_denied_with_offer_when_over_ideal() {
    // Steady capacity on a 10 Mbit/s link: 500 kbit/s.
    let mut c = cfg();
    c.interfaces[0].capacity_bps = 10_000_000;
    let mut a = Admission::new(c, Tick(0)).unwrap();
    let r =
        SteadyRequest { id: SteadyId::new(10, 1), ingress: 1, egress: 2, info: info(40, 12, 0, 0) };
    match a.steady(&r, Tick(0)).unwrap() {
        Decision::Denied { offer_fwd, offer_rev } => {
            assert_eq!(offer_fwd, BwClass::floor_from_bps(500_000));
            assert_eq!(offer_rev, BwClass::ZERO);
        }
        d => panic!("{d:?}"),
    }
    let r2 = SteadyRequest { info: info(40, 10, 0, 0), ..r };
    assert_eq!(a.steady(&r2, Tick(0)).unwrap(), Decision::Granted);
}

#[test]
fn ephemeral_over_steady() {
    let mut a = Admission::new(cfg(), Tick(0)).unwrap();
    let sid = SteadyId::new(10, 1);
    let r = SteadyRequest { id: sid, ingress: 1, egress: 2, info: info(40, 10, 10, 0) };
    a.steady(&r, Tick(0)).unwrap();
    // Alone on the interface: the whole 80 Mbit/s ephemeral share.
    assert_eq!(a.ephemeral_share(&sid, 1, Dir::In), 80_000_000);
    let eid = EphemeralId::new(10, [1; 10]);
    let e = EphemeralRequest {
        id: eid,
        steady: Some(sid),
        ingress: 1,
        egress: 2,
        info: info(4, 20, 20, 0),
    };
    assert_eq!(a.ephemeral(&e, Tick(0)).unwrap(), Decision::Granted);
    let c20 = BwClass::new(20).unwrap().bps();
    assert_eq!(a.ephemeral_used(1, Dir::In, Tick(4)), c20);
    assert_eq!(a.ephemeral_used_on(&sid, true, Tick(0)), c20);
    // Too much for the share: denied with offer = share − used, rounded down.
    let big = EphemeralRequest { id: EphemeralId::new(10, [2; 10]), info: info(4, 31, 0, 0), ..e };
    match a.ephemeral(&big, Tick(0)).unwrap() {
        Decision::Denied { offer_fwd, .. } => {
            assert_eq!(offer_fwd, BwClass::floor_from_bps(80_000_000 - c20))
        }
        d => panic!("{d:?}"),
    }
    // Unknown steady path.
    let unk = EphemeralRequest {
        id: EphemeralId::new(10, [3; 10]),
        steady: Some(SteadyId::new(11, 1)),
        ..e
    };
    assert_eq!(a.ephemeral(&unk, Tick(0)), Err(Error::UnknownSteady));
    // Beyond the horizon.
    let far = EphemeralRequest { info: info(5, 20, 20, 1), ..e };
    assert!(matches!(a.ephemeral(&far, Tick(0)), Err(Error::Horizon { .. })));
    // Expired in the tick after exp_tick.
    a.confirm(&eid.into(), (1, 2), ResvIdx::new(0).unwrap()).unwrap();
    a.advance(Tick(5));
    assert_eq!(a.ephemeral_used(1, Dir::In, Tick(5)), 0);
    assert_eq!(a.ephemeral_used_on(&sid, true, Tick(5)), 0);
}

#[test]
fn core_contract_replaces_bandwidth_as_weight() {
    let mut a = Admission::new(cfg(), Tick(0)).unwrap();
    let (p, q) = (SteadyId::new(10, 1), SteadyId::new(11, 1));
    for id in [p, q] {
        let r = SteadyRequest { id, ingress: 1, egress: 2, info: info(40, 10, 10, 0) };
        assert_eq!(a.steady(&r, Tick(0)).unwrap(), Decision::Granted);
    }
    assert_eq!(a.ephemeral_share(&p, 2, Dir::Out), 40_000_000);
    let bw = BwClass::new(10).unwrap().bps();
    a.set_contract(p, Some(3 * bw)).unwrap();
    assert_eq!(a.ephemeral_share(&p, 2, Dir::Out), 60_000_000);
    assert_eq!(a.ephemeral_share(&q, 2, Dir::Out), 20_000_000);
    // The bandwidth accounting is unchanged by the contract.
    assert_eq!(a.steady_used(2, Dir::Out, Tick(0)), 2 * bw);
    a.set_contract(p, None).unwrap();
    assert_eq!(a.ephemeral_share(&p, 2, Dir::Out), 40_000_000);
}

#[test]
fn interfaces_change_in_place_keeping_reservations() {
    let id = SteadyId::new(10, 7);
    let (mut a, r) = granted_at_100(id, info(110, 8, 8, 3));
    let used = a.steady_used(1, Dir::In, Tick(100));
    // Share down to 0 and back up with more capacity and a new interface:
    // the reservation and its accounting stay.
    a.set_split(Split { ephemeral_pct: 90, best_effort_pct: 10, steady_pct: 0 }).unwrap();
    let mut more = cfg().interfaces;
    more[0].capacity_bps = 200_000_000;
    more.push(IfaceConfig { ifid: 3, capacity_bps: 1_000_000, split: Split::default() });
    a.set_interfaces(&more).unwrap();
    assert_eq!(a.steady_used(1, Dir::In, Tick(100)), used);
    assert_eq!(a.steady_used(2, Dir::Out, Tick(110)), used);
    let caps: Vec<(u16, u64)> = a.interfaces().map(|i| (i.ifid, i.capacity_bps)).collect();
    assert_eq!(caps, [(1, 200_000_000), (2, 100_000_000), (3, 1_000_000)]);
    // A second reservation of the same source is admitted under the new shares.
    let r2 = SteadyRequest { id: SteadyId::new(10, 8), ..r };
    assert_eq!(a.steady(&r2, Tick(100)).unwrap(), Decision::Granted);
    // Removing interface 2 (both leave on it) is refused and changes nothing;
    // interface 3 is free to go; an invalid list is refused.
    assert_eq!(a.set_interfaces(&more[..1]), Err(Error::InterfaceInUse(2)));
    assert_eq!(a.interfaces().count(), 3);
    let dup = [more[0], more[0]];
    assert_eq!(a.set_interfaces(&dup), Err(Error::Config("duplicate interface")));
    a.set_interfaces(&more[..2]).unwrap();
    assert_eq!(a.interfaces().count(), 2);
    // Releasing under the changed shares keeps the capped sums consistent.
    for sid in [id, r2.id] {
        a.revoke_steady(&sid, Tick(100)).unwrap();
    }
    assert_eq!(a.steady_used(1, Dir::In, Tick(100)), 0);
    a.set_interfaces(&more[..1]).unwrap();
    assert!(a.is_empty());
}
