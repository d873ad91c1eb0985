//! Load-independent cost of SCION decoding and forwarding under callgrind.
//!
//! ```text
//! cargo build --release -p scion --example scion_profile
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/scion_profile
//! callgrind_annotate --inclusive=yes /tmp/cg.out | grep 'scion_profile::run_'
//! ```
//!
//! Each `run_*` function handles [`N`] packets, so its inclusive instruction
//! count divided by `N` is the per-packet cost:
//!
//! * `run_decode_{compact,fixed64,alloc}`: a full decode of a 15-hop SCION
//!   packet (`benches/support/decode.rs`), compact representation against
//!   the fixed-capacity one it replaced and an allocating decoder;
//! * `run_decode_*_read`: the same, then every field of every hop read;
//! * `run_forward_{scion,epic_hp}`: the `ScionForward` stage on bursts of 32
//!   packets at a transit hop (plain SCION; EPIC-HP at its penultimate hop,
//!   so with the PHVF check), [`N`] / 32 bursts, all packets on one path;
//!   `run_forward_distinct_*` the same with each packet of a burst on a path
//!   of its own (so no parse or MAC is shared). `run_restore` is the part
//!   of those loops that only rewrites the packets between bursts, to be
//!   subtracted. `run_forward_distinct_epic_z` forwards EPIC-Z packets
//!   (PathType 201) on 32 different paths, and counts only the stage's
//!   `process` calls (in `process_epic_z`): nothing to subtract. The AES
//!   share is the inclusive count of the `aesni` functions
//!   (`aesni::ni::lanes`, and for EPIC-HP `aesni::ni::chain` and the key
//!   expansion `aesni::ni::expand`). The linker may fold the four
//!   identical `run_forward_*` bodies into one symbol: filter by name (the
//!   argument) to profile one at a time.
//!
//! An argument keeps only the functions whose name contains it. When run
//! natively it also prints CPU nanoseconds per packet.

use std::hint::black_box;

use packet::scion::{PathRepr, ScionRepr};
use pipeline::{Batch, Now, Stage, BURST};
use scion::ScionForward;

#[path = "../benches/support/burst.rs"]
mod burst_support;
#[path = "../benches/support/decode.rs"]
mod support;

use burst_support::{
    burst, burst_packets, burst_packets_distinct, burst_packets_distinct_epic_z, restore, transit,
    workload, Workload, NOW,
};
use support::{alloc_decode, fixed64, hop_checksum, packet_15_hops};

/// Packets per measured function.
const N: u64 = 100_000;

fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[inline(never)]
fn run_decode_compact(pkt: &[u8]) {
    for _ in 0..N {
        let _ = black_box(ScionRepr::parse(black_box(pkt)));
    }
}

#[inline(never)]
fn run_decode_fixed64(pkt: &[u8]) {
    for _ in 0..N {
        let _ = black_box(fixed64::ScionRepr::parse(black_box(pkt)));
    }
}

#[inline(never)]
fn run_decode_alloc(pkt: &[u8]) {
    for _ in 0..N {
        let _ = black_box(alloc_decode(black_box(pkt)));
    }
}

#[inline(never)]
fn run_decode_compact_read(pkt: &[u8]) {
    for _ in 0..N {
        let sum = match ScionRepr::parse(black_box(pkt)) {
            Ok(ScionRepr { path: PathRepr::Scion(p), .. }) => {
                p.hops().map(|h| hop_checksum(&h)).sum()
            }
            _ => 0u64,
        };
        black_box(sum);
    }
}

#[inline(never)]
fn run_decode_fixed64_read(pkt: &[u8]) {
    for _ in 0..N {
        let sum = match fixed64::ScionRepr::parse(black_box(pkt)) {
            Ok(fixed64::ScionRepr { path: fixed64::PathRepr::Scion(p), .. }) => {
                p.hops().iter().map(hop_checksum).sum()
            }
            _ => 0u64,
        };
        black_box(sum);
    }
}

#[inline(never)]
fn run_decode_alloc_read(pkt: &[u8]) {
    for _ in 0..N {
        let sum = match alloc_decode(black_box(pkt)) {
            Ok(d) => d.hop_fields.iter().map(hop_checksum).sum(),
            _ => 0u64,
        };
        black_box(sum);
    }
}

#[inline(never)]
fn run_restore(b: &mut Batch<Vec<u8>>, pkts: &Workload) {
    for _ in 0..N / BURST as u64 {
        restore(b, pkts);
        black_box(&mut *b);
    }
}

/// The forwarding loop; `tag` only keeps the four callers' bodies distinct,
/// so that the compiler does not merge them into one symbol (callgrind
/// attributes costs by symbol).
#[inline(always)]
fn forward_bursts(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &Workload, tag: u32) {
    black_box(tag);
    for _ in 0..N / BURST as u64 {
        restore(b, pkts);
        s.process(black_box(&mut *b), Now::from_unix_ns(NOW));
    }
}

#[inline(never)]
fn run_forward_scion(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &Workload) {
    forward_bursts(s, b, pkts, 0)
}

#[inline(never)]
fn run_forward_epic_hp(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &Workload) {
    forward_bursts(s, b, pkts, 1)
}

#[inline(never)]
fn run_forward_distinct_scion(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &Workload) {
    forward_bursts(s, b, pkts, 2)
}

#[inline(never)]
fn run_forward_distinct_epic_hp(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &Workload) {
    forward_bursts(s, b, pkts, 3)
}

/// One burst through the stage: measured alone, so that restoring the
/// packets is not counted.
#[inline(never)]
fn process_epic_z(s: &mut ScionForward, b: &mut Batch<Vec<u8>>) {
    s.process(black_box(b), Now::from_unix_ns(NOW));
}

#[inline(never)]
fn run_forward_distinct_epic_z(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &Workload) {
    black_box(4u32);
    for _ in 0..N / BURST as u64 {
        restore(b, pkts);
        process_epic_z(s, b);
    }
}

/// One measured function.
type Run = fn(&[u8]);
/// One measured forwarding function.
type ForwardRun = fn(&mut ScionForward, &mut Batch<Vec<u8>>, &Workload);

fn main() {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let pkt = packet_15_hops();
    let runs: [(&str, Run); 6] = [
        ("decode_compact", run_decode_compact),
        ("decode_fixed64", run_decode_fixed64),
        ("decode_alloc", run_decode_alloc),
        ("decode_compact_read", run_decode_compact_read),
        ("decode_fixed64_read", run_decode_fixed64_read),
        ("decode_alloc_read", run_decode_alloc_read),
    ];
    for (name, f) in runs {
        if !name.contains(filter.as_str()) {
            continue;
        }
        let t = cpu_ns();
        f(&pkt);
        println!("{name}: {:.1} ns/packet (CPU)", (cpu_ns() - t) as f64 / N as f64);
    }
    let forwards: [(&str, bool, bool, ForwardRun); 5] = [
        ("forward_scion", false, false, run_forward_scion),
        ("forward_epic_hp", true, false, run_forward_epic_hp),
        ("forward_distinct_scion", false, true, run_forward_distinct_scion),
        ("forward_distinct_epic_hp", true, true, run_forward_distinct_epic_hp),
        ("forward_distinct_epic_z", false, true, run_forward_distinct_epic_z),
    ];
    for (name, epic_hp, distinct, f) in forwards {
        if !name.contains(filter.as_str()) {
            continue;
        }
        let pkts = workload(if name.ends_with("epic_z") {
            burst_packets_distinct_epic_z()
        } else if distinct {
            burst_packets_distinct(epic_hp)
        } else {
            burst_packets(epic_hp)
        });
        let (mut s, mut b) = (transit(), burst(&pkts));
        // Every packet of the workload is forwarded (checked once, natively).
        restore(&mut b, &pkts);
        s.process(&mut b, Now::from_unix_ns(NOW));
        assert!(b.metas().iter().all(|m| m.class().is_some()), "{name}: all forwarded");
        let t = cpu_ns();
        f(&mut s, &mut b, &pkts);
        let spent = cpu_ns() - t;
        let t = cpu_ns();
        run_restore(&mut b, &pkts);
        let restoring = cpu_ns() - t;
        println!(
            "{name}: {:.1} ns/packet (CPU, restoring the packets excluded)",
            spent.saturating_sub(restoring) as f64 / N as f64
        );
    }
}
