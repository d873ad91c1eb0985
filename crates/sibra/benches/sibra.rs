//! SIBRA benchmarks, one core, per packet (`Throughput::Elements`):
//! data-packet verification (token MACs alone and the whole transit stage),
//! request processing (admission alone and the whole control stage), edge
//! policing, and core monitoring with 1 and 100 overusing flows.
//!
//! With `SIBRA_CPU_TIME=1` every workload (except the control stage, whose
//! packets are built per burst) first runs for about one second of *thread CPU
//! time* (`/proc/thread-self/schedstat`) and prints nanoseconds per element:
//! unlike criterion's wall clock, that does not grow while other processes
//! share the core.

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{criterion_group, BatchSize, BenchmarkGroup, Criterion, Throughput};
use packet::Ia;
use pipeline::{Batch, Stage, BURST};
use sibra::admission::{
    Admission, AdmissionConfig, EphemeralRequest, IfaceConfig, Split, SteadyRequest,
};
use sibra::host::{self, ActiveBlock};
use sibra::monitor::{CoreConfig, CoreMonitor, EdgeConfig, EdgeMonitor};
use sibra::stage::{InterfaceTable, RouterConfig, SibraControl, SibraEdge, SibraTransit};
use sibra::token::{issue_chain, verify_batch, Key, SofKeys, TokenCheck};
use sibra::{BwClass, EphemeralId, ResvIdx, ResvInfo, ResvKey, SteadyId, Tick};

/// The integration tests' values (clock, reservation info).
#[path = "../tests/common/mod.rs"]
mod common;

use common::{now, resv_info, NOW_S};

const NOW_NS: u64 = NOW_S * 1_000_000_000;
const HOPS: [(u16, u16); 3] = [(0, 1), (2, 3), (4, 0)];

/// Run time of this thread in nanoseconds (Linux schedstat; 0 elsewhere).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Registers `f` (one unit of work covering `elems` elements) with criterion,
/// after an optional thread-CPU-time pass.
fn measure(
    g: &mut BenchmarkGroup<'_, WallTime>,
    group: &str,
    name: &str,
    elems: u64,
    mut f: impl FnMut(),
) {
    if std::env::var_os("SIBRA_CPU_TIME").is_some() {
        for _ in 0..1024 {
            f();
        }
        let (start, mut units) = (cpu_ns(), 0u64);
        while cpu_ns() - start < 1_000_000_000 {
            for _ in 0..1024 {
                f();
            }
            units += 1024;
        }
        let ns = (cpu_ns() - start) as f64 / (units * elems) as f64;
        eprintln!("cpu-time {group}/{name}: {ns:.1} ns per element ({units} units)");
    }
    g.bench_function(name, |b| b.iter(&mut f));
}

fn keys() -> Vec<SofKeys> {
    (1..=3).map(|n| SofKeys::new(&Key::from([n; 16]))).collect()
}

fn info(exp: Tick, class: u8) -> ResvInfo {
    resv_info(exp, class, class, 1)
}

fn router_b() -> RouterConfig {
    RouterConfig { ifaces: InterfaceTable::new().with(2, 2).with(3, 3), ..Default::default() }
}

/// 32 ephemeral data packets (1500 bytes, distinct reservations) at AS B.
fn data_packets() -> Vec<Vec<u8>> {
    let ks = keys();
    let refs: Vec<&SofKeys> = ks.iter().collect();
    let t = Tick::of(now());
    (0..BURST as u8)
        .map(|n| {
            let id = EphemeralId::new(0xa, [n; 10]);
            // A class far above the offered load: the monitor stays on its normal path.
            let i = info(t.plus(3), 60);
            let blk = ActiveBlock { info: i, sofs: issue_chain(&refs, &HOPS, &i, &id.0) };
            let mut p = host::ephemeral_data(id, &blk).unwrap();
            p.curr_hop = 1;
            let probe =
                host::packet(Ia::new(1, 0xa), [0; 4], Ia::new(1, 0xc), [0; 4], &p, &[]).unwrap();
            let payload = vec![0u8; 1500 - probe.len()];
            host::packet(
                Ia::new(1, 0xa),
                [10, 0, 0, 1],
                Ia::new(1, 0xc),
                [10, 0, 0, 2],
                &p,
                &payload,
            )
            .unwrap()
        })
        .collect()
}

fn bench_verify(c: &mut Criterion) {
    let mut g = c.benchmark_group("sibra_data");
    g.throughput(Throughput::Elements(BURST as u64));
    let ks = keys();
    let t = Tick::of(now());
    let checks: Vec<TokenCheck> = (0..BURST as u8)
        .map(|n| {
            let id = EphemeralId::new(0xa, [n; 10]);
            let i = info(t.plus(3), 20);
            let s = ks[1].issue(2, 3, &i, &id.0, None);
            TokenCheck::new(&s, &i.mac_bytes(), &id.0, &[0; 8])
        })
        .collect();
    let mut ok = [false; BURST];
    measure(&mut g, "sibra_data", "token_verify_batch32", BURST as u64, || {
        verify_batch(&ks[1], black_box(&checks), &mut ok, t);
        black_box(ok);
    });
    let i = info(t.plus(3), 20);
    let id = EphemeralId::new(0xa, [0; 10]);
    let s = ks[1].issue(2, 3, &i, &id.0, None);
    measure(&mut g, "sibra_data", "token_verify_single", BURST as u64, || {
        for _ in 0..BURST {
            black_box(ks[1].check_mac(black_box(&s), &i, &id.0, None, t));
        }
    });
    let pkts = data_packets();
    let mut transit = SibraTransit::new(
        router_b(),
        ks[1].clone(),
        CoreMonitor::new(CoreConfig::default()).unwrap(),
    );
    let mut batch = Batch::new();
    for p in &pkts {
        batch.push(p.clone(), 2).unwrap();
    }
    // CurrHop: common 12 + address 24 + 1.
    let curr = 12 + 24 + 1;
    measure(&mut g, "sibra_data", "transit_stage_batch32_1500B", BURST as u64, || {
        Stage::<Vec<u8>>::process(&mut transit, &mut batch, now());
        // Put the packets back to this AS's hop (one byte each, included).
        for i in 0..BURST {
            batch.buf_mut(i)[curr] = 1;
        }
    });
    assert_eq!(batch.live_mask(), u32::MAX);
    assert_eq!(transit.counters().blacklisted, 0);
    g.finish();
}

fn admission_b() -> Admission {
    let cfg = AdmissionConfig {
        interfaces: [2, 3]
            .iter()
            .map(|&ifid| IfaceConfig {
                ifid,
                capacity_bps: 10_000_000_000,
                split: Split::default(),
            })
            .collect(),
        ..Default::default()
    };
    Admission::new(cfg, Tick::of(now())).unwrap()
}

fn bench_requests(c: &mut Criterion) {
    let mut g = c.benchmark_group("sibra_request");
    g.throughput(Throughput::Elements(1));
    let t0 = Tick::of(now());
    let sid = SteadyId::new(0xa, 1);
    let sinfo = info(t0.plus(10), 12);

    // Ephemeral admission alone: fresh IDs; one tick passes every 4096 requests
    // so expired reservations leave (their sweep cost is included, amortized),
    // and the steady path is renewed every tick (also included).
    // State lives across samples, as in a running router (tables warm).
    let mut a = admission_b();
    let mut n: u64 = 0;
    let mut epoch = u64::MAX;
    measure(&mut g, "sibra_request", "admission_ephemeral", 1, || {
        let e = n / 4096;
        let t = t0.plus(e as u32);
        if e != epoch {
            epoch = e;
            let i = ResvInfo { index: ResvIdx::from_low_bits(e as u8), ..info(t.plus(10), 12) };
            a.steady(&SteadyRequest { id: sid, ingress: 2, egress: 3, info: i }, t).unwrap();
            a.confirm(&sid.into(), (2, 3), i.index).unwrap();
        }
        n += 1;
        let mut r = [0u8; 10];
        r[..8].copy_from_slice(&n.to_be_bytes());
        let req = EphemeralRequest {
            id: EphemeralId::new(0xa, r),
            steady: Some(sid),
            ingress: 2,
            egress: 3,
            info: info(t.plus(1), 1),
        };
        black_box(a.ephemeral(&req, t).unwrap());
    });
    let mut a = admission_b();
    let mut n: u64 = 0;
    measure(&mut g, "sibra_request", "admission_steady", 1, || {
        n += 1;
        let t = t0.plus((n / 1024) as u32);
        let req = SteadyRequest {
            id: SteadyId::new(n % 64, (n / 64) as u16),
            ingress: 2,
            egress: 3,
            info: info(t.plus(1), 1),
        };
        black_box(a.steady(&req, t).unwrap());
    });

    // The whole control stage: verify the steady block, admit, write the SOF.
    // Time advances one tick per 16384 requests; the steady path is renewed
    // each tick (outside the measurement).
    let ks = keys();
    let mut ctl = SibraControl::new(router_b(), ks[1].clone(), admission_b());
    let mut n: u64 = 0;
    let mut epoch = u64::MAX;
    let mut steady = ActiveBlock { info: sinfo, sofs: Vec::new() };
    let mut t_now = now();
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function("control_stage_ephemeral_setup_batch32", |b| {
        b.iter_batched_ref(
            || {
                let e = n / 16384;
                let t = t0.plus(e as u32);
                let mut renew = None;
                if e != epoch {
                    epoch = e;
                    t_now = now().plus_ns(e * 4_000_000_000);
                    let i =
                        ResvInfo { index: ResvIdx::from_low_bits(e as u8), ..info(t.plus(10), 12) };
                    let refs: Vec<&SofKeys> = ks.iter().collect();
                    steady = ActiveBlock { info: i, sofs: issue_chain(&refs, &HOPS, &i, &sid.0) };
                    renew = Some((i, t));
                }
                let ereq =
                    host::request_info(t, 1, BwClass::new(1).unwrap(), BwClass::new(1).unwrap());
                let mut batch = Batch::new();
                for _ in 0..BURST {
                    n += 1;
                    let mut r = [0u8; 10];
                    r[..8].copy_from_slice(&n.to_be_bytes());
                    let mut p =
                        host::ephemeral_setup(EphemeralId::new(0xa, r), &[(sid, &steady)], &ereq)
                            .unwrap();
                    p.curr_hop = 1;
                    let pkt = host::packet(
                        Ia::new(1, 0xa),
                        [10, 0, 0, 1],
                        Ia::new(1, 0xc),
                        [10, 0, 0, 2],
                        &p,
                        b"",
                    )
                    .unwrap();
                    batch.push(pkt, 2).unwrap();
                }
                (batch, t_now, renew)
            },
            |(batch, now, renew)| {
                // Renewing the steady path once per tick (amortized over 16384 requests).
                if let Some((i, t)) = renew.take() {
                    let a = ctl.admission_mut();
                    a.steady(&SteadyRequest { id: sid, ingress: 2, egress: 3, info: i }, t)
                        .unwrap();
                    a.confirm(&sid.into(), (2, 3), i.index).unwrap();
                }
                Stage::<Vec<u8>>::process(&mut ctl, batch, *now);
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
    let c = ctl.counters();
    eprintln!("control stage: {} granted, {} denied", c.granted, c.denied);
    // Skipped by a name filter: nothing to check.
    assert!(c.granted + c.denied == 0 || c.granted > 100 * c.denied);
}

fn bench_edge(c: &mut Criterion) {
    let mut g = c.benchmark_group("sibra_edge");
    g.throughput(Throughput::Elements(BURST as u64));
    let keys: Vec<ResvKey> = (0..1024u32)
        .map(|n| {
            let mut r = [0u8; 10];
            r[..4].copy_from_slice(&n.to_be_bytes());
            EphemeralId::new(0xa, r).into()
        })
        .collect();
    let class = BwClass::new(40).unwrap();
    let exp = Tick::of(now()).plus(3);
    let mut m = EdgeMonitor::new(EdgeConfig::default(), 1);
    let mut i = 0usize;
    let mut ns = NOW_NS;
    measure(&mut g, "sibra_edge", "token_bucket_1024_reservations", BURST as u64, || {
        for _ in 0..BURST {
            i = (i + 1) & 1023;
            ns += 100;
            black_box(m.check(&keys[i], class, exp, 1500, ns, Tick(0)));
        }
    });
    // The whole edge stage on data packets from inside the AS (parse included).
    let pkts = data_packets();
    let cfg = RouterConfig { ifaces: InterfaceTable::new().with(1, 1), ..Default::default() };
    let mut edge = SibraEdge::new(cfg, EdgeMonitor::new(EdgeConfig::default(), 1));
    let mut batch = Batch::new();
    for p in &pkts {
        batch.push(p.clone(), 0).unwrap();
    }
    // The clock advances 1 µs per burst (as in the FAIR source bench), so
    // that each reservation's bucket (class 60: 12 Tbit/s, 2 ms of burst)
    // refills far more than the 1500 bytes a burst takes from it: with a
    // fixed clock the buckets ran dry after ≈ 2M bursts, every packet was
    // dropped, and the rest of the run timed an empty batch.
    let mut t = now();
    measure(&mut g, "sibra_edge", "edge_stage_batch32", BURST as u64, || {
        t = t.plus_ns(1_000);
        Stage::<Vec<u8>>::process(&mut edge, &mut batch, t);
        black_box(batch.live_mask());
    });
    // Every measured packet conformed (none was dropped or demoted).
    assert_eq!(batch.live_mask(), u32::MAX);
    assert_eq!(edge.counters().demoted, 0);
    g.finish();
}

fn bench_core(c: &mut Criterion) {
    let mut g = c.benchmark_group("sibra_core_monitor");
    g.throughput(Throughput::Elements(BURST as u64));
    for attackers in [1usize, 100] {
        // 1000 legitimate flows at their rate plus `attackers` flows at 10×,
        // interleaved; 1500-byte packets.
        let legit = 1000usize;
        let class = BwClass::new(20).unwrap(); // 11.86 Mbit/s
        let flows: Vec<ResvKey> = (0..legit + attackers)
            .map(|n| {
                let mut r = [0u8; 10];
                r[..8].copy_from_slice(&(n as u64).to_be_bytes());
                EphemeralId::new(0xb, r).into()
            })
            .collect();
        // Schedule: every legit flow once per round, every attacker 10× per round.
        let mut sched: Vec<usize> = Vec::new();
        for n in 0..legit {
            sched.push(n);
            if n % (legit / 10) == 0 {
                sched.extend(legit..legit + attackers);
            }
        }
        // A round moves each legit flow's 1500 bytes at its class rate.
        let round_ns = 1500 * 8 * 1_000_000_000 / class.bps();
        let gap = round_ns / sched.len() as u64;
        let exp = Tick::of(now()).plus(4);
        let mut m = CoreMonitor::new(CoreConfig::default()).unwrap();
        let mut ns = NOW_NS;
        let mut k = 0usize;
        let step = |m: &mut CoreMonitor, ns: &mut u64, k: &mut usize| {
            *k = (*k + 1) % sched.len();
            *ns += gap;
            let key = &flows[sched[*k]];
            if m.is_blacklisted(key, Tick(0)) {
                return false;
            }
            m.observe(key, class, exp, 1500, *ns, Tick(0));
            true
        };
        // Warm up until the attackers are caught.
        for _ in 0..sched.len() * 200 {
            step(&mut m, &mut ns, &mut k);
        }
        assert_eq!(m.blacklisted_total() as usize, attackers);
        let name = format!("attackers_{attackers}");
        measure(&mut g, "sibra_core_monitor", &name, BURST as u64, || {
            for _ in 0..BURST {
                black_box(step(&mut m, &mut ns, &mut k));
            }
        });
        assert_eq!(m.blacklisted_total() as usize, attackers);
    }
    g.finish();
}

criterion_group!(benches, bench_verify, bench_requests, bench_edge, bench_core);
fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
