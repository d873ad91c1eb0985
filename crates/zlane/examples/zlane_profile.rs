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

use pipeline::{Batch, Egress, Now, Stage};
use zlane::{Classifier, Gateway, Scheduler, SchedulerConfig, ZlaneClassify, ZlaneGateway};

#[path = "../benches/support/fixture.rs"]
mod fixture;

use fixture::{authorized_burst, gateway, host_burst, path, router_config, router_keys};
use fixture::{RATE_BPS, T0};

/// Packets per measured path.
const N: u64 = 10_000;

fn cpu_ns() -> u64 {
    fixture::cpu_ns().unwrap_or(0)
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

/// The router stage on bursts of standard SCION packets (class U, passed
/// on); the clock is 1 ns off [`run_router_burst`]'s, which keeps the two
/// functions apart (identical functions get merged).
#[inline(never)]
fn run_router_scion(stage: &mut ZlaneClassify, batch: &mut Batch<Vec<u8>>) {
    for k in 0..N {
        stage.process(batch, Now::from_unix_ns(T0 + k * 32_000 + 1));
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
        let (mut pkt, mut gw) = gateway(&path(l), RATE_BPS, 32_000);
        report(&format!("gateway l={l}"), 1, || run(&mut gw, &mut pkt));
        assert!(gw.counters().authorized >= N);
    }
    let bursts: [(usize, BurstRun); 3] =
        [(1, run_gateway_burst_l1), (3, run_gateway_burst_l3), (8, run_gateway_burst_l8)];
    for (l, run) in bursts {
        let p = path(l);
        let (_, gw) = gateway(&p, RATE_BPS, 0);
        let mut stage = ZlaneGateway::new(gw);
        let mut batch = host_burst(&p, 2);
        report(&format!("gateway burst of 32, l={l}"), 32, || run(&mut stage, &mut batch));
        assert_eq!(stage.gateway().counters().demoted, 0);
    }

    let (mut pkt, mut gw) = gateway(&path(5), 0, 32_000);
    report("gateway overuse", 1, || run_overuse(&mut gw, &mut pkt));
}

fn router_paths() {
    let p3 = path(3);
    let cfg = router_config();
    let (mut pkt, mut gw) = gateway(&p3, RATE_BPS, 0);
    gw.process(&mut pkt, Now::from_unix_ns(T0)).unwrap();
    let mut cl = Classifier::new(&cfg, router_keys(), T0).unwrap();
    report("epic_fields", 1, || run_epic_fields(&pkt));
    report("router one packet", 1, || run_router(&mut cl, &pkt));
    assert_eq!(cl.counters().classes[2], N);

    let mut batch = authorized_burst(&mut gw, &p3, 1);
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

    // The same burst as standard SCION packets (the path bytes are not
    // read for path type SCION: only the common and address headers).
    let mut scion = Batch::new();
    for i in 0..batch.len() {
        let mut p = batch.data(i).to_vec();
        packet::scion::ScionHeader::new_unchecked(&mut p[..])
            .set_path_type(packet::scion::PathType::SCION);
        scion.push(p, 0).unwrap();
    }
    let mut stage = ZlaneClassify::new(Classifier::new(&cfg, router_keys(), T0).unwrap());
    report("router burst of 32 SCION packets", 32, || run_router_scion(&mut stage, &mut scion));
    for i in 0..32 {
        assert_eq!(scion.meta(i).class(), Some(zlane::class::U));
    }
}
