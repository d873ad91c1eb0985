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
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::MarkBinding;
use fair::dest::{DestChannel, DestConfig, FairDestination};
use fair::keys::{KeyRing, TestKeySource, T_M};
use fair::record::RecordRing;
use fair::source::{FairSource, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use mac::Key;
use pipeline::{Batch, Frame, Meta, Now, PacketBuf, Stage, BURST};

#[path = "../benches/support/bm3.rs"]
mod bm3;

const T0: u64 = 1_700_000_000;

fn plain_v6() -> Vec<u8> {
    let mut p = vec![0u8; 60];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&20u16.to_be_bytes());
    p[6] = 17;
    p[7] = 64;
    p[8..12].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    p[24..28].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb9]);
    p[39] = 2;
    p
}

fn source() -> FairSource {
    let mut s = FairSource::new(SourceConfig { framing: Framing::Ip, ..Default::default() });
    let big = u64::MAX / 4_000_000_000;
    let ch =
        SourceChannel::new(0, 2, &Key::from([7; 16]), 1, big, big, 0, Arc::new(AtomicU32::new(0)));
    let i = s.add_channel(ch);
    s.route("2001:db9::".parse().unwrap(), 32, i);
    s
}

/// BM-3 (as the bench): the 18k-prefix FIB and 8192 packets to random hosts
/// of random prefixes (`random`) or all to one host.
fn fib_source(random: bool) -> (FairSource, Vec<Vec<u8>>) {
    let mut rng = fair::rng::Xoshiro::new(42);
    let (s, hosts) = bm3::bm3_source(&mut rng);
    let pkts = (0..8192)
        .map(|_| {
            let d = if random {
                hosts[(rng.next_u64() % bm3::PREFIXES as u64) as usize]
            } else {
                hosts[0]
            };
            let mut p = plain_v6();
            p[24..40].copy_from_slice(&d);
            p
        })
        .collect();
    (s, pkts)
}

fn batch_of(pkt: &[u8]) -> Batch<Frame> {
    let mut b = Batch::new();
    for _ in 0..BURST {
        b.push(Frame::from_slice(pkt).unwrap(), 0).unwrap();
    }
    b
}

fn reset(b: &mut Batch<Frame>, pkt: &[u8]) {
    for i in 0..BURST {
        b.buf_mut(i).set(pkt).unwrap();
        *b.meta_mut(i) = Meta::new(0);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("transit");
    let iters: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let now = Now::from_unix_ns(T0 * 1_000_000_000);
    let plain = plain_v6();
    let mut s = source();
    let stamped = {
        let mut b: Batch<Vec<u8>> = Batch::new();
        b.push(plain.clone(), 0).unwrap();
        s.process(&mut b, now);
        b.data(0).to_vec()
    };
    match mode {
        "transit" => {
            let mut r = KeyRing::data(60, T_M).unwrap();
            let mut ks = TestKeySource::new(1);
            r.rotate(T0, 200, MarkBinding::Paper, || ks.next_key());
            let mut t = FairTransit::new(
                TransitConfig { framing: Framing::Ip, ..Default::default() },
                Arc::new(r),
                5,
            );
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
                for i in 0..BURST {
                    b.buf_mut(i).set(&pkts[(at + i) % pkts.len()]).unwrap();
                    *b.meta_mut(i) = Meta::new(0);
                }
                at = (at + BURST) % pkts.len();
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
            let big = u64::MAX / 4_000_000_000;
            let mut d = FairDestination::new(
                DestConfig { framing: Framing::Ip, ..Default::default() },
                RecordRing::new(1 << 14),
            );
            d.add_source_prefix("2001:db8::".parse().unwrap(), 32, 1);
            d.add_channel(DestChannel::new(1, 1, &Key::from([7; 16]), 0, big, big, 0), 0, 7);
            let mut b = batch_of(&stamped);
            // `dest_parsed`: metadata as a parse stage leaves it (FAIR header found).
            let mut m = Meta::new(0);
            if mode == "dest_parsed" {
                let p = fair::common::locate_meta(&stamped, &m, Framing::Ip, Default::default())
                    .unwrap()
                    .unwrap();
                fair::common::set_meta(&mut m, &p);
            }
            // Restore only what the stage changed (see the bench): the packet
            // start and the 56 header bytes it moved, and the metadata.
            let head: [u8; 56] = stamped[..56].try_into().unwrap();
            for _ in 0..iters {
                for i in 0..BURST {
                    let f = b.buf_mut(i);
                    f.reset();
                    f.append(stamped.len()).unwrap();
                    f.data_mut()[..56].copy_from_slice(&head);
                    *b.meta_mut(i) = m;
                }
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
