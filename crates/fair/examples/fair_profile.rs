//! Callgrind driver for the FAIR fast paths (load-independent instruction counts).
//!
//! ```text
//! cargo build --release -p fair --example fair_profile
//! valgrind --tool=callgrind target/release/examples/fair_profile transit 100000
//! ```
//! Modes: `transit` (bare IPv6), `transit4` (Ethernet + IPv4 with the FAIR
//! shim, metadata as the parse stage leaves it: the router's FAIR pipeline),
//! `transit_mixed` (IPv4 and Ethernet + IPv6 packets alternating, parsed
//! metadata), `transit4_mix` (IPv4 fresh, stale, slotless and plain UDP
//! packets mixed as in the router's `fair-transit` traffic; includes
//! putting each burst back whole), `source`, `dest`, `dest_parsed`, `reset` (the per-burst
//! buffer reset the source run includes), `dest_restore` (the restore of the
//! bytes the destination changed, which the `dest*` runs include), `fib` /
//! `fib_single` (BM-3: source stamping over an 18k-prefix IPv6 FIB with one
//! channel per prefix, random destinations / one destination; include a
//! reset like `source`). Each iteration processes one burst of 32.

use std::hint::black_box;

use fair::common::Framing;
use fair::source::{FairSource, SourceChannel, SourceConfig};
use pipeline::{Batch, Frame, Meta, Now, PacketBuf, Stage, BURST};

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

/// Ethernet + IPv4/UDP 10.1.0.1 → 10.2.0.2, a 200-byte frame before the
/// FAIR shim (as the router's `fair` traffic template).
fn plain_v4_eth() -> Vec<u8> {
    let mut p = vec![0u8; 200];
    p[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut p[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&186u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 1, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 2, 0, 2]);
    ip[20..22].copy_from_slice(&4000u16.to_be_bytes());
    ip[22..24].copy_from_slice(&5000u16.to_be_bytes());
    ip[24..26].copy_from_slice(&166u16.to_be_bytes());
    let sum = packet::checksum::checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    p
}

/// Ethernet + [`fixture::plain_v6`].
fn plain_v6_eth() -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
    p.extend_from_slice(&plain_v6());
    p
}

/// `pkt` (behind Ethernet) as a source with `m` cooperating ASes stamps it
/// at `now`, with the metadata the parse stage leaves for it.
fn stamped_eth(pkt: Vec<u8>, m: u8, now: Now) -> (Vec<u8>, Meta) {
    let mut s = FairSource::new(SourceConfig { framing: Framing::Ethernet, ..Default::default() });
    let seq = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let big = u64::MAX / 4_000_000_000;
    let ch = SourceChannel::new(0, 2, &fair::Key::from([7; 16]), m, big, big, 0, seq);
    let i = s.add_channel(ch);
    s.route("10.2.0.0".parse().unwrap(), 16, i);
    s.route("2001:db9::".parse().unwrap(), 32, i);
    let mut b: Batch<Vec<u8>> = Batch::new();
    b.push(pkt, 0).unwrap();
    s.process(&mut b, now);
    let p = b.data(0).to_vec();
    let mut m = Meta::new(0);
    let f = fair::common::locate_meta(&p, &m, Framing::Ethernet, Default::default())
        .unwrap()
        .expect("a FAIR packet");
    fair::common::set_meta(&mut m, &f);
    (p, m)
}

/// Marks bursts of `pkts` (packet i: `pkts[i % len]`, with its metadata)
/// `iters` times, first rewinding each packet's NextAS byte (at frame
/// offset `nas_at(i)`).
#[inline(always)]
fn transit_eth(pkts: &[(Vec<u8>, Meta)], now: Now, iters: u64, nas_at: impl Fn(usize) -> usize) {
    let mut t = transit();
    let mut b: Batch<Frame> = Batch::new();
    for i in 0..BURST {
        let (p, m) = &pkts[i % pkts.len()];
        let k = b.push(Frame::from_slice(p).unwrap(), 0).unwrap();
        *b.meta_mut(k) = *m;
    }
    for _ in 0..iters {
        for i in 0..BURST {
            b.buf_mut(i).data_mut()[nas_at(i)] = 0;
        }
        t.process(&mut b, now);
        black_box(b.data(0)[nas_at(0) + 1]);
    }
    assert_eq!(t.stats.marked, iters * BURST as u64, "every packet marked");
}

/// Bursts of IPv4 FAIR packets as the router's `fair-transit` traffic mixes
/// them (packet i by i % 6): three fresh ones, one stale (10 s old), one
/// without a slot for this AS, one plain UDP packet; parsed metadata. Each
/// burst is put back whole first (the drop verdicts undone, NextAS rewound),
/// which the instruction count includes.
fn transit4_mix(now: Now, iters: u64) {
    let old = Now::from_unix_ns(now.unix_ns - 10_000_000_000);
    let (good, mg) = stamped_eth(plain_v4_eth(), 2, now);
    let (stale, ms) = stamped_eth(plain_v4_eth(), 2, old);
    let (full, mf) = stamped_eth(plain_v4_eth(), 0, now);
    let mut mp = Meta::new(0);
    (mp.l3, mp.l3_off, mp.l4_off) = (pipeline::L3::Ipv4, 14, 34);
    let kinds =
        [(&good, mg), (&good, mg), (&good, mg), (&stale, ms), (&full, mf), (&plain_v4_eth(), mp)];
    let mut t = transit();
    let mut b: Batch<Frame> = Batch::new();
    let mut metas = [Meta::new(0); BURST];
    for (i, m) in metas.iter_mut().enumerate() {
        let (p, pm) = kinds[i % kinds.len()];
        b.push(Frame::from_slice(p).unwrap(), 0).unwrap();
        *m = pm;
    }
    let mut bufs = Vec::with_capacity(BURST);
    for _ in 0..iters {
        b.drain(|f, _| bufs.push(f));
        for (f, m) in bufs.drain(..).zip(&metas) {
            let k = b.push(f, 0).unwrap_or_default();
            *b.metas_mut().get_mut(k).unwrap() = *m;
        }
        for i in 0..BURST {
            b.buf_mut(i).data_mut()[42] = 0;
        }
        t.process(&mut b, now);
        black_box(b.data(0)[43]);
    }
    let good_n = (0..BURST).filter(|i| i % kinds.len() < 3).count() as u64;
    assert_eq!(t.stats.marked, iters * good_n, "the fresh packets marked");
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
        "transit4" | "transit_mixed" => {
            let (v4, m4) = stamped_eth(plain_v4_eth(), 2, now);
            // As the parse stage lays it out: IPv4 at 14, the shim at 34.
            assert_eq!((m4.l3_off, m4.proto_off), (14, 34));
            if mode == "transit4" {
                transit_eth(&[(v4, m4)], now, iters, |_| 34 + 8);
            } else {
                let (v6, m6) = stamped_eth(plain_v6_eth(), 2, now);
                assert_eq!((m6.l3_off, m6.proto_off), (14, 54));
                transit_eth(&[(v4, m4), (v6, m6)], now, iters, |i| [42, 62][i % 2]);
            }
        }
        "transit4_mix" => transit4_mix(now, iters),
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
