//! The memoised per-packet path against the reference (uncached) one:
//! `inspect` vs `inspect_reference` (jobs and MAC inputs, data and
//! requests) and `process` vs `process_reference` (verdicts, packet
//! bytes, counters), over sequences of valid and mutated packets sharing
//! one layout memo.

use proptest::prelude::*;

use super::edge::{edge_info, edge_info_reference};
use super::job::{inspect, inspect_reference};
use super::*;
use crate::host::{self, ActiveBlock};
use crate::layout::SibraShape;
use crate::monitor::{CoreConfig, CoreMonitor};
use crate::mutate::{apply, arb_mutation, Mutation};
use crate::token::{issue_chain, Key, SofKeys, TokenCheck};
use crate::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, SteadyId, Tick};
use packet::scion::SibraPathRepr;
use packet::Ia;
use pipeline::{Batch, DropReason, Meta, Stage, Verdict, BURST};

/// Shared with the integration tests. `admission/tests.rs` loads it too: two
/// copies in the unit-test build, on purpose.
#[allow(clippy::duplicate_mod)]
#[path = "../../tests/common/mod.rs"]
mod common;

use common::{now, plain_scion_packet, resv_info};

fn keys(n: u8) -> SofKeys {
    SofKeys::new(&Key::from([n; 16]))
}

fn cfg() -> RouterConfig {
    RouterConfig {
        ifaces: InterfaceTable::new().with(2, 2).with(3, 3),
        local_port: 9,
        ..Default::default()
    }
}

fn info(exp: Tick) -> ResvInfo {
    resv_info(exp, 20, 18, 2)
}

fn block(ids: &[u8], hops: &[(u16, u16)], exp: Tick) -> ActiveBlock {
    // This AS (key 2) holds every hop with an ingress or egress 2 or 3
    // or a junction's 0 side; the others are other ASes' (keys 1, 3).
    let ks: Vec<SofKeys> = hops
        .iter()
        .map(|&(i, e)| keys(if matches!(i, 2 | 3) || matches!(e, 2 | 3) { 2 } else { 1 }))
        .collect();
    let refs: Vec<&SofKeys> = ks.iter().collect();
    let i = info(exp);
    ActiveBlock { info: i, sofs: issue_chain(&refs, hops, &i, ids) }
}

fn frame(p: &SibraPathRepr, payload: usize) -> Vec<u8> {
    let mut v = host::packet(
        Ia::new(1, 0xa),
        [10, 0, 0, 1],
        Ia::new(1, 0xc),
        [10, 0, 0, 2],
        p,
        &vec![0x5a; payload],
    )
    .unwrap();
    v.truncate(v.len());
    v
}

/// Valid (and a few deliberately invalid) packets of every kind this AS
/// sees, each with the port it would arrive on.
fn templates() -> Vec<(Vec<u8>, u16)> {
    let t = Tick::of(now());
    let mut out = Vec::new();
    let three = [(0, 1), (2, 3), (4, 0)];
    for (n, exp) in [(1u8, t.plus(2)), (2, t), (3, Tick(t.0 - 1))] {
        let id = EphemeralId::new(0xa, [n; 10]);
        let mut p = host::ephemeral_data(id, &block(&id.0, &three, exp)).unwrap();
        p.curr_hop = 1;
        out.push((frame(&p, 20), 2));
        // Reverse direction.
        p.flags &= !packet::scion::sibra::FLAG_FORWARD;
        out.push((frame(&p, 0), 3));
    }
    let sid = SteadyId::new(0xa, 4);
    let sblk = block(&sid.0, &three, t.plus(10));
    let mut p = host::steady_data(sid, &sblk).unwrap();
    p.curr_hop = 1;
    out.push((frame(&p, 8), 2));
    // Steady setup flags on a data packet: Malformed.
    p.flags |= packet::scion::sibra::FLAG_SETUP;
    out.push((frame(&p, 8), 2));
    // Junction: this AS holds hops 1 (2 -> 0) and 2 (0 -> 3).
    let id = EphemeralId::new(0xa, [5; 10]);
    let mut p =
        host::ephemeral_data(id, &block(&id.0, &[(0, 1), (2, 0), (0, 3), (4, 0)], t.plus(1)))
            .unwrap();
    p.curr_hop = 1;
    out.push((frame(&p, 4), 2));
    // Local delivery at the last hop.
    let id = EphemeralId::new(0xa, [6; 10]);
    let mut p = host::ephemeral_data(id, &block(&id.0, &[(0, 1), (2, 0)], t.plus(1))).unwrap();
    p.curr_hop = 1;
    out.push((frame(&p, 4), 2));
    // Ephemeral setup request over two steady blocks, at the junction
    // between them (block 0's last hop, block 1's first).
    let s0 = SteadyId::new(0xa, 7);
    let s1 = SteadyId::new(0xb, 8);
    let b0 = block(&s0.0, &[(0, 1), (2, 0)], t.plus(10));
    let b1 = block(&s1.0, &[(0, 3), (4, 0)], t.plus(9));
    let mut p = host::ephemeral_setup(
        EphemeralId::new(0xa, [9; 10]),
        &[(s0, &b0), (s1, &b1)],
        &info(t.plus(3)),
    )
    .unwrap();
    p.curr_hop = 1;
    out.push((frame(&p, 0), 2));
    // The same setup with its SOFs read as data (R cleared): a junction
    // across blocks, each verified with its own steady ID.
    p.flags &= !packet::scion::sibra::FLAG_REQUEST;
    p.request = None;
    out.push((frame(&p, 0), 2));
    // Not SIBRA.
    out.push((plain_scion_packet(), 2));
    out
}

/// SCION version, HdrLen, PayloadLen, path type, address types, and the
/// SIBRA flags, CurrHop, P0..P2, first SOF bytes of the templates.
const KEY_BYTES: [usize; 15] = [0, 5, 6, 7, 8, 9, 36, 37, 38, 39, 40, 60, 62, 69, 71];

fn transit(policy: RequestPolicy) -> SibraTransit {
    transit_with(policy, true, false)
}

/// A transit stage, with one revoked reservation (`revoke`: the
/// expiring-now ephemeral one, index 2) and one blacklisted (`blacklist`:
/// the valid forward ephemeral one): with neither, the stage's per-packet
/// checks skip both tables.
fn transit_with(policy: RequestPolicy, revoke: bool, blacklist: bool) -> SibraTransit {
    let t = Tick::of(now());
    let mut s = SibraTransit::new(cfg(), keys(2), CoreMonitor::new(CoreConfig::default()).unwrap())
        .with_requests(policy);
    if revoke {
        let key: ResvKey = EphemeralId::new(0xa, [2; 10]).into();
        s.revocations_mut().revoke(key, ResvIdx::new(2).unwrap(), t.plus(5), t).unwrap();
    }
    if blacklist {
        let key: ResvKey = EphemeralId::new(0xa, [1; 10]).into();
        s.monitor_mut().blacklist(key, t.plus(5), t).unwrap();
    }
    s
}

type Step = (usize, Mutation, u16);

fn arb_steps() -> impl Strategy<Value = Vec<Vec<Step>>> {
    let step = (any::<usize>(), arb_mutation(), prop_oneof![4 => Just(0u16), 1 => 0u16..6]);
    prop::collection::vec(prop::collection::vec(step, 1..=BURST), 1..4)
}

/// The packet and arrival port of a step (port 0 in the step: the
/// template's own port).
fn realize(tpl: &[(Vec<u8>, u16)], (t, m, port): &Step) -> (Vec<u8>, u16) {
    let (p, own) = &tpl[t % tpl.len()];
    (apply(p.clone(), m, &KEY_BYTES), if *port == 0 { *own } else { *port })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn inspect_equals_reference(bursts in arb_steps()) {
        let tpl = templates();
        let cfg = cfg();
        let mut shape = SibraShape::default();
        for burst in &bursts {
            for step in burst {
                let (pkt, port) = realize(&tpl, step);
                let meta = Meta::new(port);
                for requests in [false, true] {
                    let mut a = [TokenCheck::default(); 2];
                    let mut b = [TokenCheck::default(); 2];
                    let got = inspect(&pkt, &meta, &cfg, requests, &mut shape, &mut a);
                    let want = inspect_reference(&pkt, &meta, &cfg, requests, &mut b);
                    prop_assert_eq!(got, want);
                    if let Ok(Some(j)) = want {
                        let n = if j.verify { usize::from(j.n_hops) } else { 0 };
                        prop_assert_eq!(&a[..n], &b[..n]);
                    }
                }
            }
        }
    }

    #[test]
    fn edge_info_equals_reference(bursts in arb_steps()) {
        let tpl = templates();
        let mut shape = SibraShape::default();
        for step in bursts.iter().flatten() {
            let (pkt, port) = realize(&tpl, step);
            let meta = Meta::new(port);
            prop_assert_eq!(
                edge_info(&pkt, &meta, &mut shape),
                edge_info_reference(&pkt, &meta)
            );
        }
    }

    #[test]
    fn process_equals_reference(
        bursts in arb_steps(),
        pad in prop_oneof![Just(0usize), 0usize..160],
        to_control in any::<bool>(),
        hinted in any::<bool>(),
        revoke in any::<bool>(),
        blacklist in any::<bool>(),
    ) {
        let tpl = templates();
        let policy = if to_control { RequestPolicy::ToControl } else { RequestPolicy::Skip };
        let (mut fast, mut slow) =
            (transit_with(policy, revoke, blacklist), transit_with(policy, revoke, blacklist));
        for burst in &bursts {
            let mut a: Batch<Vec<u8>> = Batch::new();
            let mut b: Batch<Vec<u8>> = Batch::new();
            let mut lens = Vec::new();
            for step in burst {
                let (mut pkt, port) = realize(&tpl, step);
                // Bytes after the payload: longer packets take the fixed
                // window, shorter ones the exact reads.
                pkt.resize(pkt.len() + pad, 0xa5);
                lens.push(pkt.len());
                let i = a.push(pkt.clone(), port).unwrap();
                // The fast stage also sees the parse stage's header hint.
                if hinted {
                    a.meta_mut(i).scion = pipeline::ScionHint::of_header(&pkt);
                }
                b.push(pkt, port).unwrap();
            }
            let before = *fast.counters();
            Stage::<Vec<u8>>::process(&mut fast, &mut a, now());
            slow.process_reference(&mut b, now());
            prop_assert_eq!(a.live_mask(), b.live_mask());
            // The counters against the verdicts (the two stages share their
            // last pass): a packet the stage sent on went out in class R,
            // to the local port when its path ends here.
            let sent = |local: bool| {
                (0..a.len())
                    .filter(|&i| {
                        matches!(a.meta(i).verdict,
                            Verdict::Forward { port, class } if class == CLASS_R && (port == 9) == local)
                    })
                    .count() as u64
            };
            prop_assert_eq!(fast.counters().forwarded - before.forwarded, sent(false));
            prop_assert_eq!(fast.counters().local - before.local, sent(true));
            prop_assert_eq!(a.len(), lens.len());
            for (i, &len) in lens.iter().enumerate() {
                prop_assert_eq!(a.meta(i).verdict, b.meta(i).verdict, "packet {}", i);
                prop_assert_eq!(a.data(i), b.data(i));
                // No packet changes length.
                prop_assert_eq!(a.data(i).len(), len);
            }
            prop_assert_eq!(fast.counters(), slow.counters());
            // The same observations in the same order: the same sketch,
            // suspects and blacklist (packet lengths included).
            prop_assert!(fast.monitor_mut().state() == slow.monitor_mut().state());
        }
    }
}

/// A burst of only standard SCION, hinted by the parse stage, passes on
/// as a whole, exactly as the reference stage passes each packet.
#[test]
fn a_burst_of_standard_scion_passes_on_by_its_common_hint() {
    let mut fast = transit(RequestPolicy::Skip);
    let mut slow = transit(RequestPolicy::Skip);
    let (mut a, mut b): (Batch<Vec<u8>>, Batch<Vec<u8>>) = (Batch::new(), Batch::new());
    for _ in 0..BURST {
        // Path type SCION in the common header (the hint and the stage's
        // skip look no further).
        let mut pkt = plain_scion_packet();
        pkt[8] = packet::scion::PathType::SCION.0;
        let i = a.push(pkt.clone(), 2).unwrap();
        a.meta_mut(i).scion = pipeline::ScionHint::of_header(&pkt);
        b.push(pkt, 2).unwrap();
    }
    let hint = a.common_scion_hint().and_then(pipeline::ScionHint::path_type);
    assert_eq!(hint, Some(packet::scion::PathType::SCION));
    Stage::<Vec<u8>>::process(&mut fast, &mut a, now());
    slow.process_reference(&mut b, now());
    assert_eq!(a.live_mask(), b.live_mask());
    for i in 0..BURST {
        assert_eq!(a.meta(i).verdict, b.meta(i).verdict);
        assert_eq!(a.data(i), b.data(i));
    }
    assert_eq!(fast.counters(), slow.counters());
    assert_eq!(fast.counters().skipped, BURST as u64);
}

/// The templates reach every outcome they are meant to (so the
/// property tests above compare more than drops).
#[test]
fn templates_cover_the_outcomes() {
    let tpl = templates();
    let mut t = transit(RequestPolicy::ToControl);
    let mut b: Batch<Vec<u8>> = Batch::new();
    for (p, port) in &tpl {
        b.push(p.clone(), *port).unwrap();
    }
    Stage::<Vec<u8>>::process(&mut t, &mut b, now());
    let v: Vec<Verdict> = (0..b.len()).map(|i| b.meta(i).verdict).collect();
    let fwd = |port| Verdict::Forward { port, class: CLASS_R };
    let want = [
        fwd(3),
        fwd(2),
        Verdict::Drop(DropReason::Revoked),
        Verdict::Drop(DropReason::Revoked),
        Verdict::Drop(DropReason::Expired),
        Verdict::Drop(DropReason::Expired),
        fwd(3),
        Verdict::Drop(DropReason::Malformed),
        fwd(3),
        fwd(9),
        Verdict::ToControl,
        fwd(3),
        Verdict::Forward { port: 2, class: pipeline::Class::BEST_EFFORT },
    ];
    assert_eq!(v, want);
    assert_eq!(t.counters().junctions, 2);
}

/// The request channel of `SibraControl` keys a request by the steady path
/// it leaves this AS on (at a junction, the second block's) and that
/// path's egress interface; a request whose leaving path is not held here
/// has no rate and never reaches admission.
#[test]
fn request_channel_polices_the_path_a_request_leaves_on() {
    use crate::admission::{
        Admission, AdmissionConfig, IfaceConfig, RequestLimitConfig, RequestLimiter, Split,
        SteadyRequest,
    };
    let t = Tick::of(now());
    let (s0, s1) = (SteadyId::new(0xa, 7), SteadyId::new(0xb, 8));
    let b0 = block(&s0.0, &[(0, 1), (2, 0)], t.plus(10));
    let b1 = block(&s1.0, &[(0, 3), (4, 0)], t.plus(9));
    let setup = |n: u8| {
        let id = EphemeralId::new(0xa, [n; 10]);
        let mut p = host::ephemeral_setup(id, &[(s0, &b0), (s1, &b1)], &info(t.plus(3))).unwrap();
        p.curr_hop = 1;
        (frame(&p, 0), 2)
    };
    let interfaces = [2, 3].map(|ifid| IfaceConfig {
        ifid,
        capacity_bps: 1_000_000_000,
        split: Split::default(),
    });
    let acfg = AdmissionConfig { interfaces: interfaces.to_vec(), ..Default::default() };
    let limiter = RequestLimiter::new(RequestLimitConfig::default()).unwrap();
    let mut c = SibraControl::new(cfg(), keys(2), Admission::new(acfg, t).unwrap())
        .with_request_limit(Some(limiter));
    let hold = |c: &mut SibraControl, id, ingress, egress| {
        let info = resv_info(t.plus(10), 10, 10, 0);
        let q = SteadyRequest { id, ingress, egress, info };
        assert_eq!(c.admission_mut().steady(&q, t), Ok(crate::admission::Decision::Granted));
    };
    let run = |c: &mut SibraControl, pkt: (Vec<u8>, u16)| {
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(pkt.0, pkt.1).unwrap();
        Stage::<Vec<u8>>::process(c, &mut b, now());
        let accepted = host::sibra_path(b.data(0)).is_ok_and(|p| p.accepted());
        (b.meta(0).verdict, accepted)
    };
    // Only the path it arrives on is held: no rate on interface 3.
    hold(&mut c, s0, 2, 0);
    assert_eq!(run(&mut c, setup(1)).0, Verdict::Drop(DropReason::ChannelCap));
    assert_eq!(c.counters().granted, 0, "dropped before admission");
    // The path it leaves on: the request passes and is granted at both hops.
    hold(&mut c, s1, 0, 3);
    assert_eq!(run(&mut c, setup(2)), (Verdict::Forward { port: 3, class: CLASS_R }, true));
    assert_eq!(c.counters().granted, 2);
    let r = c.request_limiter().unwrap();
    assert_eq!((r.counters().passed, r.counters().dropped, r.len()), (1, 1, 1));
    // Built from parts without a limiter, nothing is policed.
    let acfg = AdmissionConfig { interfaces: interfaces.to_vec(), ..Default::default() };
    let mut plain = SibraControl::new(cfg(), keys(2), Admission::new(acfg, t).unwrap());
    assert!(plain.request_limiter().is_none());
    assert_eq!(run(&mut plain, setup(3)), (Verdict::Forward { port: 3, class: CLASS_R }, false));
}

/// The stages' SCION offset (one 16-bit read of the two kinds) against
/// `scion::scion_offset`, for every network layer and protocol.
#[test]
fn scion_offset_equals_the_scion_crates() {
    use pipeline::{Proto, L3};
    for l3 in [L3::None, L3::Ipv4, L3::Ipv6] {
        for proto in [Proto::None, Proto::Scion, Proto::Fair, Proto::FlowPolice] {
            for off in [0u16, 14, 42, pipeline::NO_OFFSET] {
                let meta = Meta { l3, proto, proto_off: off, ..Meta::new(1) };
                assert_eq!(
                    super::job::scion_offset(&meta),
                    scion::scion_offset(&meta),
                    "{l3:?} {proto:?} {off}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The transit job read through the fixed window against the same job
    /// read exactly (verdict, job and MAC inputs), for every packet whose
    /// layout allows the window and that is long enough for it.
    #[test]
    fn job_through_window_equals_exact(
        bursts in arb_steps(),
        pad in 0usize..160,
    ) {
        use super::job::{fields_of, job_of, Job, Window};
        use crate::layout::WINDOW_LEN;
        let tpl = templates();
        let cfg = cfg();
        let mut shape = SibraShape::default();
        for step in bursts.iter().flatten() {
            let (mut pkt, port) = realize(&tpl, step);
            pkt.resize(pkt.len() + pad, 0x3c);
            let meta = Meta::new(port);
            let Ok(Some((off, l))) = fields_of(&pkt, &meta, &mut shape) else { continue };
            let l = *l;
            let rest = &pkt[off..];
            let arrival = cfg.ifaces.ingress_if(port);
            let (mut ja, mut jb) = (Job::default(), Job::default());
            let (mut ca, mut cb) = ([TokenCheck::default(); 2], [TokenCheck::default(); 2]);
            let want = job_of::<_, false>(rest, off, &l, arrival, &cfg, &mut jb, &mut cb);
            match rest.first_chunk::<WINDOW_LEN>() {
                Some(w) if l.plan.window => {
                    let got =
                        job_of::<_, false>(Window(w), off, &l, arrival, &cfg, &mut ja, &mut ca);
                    prop_assert_eq!(got, want);
                    prop_assert_eq!(ja, jb);
                    prop_assert_eq!(ca, cb);
                }
                // Too short for the window (or a layout past it): read
                // exactly only, as `process_equals_reference` covers.
                _ => {}
            }
        }
    }
}

/// Every SIBRA template's layout fits the fixed window (so the property
/// tests compare the window on all of them, padded), and some templates
/// are too short for it (so they compare the exact reads too).
#[test]
fn templates_fit_the_window() {
    use super::job::fields_of;
    use crate::layout::WINDOW_LEN;
    let mut shape = SibraShape::default();
    let mut n = 0;
    for (pkt, port) in templates() {
        let Ok(Some((_, l))) = fields_of(&pkt, &Meta::new(port), &mut shape) else { continue };
        assert!(l.plan.window);
        n += 1;
    }
    assert!(n >= 8);
    // A short packet (some templates are) still goes through the exact
    // reads: the stage's verdicts for the templates as they are.
    assert!(templates().iter().any(|(p, _)| p.len() < WINDOW_LEN));
}

proptest! {
    /// A SOF's sides from its wire bytes (one word, rotated) against the
    /// decoded SOF's.
    #[test]
    fn sides_of_wire_equals_sides(sof in any::<[u8; 8]>(), fwd in any::<bool>()) {
        let want = super::job::sides(&crate::types::Sof::from_bytes(&sof), fwd);
        prop_assert_eq!(super::job::sides_of_wire(&sof, fwd), want);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The request test (path type byte first) against its definition:
    /// the located SIBRA path's first byte carries the request flag. Over
    /// mutated templates (requests among them), with the path type byte
    /// overwritten one time in three, and over random frames.
    #[test]
    fn is_request_answers_as_the_located_path(
        bursts in arb_steps(),
        path_type in prop::option::weighted(0.3, any::<u8>()),
        junk in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        use super::job::{is_request, locate_path};
        let defined = |data: &[u8], meta: &Meta| {
            matches!(locate_path(data, meta), Ok(Some(r))
                if data.get(r.start).is_some_and(|f| f & packet::scion::sibra::FLAG_REQUEST != 0))
        };
        let tpl = templates();
        for step in bursts.iter().flatten() {
            let (mut pkt, port) = realize(&tpl, step);
            if let (Some(t), Some(b)) = (path_type, pkt.get_mut(8)) {
                *b = t;
            }
            let meta = Meta::new(port);
            prop_assert_eq!(is_request(&pkt, &meta), defined(&pkt, &meta));
        }
        let meta = Meta::new(0);
        prop_assert_eq!(is_request(&junk, &meta), defined(&junk, &meta));
    }
}

/// The templates include requests that the test above finds.
#[test]
fn the_templates_include_requests() {
    use super::job::is_request;
    assert!(templates().iter().any(|(p, port)| is_request(p, &Meta::new(*port))));
}
