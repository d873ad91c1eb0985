//! Load-independent cost of parsing each packet kind under callgrind.
//!
//! ```text
//! cargo build --release -p benches --example parse_profile
//! valgrind --tool=callgrind --toggle-collect='*::run_parse' \
//!     target/release/examples/parse_profile sibra
//! ```
//!
//! The argument picks the packet kind: `fair` (Ethernet → IPv6 → FAIR
//! extension header), `flowpolice` (Ethernet → IPv4 → FlowPolice shim, IPv4
//! checksum verified as the stage's default does), `scion` (standard path,
//! one segment of 3 hops), `epic_hp` (the same path as EPIC-HP), `epicz`
//! (Z-Lane EPIC-Z, 5 hops), `sibra` (an ephemeral SIBRA reservation over 3
//! ASes); SCION kinds travel over Ethernet → IPv6 → UDP 30041.
//!
//! `run_parse` runs the router's `parse` stage over [`N`] bursts of 32
//! frames (32 hosts, so the frames differ); the stage leaves every packet
//! live, so the same burst is parsed again without being rebuilt.
//! `run_view` does the same and then, for SCION kinds, opens the SCION
//! header and path with `packet::scion::parse` at the offset the stage
//! found (what every SCION stage reads first). Per packet = inclusive
//! instructions / (N · 32). Natively it prints CPU ns per packet.

use std::hint::black_box;

use pipeline::{Batch, Now, Parse, ParseConfig, Proto, Stage, BURST};

#[path = "support/frames.rs"]
mod frames;

use frames::{epic_hp_frame, epicz_frame, fair_frame, flowpolice_frame, scion_frame, sibra_frame};

/// Bursts per measured function.
const N: u64 = 10_000;

fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The router's parse stage over `n` bursts.
#[inline(never)]
fn run_parse(p: &mut Parse, b: &mut Batch<Vec<u8>>, n: u64) {
    for _ in 0..n {
        p.process(black_box(&mut *b), Now::from_unix_ns(0));
    }
}

/// The parse stage, then the SCION header and path opened where it found them.
#[inline(never)]
fn run_view(p: &mut Parse, b: &mut Batch<Vec<u8>>, n: u64) -> u64 {
    let mut acc = 0u64;
    for _ in 0..n {
        p.process(black_box(&mut *b), Now::from_unix_ns(0));
        for i in 0..BURST {
            let m = b.meta(i);
            if m.proto == Proto::Scion {
                let scion = &b.data(i)[usize::from(m.proto_off)..];
                if let Ok(v) = packet::scion::parse(scion) {
                    acc = acc.wrapping_add(v.header.payload_len() as u64);
                }
            }
        }
    }
    acc
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map(String::as_str).unwrap_or("scion");
    let view = args.get(2).is_some_and(|a| a == "view");
    let frame: fn(u8) -> Vec<u8> = match kind {
        "fair" => fair_frame,
        "flowpolice" => flowpolice_frame,
        "scion" => scion_frame,
        "epic_hp" => epic_hp_frame,
        "epicz" => epicz_frame,
        "sibra" => sibra_frame,
        k => {
            eprintln!(
                "parse_profile: unknown kind {k} (fair, flowpolice, scion, epic_hp, epicz, sibra)"
            );
            std::process::exit(2);
        }
    };
    let mut b = Batch::new();
    for i in 0..BURST as u8 {
        b.push(frame(i), 0).expect("32 fit");
    }
    let mut p = Parse::new(ParseConfig::default());
    // Every frame is recognised as its protocol (checked before measuring).
    p.process(&mut b, Now::from_unix_ns(0));
    let want = match kind {
        "fair" => Proto::Fair,
        "flowpolice" => Proto::FlowPolice,
        _ => Proto::Scion,
    };
    assert_eq!(b.live_mask(), u32::MAX, "{kind}: every frame parses");
    assert!((0..BURST).all(|i| b.meta(i).proto == want), "{kind}: recognised as {want:?}");
    if want == Proto::Scion {
        let m = b.meta(0);
        packet::scion::parse(&b.data(0)[usize::from(m.proto_off)..]).expect("SCION view");
    }
    let t = cpu_ns();
    if view {
        black_box(run_view(&mut p, &mut b, N));
    } else {
        run_parse(&mut p, &mut b, N);
    }
    let ns = (cpu_ns() - t) as f64 / (N * BURST as u64) as f64;
    println!("{kind}{}: {ns:.1} ns/packet (CPU)", if view { " + SCION view" } else { "" });
}
