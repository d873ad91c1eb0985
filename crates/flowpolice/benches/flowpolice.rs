//! FlowPolice per-packet cost at 1M, 10M and 100M flows (thesis Table 5.1).
//!
//! * `regular/<N>`: the whole stage on bursts of 32 IPv4 packets of random
//!   established flows (parse, flow-ID check, batched MAC verification,
//!   prefetched table update, batched restamp, in-place rewrite).
//! * `request/<N>`: new-flow creation and stamping in bursts of 32
//!   ([`Router::request_blocks`]: hashes, inserts with prefetches a few
//!   requests ahead, MAC input blocks; batched MAC), puzzle excluded as in
//!   Table 5.1.
//! * `puzzle_verify`: one SHA-256 puzzle check (the part Table 5.1 leaves out).
//!
//! Sizes: `FP_BENCH_FLOWS=1,10,100` (millions; default `1,10`); table load
//! `FP_BENCH_LOAD` percent (default 80), probe window `FP_BENCH_WINDOW` (default 32),
//! `FP_BENCH_HINTS=0` / `=1` to force the tag-guided entry loads off / on
//! (`Config::slot_hints`; default: on), `FP_BENCH_LAG=<n>` the
//! tag-to-entry prefetch lag (`Config::hint_lag`). 100M flows at 80 %
//! allocate 125M slots = 6.1 GB: run that size alone.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use flowpolice::config::{Config, LinkLayer};
use flowpolice::host::{ipv4_packet, Sender};
use flowpolice::puzzle::{self, SeedChain};
use flowpolice::table::{FlowTable, DEFAULT_PROBE_WINDOW};
use flowpolice::FlowPolice;
use flowpolice::{Params, Router};
use packet::flowpolice::{FlowPolice as Shim, PacketType};
use pipeline::{Batch, Now, Stage, BURST};

const T0_MS: u64 = 10_000_000;
/// Bursts per timed run (their packets stay cache-warm: 64 × 32 × ~100 B).
const CHUNK: usize = 64;

/// CPU time of this thread. The benchmark machine is shared by several jobs, so
/// wall time would count other processes' time slices; on-CPU time does not.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn sizes() -> Vec<usize> {
    std::env::var("FP_BENCH_FLOWS")
        .unwrap_or_else(|_| "1,10".into())
        .split(',')
        .filter_map(|s| s.trim().parse::<f64>().ok())
        .map(|m| (m * 1e6) as usize)
        .collect()
}

/// Table slots for `flows` flows at the `FP_BENCH_LOAD` load (default 80 %).
fn table_slots(flows: usize) -> usize {
    let load = std::env::var("FP_BENCH_LOAD").ok().and_then(|s| s.parse().ok());
    FlowTable::slots_for(flows, load.unwrap_or(flowpolice::table::DEFAULT_LOAD_PERCENT))
}

/// Probe window (`FP_BENCH_WINDOW`, default `DEFAULT_PROBE_WINDOW`).
fn window() -> usize {
    std::env::var("FP_BENCH_WINDOW")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_PROBE_WINDOW)
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn now_ms(ms: u64) -> Now {
    Now::from_unix_ns(ms * 1_000_000)
}

fn config(slots: usize) -> Config {
    let mut c = Config::new(
        mac::Key::from([9; 16]),
        [0x1234, 0x5678],
        slots,
        SeedChain::generate([1; 32], 0, 4),
    );
    c.link = LinkLayer::Ip;
    c.probe_window = window();
    // `FP_BENCH_HINTS=0` / `=1`: force whole home chunks / tag-guided entry loads.
    c.slot_hints = std::env::var("FP_BENCH_HINTS").ok().map(|v| v != "0");
    // `FP_BENCH_LAG=<n>`: packets between the tag and the entry prefetch.
    c.hint_lag = std::env::var("FP_BENCH_LAG").ok().and_then(|v| v.parse().ok());
    c
}

/// Destination address of flow `i` (flow ID = destination for insecure destinations).
fn dst(i: usize) -> Ipv4Addr {
    Ipv4Addr::from(0x0b00_0000u32 + i as u32)
}

fn bench_regular(c: &mut Criterion, flows: usize) {
    let slots = table_slots(flows);
    let t = Instant::now();
    let mut stage = FlowPolice::new(config(slots)).unwrap();
    let mut caps = Vec::with_capacity(flows);
    {
        let r = stage.router_mut();
        // At high loads a few windows fill up: those flows are left out.
        for i in 0..flows {
            let f = u64::from(u32::from(dst(i)));
            if let Ok(x) = r.on_request(f, T0_MS) {
                caps.push((i, x.capability));
            }
        }
    }
    eprintln!(
        "regular/{flows}: table {slots} slots ({} MiB), {:.1} B/flow, {} refused, filled in {:?}",
        stage.router().table().memory_bytes() >> 20,
        stage.router().memory_per_flow(flows),
        flows - caps.len(),
        t.elapsed()
    );
    // CHUNK bursts of packet buffers, rewritten (untimed) before every timed run
    // to carry random established flows: packet bytes are cache-warm as after NIC
    // DMA, flow entries are wherever the table traffic left them.
    let src = Ipv4Addr::new(10, 0, 0, 1);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut batches: Vec<Batch<Vec<u8>>> = (0..CHUNK)
        .map(|_| {
            let mut b = Batch::new();
            for _ in 0..BURST {
                let mut s = Sender::new();
                s.on_returned(caps[0].1);
                let mut shim = [0u8; 28];
                s.write_regular(&mut shim, 17).unwrap();
                b.push(ipv4_packet(src, dst(0), &shim, &[0u8; 32]), 0).unwrap();
            }
            b
        })
        .collect();
    let mut g = c.benchmark_group("flowpolice/regular");
    g.throughput(Throughput::Elements(BURST as u64));
    let at = now_ms(T0_MS + 100);
    g.bench_function(BenchmarkId::from_parameter(flows), |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let n = (iters - done).min(CHUNK as u64) as usize;
                for batch in &mut batches[..n] {
                    for k in 0..BURST {
                        let (i, cap) = caps[(xorshift(&mut seed) % caps.len() as u64) as usize];
                        let pkt = batch.buf_mut(k);
                        pkt[16..20].copy_from_slice(&dst(i).octets());
                        let mut shim = Shim::new_unchecked(&mut pkt[20..]);
                        shim.set_packet_type(PacketType::BestEffort);
                        shim.set_capability(&cap);
                    }
                }
                let start = thread_cpu();
                for batch in &mut batches[..n] {
                    stage.process(batch, at);
                }
                elapsed += thread_cpu() - start;
                done += n as u64;
            }
            elapsed
        })
    });
    g.finish();
    assert_eq!(stage.counters().bad_mac + stage.counters().expired, 0);
    assert!(batches.iter().all(|b| b.live_mask().count_ones() as usize == BURST));
}

fn bench_request(c: &mut Criterion, flows: usize) {
    let slots = table_slots(flows);
    let key = mac::Key::from([9; 16]);
    let mut r = Router::new(Params::default(), &key, slots, window(), [0x1234, 0x5678]).unwrap();
    // At high loads a few windows fill up: those flows are refused (counted).
    let refused = (0..flows as u64).filter(|&i| r.on_request(i, T0_MS).is_err()).count();
    eprintln!(
        "request/{flows}: {} slots ({:.1} B/flow), {refused} of {flows} refused while filling",
        r.table().slots(),
        r.memory_per_flow(flows)
    );
    let probes0 = r.table().insert_probes();
    let idle_ms = u64::from(r.params().idle_periods + 1) * u64::from(r.params().period_ms);
    let mut g = c.benchmark_group("flowpolice/request");
    g.throughput(Throughput::Elements(BURST as u64));
    let mut next = flows as u64;
    // The prefilled flows are idle from the start: at most N/2 newcomers are
    // live at a time, the rest of the table is idle lines to reclaim.
    let mut t_ms = T0_MS + idle_ms;
    let mut since_advance = 0usize;
    let mut full = 0u64;
    g.bench_function(BenchmarkId::from_parameter(flows), |b| {
        b.iter_custom(|iters| {
            let mut ids = [0u64; BURST];
            let mut results = [Err(flowpolice::Reject::TableFull); BURST];
            let mut blocks = [[0u8; 16]; BURST];
            let start = thread_cpu();
            for _ in 0..iters {
                // Keep the table from filling: every N/2 new flows, let all
                // earlier ones go idle so that new flows reclaim their lines.
                if since_advance >= flows / 2 {
                    t_ms += idle_ms;
                    since_advance = 0;
                }
                for (j, f) in ids.iter_mut().enumerate() {
                    *f = next + j as u64;
                }
                full += r.request_blocks(&ids, t_ms, &mut results, &mut blocks) as u64;
                r.key().mac_blocks(&mut blocks);
                black_box((&blocks, &results));
                next += BURST as u64;
                since_advance += BURST;
            }
            thread_cpu() - start
        })
    });
    g.finish();
    eprintln!(
        "request/{flows}: {} flows in table after the run, {full} refused, {:.2} entries read per insertion",
        r.table().len(),
        (r.table().insert_probes() - probes0) as f64 / (next - flows as u64).max(1) as f64
    );
}

fn bench_puzzle(c: &mut Criterion) {
    let seed = [5u8; 32];
    let (s, d) = ([10, 0, 0, 1], [192, 0, 2, 1]);
    let nonce = puzzle::solve(&seed, &s, &d, 8, 0).unwrap();
    let mut g = c.benchmark_group("flowpolice");
    g.throughput(Throughput::Elements(1));
    g.bench_function("puzzle_verify", |b| {
        b.iter_custom(|iters| {
            let start = thread_cpu();
            for _ in 0..iters {
                black_box(puzzle::verify(black_box(&seed), &s, &d, black_box(nonce), 8));
            }
            thread_cpu() - start
        })
    });
    g.finish();
}

fn all(c: &mut Criterion) {
    eprintln!("flow entry: {} B", FlowTable::bytes_per_entry());
    bench_puzzle(c);
    for n in sizes() {
        bench_regular(c, n);
        bench_request(c, n);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = all
}
criterion_main!(benches);
