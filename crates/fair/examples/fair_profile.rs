//! Callgrind driver for the FAIR fast paths (load-independent instruction counts).
//!
//! ```text
//! cargo build --release -p fair --example fair_profile
//! valgrind --tool=callgrind target/release/examples/fair_profile transit 100000
//! ```
//! Modes: `transit`, `source`, `dest`, `dest_parsed`, `reset` (the per-burst
//! buffer reset the source run includes), `dest_restore` (the restore of the
//! bytes the destination changed, which the `dest*` runs include), `fib` /
//! `fib_single` (BM-3: source stamping over an 18k-prefix IPv6 FIB with one
//! channel per prefix, random destinations / one destination; include a
//! reset like `source`). Each iteration processes one burst of 32.

use std::hint::black_box;

use pipeline::{Meta, Now, PacketBuf, Stage, BURST};

#[path = "../benches/support/bm3.rs"]
mod bm3;
#[path = "../benches/support/fixture.rs"]
mod fixture;

use fixture::{batch_of, destination, fib_packets, load, now, parsed_meta, plain_v6};
use fixture::{reset, source, stamped_v6, transit, Restore};

/// BM-3 (as the bench): the 18k-prefix FIB and 8192 packets to random hosts
/// of random prefixes (`random`) or all to one host.
fn fib_source(random: bool) -> (fair::source::FairSource, Vec<Vec<u8>>) {
    let mut rng = fair::rng::Xoshiro::new(42);
    let (s, hosts) = bm3::bm3_source(&mut rng);
    (s, fib_packets(&hosts, &mut rng, random, 8192))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("transit");
    let iters: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let now = now();
    let plain = plain_v6();
    let mut s = source();
    let stamped = stamped_v6(&mut s, now);
    match mode {
        "transit" => {
            let mut t = transit();
            let mut b = batch_of(&stamped);
            for _ in 0..iters {
                for i in 0..BURST {
                    b.buf_mut(i).data_mut()[48] = 0;
                }
                t.process(&mut b, now);
                black_box(b.data(0)[49]);
            }
        }
        "source" => {
            let mut b = batch_of(&plain);
            // The clock advances 1 µs per burst so that the shaper never runs dry.
            for k in 0..iters {
                reset(&mut b, &plain);
                s.process(&mut b, Now::from_unix_ns(now.unix_ns + k * 1_000));
                black_box(b.data(0)[47]);
            }
            assert_eq!(s.stats.nonconforming, 0, "the shaper must not run dry");
        }
        "fib" | "fib_single" => {
            let (mut s, pkts) = fib_source(mode == "fib");
            let mut b = batch_of(&pkts[0]);
            let mut at = 0;
            for k in 0..iters {
                load(&mut b, &pkts, &mut at);
                s.process(&mut b, Now::from_unix_ns(now.unix_ns + k * 1_000));
                black_box(b.data(0)[47]);
            }
            assert_eq!(s.stats.nonconforming + s.stats.no_channel, 0);
        }
        "reset" => {
            let mut b = batch_of(&plain);
            for _ in 0..iters {
                reset(&mut b, &plain);
                black_box(b.data(0)[47]);
            }
        }
        "dest" | "dest_parsed" | "dest_restore" => {
            let mut d = destination();
            let mut b = batch_of(&stamped);
            // `dest_parsed`: metadata as a parse stage leaves it (FAIR header found).
            let m = if mode == "dest_parsed" { parsed_meta(&stamped) } else { Meta::new(0) };
            // Restore only what the stage changed (see `Restore`).
            let restore = Restore::new(&stamped);
            for _ in 0..iters {
                restore.apply(&mut b, m);
                if mode != "dest_restore" {
                    d.process(&mut b, now);
                }
                black_box(b.data(0).len());
            }
            assert_eq!(d.stats.icv_fail, 0);
        }
        m => panic!("unknown mode {m}"),
    }
}
