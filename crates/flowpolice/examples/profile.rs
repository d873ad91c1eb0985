//! A fixed workload for instruction-count profiling of the regular-packet
//! path (`valgrind --tool=callgrind --toggle-collect='*run_bursts*'`):
//! `FP_FLOWS` established flows (default 100 000), `FP_BURSTS` bursts of 32
//! packets of random flows (default 2000) through the stage. `FP_DISTINCT`
//! (default: all) builds only that many distinct bursts and cycles through
//! them, rewriting them to carry other random flows (untimed, outside
//! `run_bursts`) before each round, so that the packet bytes stay cache-warm
//! as in the criterion bench (e.g. `FP_FLOWS=1000000 FP_BURSTS=200000 FP_DISTINCT=64` for timing; the
//! time printed is this thread's CPU time, which load does not inflate).
//!
//! `FP_HINTS=0` / `=1` forces the tag-guided entry loads off / on
//! (`Config::slot_hints`; default: on); `FP_LAG=<n>` sets
//! `Config::hint_lag`.
//!
//! `FP_MODE=request`: the request path of the `request` criterion bench
//! instead (router-level insertion of new flows into a table of `FP_FLOWS`
//! idle flows: `Router::request_blocks` hashes, inserts and builds the MAC
//! inputs, then the batched MAC; puzzle excluded), in
//! `run_requests` (`--toggle-collect='*run_requests*'`).

use std::hint::black_box;
use std::net::Ipv4Addr;

use flowpolice::config::{Config, LinkLayer};
use flowpolice::host::{ipv4_packet, Sender};
use flowpolice::puzzle::SeedChain;
use flowpolice::table::{FlowTable, DEFAULT_LOAD_PERCENT, DEFAULT_PROBE_WINDOW};
use flowpolice::FlowPolice;
use flowpolice::{Capability, Params, Router};
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

fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// The `request` bench's timed loop: `bursts` bursts of 32 new flows from
/// `*next` on at `t_ms`.
#[inline(never)]
fn run_requests(r: &mut Router, bursts: usize, next: &mut u64, t_ms: u64) -> usize {
    let mut ids = [0u64; BURST];
    let mut results = [Err(flowpolice::Reject::TableFull); BURST];
    let mut blocks = [[0u8; 16]; BURST];
    let mut full = 0;
    for _ in 0..bursts {
        let base = *next;
        for (j, f) in ids.iter_mut().enumerate() {
            *f = base + j as u64;
        }
        // Hash, insert, MAC input blocks; then the batched MAC.
        full += r.request_blocks(&ids, t_ms, &mut results, &mut blocks);
        r.key().mac_blocks(&mut blocks);
        // A caller stamps the MACs with the packet IDs and times in `results`.
        black_box((&blocks, &results));
        *next += BURST as u64;
    }
    full
}

fn requests(flows: usize, bursts: usize) {
    let slots = FlowTable::slots_for(flows, DEFAULT_LOAD_PERCENT);
    let mut r = Router::new(
        Params::default(),
        &mac::Key::from([9; 16]),
        slots,
        DEFAULT_PROBE_WINDOW,
        [0x1234, 0x5678],
    )
    .unwrap();
    for i in 0..flows as u64 {
        let _ = r.on_request(i, T0_MS);
    }
    let idle_ms = u64::from(r.params().idle_periods + 1) * u64::from(r.params().period_ms);
    let mut t_ms = T0_MS + idle_ms;
    let mut next = flows as u64;
    // As in the bench: every N/2 newcomers, all earlier flows go idle.
    let round = (flows / 2 / BURST).max(1);
    let (mut done, mut cpu, mut full) = (0, 0u128, 0);
    while done < bursts {
        let n = round.min(bursts - done);
        let c = thread_cpu_ns();
        full += run_requests(&mut r, n, &mut next, t_ms);
        cpu += thread_cpu_ns() - c;
        done += n;
        t_ms += idle_ms;
    }
    eprintln!(
        "requests: {flows} idle flows, {} new: {:.1} ns/request CPU, {full} refused",
        bursts * BURST,
        cpu as f64 / (bursts * BURST) as f64
    );
}

fn main() {
    let flows = env("FP_FLOWS", 100_000);
    let bursts = env("FP_BURSTS", 2000);
    if std::env::var("FP_MODE").is_ok_and(|m| m == "request") {
        return requests(flows, bursts);
    }
    let distinct = env("FP_DISTINCT", bursts).clamp(1, bursts.max(1));
    let mut cfg = Config::new(
        mac::Key::from([9; 16]),
        [0x1234, 0x5678],
        FlowTable::slots_for(flows, DEFAULT_LOAD_PERCENT),
        SeedChain::generate([1; 32], 0, 4),
    );
    cfg.link = LinkLayer::Ip;
    cfg.slot_hints = std::env::var("FP_HINTS").ok().map(|v| v != "0");
    cfg.hint_lag = std::env::var("FP_LAG").ok().and_then(|v| v.parse().ok());
    let mut stage = FlowPolice::new(cfg).unwrap();
    let caps: Vec<(usize, Capability)> = (0..flows)
        .filter_map(|i| {
            let f = u64::from(u32::from(dst(i)));
            stage.router_mut().on_request(f, T0_MS).ok().map(|x| (i, x.capability))
        })
        .collect();
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut batches: Vec<Batch<Vec<u8>>> = (0..distinct)
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
    let rounds = bursts / distinct;
    let (mut wall, mut cpu) = (0u128, 0u128);
    for round in 0..rounds {
        if round > 0 {
            for b in batches.iter_mut() {
                for k in 0..BURST {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let (i, cap) = caps[(seed % caps.len() as u64) as usize];
                    let pkt = b.buf_mut(k);
                    pkt[16..20].copy_from_slice(&dst(i).octets());
                    let mut shim = Shim::new_unchecked(&mut pkt[20..]);
                    shim.set_packet_type(PacketType::BestEffort);
                    shim.set_capability(&cap);
                }
            }
        }
        let t = std::time::Instant::now();
        let c = thread_cpu_ns();
        run_bursts(&mut stage, &mut batches, now);
        cpu += thread_cpu_ns() - c;
        wall += t.elapsed().as_nanos();
    }
    let packets = (rounds * distinct * BURST) as f64;
    let (ns, cpu_ns) = (wall as f64 / packets, cpu as f64 / packets);
    black_box(&batches);
    let c = stage.counters();
    eprintln!(
        "{flows} flows, {} packets: {ns:.1} ns/packet wall, {cpu_ns:.1} ns/packet CPU, privileged+best effort {}, dropped {}",
        rounds * distinct * BURST,
        c.privileged + c.best_effort,
        c.bad_mac + c.expired + c.over_window
    );
}
