//! The `ScionForward` stage on bursts of 32 packets at a transit hop:
//! plain SCION, and EPIC-HP at its penultimate hop (so with the PHVF
//! check); all on one path, and (`_distinct`) each on a path of its own.
//! Each iteration first rewrites the 32 packets as they arrived;
//! `restore_only` measures that part alone, to be subtracted.
//!
//! `cargo bench -p scion --bench forward_burst`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pipeline::{Now, Stage, BURST};

#[path = "support/burst.rs"]
mod support;

use support::{burst, burst_packets, burst_packets_distinct, restore, transit, workload, NOW};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("scion_burst");
    g.throughput(Throughput::Elements(BURST as u64));
    let workloads = [
        ("forward_burst32_scion", false, false),
        ("forward_burst32_epic_hp", true, false),
        ("forward_burst32_scion_distinct", false, true),
        ("forward_burst32_epic_hp_distinct", true, true),
    ];
    for (name, epic_hp, distinct) in workloads {
        let pkts = workload(if distinct {
            burst_packets_distinct(epic_hp)
        } else {
            burst_packets(epic_hp)
        });
        let (mut s, mut b) = (transit(), burst(&pkts));
        restore(&mut b, &pkts);
        s.process(&mut b, Now::from_unix_ns(NOW));
        assert!(b.metas().iter().all(|m| m.class().is_some()), "{name}: all forwarded");
        g.bench_function(name, |it| {
            it.iter(|| {
                restore(&mut b, &pkts);
                s.process(black_box(&mut b), Now::from_unix_ns(NOW));
            })
        });
    }
    let pkts = workload(burst_packets(false));
    let mut b = burst(&pkts);
    g.bench_function("restore_only", |it| {
        it.iter(|| {
            restore(&mut b, &pkts);
            black_box(&mut b);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
