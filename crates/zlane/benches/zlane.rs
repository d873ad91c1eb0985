//! Per-packet costs of the Z-Lane gateway, router classification and scheduler.
//!
//! `cargo bench -p zlane --bench zlane`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mac::Key;
use packet::scion::{AddrHdrRepr, RawHostAddr};
use packet::{HostAddr, Ia};
use pipeline::{Egress, Now};
use scion::build::{self, HopSpec};
use scion::ForwardingKey;
use zlane::config::{Origin, Rate, RouterConfig};
use zlane::gateway::GatewayConfig;
use zlane::keys::{RouterKeys, SvKeys, EPIC_Z_PROTOCOL};
use zlane::{Classifier, Gateway, Scheduler, SchedulerConfig, TokenBucket};

const T0: u64 = 1_700_000_000_000_000_000;
const SRC: Ia = Ia::new(1, 10);

fn sv() -> SvKeys {
    SvKeys::new(&Key::from([2; 16]), 1_699_999_000, 1_700_100_000)
}

/// An EPIC-Z packet over `hops` hop fields (one AS each), 100-byte payload,
/// and a gateway that knows every on-path AS key.
fn setup(hops: usize, host_rate: u64) -> (Vec<u8>, Gateway) {
    let specs: Vec<HopSpec> = (0..hops as u16)
        .map(|i| HopSpec {
            key: ForwardingKey::new(&Key::from([i as u8 + 1; 16])),
            cons_ingress: i,
            cons_egress: i + 1,
            exp_time: 255,
        })
        .collect();
    let path = build::path(&[build::segment(true, 7, 1_700_000_000, &specs)]).unwrap();
    let host = RawHostAddr::from(HostAddr::V4([10, 0, 0, 1]));
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 99),
        src_ia: SRC,
        dst_host: host,
        src_host: host,
    };
    let mut s = sv();
    let k =
        s.level1(SRC, T0 / 1_000_000_000).unwrap().host_cmac(EPIC_Z_PROTOCOL, 0, host.as_bytes());
    let keys: Vec<_> = (0..hops).map(|_| &k).collect();
    let pkt = zlane::endhost::epic_packet(&hdr, &path, &keys, 0, 0, 1, &[0; 100]).unwrap();
    let mut gw = Gateway::new(GatewayConfig {
        host_capacity: 32_000,
        default_rate_bps: host_rate,
        burst: 65_535,
        ..Default::default()
    })
    .unwrap();
    for (i, h) in path.hops().iter().enumerate() {
        let ia = Ia::new(1, 100 + i as u64);
        gw.set_as_key(ia, &Key::from(s.derive_key(SRC)));
        gw.register_hop(h.mac, ia);
    }
    // 32 000 active hosts in the table.
    for n in 0..32_000u32 {
        let mut p = pkt.clone();
        let mut h = packet::scion::ScionHeader::new_unchecked(&mut p[..]);
        h.src_host_bytes_mut().copy_from_slice(&(0x0b00_0000 + n).to_be_bytes());
        let _ = gw.process(&mut p, Now::from_unix_ns(T0));
    }
    (pkt, gw)
}

fn bench(c: &mut Criterion) {
    assert_eq!(core::mem::size_of::<TokenBucket>(), 8, "8-byte token bucket (Appendix D)");
    let mut g = c.benchmark_group("zlane_gateway");
    g.throughput(Throughput::Elements(1));
    for l in 1..=8usize {
        let (template, mut gw) = setup(l, 6_000_000_000);
        let mut pkt = template.clone();
        let mut t = T0;
        g.bench_with_input(BenchmarkId::new("compliant", l), &l, |b, _| {
            b.iter(|| {
                t += 1_000;
                black_box(gw.process(black_box(&mut pkt), Now::from_unix_ns(t)))
            })
        });
        assert!(gw.counters().authorized > 1000);
    }
    let (template, mut gw) = setup(5, 0);
    let mut pkt = template.clone();
    g.bench_function("overuse", |b| {
        b.iter(|| black_box(gw.process(black_box(&mut pkt), Now::from_unix_ns(T0))))
    });
    g.finish();

    // Router: verify (level-2 derivation + V_i + Ṽ_i) + classify + bucket.
    let (template, mut gw) = setup(3, 6_000_000_000);
    let mut pkt = template.clone();
    gw.process(&mut pkt, Now::from_unix_ns(T0)).unwrap();
    let cfg = RouterConfig {
        local_ia: Ia::new(1, 100),
        capacity_bps: 100_000_000_000,
        rates: vec![(Origin::As(SRC), Some(Rate::Bps(6_000_000_000)))],
        ..Default::default()
    };
    let mut cl = Classifier::new(&cfg, sv(), T0).unwrap();
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
        classes[2] >= 2 && classes.iter().sum::<u64>() == classes[2],
        "router bench must measure G packets"
    );
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
    g.bench_function("sched_enqueue_dequeue", |b| {
        b.iter(|| {
            t += 100;
            let buf = bufs.pop().unwrap_or_else(|| vec![0u8; 100]);
            k = k.wrapping_add(1);
            let _ = s.enqueue(buf, classes[k & 3], Now::from_unix_ns(t));
            s.dequeue(Now::from_unix_ns(t), 1, &mut out);
            bufs.append(&mut out);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
