//! The SIBRA stages' entry point on arbitrary packets: never panics, every
//! packet ends forwarded, dropped with a reason, or handed to control.
//! Also: the layout memo (`sibra_fields_memo`, one shape kept across inputs)
//! answers exactly as the uncached `sibra_fields`, and `SibraTransit`'s
//! memoised `process` gives the same verdicts, bytes and counters as its
//! reference `process_reference`.
//!
//! Input: byte 0 = arrival port (low 2 bits); byte 1 bit 0 selects raw mode
//! (the rest is the whole packet) or template mode (the rest is XORed over a
//! valid ephemeral data packet or request, reaching the MAC and admission code).
#![no_main]

use std::cell::{Cell, RefCell};

use libfuzzer_sys::fuzz_target;
use packet::scion::sibra_fields;
use pipeline::{Batch, Now, Pipeline, Stage, Verdict};
use sibra::admission::{Admission, AdmissionConfig, IfaceConfig, Split};
use sibra::host::{self, ActiveBlock};
use sibra::layout::{sibra_fields_memo, SibraShape};
use sibra::monitor::{CoreConfig, CoreMonitor, EdgeConfig, EdgeMonitor};
use sibra::stage::{InterfaceTable, RouterConfig, SibraControl, SibraEdge, SibraTransit};
use sibra::token::{issue_chain, Key, SofKeys};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, SteadyId, Tick};

const NOW_NS: u64 = 1_700_000_000_000_000_000;

thread_local! {
    /// The layout memo and a transit pair (memoised, reference) kept across
    /// inputs, as a router keeps them across bursts.
    static SHAPE: Cell<SibraShape> = Cell::new(SibraShape::default());
    static PAIR: RefCell<Option<(SibraTransit, SibraTransit)>> = const { RefCell::new(None) };
}

fn templates() -> [Vec<u8>; 2] {
    let tick = Tick::of(Now::from_unix_ns(NOW_NS));
    let ks: Vec<SofKeys> = (1..=3).map(|n| SofKeys::new(&Key::from([n; 16]))).collect();
    let refs: Vec<&SofKeys> = ks.iter().collect();
    let hops = [(0, 1), (2, 3), (4, 0)];
    let info = ResvInfo {
        exp_tick: tick.plus(2),
        bw_fwd: BwClass::new(20).unwrap(),
        bw_rev: BwClass::new(20).unwrap(),
        index: ResvIdx::new(1).unwrap(),
        fwd: true,
        fail_hop: 0,
    };
    let eid = EphemeralId::new(0xa, [3; 10]);
    let blk = ActiveBlock { info, sofs: issue_chain(&refs, &hops, &info, &eid.0) };
    let mut data = host::ephemeral_data(eid, &blk).unwrap();
    data.curr_hop = 1;
    let sid = SteadyId::new(0xa, 1);
    let sblk = ActiveBlock { info, sofs: issue_chain(&refs, &hops, &info, &sid.0) };
    let mut req = host::ephemeral_setup(eid, &[(sid, &sblk)], &info).unwrap();
    req.curr_hop = 1;
    let pkt = |p| {
        host::packet(
            packet::Ia::new(1, 0xa),
            [10, 0, 0, 1],
            packet::Ia::new(1, 0xc),
            [10, 0, 0, 2],
            p,
            &[0; 64],
        )
        .unwrap()
    };
    [pkt(&data), pkt(&req)]
}

fuzz_target!(|input: &[u8]| {
    let template = |sel: u8| templates()[usize::from(sel >> 1 & 1)].clone();
    let Some(pkt) = fuzz::raw_or_xored(input, template) else { return };
    let port = u16::from(input[0] & 3);
    let now = Now::from_unix_ns(NOW_NS);
    let ifaces = InterfaceTable::new().with(2, 2).with(3, 3);
    let rc = RouterConfig { ifaces, ..Default::default() };
    let acfg = AdmissionConfig {
        interfaces: [2, 3]
            .iter()
            .map(|&ifid| IfaceConfig { ifid, capacity_bps: 1_000_000_000, split: Split::default() })
            .collect(),
        max_steady: 16,
        max_ephemeral: 16,
        max_sources: 16,
        ..Default::default()
    };
    let keys = SofKeys::new(&Key::from([2; 16]));
    let mut p: Pipeline<Vec<u8>> = Pipeline::new()
        .with(SibraControl::new(
            rc.clone(),
            keys.clone(),
            Admission::new(acfg, Tick::of(now)).unwrap(),
        ))
        .with(SibraTransit::new(
            rc.clone(),
            keys,
            CoreMonitor::new(CoreConfig { width: 64, ..Default::default() }).unwrap(),
        ))
        .with(SibraEdge::new(rc, EdgeMonitor::new(EdgeConfig::default(), 7)));
    let mut shape = SHAPE.get();
    assert_eq!(sibra_fields_memo(&pkt, &mut shape), sibra_fields(&pkt));
    SHAPE.set(shape);
    PAIR.with_borrow_mut(|pair| {
        let (fast, slow) = pair.get_or_insert_with(|| {
            let t = || {
                SibraTransit::new(
                    RouterConfig {
                        ifaces: InterfaceTable::new().with(2, 2).with(3, 3),
                        ..Default::default()
                    },
                    SofKeys::new(&Key::from([2; 16])),
                    CoreMonitor::new(CoreConfig { width: 64, ..Default::default() }).unwrap(),
                )
            };
            (t(), t())
        });
        let (mut a, mut b) = (Batch::new(), Batch::new());
        for _ in 0..2 {
            let _ = a.push(pkt.clone(), port);
            let _ = b.push(pkt.clone(), port);
        }
        Stage::<Vec<u8>>::process(fast, &mut a, now);
        slow.process_reference(&mut b, now);
        for i in 0..a.len() {
            assert_eq!(a.meta(i).verdict, b.meta(i).verdict);
            assert_eq!(a.data(i), b.data(i));
        }
        assert_eq!(fast.counters(), slow.counters());
    });
    let mut b = Batch::new();
    let _ = b.push(pkt.clone(), port);
    let _ = b.push(pkt, port);
    p.run(&mut b, now);
    for i in 0..b.len() {
        match b.meta(i).verdict {
            Verdict::Forward { .. } => assert!(b.is_live(i)),
            Verdict::Drop(_) | Verdict::ToControl => assert!(!b.is_live(i)),
        }
    }
});
