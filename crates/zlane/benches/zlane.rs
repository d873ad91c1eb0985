//! Per-packet costs of the Z-Lane gateway, router classification and scheduler.
//!
//! `cargo bench -p zlane --bench zlane`
//!
//! With `CPU_TIME=1`, a second pass reports the router's on-CPU time per
//! packet (from `/proc/thread-self/schedstat`), which excludes time the
//! thread spent descheduled when other processes share the cores.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pipeline::{Batch, Egress, Now, Stage};
use zlane::{Classifier, Gateway, Scheduler, SchedulerConfig, TokenBucket, ZlaneClassify};

#[path = "support/fixture.rs"]
mod fixture;

use fixture::{authorized_burst, cpu_ns, gateway, host_burst, path, router_config, router_keys};
use fixture::{RATE_BPS, T0};

/// Repetitions of each CPU-time pass relative to the counts below: the
/// schedstat clock advances in scheduler ticks (≈ 4 ms measured here), so a
/// pass must run long enough (≥ ≈ 100 ms) for a tick to be a small error.
const CPU_REPEAT: u64 = 10;

/// Runs `f` `n` × [`CPU_REPEAT`] times and prints the on-CPU time per element
/// (`per` elements per call).
fn cpu_time<R>(name: &str, n: u64, per: u64, mut f: impl FnMut() -> R) {
    let n = n * CPU_REPEAT;
    let Some(t0) = cpu_ns() else { return };
    for _ in 0..n {
        black_box(f());
    }
    if let Some(t1) = cpu_ns() {
        let ns = (t1 - t0) as f64 / (n * per) as f64;
        println!("cpu-time {name}: {ns:.1} ns/packet over {} packets", n * per);
    }
}

/// An EPIC-Z packet over `hops` hop fields (one AS each), 100-byte payload,
/// and a gateway that knows every on-path AS key, with 32 000 active hosts.
fn setup(hops: usize, host_rate: u64) -> (Vec<u8>, Gateway) {
    gateway(&path(hops), host_rate, 32_000)
}

fn bench(c: &mut Criterion) {
    assert_eq!(core::mem::size_of::<TokenBucket>(), 8, "8-byte token bucket (Appendix D)");
    let mut g = c.benchmark_group("zlane_gateway");
    g.throughput(Throughput::Elements(1));
    for l in 1..=8usize {
        let (template, mut gw) = setup(l, RATE_BPS);
        let mut pkt = template.clone();
        let mut t = T0;
        g.bench_with_input(BenchmarkId::new("compliant", l), &l, |b, _| {
            b.iter(|| {
                t += 1_000;
                black_box(gw.process(black_box(&mut pkt), Now::from_unix_ns(t)))
            })
        });
        assert!(gw.counters().authorized > 1000);
        if std::env::var_os("CPU_TIME").is_some() {
            let mut t2 = t;
            cpu_time(&format!("zlane_gateway/compliant/{l}"), 300_000, 1, || {
                t2 += 1_000;
                gw.process(black_box(&mut pkt), Now::from_unix_ns(t2))
            });
        }
    }
    // The stage: a burst of 32 packets from 32 hosts, HVFs batched per AS key.
    g.throughput(Throughput::Elements(32));
    for l in [1usize, 3, 8] {
        let p = path(l);
        let (_, gw) = gateway(&p, RATE_BPS, 0);
        let mut stage = zlane::ZlaneGateway::new(gw);
        let mut batch = host_burst(&p, 2);
        let mut t = T0;
        let mut run = |batch: &mut Batch<Vec<u8>>| {
            t += 32_000;
            stage.process(batch, Now::from_unix_ns(t));
        };
        g.bench_with_input(BenchmarkId::new("compliant_burst32", l), &l, |b, _| {
            b.iter(|| run(&mut batch))
        });
        if std::env::var_os("CPU_TIME").is_some() {
            cpu_time(&format!("zlane_gateway/compliant_burst32/{l}"), 10_000, 32, || {
                run(&mut batch)
            });
        }
        assert!(stage.gateway().counters().authorized >= 32);
        assert_eq!(
            stage.gateway().counters().demoted,
            0,
            "burst bench must measure compliant packets"
        );
    }
    g.throughput(Throughput::Elements(1));
    let (template, mut gw) = setup(5, 0);
    let mut pkt = template.clone();
    g.bench_function("overuse", |b| {
        b.iter(|| black_box(gw.process(black_box(&mut pkt), Now::from_unix_ns(T0))))
    });
    if std::env::var_os("CPU_TIME").is_some() {
        cpu_time("zlane_gateway/overuse", 1_000_000, 1, || {
            gw.process(black_box(&mut pkt), Now::from_unix_ns(T0))
        });
    }
    g.finish();

    // Router: verify (level-2 derivation + V_i + Ṽ_i) + classify + bucket.
    let (template, mut gw) = setup(3, RATE_BPS);
    let mut pkt = template.clone();
    gw.process(&mut pkt, Now::from_unix_ns(T0)).unwrap();
    let cfg = router_config();
    let mut cl = Classifier::new(&cfg, router_keys(), T0).unwrap();
    assert_eq!(cl.classify(&pkt, Now::from_unix_ns(T0)), Ok(zlane::class::G));
    let mut i = 0u64;
    let mut g = c.benchmark_group("zlane_router");
    g.throughput(Throughput::Elements(1));
    let mut t = T0;
    g.bench_function("verify_classify_bucket", |b| {
        b.iter(|| {
            // Stay inside the 2 s freshness window.
            i = (i + 1) % 1_000_000;
            black_box(cl.classify(black_box(&pkt), Now::from_unix_ns(T0 + i * 1_000)))
        })
    });
    // Every measured packet must have taken the full G path (verify + bucket), not
    // been demoted or dropped (criterion's test mode runs the closure only once).
    let classes = cl.counters().classes;
    assert!(
        classes[2] >= 1 && classes.iter().sum::<u64>() == classes[2],
        "router bench must measure G packets"
    );
    if std::env::var_os("CPU_TIME").is_some() {
        let mut j = 0u64;
        cpu_time("zlane_router/verify_classify_bucket", 300_000, 1, || {
            j = (j + 1) % 1_000_000;
            cl.classify(black_box(&pkt), Now::from_unix_ns(T0 + j * 1_000))
        });
    }

    // The same work through the stage, one burst of 32 packets from 32
    // different hosts (32 different level-2 keys) per iteration.
    let path3 = path(3);
    let (_, mut gw3) = gateway(&path3, RATE_BPS, 0);
    let mut batch = authorized_burst(&mut gw3, &path3, 1);
    let mut stage = ZlaneClassify::new(Classifier::new(&cfg, router_keys(), T0).unwrap());
    let mut k = 0u64;
    let mut run_burst = |batch: &mut Batch<Vec<u8>>| {
        // 32 packets per 32 µs stay below the 6 Gbit/s bucket: all G.
        k = (k + 1) % 50_000;
        stage.process(batch, Now::from_unix_ns(T0 + k * 32_000));
    };
    g.throughput(Throughput::Elements(32));
    g.bench_function("verify_classify_bucket_burst32", |b| b.iter(|| run_burst(&mut batch)));
    if std::env::var_os("CPU_TIME").is_some() {
        cpu_time("zlane_router/verify_classify_bucket_burst32", 10_000, 32, || {
            run_burst(&mut batch)
        });
    }
    for i in 0..32 {
        assert_eq!(batch.meta(i).class(), Some(zlane::class::G), "burst bench must measure G");
    }
    g.throughput(Throughput::Elements(1));
    let mut tb = TokenBucket::new(1000, 9000, 0);
    g.bench_function("token_bucket", |b| {
        b.iter(|| {
            t += 1_000;
            black_box(tb.take(black_box(100), 9000, t))
        })
    });
    // Scheduler: enqueue + dequeue of one packet in a busy mix.
    let mut s: Scheduler<Vec<u8>> = Scheduler::new(SchedulerConfig::default()).unwrap();
    let classes = [zlane::class::R, zlane::class::G, zlane::class::A, zlane::class::U];
    let mut out = Vec::with_capacity(64);
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 100]).collect();
    let mut k = 0usize;
    let mut one = || {
        t += 100;
        let buf = bufs.pop().unwrap_or_else(|| vec![0u8; 100]);
        k = k.wrapping_add(1);
        let _ = s.enqueue(buf, classes[k & 3], Now::from_unix_ns(t));
        s.dequeue(Now::from_unix_ns(t), 1, &mut out);
        bufs.append(&mut out);
    };
    g.bench_function("sched_enqueue_dequeue", |b| b.iter(&mut one));
    if std::env::var_os("CPU_TIME").is_some() {
        cpu_time("zlane_router/sched_enqueue_dequeue", 1_000_000, 1, &mut one);
    }
    // Scheduler dequeue alone: a burst of 32 queued packets (mixed classes)
    // handed out at once; only the dequeue calls are timed.
    let mut s: Scheduler<Vec<u8>> = Scheduler::new(SchedulerConfig::default()).unwrap();
    let mut pool: Vec<Vec<u8>> = (0..32).map(|_| vec![0u8; 100]).collect();
    let mut out = Vec::with_capacity(32);
    let mut t = T0;
    let fill = |s: &mut Scheduler<Vec<u8>>, pool: &mut Vec<Vec<u8>>, t: u64| {
        for (j, buf) in pool.drain(..).enumerate() {
            let _ = s.enqueue(buf, classes[j & 3], Now::from_unix_ns(t));
        }
    };
    g.throughput(Throughput::Elements(32));
    g.bench_function("sched_dequeue_burst32", |b| {
        b.iter_custom(|iters| {
            let mut total = std::time::Duration::ZERO;
            for _ in 0..iters {
                // 32 × 100 B at 10 Gbit/s = 2.56 µs; 1 ms apart the link is idle.
                t += 1_000_000;
                fill(&mut s, &mut pool, t);
                let start = std::time::Instant::now();
                let n = s.dequeue(Now::from_unix_ns(t + 10_000), 32, &mut out);
                total += start.elapsed();
                assert_eq!(n, 32);
                pool.append(&mut out);
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
