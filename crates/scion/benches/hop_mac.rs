//! Per-packet cost of hop-field verification and full SCION forwarding.
//!
//! `cargo bench -p scion --bench hop_mac`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mac::Key;
use packet::scion::ScionPath;
use scion::build::{self, HopSpec};
use scion::{mac_input, ForwardConfig, Forwarder, ForwardingKey, InterfaceTable};

fn path_bytes(key: &ForwardingKey) -> Vec<u8> {
    // One construction-direction segment of 3 hops, positioned at hop 1.
    let hops: Vec<HopSpec> = (0..3u16)
        .map(|i| HopSpec { key: key.clone(), cons_ingress: i, cons_egress: i + 1, exp_time: 255 })
        .collect();
    let seg = build::segment(true, 0x5a5a, 1_700_000_000, &hops);
    let repr = build::path(&[seg]).expect("path");
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ScionPath::new_unchecked(&mut buf[..])).expect("emit");
    // Let the first hop process it so the packet sits at hop 1 with its SegID.
    let fwd =
        Forwarder::new(key.clone(), InterfaceTable::new().with(1, 1), ForwardConfig::default());
    fwd.forward(&mut buf, 0, 1_700_000_100_000_000_000).expect("hop 0");
    buf
}

fn bench(c: &mut Criterion) {
    let key = ForwardingKey::new(&Key::from([0x2b; 16]));
    let input = mac_input(0x1234, 1_700_000_000, 63, 1, 2);
    let sigma = key.mac(&input);
    let mut g = c.benchmark_group("scion");
    g.throughput(Throughput::Elements(1));
    g.bench_function("hop_mac_verify", |b| b.iter(|| key.verify(black_box(&input), &sigma)));
    let inputs: Vec<_> = (0..32u16).map(|i| mac_input(i, 1_700_000_000, 63, 1, 2)).collect();
    let mut out = [[0u8; 6]; 32];
    g.throughput(Throughput::Elements(32));
    g.bench_function("hop_mac_batch32", |b| b.iter(|| key.mac_batch(black_box(&inputs), &mut out)));
    g.throughput(Throughput::Elements(1));
    let fwd =
        Forwarder::new(key.clone(), InterfaceTable::new().with(2, 7), ForwardConfig::default());
    let template = path_bytes(&key);
    let mut buf = template.clone();
    g.bench_function("forward_one_hop", |b| {
        b.iter(|| {
            buf.copy_from_slice(&template);
            black_box(fwd.forward(black_box(&mut buf), 1, 1_700_000_100_000_000_000))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
