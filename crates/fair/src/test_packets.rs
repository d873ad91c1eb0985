//! Test fixtures shared by the stage tests: bare-IP UDP packets carrying a
//! FAIR header.

use pipeline::L3;

/// A bare-IP UDP packet (IPv6, optionally behind an empty Hop-by-Hop
/// header, or IPv4) from source byte `src` (`2001:d<src>::` /
/// `10.<src>.0.1`, destination `3000::` / `11.0.0.0`) with a FAIR header
/// of `n` slots stamped `ts` / `seqno`. Returns the packet and the FAIR
/// header's offset.
pub(crate) fn fair_udp(
    v6: bool,
    hbh: bool,
    src: u8,
    n: usize,
    ts: u16,
    seqno: u32,
) -> (Vec<u8>, usize) {
    let mut p = if v6 {
        let mut p = vec![0u8; 48];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&8u16.to_be_bytes());
        p[6] = 17;
        p[8..12].copy_from_slice(&[0x20, 0x01, 0x0d, src]);
        p[24] = 0x30;
        if hbh {
            p[6] = 0;
            p[40] = 17;
        }
        p
    } else {
        let mut p = vec![0u8; 28];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&28u16.to_be_bytes());
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, src, 0, 1]);
        p[16] = 11;
        p
    };
    let l3 = if v6 { L3::Ipv6 } else { L3::Ipv4 };
    let o = crate::wire::insert(&mut p, 0, l3, n, 253).expect("room for the header").fair_off();
    p[o + 2..o + 4].copy_from_slice(&ts.to_be_bytes());
    p[o + 4..o + 7].copy_from_slice(&seqno.to_be_bytes()[1..]);
    (p, o)
}
