//! The machine's floor for the flow table's memory traffic: random
//! read-modify-write accesses to one cache line each, over a buffer of
//! `MB` MiB (huge pages requested, as for the flow table), issued in bursts
//! of `BATCH` (default 32): all the burst's lines are prefetched, then each
//! is read and written. Prints thread CPU time per access.
//!
//! A regular packet touches ≈ 1.5 entry lines plus a tag line, so
//! `ns/access × 1.5` at the table's size bounds its time from below,
//! whatever the stage's code does (BENCHMARKS.md, FlowPolice, session 5).
//!
//! `cargo run --release -p flowpolice --example memfloor -- 64 512 6144`

use std::hint::black_box;

/// One cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

fn main() {
    let batch: usize = std::env::var("BATCH").ok().and_then(|s| s.parse().ok()).unwrap_or(32);
    let batch = batch.clamp(1, 256);
    for mb in std::env::args().skip(1).filter_map(|a| a.parse::<usize>().ok()) {
        let lines = (mb << 20) / 64;
        let mut buf = memhint::huge_filled_vec(lines.max(1), Line([1; 64]));
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut idx = [0usize; 256];
        let accesses = 4_000_000 / batch * batch;
        let t = thread_cpu_ns();
        for _ in 0..accesses / batch {
            for i in idx.iter_mut().take(batch) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *i = (s % buf.len() as u64) as usize;
                memhint::prefetch(&buf[*i]);
            }
            for &i in idx.iter().take(batch) {
                buf[i].0[0] = buf[i].0[0].wrapping_add(1);
            }
        }
        let ns = (thread_cpu_ns() - t) / accesses as f64;
        black_box(&buf);
        println!("{mb} MiB, batch {batch}: {ns:.1} ns per random line (read + write)");
    }
}
