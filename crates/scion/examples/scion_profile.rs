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
//!   so with the PHVF check), [`N`] / 32 bursts; `run_restore` is the part
//!   of those loops that only rewrites the packets between bursts, to be
//!   subtracted. The AES share is the inclusive count of
//!   `ForwardingKey::full_mac_batch` (and, for EPIC-HP, `epic::hvf`).
//!
//! An argument keeps only the functions whose name contains it. When run
//! natively it also prints CPU nanoseconds per packet.

use std::hint::black_box;

use mac::Key;
use packet::scion::{AddrHdrRepr, PathRepr, RawHostAddr, ScionRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Meta, Now, Stage, BURST};
use scion::build::{self, HopSpec};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};

#[path = "../benches/support/decode.rs"]
mod support;

use support::{alloc_decode, fixed64, hop_checksum, packet_15_hops};

/// Packets per measured function.
const N: u64 = 100_000;
/// When the forwarded packets' info fields were stamped (Unix s).
const T0: u32 = 1_700_000_000;
/// When they are forwarded (Unix ns).
const NOW: u64 = (T0 as u64 + 60) * 1_000_000_000;

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

/// The transit AS (key 2) of a one-segment path over ASes 1, 2, 3, 4;
/// interface 21 on port 0, 23 on port 1.
fn transit() -> ScionForward {
    let key = ForwardingKey::new(&Key::from([2; 16]));
    let ifaces = InterfaceTable::new().with(21, 0).with(23, 1);
    ScionForward::new(Forwarder::new(key, ifaces, ForwardConfig::default()))
}

/// 32 packets of host `i` over the path of [`transit`], as they arrive at
/// AS 2 (CurrHF 1 of 3 hops for SCION; of 3 for EPIC-HP too, so AS 2 is the
/// penultimate hop and checks the PHVF).
fn burst_packets(epic_hp: bool) -> Vec<Vec<u8>> {
    let hs = |k: u8, i, e| HopSpec {
        key: ForwardingKey::new(&Key::from([k; 16])),
        cons_ingress: i,
        cons_egress: e,
        exp_time: 255,
    };
    let (info, hops, auth) = build::segment_with_authenticators(
        true,
        0x1234,
        T0,
        &[hs(1, 0, 12), hs(2, 21, 23), hs(3, 32, 0)],
    );
    let mut path = build::path(&[(info, hops)]).expect("path");
    path.curr_hf = 1;
    path.info_fields[0].seg_id = scion::chain_seg_id(0x1234, &path.hops()[0].mac);
    (0..BURST as u8)
        .map(|i| {
            let hdr = AddrHdrRepr {
                qos: 0,
                flow_id: 1,
                next_hdr: 17,
                payload_len: 0,
                dst_ia: Ia::new(1, 3),
                src_ia: Ia::new(1, 1),
                dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 3])),
                src_host: RawHostAddr::from(HostAddr::V4([10, 0, 1, i])),
            };
            if epic_hp {
                build::epic_hp_packet(&hdr, &path, &auth[1], &auth[2], NOW, 0, 1, &[0; 64])
                    .expect("EPIC-HP packet")
            } else {
                let r = ScionRepr {
                    hdr: AddrHdrRepr { payload_len: 64, ..hdr },
                    path: PathRepr::Scion(path.repr()),
                };
                let mut b = vec![0; r.buffer_len() + 64];
                r.emit(&mut b).expect("SCION packet");
                b
            }
        })
        .collect()
}

/// A burst of `pkts`, all arrived on port 0.
fn burst(pkts: &[Vec<u8>]) -> Batch<Vec<u8>> {
    let mut b = Batch::new();
    for p in pkts {
        b.push(p.clone(), 0).expect("32 fit");
    }
    b
}

/// Puts the packets of `pkts` back into `b` as they arrived.
#[inline(always)]
fn restore(b: &mut Batch<Vec<u8>>, pkts: &[Vec<u8>]) {
    for (i, p) in pkts.iter().enumerate() {
        b.buf_mut(i).copy_from_slice(p);
    }
    for m in b.metas_mut() {
        *m = Meta::new(0);
    }
}

#[inline(never)]
fn run_restore(b: &mut Batch<Vec<u8>>, pkts: &[Vec<u8>]) {
    for _ in 0..N / BURST as u64 {
        restore(b, pkts);
        black_box(&mut *b);
    }
}

#[inline(always)]
fn forward_bursts(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &[Vec<u8>]) {
    for _ in 0..N / BURST as u64 {
        restore(b, pkts);
        s.process(black_box(&mut *b), Now::from_unix_ns(NOW));
    }
}

#[inline(never)]
fn run_forward_scion(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &[Vec<u8>]) {
    forward_bursts(s, b, pkts)
}

#[inline(never)]
fn run_forward_epic_hp(s: &mut ScionForward, b: &mut Batch<Vec<u8>>, pkts: &[Vec<u8>]) {
    forward_bursts(s, b, pkts)
}

/// One measured function.
type Run = fn(&[u8]);
/// One measured forwarding function.
type ForwardRun = fn(&mut ScionForward, &mut Batch<Vec<u8>>, &[Vec<u8>]);

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
    let forwards: [(&str, bool, ForwardRun); 2] = [
        ("forward_scion", false, run_forward_scion),
        ("forward_epic_hp", true, run_forward_epic_hp),
    ];
    for (name, epic_hp, f) in forwards {
        if !name.contains(filter.as_str()) {
            continue;
        }
        let pkts = burst_packets(epic_hp);
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
