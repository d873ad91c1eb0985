//! Protocol stages against reference loops over the same packets, for
//! ratios (stage time / reference time) that stay comparable across runs
//! on a shared machine: a slower or busier machine slows both sides.
//!
//! Each pair `ratio/<stage>` is measured in rounds. A round times `k`
//! bursts of 32 packets through the stage, then `k` reference passes over
//! the same buffers (the order flips every round), so both sides see the
//! same caches, clock and load within a few milliseconds of each other.
//! The ratio is the median of the per-round ratios, with its quartiles;
//! a load spike that hits one round moves only that round. References:
//!
//! * `copy`: the frames copied into a scratch burst (what touching the
//!   bytes once costs), for the parse stages;
//! * `checksum`: the Internet checksum over every packet's bytes, for the
//!   forwarding stages.
//!
//! `cargo bench -p benches --bench ratio_stages -- [--quick] [FILTER]`
//! prints one line per pair (`scripts/bench-ratio` runs it and prints a
//! table); under `cargo test --benches` each pair runs a few bursts and
//! its checks only.

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mac::Key;
use packet::scion::{AddrHdrRepr, PathRepr, ScionRepr};
use packet::Ia;
use pipeline::{Batch, Meta, Now, Parse, ParseConfig, Stage, BURST};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};
use sibra::host::{self, ActiveBlock};
use sibra::monitor::{CoreConfig, CoreMonitor};
use sibra::stage::{InterfaceTable as SibraIfaces, RouterConfig, SibraTransit};
use sibra::token::{issue_chain, SofKeys};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, Tick};

#[path = "../examples/support/frames.rs"]
mod frames;

use frames::{epicz_frame, fair_frame, flowpolice_frame, scion_frame, T0};

/// Builds the frame of host `i`.
type FrameFn = fn(u8) -> Vec<u8>;

/// When the SCION packets are forwarded (Unix ns).
const NOW: u64 = (T0 as u64 + 60) * 1_000_000_000;

/// Target length of one side of a round.
const ROUND_SIDE: Duration = Duration::from_millis(1);

/// A stage, its reference over the same buffers, and a check of the
/// stage's work (run after measuring: every packet took the measured path).
struct Pair {
    name: &'static str,
    reference: &'static str,
    stage: Box<dyn FnMut()>,
    refer: Box<dyn FnMut()>,
    check: Box<dyn FnMut()>,
}

/// Medians over the rounds of one pair.
struct Measured {
    stage_ns: f64,
    reference_ns: f64,
    ratio: f64,
    q1: f64,
    q3: f64,
    rounds: usize,
}

fn run_k(f: &mut dyn FnMut(), k: u64) -> Duration {
    let s = Instant::now();
    for _ in 0..k {
        f();
    }
    s.elapsed()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn measure(p: &mut Pair, warm: Duration, time: Duration) -> Measured {
    // Warm-up, alternating; it also sizes `k`.
    let (start, mut n) = (Instant::now(), 0u64);
    while n < 2 || start.elapsed() < warm {
        (p.stage)();
        (p.refer)();
        n += 1;
    }
    let both = start.elapsed().as_secs_f64() / n as f64;
    let k = ((2.0 * ROUND_SIDE.as_secs_f64() / both) as u64).max(1);
    let (mut st, mut rf, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    let start = Instant::now();
    while st.len() < 11 || start.elapsed() < time {
        let (s, r) = if st.len() % 2 == 0 {
            let s = run_k(&mut p.stage, k);
            (s, run_k(&mut p.refer, k))
        } else {
            let r = run_k(&mut p.refer, k);
            (run_k(&mut p.stage, k), r)
        };
        let per = (k * BURST as u64) as f64;
        st.push(s.as_nanos() as f64 / per);
        rf.push(r.as_nanos() as f64 / per);
        ratio.push(s.as_secs_f64() / r.as_secs_f64().max(1e-12));
    }
    for v in [&mut st, &mut rf, &mut ratio] {
        v.sort_by(f64::total_cmp);
    }
    Measured {
        stage_ns: quantile(&st, 0.5),
        reference_ns: quantile(&rf, 0.5),
        ratio: quantile(&ratio, 0.5),
        q1: quantile(&ratio, 0.25),
        q3: quantile(&ratio, 0.75),
        rounds: st.len(),
    }
}

fn batch_of(frames: &[Vec<u8>]) -> Batch<Vec<u8>> {
    let mut b = Batch::new();
    for f in frames {
        b.push(f.clone(), 0).expect("32 fit");
    }
    b
}

fn burst(frame: FrameFn) -> Vec<Vec<u8>> {
    (0..BURST as u8).map(frame).collect()
}

/// Copies every frame of `b` into a scratch burst.
fn copy(b: &Batch<Vec<u8>>, scratch: &mut [Vec<u8>]) {
    for (i, d) in scratch.iter_mut().enumerate() {
        d.copy_from_slice(black_box(b.data(i)));
    }
    black_box(&*scratch);
}

/// The Internet checksum of every packet of `b`.
fn checksum(b: &Batch<Vec<u8>>) {
    let mut acc = 0u32;
    for i in 0..BURST {
        acc = acc.wrapping_add(u32::from(packet::checksum::checksum(black_box(b.data(i)))));
    }
    black_box(acc);
}

fn parse_pairs() -> Vec<Pair> {
    let kinds: [(&'static str, FrameFn); 4] = [
        ("parse_fair", fair_frame),
        ("parse_flowpolice", flowpolice_frame),
        ("parse_scion", scion_frame),
        ("parse_epicz", epicz_frame),
    ];
    kinds
        .into_iter()
        .map(|(name, frame)| {
            let frames = burst(frame);
            // The stage leaves every packet live, so the same burst is
            // parsed again without being rebuilt.
            let b = Rc::new(RefCell::new(batch_of(&frames)));
            let p = Rc::new(RefCell::new(Parse::new(ParseConfig::default())));
            let mut scratch = frames.clone();
            let (b1, b2, b3, p1, p3) = (b.clone(), b.clone(), b, p.clone(), p);
            Pair {
                name,
                reference: "copy",
                stage: Box::new(move || {
                    p1.borrow_mut().process(black_box(&mut *b1.borrow_mut()), Now::from_unix_ns(0))
                }),
                refer: Box::new(move || copy(&b2.borrow(), &mut scratch)),
                check: Box::new(move || {
                    let mut b = b3.borrow_mut();
                    p3.borrow_mut().process(&mut b, Now::from_unix_ns(0));
                    assert_eq!(b.live_mask(), u32::MAX, "{name}: every frame parses");
                }),
            }
        })
        .collect()
}

/// The transit AS (key 2) of a one-segment path over ASes 1, 2, 3.
fn scion_transit() -> ScionForward {
    let key = ForwardingKey::new(&Key::from([2; 16]));
    let ifaces = InterfaceTable::new().with(21, 0).with(23, 1);
    ScionForward::new(Forwarder::new(key, ifaces, ForwardConfig::default()))
}

/// Bare SCION packets (the stage's input starts at the SCION header).
fn scion_packets() -> Vec<Vec<u8>> {
    let (path, _) = frames::scion_path();
    (0..BURST as u8)
        .map(|i| {
            let r = ScionRepr {
                hdr: AddrHdrRepr { payload_len: 64, ..frames::hdr(i, 64) },
                path: PathRepr::Scion(path.repr()),
            };
            let mut b = vec![0; r.buffer_len() + 64];
            r.emit(&mut b).expect("SCION packet");
            b
        })
        .collect()
}

fn restore(b: &mut Batch<Vec<u8>>, pkts: &[Vec<u8>]) {
    for (i, p) in pkts.iter().enumerate() {
        b.buf_mut(i).copy_from_slice(p);
    }
    for m in b.metas_mut() {
        *m = Meta::new(0);
    }
}

fn scion_pair() -> Pair {
    let pkts = Rc::new(scion_packets());
    let s = Rc::new(RefCell::new(scion_transit()));
    let b = Rc::new(RefCell::new(batch_of(&pkts)));
    let (b1, b2, b3, s1, s3, p1, p2, p3) =
        (b.clone(), b.clone(), b, s.clone(), s, pkts.clone(), pkts.clone(), pkts);
    // The stage rewrites the packets (hop pointer, SegID), so both sides put
    // them back before every burst: restoring is part of both loops.
    Pair {
        name: "scion_forward",
        reference: "checksum",
        stage: Box::new(move || {
            let mut b = b1.borrow_mut();
            restore(&mut b, &p1);
            s1.borrow_mut().process(black_box(&mut *b), Now::from_unix_ns(NOW));
        }),
        refer: Box::new(move || {
            let mut b = b2.borrow_mut();
            restore(&mut b, &p2);
            checksum(&b);
        }),
        check: Box::new(move || {
            let mut b = b3.borrow_mut();
            restore(&mut b, &p3);
            s3.borrow_mut().process(&mut b, Now::from_unix_ns(NOW));
            assert!(b.metas().iter().all(|m| m.class().is_some()), "every SCION packet forwarded");
        }),
    }
}

/// SIBRA ephemeral packets of 2048 reservations at the middle AS, in
/// 64 bursts, and the transit stage holding its key.
fn sibra_setup() -> (SibraTransit, Vec<Batch<Vec<u8>>>) {
    let now = Now::from_unix_ns(NOW);
    let ks: Vec<SofKeys> = (1..=3).map(|k| SofKeys::new(&Key::from([k; 16]))).collect();
    let info = ResvInfo {
        exp_tick: Tick::of(now).plus(3),
        bw_fwd: BwClass::new(60).expect("class"),
        bw_rev: BwClass::new(60).expect("class"),
        index: ResvIdx::new(1).expect("index"),
        fwd: true,
        fail_hop: 0,
    };
    let refs = [&ks[0], &ks[1], &ks[2]];
    let bursts = (0..64u16)
        .map(|b| {
            let mut batch = Batch::new();
            for i in 0..BURST as u16 {
                let tag = (b * BURST as u16 + i).to_be_bytes();
                let id = EphemeralId::new(0xa, [tag[0], tag[1], 0, 0, 0, 0, 0, 0, 0, 7]);
                let blk = ActiveBlock {
                    info,
                    sofs: issue_chain(&refs, &[(0, 1), (2, 3), (4, 0)], &info, &id.0),
                };
                let mut p = host::ephemeral_data(id, &blk).expect("path");
                p.curr_hop = 1;
                let pkt = host::packet(
                    Ia::new(1, 0xa),
                    [10, 0, 0, 1],
                    Ia::new(1, 0xc),
                    [10, 0, 0, 2],
                    &p,
                    &[0; 120],
                )
                .expect("packet");
                batch.push(pkt, 2).expect("32 fit");
            }
            batch
        })
        .collect();
    let cfg =
        RouterConfig { ifaces: SibraIfaces::new().with(2, 2).with(3, 3), ..Default::default() };
    let t = SibraTransit::new(
        cfg,
        ks[1].clone(),
        CoreMonitor::new(CoreConfig::default()).expect("monitor"),
    );
    (t, bursts)
}

fn sibra_pair() -> Pair {
    // CurrHop: common header 12 + address header 24 + 1.
    const CURR: usize = 12 + 24 + 1;
    let (t, bursts) = sibra_setup();
    let t = Rc::new(RefCell::new(t));
    let bursts = Rc::new(RefCell::new(bursts));
    let calls = Rc::new(RefCell::new(0u64));
    let (t1, t3, bs1, bs2, c1, c3) = (t.clone(), t, bursts.clone(), bursts, calls.clone(), calls);
    let (mut next, mut at) = (0usize, 0usize);
    let now = Now::from_unix_ns(NOW);
    Pair {
        name: "sibra_transit",
        reference: "checksum",
        stage: Box::new(move || {
            let mut bs = bs1.borrow_mut();
            let b = &mut bs[next % 64];
            next += 1;
            Stage::<Vec<u8>>::process(&mut *t1.borrow_mut(), black_box(&mut *b), now);
            // The stage advanced CurrHop; the next round arrives at AS 2 again.
            for i in 0..BURST {
                b.buf_mut(i)[CURR] = 1;
            }
            *c1.borrow_mut() += 1;
        }),
        refer: Box::new(move || {
            let bs = bs2.borrow();
            checksum(&bs[at % 64]);
            at += 1;
        }),
        check: Box::new(move || {
            let c = *t3.borrow().counters();
            let want = *c3.borrow() * BURST as u64;
            assert!(
                c.forwarded == want && c.blacklisted == 0,
                "every SIBRA packet verified and forwarded ({want}): {c:?}"
            );
        }),
    }
}

struct Opts {
    bench: bool,
    warm: Duration,
    time: Duration,
    filter: Option<String>,
}

fn opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    Opts {
        // `cargo bench` passes `--bench`; `cargo test --benches` does not.
        bench: args.iter().any(|a| a == "--bench"),
        warm: Duration::from_millis(if quick { 500 } else { 3000 }),
        time: Duration::from_millis(if quick { 1000 } else { 5000 }),
        filter: args.into_iter().find(|a| !a.starts_with('-')),
    }
}

fn main() {
    let o = opts();
    let mut pairs = parse_pairs();
    pairs.push(scion_pair());
    pairs.push(sibra_pair());
    for mut p in pairs {
        let id = format!("ratio/{}", p.name);
        if o.filter.as_deref().is_some_and(|f| !id.contains(f)) {
            continue;
        }
        if !o.bench {
            for _ in 0..3 {
                (p.stage)();
                (p.refer)();
            }
            (p.check)();
            println!("{id}: ok");
            continue;
        }
        let r = measure(&mut p, o.warm, o.time);
        (p.check)();
        // One line per pair: readable, and parsed by scripts/bench-ratio.
        println!(
            "{id} stage_ns={:.2} reference_ns={:.2} ratio={:.3} q1={:.3} q3={:.3} \
             rounds={} reference={}",
            r.stage_ns, r.reference_ns, r.ratio, r.q1, r.q3, r.rounds, p.reference
        );
    }
}
