//! Full decode of a SCION packet with a 15-hop path into an owned
//! representation: the current `ScionRepr` (compact, hop fields borrowed)
//! against the fixed-capacity representation it replaced and an allocating
//! decoder, in the same run. "+read" variants also read every field of
//! every hop field, so a decoder that defers work pays for it.
//!
//! `cargo bench -p scion --bench decode`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use packet::scion::{PathRepr, ScionRepr};

#[path = "support/decode.rs"]
mod support;

use support::{alloc_decode, fixed64, hop_checksum, packet_15_hops, HOPS};

fn bench(c: &mut Criterion) {
    let pkt = packet_15_hops();
    // All three decoders agree on the packet.
    let new = ScionRepr::parse(&pkt).expect("decodes");
    let old = fixed64::ScionRepr::parse(&pkt).expect("decodes");
    let heap = alloc_decode(&pkt).expect("decodes");
    let (PathRepr::Scion(np), fixed64::PathRepr::Scion(op)) = (new.path, old.path) else {
        panic!("not a SCION path")
    };
    assert!(np.hops().eq(op.hops().iter().copied()));
    assert!(np.hops().eq(heap.hop_fields.iter().copied()));
    assert_eq!(np.hops().len(), HOPS);

    let mut g = c.benchmark_group("scion_decode_15hops");
    g.throughput(Throughput::Elements(1));
    g.bench_function("compact", |b| b.iter(|| black_box(ScionRepr::parse(black_box(&pkt)))));
    g.bench_function("fixed64_before", |b| {
        b.iter(|| black_box(fixed64::ScionRepr::parse(black_box(&pkt))))
    });
    g.bench_function("alloc_vec", |b| b.iter(|| black_box(alloc_decode(black_box(&pkt)))));
    g.bench_function("compact+read", |b| {
        b.iter(|| {
            let r = ScionRepr::parse(black_box(&pkt)).ok()?;
            let PathRepr::Scion(p) = r.path else { return None };
            Some(p.hops().map(|h| hop_checksum(&h)).sum::<u64>())
        })
    });
    g.bench_function("fixed64_before+read", |b| {
        b.iter(|| {
            let r = fixed64::ScionRepr::parse(black_box(&pkt)).ok()?;
            let fixed64::PathRepr::Scion(p) = r.path else { return None };
            Some(p.hops().iter().map(hop_checksum).sum::<u64>())
        })
    });
    g.bench_function("alloc_vec+read", |b| {
        b.iter(|| {
            let r = alloc_decode(black_box(&pkt)).ok()?;
            Some(r.hop_fields.iter().map(hop_checksum).sum::<u64>())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
