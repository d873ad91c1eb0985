//! Per-packet cost of the MAC primitives.
//!
//! `cargo bench -p mac --bench mac`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mac::{Aes, Block, Cmac, Key};

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
}

criterion_group!(benches, bench);
criterion_main!(benches);
