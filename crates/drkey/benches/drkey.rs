//! Per-packet cost of DRKey derivation on the router fast path.
//!
//! `cargo bench -p drkey --bench drkey`
//!
//! * `level2_warm`: cache hit (level-1 schedule cached) + one level-2 PRF.
//! * `level1_level2_cold`: cache miss on every lookup (level-1 PRF under the SV,
//!   key expansion, insertion) + one level-2 PRF.
//! * `level1_level2_uncached`: the same derivation without the cache.
//!
//! With `CPU_TIME=1`, a second pass reports on-CPU time per operation (from
//! `/proc/thread-self/schedstat`, nanosecond resolution), which excludes time
//! the thread spent descheduled when other processes share the cores.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use drkey::{Epoch, HostAddr, Ia, Level1Cache, Protocol, SecretValue};

/// On-CPU nanoseconds of this thread so far (Linux), if available.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Runs `f` `n` times and prints the on-CPU time per call.
fn cpu_time<R>(name: &str, n: u64, mut f: impl FnMut() -> R) {
    let Some(t0) = cpu_ns() else { return };
    for _ in 0..n {
        black_box(f());
    }
    if let Some(t1) = cpu_ns() {
        println!("cpu-time {name}: {:.2} ns/op over {n} ops", (t1 - t0) as f64 / n as f64);
    }
}

fn bench(c: &mut Criterion) {
    let epoch = Epoch::new(1_700_000_000, 1_700_086_400).unwrap();
    let sv = SecretValue::derive(b"bench master secret", Protocol::GENERIC, epoch).unwrap();
    let v4 = HostAddr::V4([10, 0, 0, 1]);
    let v6 = HostAddr::V6([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    // 64 source ASes, visited round robin (all fit into the warm cache).
    let ias: Vec<Ia> = (0..64).map(|i| Ia::new(1, 0xff00_0000_0100 + i)).collect();
    // For the cold case: far more ASes than the cache holds, so every lookup misses.
    let many: Vec<Ia> = (0..4096).map(|i| Ia::new(2, 0x10_0000 + i)).collect();

    let mut g = c.benchmark_group("drkey");
    g.throughput(Throughput::Elements(1));

    let mut warm = Level1Cache::new(Protocol::GENERIC, 1024, 0x1234_5678);
    warm.install(sv.clone()).unwrap();
    for &ia in &ias {
        warm.level1(epoch, ia).unwrap();
    }
    let mut i = 0usize;
    for (name, host) in [("level2_warm_v4", &v4), ("level2_warm_v6", &v6)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                i = (i + 1) & 63;
                let l1 = warm.level1(epoch, black_box(ias[i])).unwrap();
                l1.host_as(black_box(host))
            })
        });
    }
    g.bench_function("level2_warm_generic_v4", |b| {
        b.iter(|| {
            i = (i + 1) & 63;
            let l1 = warm.level1(epoch, black_box(ias[i])).unwrap();
            l1.generic_host_as(Protocol(7), black_box(&v4))
        })
    });
    assert_eq!(warm.stats().misses, 64, "warm benchmark must not miss");

    let mut cold = Level1Cache::new(Protocol::GENERIC, 64, 0x1234_5678);
    cold.install(sv.clone()).unwrap();
    let mut j = 0usize;
    g.bench_function("level1_level2_cold_v4", |b| {
        b.iter(|| {
            j = (j + 1) & 4095;
            let l1 = cold.level1(epoch, black_box(many[j])).unwrap();
            l1.host_as(black_box(&v4))
        })
    });
    let st = cold.stats();
    println!("cold cache: {} misses, {} hits", st.misses, st.hits);
    g.bench_function("level1_level2_uncached_v4", |b| {
        b.iter(|| {
            j = (j + 1) & 4095;
            sv.level1(black_box(many[j])).host_as(black_box(&v4))
        })
    });
    let l1 = sv.level1(ias[0]);
    g.bench_function("level2_from_schedule_v4", |b| b.iter(|| l1.host_as(black_box(&v4))));
    g.bench_function("level1_expand", |b| {
        let k = sv.level1_key(ias[0]);
        b.iter(|| drkey::Level1::new(black_box(&k)))
    });
    g.finish();

    if std::env::var_os("CPU_TIME").is_some() {
        const N: u64 = 20_000_000;
        let mut i = 0usize;
        cpu_time("level2_warm_v4", N, || {
            i = (i + 1) & 63;
            warm.level1(epoch, black_box(ias[i])).unwrap().host_as(black_box(&v4))
        });
        cpu_time("level2_warm_v6", N, || {
            i = (i + 1) & 63;
            warm.level1(epoch, black_box(ias[i])).unwrap().host_as(black_box(&v6))
        });
        let mut j = 0usize;
        cpu_time("level1_level2_cold_v4", N / 4, || {
            j = (j + 1) & 4095;
            cold.level1(epoch, black_box(many[j])).unwrap().host_as(black_box(&v4))
        });
        cpu_time("level2_from_schedule_v4", N, || l1.host_as(black_box(&v4)));
        let aes = mac::Aes::from_bytes(&[7; 16]);
        let mut blk = [0u8; 16];
        cpu_time("aes_block (reference)", N, || aes.encrypt_block(black_box(&mut blk)));
    }

    let mut g = c.benchmark_group("drkey_control");
    g.sample_size(10);
    g.bench_function("sv_pbkdf2", |b| {
        b.iter_batched(
            || (),
            |_| SecretValue::derive(black_box(b"bench master secret"), Protocol::GENERIC, epoch),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
