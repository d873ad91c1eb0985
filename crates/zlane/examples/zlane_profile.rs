//! Load-independent cost comparison of the Z-Lane hot paths under callgrind.
//!
//! ```text
//! cargo build --release -p zlane --example zlane_profile
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/zlane_profile
//! callgrind_annotate --inclusive=yes /tmp/cg.out | grep 'zlane_profile::run_'
//! ```
//!
//! Each `run_*` function performs [`N`] packets (or bursts) of one path, so
//! its inclusive instruction count divided by `N` is the per-packet cost.
//! The program also prints per-packet CPU nanoseconds when run natively.
//! An argument keeps only the paths whose name contains it (`gateway`,
//! `router`, `scheduler`); `PROFILE_REPEAT=k` repeats the router-burst loop
//! k times for native timing (the CPU-time clock can tick coarsely).

use std::hint::black_box;

use drkey::{Epoch, Protocol, SecretValue, DEFAULT_GRACE_NS};
use mac::{Cmac, Key};
use packet::scion::{AddrHdrRepr, RawHostAddr, ScionPathRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Egress, Now, Stage};
use scion::build::{self, HopSpec};
use scion::ForwardingKey;
use zlane::config::GatewayConfig;
use zlane::config::{Origin, Rate, RateConfig, RouterConfig};
use zlane::keys::{RouterKeys, EPIC_Z_PROTOCOL};
use zlane::{Classifier, Gateway, Scheduler, SchedulerConfig, ZlaneClassify, ZlaneGateway};

/// Packets per measured path.
const N: u64 = 10_000;
const T0: u64 = 1_700_000_000_000_000_000;
const SRC: Ia = Ia::new(1, 10);

fn sv() -> SecretValue {
    let epoch = Epoch::new(1_699_990_000, 1_700_076_400).unwrap();
    SecretValue::derive(b"bench master secret", Protocol::GENERIC, epoch).unwrap()
}

fn router_keys() -> RouterKeys {
    let mut k = RouterKeys::new(4096, 0x5eed, DEFAULT_GRACE_NS);
    k.install(sv()).unwrap();
    k
}

fn path(hops: usize) -> ScionPathRepr {
    let specs: Vec<HopSpec> = (0..hops as u16)
        .map(|i| HopSpec {
            key: ForwardingKey::new(&Key::from([i as u8 + 1; 16])),
            cons_ingress: i,
            cons_egress: i + 1,
            exp_time: 255,
        })
        .collect();
    build::path(&[build::segment(true, 7, 1_700_000_000, &specs)]).unwrap()
}

fn host_packet(path: &ScionPathRepr, host: HostAddr) -> Vec<u8> {
    let raw = RawHostAddr::from(host);
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 99),
        src_ia: SRC,
        dst_host: raw,
        src_host: raw,
    };
    let k = Cmac::new(&sv().level1(SRC).generic_as_host(Protocol(EPIC_Z_PROTOCOL), &host));
    let keys: Vec<_> = (0..path.num_hf()).map(|_| &k).collect();
    zlane::host::epic_packet(&hdr, path, &keys, 0, 0, 1, &[0; 100]).unwrap()
}

fn gateway(path: &ScionPathRepr, rate: u64, hosts: u32) -> (Vec<u8>, Gateway) {
    let pkt = host_packet(path, HostAddr::V4([10, 0, 0, 1]));
    let s = sv();
    let mut gw = Gateway::new(GatewayConfig {
        host_capacity: 32_000,
        default_rate_bps: rate,
        burst: 65_535,
        ..Default::default()
    })
    .unwrap();
    for (i, h) in path.hops().iter().enumerate() {
        let ia = Ia::new(1, 100 + i as u64);
        gw.set_as_key(ia, &s.level1_key(SRC));
        gw.register_hop(h.mac, ia);
    }
    for n in 0..hosts {
        let mut p = pkt.clone();
        let mut h = packet::scion::ScionHeader::new_unchecked(&mut p[..]);
        h.src_host_bytes_mut().copy_from_slice(&(0x0b00_0000 + n).to_be_bytes());
        let _ = gw.process(&mut p, Now::from_unix_ns(T0));
    }
    (pkt, gw)
}

fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn report(name: &str, per: u64, f: impl FnOnce()) {
    let t = cpu_ns();
    f();
    let ns = (cpu_ns() - t) as f64 / (N * per) as f64;
    println!("{name}: {ns:.1} ns/packet (CPU)");
}

/// One measured gateway path.
type GatewayRun = fn(&mut Gateway, &mut [u8]);
/// One measured gateway-stage path.
type BurstRun = fn(&mut ZlaneGateway, &mut Batch<Vec<u8>>);

/// `tag` keeps the three instances apart (identical functions get merged).
#[inline(always)]
fn run_gateway(gw: &mut Gateway, pkt: &mut [u8], tag: u64) {
    for k in 0..N {
        let t = T0 + k * 1_000 + tag;
        black_box(gw.process(black_box(&mut *pkt), Now::from_unix_ns(t))).ok();
    }
}

#[inline(never)]
fn run_gateway_l1(gw: &mut Gateway, pkt: &mut [u8]) {
    run_gateway(gw, pkt, 1)
}

#[inline(never)]
fn run_gateway_l3(gw: &mut Gateway, pkt: &mut [u8]) {
    run_gateway(gw, pkt, 3)
}

#[inline(never)]
fn run_gateway_l8(gw: &mut Gateway, pkt: &mut [u8]) {
    run_gateway(gw, pkt, 8)
}

#[inline(always)]
fn run_gateway_burst(stage: &mut ZlaneGateway, batch: &mut Batch<Vec<u8>>, tag: u64) {
    for k in 0..N {
        stage.process(batch, Now::from_unix_ns(T0 + k * 32_000 + tag));
    }
}

/// The gateway stage on bursts of 32 hosts, ℓ = 3 (the name predates ℓ = 1, 8).
#[inline(never)]
fn run_gateway_burst_l3(stage: &mut ZlaneGateway, batch: &mut Batch<Vec<u8>>) {
    run_gateway_burst(stage, batch, 3)
}

#[inline(never)]
fn run_gateway_burst_l1(stage: &mut ZlaneGateway, batch: &mut Batch<Vec<u8>>) {
    run_gateway_burst(stage, batch, 1)
}

#[inline(never)]
fn run_gateway_burst_l8(stage: &mut ZlaneGateway, batch: &mut Batch<Vec<u8>>) {
    run_gateway_burst(stage, batch, 8)
}

#[inline(never)]
fn run_overuse(gw: &mut Gateway, pkt: &mut [u8]) {
    for _ in 0..N {
        black_box(gw.process(black_box(&mut *pkt), Now::from_unix_ns(T0))).ok();
    }
}

#[inline(never)]
fn run_router(cl: &mut Classifier, pkt: &[u8]) {
    for k in 0..N {
        black_box(cl.classify(black_box(pkt), Now::from_unix_ns(T0 + k * 1_000))).ok();
    }
}

/// The router's one-pass EPIC-Z reader alone.
#[inline(never)]
fn run_epic_fields(pkt: &[u8]) {
    for _ in 0..N {
        black_box(packet::scion::epic_fields(black_box(pkt))).ok();
    }
}

#[inline(never)]
fn run_router_burst(stage: &mut ZlaneClassify, batch: &mut Batch<Vec<u8>>) {
    for k in 0..N {
        stage.process(batch, Now::from_unix_ns(T0 + k * 32_000));
    }
}

#[inline(never)]
fn run_sched(s: &mut Scheduler<Vec<u8>>, bufs: &mut Vec<Vec<u8>>, out: &mut Vec<Vec<u8>>) {
    let classes = [zlane::class::R, zlane::class::G, zlane::class::A, zlane::class::U];
    let mut t = T0;
    for k in 0..N as usize {
        t += 100;
        let buf = bufs.pop().unwrap_or_else(|| vec![0u8; 100]);
        let _ = s.enqueue(buf, classes[k & 3], Now::from_unix_ns(t));
        s.dequeue(Now::from_unix_ns(t), 1, out);
        bufs.append(out);
    }
}

fn main() {
    // An optional argument keeps only the paths whose name contains it
    // (e.g. `router`), for a callgrind run of one path.
    let only = std::env::args().nth(1).unwrap_or_default();
    let want = |name: &str| name.contains(only.as_str());
    if want("gateway") {
        gateway_paths();
    }
    if want("router") {
        router_paths();
    }
    if want("scheduler") {
        let mut s: Scheduler<Vec<u8>> = Scheduler::new(SchedulerConfig::default()).unwrap();
        let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 100]).collect();
        let mut out = Vec::with_capacity(64);
        report("scheduler enqueue+dequeue", 1, || run_sched(&mut s, &mut bufs, &mut out));
    }
}

fn gateway_paths() {
    let runs: [(usize, GatewayRun); 3] =
        [(1, run_gateway_l1), (3, run_gateway_l3), (8, run_gateway_l8)];
    for (l, run) in runs {
        let (mut pkt, mut gw) = gateway(&path(l), 6_000_000_000, 32_000);
        report(&format!("gateway l={l}"), 1, || run(&mut gw, &mut pkt));
        assert!(gw.counters().authorized >= N);
    }
    let bursts: [(usize, BurstRun); 3] =
        [(1, run_gateway_burst_l1), (3, run_gateway_burst_l3), (8, run_gateway_burst_l8)];
    for (l, run) in bursts {
        let p = path(l);
        let (_, gw) = gateway(&p, 6_000_000_000, 0);
        let mut stage = ZlaneGateway::new(gw);
        let mut batch: Batch<Vec<u8>> = Batch::new();
        for h in 0..32u8 {
            batch.push(host_packet(&p, HostAddr::V4([10, 0, 2, h])), 0).unwrap();
        }
        report(&format!("gateway burst of 32, l={l}"), 32, || run(&mut stage, &mut batch));
        assert_eq!(stage.gateway().counters().demoted, 0);
    }

    let (mut pkt, mut gw) = gateway(&path(5), 0, 32_000);
    report("gateway overuse", 1, || run_overuse(&mut gw, &mut pkt));
}

fn router_paths() {
    let p3 = path(3);

    let cfg = RouterConfig {
        local_ia: Ia::new(1, 100),
        capacity_bps: 100_000_000_000,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(6_000_000_000)) }],
        ..Default::default()
    };
    let (mut pkt, mut gw) = gateway(&p3, 6_000_000_000, 0);
    gw.process(&mut pkt, Now::from_unix_ns(T0)).unwrap();
    let mut cl = Classifier::new(&cfg, router_keys(), T0).unwrap();
    report("epic_fields", 1, || run_epic_fields(&pkt));
    report("router one packet", 1, || run_router(&mut cl, &pkt));
    assert_eq!(cl.counters().classes[2], N);

    let mut batch: Batch<Vec<u8>> = Batch::new();
    for h in 0..32u8 {
        let mut p = host_packet(&p3, HostAddr::V4([10, 0, 1, h]));
        gw.process(&mut p, Now::from_unix_ns(T0)).unwrap();
        batch.push(p, 0).unwrap();
    }
    let mut stage = ZlaneClassify::new(Classifier::new(&cfg, router_keys(), T0).unwrap());
    // `PROFILE_REPEAT=k` repeats the measured loop k times (native timing:
    // the CPU-time clock may tick coarsely; callgrind runs need only one).
    let reps: u64 = std::env::var("PROFILE_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    report("router burst of 32 hosts", 32 * reps, || {
        for _ in 0..reps {
            run_router_burst(&mut stage, &mut batch)
        }
    });
    for i in 0..32 {
        assert_eq!(batch.meta(i).class(), Some(zlane::class::G));
    }
}
