//! Load-independent cost of the parse stage on the packets of one SCION
//! link under callgrind: bursts of 32 SCION frames over UDP/IPv4 (or IPv6)
//! that share their underlay headers and differ in UDP source port and
//! SCION flow ID, as a border router receives them from a neighbour.
//!
//! ```text
//! cargo build --release -p pipeline --example parse_link
//! valgrind --tool=callgrind --toggle-collect='*::run_parse' \
//!     target/release/examples/parse_link ipv4
//! ```
//!
//! Per packet = inclusive instructions of `run_parse` / (N · 32).

use std::hint::black_box;

use pipeline::{Batch, Now, Parse, ParseConfig, Proto, Stage, BURST};

/// Bursts per run.
const N: u64 = 10_000;

/// SCION frame `i` of the link: Ethernet, IPv4 or IPv6, UDP 30041, a
/// SCION common and address header (4-byte hosts) and a 3-hop path.
fn frame(i: u8, v6: bool) -> Vec<u8> {
    let payload = 64usize;
    let hdr_len = 36 + 4 + 8 + 3 * 12;
    let mut scion = vec![0u8; hdr_len + payload];
    scion[1] = i;
    scion[3] = i;
    scion[4] = 17;
    scion[5] = (hdr_len / 4) as u8;
    scion[6..8].copy_from_slice(&(payload as u16).to_be_bytes());
    scion[8] = 1;
    let mut udp = vec![0u8; 8];
    udp[0..2].copy_from_slice(&(30042 + u16::from(i)).to_be_bytes());
    udp[2..4].copy_from_slice(&30041u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + scion.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&scion);
    let mut f = vec![0u8; 14];
    if v6 {
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(udp.len() as u16).to_be_bytes());
        ip[6] = 17;
        ip[7] = 64;
        ip[8] = 0xfd;
        ip[23] = 1;
        ip[24] = 0xfd;
        ip[39] = 2;
        f.extend_from_slice(&ip);
    } else {
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
        ip[16..20].copy_from_slice(&[192, 0, 2, 2]);
        let c = packet::checksum::checksum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&udp);
    f
}

/// The parse stage over `n` bursts.
#[inline(never)]
fn run_parse(p: &mut Parse, b: &mut Batch<Vec<u8>>, n: u64) {
    for _ in 0..n {
        p.process(black_box(&mut *b), Now::from_unix_ns(0));
    }
}

fn main() {
    let v6 = std::env::args().nth(1).is_some_and(|a| a == "ipv6");
    let mut b = Batch::new();
    for i in 0..BURST as u8 {
        b.push(frame(i, v6), 0).expect("32 fit");
    }
    let mut p = Parse::new(ParseConfig::default());
    p.process(&mut b, Now::from_unix_ns(0));
    assert_eq!(b.live_mask(), u32::MAX, "every frame parses");
    assert!((0..BURST).all(|i| b.meta(i).proto == Proto::Scion), "SCION");
    run_parse(&mut p, &mut b, N);
}
