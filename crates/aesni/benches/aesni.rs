//! Per-block costs: one block, a CBC chain, and interleaved multi-key lanes.
//!
//! `cargo bench -p aesni --bench aesni`

use std::hint::black_box;

use aesni::{Aes128, Block};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn bench(c: &mut Criterion) {
    let keys: Vec<Aes128> = (0..32u8).map(|i| Aes128::new(&[i; 16])).collect();
    let mut g = c.benchmark_group("aesni");
    g.throughput(Throughput::Elements(1));
    let mut b: Block = [1; 16];
    g.bench_function("encrypt_block", |x| x.iter(|| keys[0].encrypt_block(black_box(&mut b))));
    // Reference: the `aes` crate's own one-block call (its dispatch included).
    {
        use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
        let a = aes::Aes128Enc::new(&Array::from([0u8; 16]));
        let mut rb = Array::from([1u8; 16]);
        g.bench_function("aes_crate_encrypt_block", |x| {
            x.iter(|| a.encrypt_block(black_box(&mut rb)))
        });
    }
    g.bench_function("cbc_chain_3", |x| {
        x.iter(|| {
            let mut s = [0u8; 16];
            keys[0].cbc_chain(&mut s, 3, |j| [j as u8; 16]);
            black_box(s)
        })
    });
    g.throughput(Throughput::Elements(32));
    let mut states = [[0u8; 16]; 32];
    g.bench_function("cbc_lanes_32_keys_3_blocks", |x| {
        x.iter(|| {
            aesni::cbc_lanes(|i| &keys[i], black_box(&mut states), 3, |i, j| [(i + j) as u8; 16])
        })
    });
    g.bench_function("encrypt_blocks_32", |x| {
        x.iter(|| keys[0].encrypt_blocks(black_box(&mut states)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
