//! Per-packet cost of the MAC primitives.
//!
//! `cargo bench -p mac --bench mac`
//!
//! With `CPU_TIME=1`, a second pass reports on-CPU time per packet (from
//! `/proc/thread-self/schedstat`), which excludes time the thread spent
//! descheduled when other processes share the cores.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mac::{Aes, Block, Cmac, Key};

/// On-CPU nanoseconds of this thread so far (Linux), if available.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Runs `f` `n` times and prints the on-CPU time per packet (`per` packets per call).
fn cpu_time<R>(name: &str, n: u64, per: u64, mut f: impl FnMut() -> R) {
    let Some(t0) = cpu_ns() else { return };
    for _ in 0..n {
        black_box(f());
    }
    if let Some(t1) = cpu_ns() {
        println!("cpu-time {name}: {:.2} ns/packet", (t1 - t0) as f64 / (n * per) as f64);
    }
}

fn bench(c: &mut Criterion) {
    let key = Key::from([0x2b; 16]);
    let cmac = Cmac::new(&key);
    let aes = Aes::new(&key);

    let mut g = c.benchmark_group("mac");
    g.throughput(Throughput::Elements(1));
    let m16 = [0x11u8; 16];
    let m48 = [0x22u8; 48];
    g.bench_function("aes_block", |b| {
        let mut blk = [0u8; 16];
        b.iter(|| {
            aes.encrypt_block(black_box(&mut blk));
        })
    });
    g.bench_function("key_expand", |b| b.iter(|| Aes::from_bytes(black_box(&[7u8; 16]))));
    g.bench_function("cmac_16B", |b| b.iter(|| cmac.mac(black_box(&m16))));
    g.bench_function("cmac_48B", |b| b.iter(|| cmac.mac(black_box(&m48))));
    g.bench_function("cbc_mac_3blocks_single", |b| b.iter(|| aes.cbc_mac(black_box(&m48))));
    g.finish();

    // Batched: 32 independent 3-block messages per iteration, reported per packet.
    let msgs: Vec<[Block; 3]> =
        (0..32).map(|i| core::array::from_fn(|j| [(i * 3 + j) as u8; 16])).collect();
    let mut tags = [[0u8; 16]; 32];
    let mut g = c.benchmark_group("mac_batch32");
    g.throughput(Throughput::Elements(32));
    g.bench_function("cbc_mac_3blocks_batched", |b| {
        b.iter(|| {
            aes.cbc_mac_batch(3, |i, j| msgs[i][j], black_box(&mut tags));
        })
    });
    g.bench_function("cmac_48B_batched", |b| {
        b.iter(|| {
            cmac.mac_batch(48, |_| black_box(&m48[..]), black_box(&mut tags));
        })
    });
    g.finish();

    // Different key per packet (Z-Lane/EPIC per-source-host DRKeys): 32 packets
    // per iteration, one expanded key each; per-packet sequential CBC-MACs vs
    // the interleaved multi-key CBC-MAC.
    let keys: Vec<Aes> = (0..32u8).map(|i| Aes::from_bytes(&[i.wrapping_mul(29); 16])).collect();
    let mut g = c.benchmark_group("mac_multikey32");
    g.throughput(Throughput::Elements(32));
    for blocks in [1usize, 3] {
        g.bench_function(format!("cbc_mac_{blocks}blocks_sequential"), |b| {
            b.iter(|| {
                for (i, tag) in tags.iter_mut().enumerate() {
                    *tag = keys[i].cbc_mac_blocks(black_box(&msgs[i][..blocks]));
                }
                black_box(&mut tags);
            })
        });
        g.bench_function(format!("cbc_mac_{blocks}blocks_multi"), |b| {
            b.iter(|| {
                Aes::cbc_mac_multi(
                    blocks,
                    |i| &keys[i],
                    |i, j| black_box(msgs[i][j]),
                    black_box(&mut tags),
                );
            })
        });
    }
    g.finish();

    if std::env::var_os("CPU_TIME").is_some() {
        const N: u64 = 10_000_000;
        cpu_time("cmac_16B", N, 1, || cmac.mac(black_box(&m16)));
        cpu_time("cmac_48B", N, 1, || cmac.mac(black_box(&m48)));
        cpu_time("cbc_mac_3blocks_single", N, 1, || aes.cbc_mac(black_box(&m48)));
        cpu_time("cbc_mac_3blocks_batched32", N / 32, 32, || {
            aes.cbc_mac_batch(3, |i, j| msgs[i][j], black_box(&mut tags));
        });
        cpu_time("multikey32_cbc_mac_3blocks_sequential", N / 32, 32, || {
            for (i, tag) in tags.iter_mut().enumerate() {
                *tag = keys[i].cbc_mac_blocks(black_box(&msgs[i][..]));
            }
        });
        cpu_time("multikey32_cbc_mac_3blocks_multi", N / 32, 32, || {
            Aes::cbc_mac_multi(3, |i| &keys[i], |i, j| black_box(msgs[i][j]), black_box(&mut tags));
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
