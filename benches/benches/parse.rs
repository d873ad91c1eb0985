//! Per-packet header parsing: the cost of getting from a raw frame to every
//! field a FAIR or FlowPolice stage reads.
//!
//! * `fair_ipv6_5_marks`: Ethernet → IPv6 → FAIR extension header (16 B, 7
//!   slots, 5 of them written, `ptr = 5`) and every FAIR field plus the 5
//!   written slots.
//! * `flowpolice_ipv4`: Ethernet → IPv4 → FlowPolice regular shim (28 B) and
//!   every shim field (header checksum left to the NIC, as on the fast path).
//! * `flowpolice_ipv4_csum`: the same plus IPv4 header checksum verification.
//!
//! Each iteration parses a burst of 32 distinct frames (so the branch
//! predictor cannot learn a single packet); throughput is per packet.

use std::hint::black_box;

use criterion::{criterion_group, Criterion, Throughput};
use packet::ethernet::{ethertype, Ethernet};
use packet::fair::{locate_ipv6, Slot, FAIR_NEXT_HEADER};
use packet::flowpolice::{FlowPolice, PacketType};
use packet::ipv4::{protocol, Ipv4};
use packet::ipv6::Ipv6;

const BURST: usize = 32;

fn hx(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).expect("hex")
}

fn fair_frame(i: usize) -> Vec<u8> {
    let mut f = hx("020000000001 020000000002 86dd");
    // IPv6: payload = 16 (FAIR) + 8 (UDP) + 4.
    f.extend_from_slice(&hx("6000000000 1c fd 40"));
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, i as u8]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    // FAIR: nh UDP, hdr_len 1, ts, seqno i, icv, next_as 5, slots.
    f.extend_from_slice(&[0x11, 0x01, 0xbe, 0xef, 0, 0, i as u8, 0x5d, 0x05]);
    f.extend_from_slice(&[0xa3, 0x17, 0x2c, 0x41, 0x9f, 0x00, 0x00]);
    f.extend_from_slice(&hx("04d2162e000cabcd 46414952"));
    f
}

fn fp_frame(i: usize) -> Vec<u8> {
    let mut f = hx("020000000001 020000000002 0800");
    let mut ip = hx("45000038 12344000 40fe0000 c0000201 c6336407");
    ip[15] = i as u8;
    let c = packet::checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    // Privileged shim: proto UDP, type 11, hdr_len 28, P_id i, flow_id, ts, mac.
    f.extend_from_slice(&[0x11, 0xc0, 0x00, 0x1c, 0x00, i as u8]);
    f.extend_from_slice(&[0, 0, 0, 0, 0xc0, 0, 2, i as u8, 0x12, 0x34, 0x56, 0x78]);
    f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 0, 0]);
    f.extend_from_slice(&hx("04d2162e00080000"));
    f
}

/// Parses one FAIR frame and folds every field into a value.
#[inline(always)]
fn parse_fair(frame: &[u8]) -> u64 {
    let Ok(eth) = Ethernet::new_checked(frame) else { return 0 };
    if eth.ethertype() != ethertype::IPV6 {
        return 0;
    }
    // `locate_ipv6` applies every IPv6 length rule FAIR needs (fixed header
    // present, version 6, 40 + Payload Length within the buffer), so the
    // IPv6 view need not check them a second time.
    let pkt = eth.payload();
    let Ok(Some(loc)) = locate_ipv6(pkt, FAIR_NEXT_HEADER) else { return 0 };
    let ip = Ipv6::new_unchecked(pkt);
    let f = loc.view(pkt);
    let mut acc = ip.payload_len() as u64
        ^ (f.next_header() as u64)
        ^ ((f.timestamp() as u64) << 8)
        ^ ((f.seqno() as u64) << 24)
        ^ ((f.icv() as u64) << 48)
        ^ ((f.sb() as u64) << 56)
        ^ ((f.ptr() as u64) << 57);
    // `check_len` guarantees ptr <= N, so this slice is in bounds.
    for &b in &f.slots()[..f.ptr() as usize] {
        let s = Slot(b);
        acc = acc.rotate_left(5) ^ (((s.nonce() as u64) << 4) | s.mac4() as u64);
    }
    acc
}

/// Parses one FlowPolice frame and folds every shim field into a value.
#[inline(always)]
fn parse_fp(frame: &[u8], verify_csum: bool) -> u64 {
    let Ok(eth) = Ethernet::new_checked(frame) else { return 0 };
    if eth.ethertype() != ethertype::IPV4 {
        return 0;
    }
    let Ok(ip) = Ipv4::new_checked(eth.payload()) else { return 0 };
    if verify_csum && !ip.verify_checksum() {
        return 0;
    }
    if ip.protocol() != protocol::FLOWPOLICE {
        return 0;
    }
    let Ok(s) = FlowPolice::new_checked(ip.payload()) else { return 0 };
    let t = match s.packet_type() {
        Some(PacketType::Request) => 1,
        Some(PacketType::BestEffort) => 2,
        Some(PacketType::Privileged) => 3,
        None => 0,
    };
    let mac = u64::from_be_bytes(s.mac());
    (s.next_header() as u64)
        ^ (t << 8)
        ^ ((s.p_id() as u64) << 16)
        ^ s.flow_id().rotate_left(32)
        ^ ((s.ts() as u64) << 20)
        ^ mac
        ^ u32::from(ip.src_addr()) as u64
}

fn bench(c: &mut Criterion) {
    let fair: Vec<Vec<u8>> = (0..BURST).map(fair_frame).collect();
    let fp: Vec<Vec<u8>> = (0..BURST).map(fp_frame).collect();
    // Sanity: every frame parses to something.
    assert!(fair.iter().all(|f| parse_fair(f) != 0));
    assert!(fp.iter().all(|f| parse_fp(f, true) != 0));

    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function("fair_ipv6_5_marks", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for f in black_box(&fair) {
                acc ^= parse_fair(f);
            }
            black_box(acc)
        })
    });
    g.bench_function("flowpolice_ipv4", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for f in black_box(&fp) {
                acc ^= parse_fp(f, false);
            }
            black_box(acc)
        })
    });
    g.bench_function("flowpolice_ipv4_csum", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for f in black_box(&fp) {
                acc ^= parse_fp(f, true);
            }
            black_box(acc)
        })
    });
    g.finish();
}

/// Thread CPU time (user + system) in nanoseconds, from
/// `/proc/thread-self/stat` (10 ms ticks; runs are long enough that this is
/// below 1 % of the total). `None` off Linux.
fn thread_cpu_ns() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let rest = s.get(s.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 * 1e7)
}

/// CPU time per packet, which (unlike criterion's wall clock) does not grow
/// when other processes share the core. Enabled with `PARSE_CPU_TIME=1`.
fn cpu_time_report() {
    let fair: Vec<Vec<u8>> = (0..BURST).map(fair_frame).collect();
    let fp: Vec<Vec<u8>> = (0..BURST).map(fp_frame).collect();
    let rounds = 4_000_000u64;
    let run = |name: &str, frames: &[Vec<u8>], f: &dyn Fn(&[u8]) -> u64| {
        let (Some(t0), w0) = (thread_cpu_ns(), std::time::Instant::now()) else {
            println!("cpu-time {name}: unavailable");
            return;
        };
        let mut acc = 0u64;
        for _ in 0..rounds {
            for fr in black_box(frames) {
                acc ^= f(fr);
            }
        }
        black_box(acc);
        let wall = w0.elapsed().as_nanos() as f64;
        let cpu = thread_cpu_ns().unwrap_or(t0) - t0;
        let n = (rounds * frames.len() as u64) as f64;
        println!(
            "cpu-time parse/{name}: {:.2} ns/packet cpu, {:.2} ns/packet wall",
            cpu / n,
            wall / n
        );
    };
    run("fair_ipv6_5_marks", &fair, &|f| parse_fair(f));
    run("flowpolice_ipv4", &fp, &|f| parse_fp(f, false));
    run("flowpolice_ipv4_csum", &fp, &|f| parse_fp(f, true));
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if std::env::var_os("PARSE_CPU_TIME").is_some() {
        cpu_time_report();
    }
}
