//! A fixed workload for instruction-count profiling of the regular-packet
//! path (`valgrind --tool=callgrind --toggle-collect='*run_bursts*'`):
//! `FP_FLOWS` established flows (default 100 000), `FP_BURSTS` bursts of 32
//! packets of random flows (default 2000) through the stage.

use std::hint::black_box;
use std::net::Ipv4Addr;

use flowpolice::host::{ipv4_packet, Sender};
use flowpolice::puzzle::SeedChain;
use flowpolice::stage::{Config, FlowPolice, LinkLayer};
use flowpolice::table::{FlowTable, DEFAULT_LOAD_PERCENT};
use flowpolice::Capability;
use packet::flowpolice::{FlowPolice as Shim, PacketType};
use pipeline::{Batch, Now, Stage, BURST};

const T0_MS: u64 = 10_000_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn dst(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0b00_0000u32 + i as u32)
}

#[inline(never)]
fn run_bursts(stage: &mut FlowPolice, batches: &mut [Batch<Vec<u8>>], now: Now) {
    for b in batches.iter_mut() {
        stage.process(b, now);
    }
}

fn main() {
    let flows = env("FP_FLOWS", 100_000);
    let bursts = env("FP_BURSTS", 2000);
    let mut cfg = Config::new(
        mac::Key::from([9; 16]),
        [0x1234, 0x5678],
        FlowTable::slots_for(flows, DEFAULT_LOAD_PERCENT),
        SeedChain::generate([1; 32], 0, 4),
    );
    cfg.link = LinkLayer::Ip;
    let mut stage = FlowPolice::new(cfg).unwrap();
    let caps: Vec<(usize, Capability)> = (0..flows)
        .filter_map(|i| {
            let f = u64::from(u32::from(dst(i)));
            stage.router_mut().on_request(f, T0_MS).ok().map(|x| (i, x.capability))
        })
        .collect();
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut batches: Vec<Batch<Vec<u8>>> = (0..bursts)
        .map(|_| {
            let mut b = Batch::new();
            for _ in 0..BURST {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let (i, cap) = caps[(seed % caps.len() as u64) as usize];
                let mut s = Sender::new();
                s.on_returned(cap);
                let mut shim = [0u8; 28];
                s.write_regular(&mut shim, 17).unwrap();
                let mut pkt = ipv4_packet(src, dst(i), &shim, &[0u8; 32]);
                Shim::new_unchecked(&mut pkt[20..]).set_packet_type(PacketType::BestEffort);
                b.push(pkt, 0).unwrap();
            }
            b
        })
        .collect();
    let now = Now::from_unix_ns((T0_MS + 100) * 1_000_000);
    let t = std::time::Instant::now();
    run_bursts(&mut stage, &mut batches, now);
    let ns = t.elapsed().as_nanos() as f64 / (bursts * BURST) as f64;
    black_box(&batches);
    let c = stage.counters();
    eprintln!(
        "{flows} flows, {} packets: {ns:.1} ns/packet (wall), privileged+best effort {}, dropped {}",
        bursts * BURST,
        c.privileged + c.best_effort,
        c.bad_mac + c.expired + c.over_window
    );
}
