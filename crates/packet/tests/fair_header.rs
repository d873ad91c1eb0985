//! FAIR header: the fair.md §2.8 worked examples byte for byte, every §2.9
//! validation rule, the U-W1..U-W6 unit tests of §9.1 that concern the wire
//! format, round trips, truncation and random input.

use packet::fair::{
    locate_ipv4, locate_ipv6, Carrier, Fair, FairRepr, FairSlots, Slot, FAIR_NEXT_HEADER,
};
use packet::ipv4::{Ipv4, Ipv4Options, Ipv4Repr};
use packet::ipv6::{Ipv6, Ipv6Repr};
use packet::ipv6_ext::ExtConfig;
use packet::Error;
use proptest::prelude::*;

mod common;
use common::h;

fn is_malformed<T: core::fmt::Debug>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::Malformed { .. }))
}

// §2.8, IPv6, one cooperating transit AS.
const V6_ORIG: &str = "60 00 00 00 00 0c 11 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 04 d2 16 2e 00 0c ab cd
46 41 49 52";
const V6_SEND: &str = "60 00 00 00 00 1c fd 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 11 01 be ef 00 00 01 5d
00 00 00 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52";
const V6_FWD: &str = "60 00 00 00 00 1c fd 40 20 01 0d b8 00 00 00 00 00 00 00 00 00 00 00 01
20 01 0d b9 00 00 00 00 00 00 00 00 00 00 00 02 11 01 be ef 00 00 01 5d
01 a3 00 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52";

// §2.8, IPv4, four cooperating transit ASes.
const V4_ORIG: &str = "45 00 00 20 12 34 40 00 40 11 3c 5d c0 00 02 01 c6 33 64 07 04 d2 16 2e
00 0c ab cd 46 41 49 52";
const V4_SEND: &str = "45 00 00 2d 12 34 40 00 40 fd 3b 64 c0 00 02 01 c6 33 64 07 11 0d 00 01
ff ff ff c0 00 00 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52";
const V4_FWD: &str = "45 00 00 2d 12 34 40 00 40 fd 3b 64 c0 00 02 01 c6 33 64 07 11 0d 00 01
ff ff ff c0 01 5d 00 00 00 04 d2 16 2e 00 0c ab cd 46 41 49 52";

#[test]
fn v6_send_fields() {
    let b = h(V6_SEND);
    assert_eq!(b.len(), 68);
    let loc = locate_ipv6(&b, FAIR_NEXT_HEADER).unwrap().unwrap();
    assert_eq!((loc.offset, loc.len, loc.nh_offset, loc.carrier), (40, 16, 6, Carrier::Ipv6));
    let f = loc.view(&b);
    assert_eq!(f.next_header(), 0x11);
    assert_eq!(f.hdr_len(), 1);
    assert_eq!(f.header_len(), 16);
    assert_eq!(f.n_slots(), 7);
    assert_eq!(f.timestamp(), 0xbeef);
    assert_eq!(f.seqno(), 1);
    assert_eq!(f.icv(), 0x5d);
    assert_eq!(f.next_as(), 0);
    assert!(!f.sb());
    assert_eq!(f.ptr(), 0);
    for i in 0..7 {
        assert_eq!(f.slot(i), Some(Slot(0)));
    }
    assert_eq!(f.slot(7), None);
    assert_eq!(f.body(), &h("be ef 00 00 01 5d 00 00 00 00 00 00 00 00")[..]);
    // The generic walker agrees.
    let c = Ipv6::new_checked(&b[..]).unwrap().walk_ext(&ExtConfig::DEFAULT).unwrap();
    assert_eq!((c.fair, c.upper_protocol, c.upper_offset), (Some((40, 16)), 17, 56));
    // The original is not a FAIR packet.
    assert_eq!(locate_ipv6(&h(V6_ORIG), FAIR_NEXT_HEADER), Ok(None));
}

#[test]
fn v6_send_emitted_byte_for_byte() {
    let orig = h(V6_ORIG);
    let ip = Ipv6Repr::parse(&Ipv6::new_checked(&orig[..]).unwrap()).unwrap();
    let fair = FairRepr {
        carrier: Carrier::Ipv6,
        next_header: ip.next_header,
        timestamp: 0xbeef,
        seqno: 1,
        icv: 0x5d,
        sb: false,
        ptr: 0,
        slots: FairSlots::zeroed(7),
    };
    assert_eq!(fair.buffer_len(), 16);
    let out_ip = Ipv6Repr { next_header: 253, payload_len: ip.payload_len + 16, ..ip };
    let mut out = vec![0u8; 68];
    out_ip.emit(&mut Ipv6::new_unchecked(&mut out[..])).unwrap();
    fair.emit(&mut Fair::new_unchecked(&mut out[40..56], Carrier::Ipv6)).unwrap();
    out[56..].copy_from_slice(&orig[40..]);
    assert_eq!(out, h(V6_SEND));
    // And parses back to the same representation.
    let loc = locate_ipv6(&out, 253).unwrap().unwrap();
    assert_eq!(FairRepr::parse(&loc.view(&out)).unwrap(), fair);
}

#[test]
fn v6_forward_byte_for_byte() {
    let mut b = h(V6_SEND);
    let loc = locate_ipv6(&b, FAIR_NEXT_HEADER).unwrap().unwrap();
    let mut f = loc.view_mut(&mut b);
    assert_eq!(f.push_mark(Slot::new(0xa, 0x3)), Ok(0));
    assert_eq!(f.ptr(), 1);
    assert_eq!(b, h(V6_FWD));
    let diff = b.iter().zip(h(V6_SEND)).filter(|(a, b)| **a != *b).count();
    assert_eq!(diff, 2);
}

#[test]
fn v4_send_fields() {
    let b = h(V4_SEND);
    assert_eq!(b.len(), 45);
    let ip = Ipv4::new_checked(&b[..]).unwrap();
    assert!(ip.verify_checksum());
    assert_eq!(ip.checksum(), 0x3b64);
    let loc = locate_ipv4(&b, FAIR_NEXT_HEADER).unwrap().unwrap();
    assert_eq!((loc.offset, loc.len, loc.nh_offset, loc.carrier), (20, 13, 9, Carrier::Ipv4));
    let f = loc.view(&b);
    assert_eq!(f.next_header(), 0x11);
    assert_eq!(f.hdr_len(), 13);
    assert_eq!(f.n_slots(), 4);
    assert_eq!(f.timestamp(), 1);
    assert_eq!(f.seqno(), 0xff_ffff);
    assert_eq!(f.icv(), 0xc0);
    assert_eq!((f.sb(), f.ptr()), (false, 0));
    assert_eq!(f.slots(), &[0, 0, 0, 0]);
    // The located view spans the header only; a view from the shim start sees the payload.
    assert!(f.payload().is_empty());
    let g = Fair::new_checked(&b[20..], Carrier::Ipv4).unwrap();
    assert_eq!(g.payload(), &h("04 d2 16 2e 00 0c ab cd 46 41 49 52")[..]);
    assert_eq!(locate_ipv4(&h(V4_ORIG), FAIR_NEXT_HEADER), Ok(None));
}

#[test]
fn v4_send_emitted_byte_for_byte() {
    let orig = h(V4_ORIG);
    let ip = Ipv4Repr::parse(&Ipv4::new_checked(&orig[..]).unwrap()).unwrap();
    let fair = FairRepr {
        carrier: Carrier::Ipv4,
        next_header: ip.protocol,
        timestamp: 1,
        seqno: 0xff_ffff,
        icv: 0xc0,
        sb: false,
        ptr: 0,
        slots: FairSlots::zeroed(4),
    };
    assert_eq!(fair.buffer_len(), 13);
    let out_ip = Ipv4Repr { protocol: 253, payload_len: ip.payload_len + 13, ..ip };
    let mut out = vec![0u8; 45];
    out_ip.emit(&mut Ipv4::new_unchecked(&mut out[..])).unwrap();
    fair.emit(&mut Fair::new_unchecked(&mut out[20..33], Carrier::Ipv4)).unwrap();
    out[33..].copy_from_slice(&orig[20..]);
    assert_eq!(out, h(V4_SEND));
}

#[test]
fn v4_forward_byte_for_byte() {
    let mut b = h(V4_SEND);
    let loc = locate_ipv4(&b, FAIR_NEXT_HEADER).unwrap().unwrap();
    assert_eq!(loc.view_mut(&mut b).push_mark(Slot::new(0x5, 0xd)), Ok(0));
    assert_eq!(b, h(V4_FWD));
    // Marking does not touch the IPv4 header: its checksum stays valid.
    assert!(Ipv4::new_checked(&b[..]).unwrap().verify_checksum());
    let f = locate_ipv4(&b, 253).unwrap().unwrap().view(&b);
    assert_eq!((f.ptr(), f.slot(0)), (1, Some(Slot(0x5d))));
    assert_eq!((f.slot(0).unwrap().nonce(), f.slot(0).unwrap().mac4()), (5, 0xd));
}

// ------------------------------------------------------------ §2.9 rules

#[test]
fn rule_truncated_header_alone() {
    let v6 = h(V6_SEND);
    let eh = &v6[40..56];
    for n in 0..eh.len() {
        assert_eq!(Fair::new_checked(&eh[..n], Carrier::Ipv6).unwrap_err(), Error::Truncated);
    }
    let v4 = h(V4_SEND);
    let shim = &v4[20..33];
    for n in 0..shim.len() {
        assert_eq!(Fair::new_checked(&shim[..n], Carrier::Ipv4).unwrap_err(), Error::Truncated);
    }
}

#[test]
fn rule_truncated_packets_at_every_offset() {
    for (pkt, v6) in
        [(h(V6_SEND), true), (h(V6_FWD), true), (h(V4_SEND), false), (h(V4_FWD), false)]
    {
        for n in 0..pkt.len() {
            let r = if v6 { locate_ipv6(&pkt[..n], 253) } else { locate_ipv4(&pkt[..n], 253) };
            assert!(r.is_err(), "len {n}: {r:?}");
        }
    }
}

#[test]
fn rule_bad_length_ipv6_hdr_len() {
    for bad in [0u8, 17, 0xff] {
        let mut b = h(V6_SEND);
        b[41] = bad;
        assert!(is_malformed(locate_ipv6(&b, 253)), "hdr_len {bad}");
        assert!(is_malformed(Fair::new_checked(&b[40..], Carrier::Ipv6)));
    }
    // hdr_len 16 is the largest valid one (136 bytes, 127 slots).
    let r = FairRepr {
        carrier: Carrier::Ipv6,
        next_header: 17,
        timestamp: 0,
        seqno: 0,
        icv: 0,
        sb: false,
        ptr: 127,
        slots: FairSlots::zeroed(127),
    };
    let mut buf = [0u8; 136];
    r.emit(&mut Fair::new_unchecked(&mut buf[..], Carrier::Ipv6)).unwrap();
    assert_eq!(buf[1], 16);
    assert!(Fair::new_checked(&buf[..], Carrier::Ipv6).is_ok());
}

#[test]
fn rule_bad_length_ipv4_hdr_len() {
    for bad in [0u8, 8, 137, 0xff] {
        let mut b = h(V4_SEND);
        b[21] = bad;
        assert!(is_malformed(locate_ipv4(&b, 253)), "hdr_len {bad}");
        assert!(is_malformed(Fair::new_checked(&b[20..], Carrier::Ipv4)));
    }
    // hdr_len 9: no slots, still a valid header (ptr must be 0).
    let shim = h("11 09 00 01 00 00 05 c0 00");
    let f = Fair::new_checked(&shim[..], Carrier::Ipv4).unwrap();
    assert_eq!((f.n_slots(), f.slot(0)), (0, None));
}

#[test]
fn rule_bad_length_ip_lengths() {
    // IPv4 IHL < 5.
    let mut b = h(V4_SEND);
    b[0] = 0x44;
    assert!(is_malformed(locate_ipv4(&b, 253)));
    // Total Length beyond the buffer.
    let mut b = h(V4_SEND);
    b[3] = 46;
    assert!(is_malformed(locate_ipv4(&b, 253)));
    // Total Length smaller than header + shim (shim needs 13, 12 available).
    let mut b = h(V4_SEND);
    b[3] = 32;
    assert!(is_malformed(locate_ipv4(&b, 253)));
    // 40 + Payload Length beyond the buffer.
    let mut b = h(V6_SEND);
    b[5] = 0x1d;
    assert!(is_malformed(locate_ipv6(&b, 253)));
    // 40 + Payload Length smaller than header + FAIR.
    let mut b = h(V6_SEND);
    b[5] = 0x0f;
    assert!(is_malformed(locate_ipv6(&b, 253)));
    // Wrong versions.
    let mut b = h(V6_SEND);
    b[0] = 0x40;
    assert!(is_malformed(locate_ipv6(&b, 253)));
    let mut b = h(V4_SEND);
    b[0] = 0x65;
    assert!(is_malformed(locate_ipv4(&b, 253)));
}

#[test]
fn rule_pointer_out_of_range() {
    // IPv6: N = 7; ptr 7 valid, 8 malformed; SB does not count.
    let mut b = h(V6_SEND);
    b[48] = 7;
    assert!(locate_ipv6(&b, 253).unwrap().is_some());
    b[48] = 0x87;
    assert!(locate_ipv6(&b, 253).unwrap().is_some());
    b[48] = 8;
    assert!(is_malformed(locate_ipv6(&b, 253)));
    b[48] = 0x88;
    assert!(is_malformed(locate_ipv6(&b, 253)));
    // IPv4: N = 4.
    let mut b = h(V4_SEND);
    b[28] = 4;
    assert!(locate_ipv4(&b, 253).unwrap().is_some());
    b[28] = 5;
    assert!(is_malformed(locate_ipv4(&b, 253)));
    // Emit refuses ptr > N too.
    let r = FairRepr {
        carrier: Carrier::Ipv4,
        next_header: 6,
        timestamp: 0,
        seqno: 0,
        icv: 0,
        sb: false,
        ptr: 5,
        slots: FairSlots::zeroed(4),
    };
    let mut out = [0u8; 13];
    assert!(is_malformed(r.emit(&mut Fair::new_unchecked(&mut out[..], Carrier::Ipv4))));
}

#[test]
fn rule_not_fair_and_placement() {
    // IPv4 protocol other than FAIR_PROTO; configurable value.
    assert_eq!(locate_ipv4(&h(V4_SEND), 254), Ok(None));
    assert_eq!(locate_ipv6(&h(V6_SEND), 254), Ok(None));
    // U-W4: HBH before FAIR is found ...
    let send = h(V6_SEND);
    let mut b = send[..40].to_vec();
    b[6] = 0; // HBH
    b.extend_from_slice(&h("fd 00 05 02 00 00 01 00"));
    b.extend_from_slice(&send[40..]);
    b[5] += 8;
    let loc = locate_ipv6(&b, 253).unwrap().unwrap();
    assert_eq!((loc.offset, loc.len, loc.nh_offset), (48, 16, 40));
    // ... and FAIR after Destination Options is not.
    b[6] = 60;
    assert_eq!(locate_ipv6(&b, 253), Ok(None));
    // HBH longer than the payload.
    let mut t = b.clone();
    t[6] = 0;
    t[41] = 0x20;
    assert!(is_malformed(locate_ipv6(&t, 253)));
}

#[test]
fn rule_fragment_with_shim_parsed_normally() {
    let mut b = h(V4_SEND);
    b[6] = 0x20; // MF, offset 0x00b9 (in 8-byte units)
    b[7] = 0xb9;
    let ip = Ipv4::new_checked(&b[..]).unwrap();
    assert!(ip.is_fragment());
    let loc = locate_ipv4(&b, 253).unwrap().unwrap();
    assert_eq!(loc.view(&b).seqno(), 0xff_ffff);
}

// ------------------------------------------------------------ U-W1..U-W6

#[test]
fn uw1_ipv6_round_trip_every_hdr_len() {
    for hdr_len in 1u8..=16 {
        let n = 8 * (hdr_len as usize + 1) - 9;
        let mut slots = FairSlots::zeroed(n);
        for i in 0..n {
            slots.set(i, Slot(i as u8 ^ 0x5a)).unwrap();
        }
        let r = FairRepr {
            carrier: Carrier::Ipv6,
            next_header: 17,
            timestamp: 0x1234,
            seqno: 0xabcdef,
            icv: 0x77,
            sb: hdr_len % 2 == 0,
            ptr: (n / 2) as u8,
            slots,
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut Fair::new_unchecked(&mut buf[..], Carrier::Ipv6)).unwrap();
        assert_eq!(buf[1], hdr_len);
        let f = Fair::new_checked(&buf[..], Carrier::Ipv6).unwrap();
        assert_eq!(f.n_slots(), n);
        assert_eq!(FairRepr::parse(&f).unwrap(), r);
    }
    // Slot counts that are not 8k-9 cannot be carried over IPv6.
    let r = FairRepr {
        carrier: Carrier::Ipv6,
        next_header: 17,
        timestamp: 0,
        seqno: 0,
        icv: 0,
        sb: false,
        ptr: 0,
        slots: FairSlots::zeroed(5),
    };
    assert!(is_malformed(r.emit(&mut Fair::new_unchecked(&mut [0u8; 64][..], Carrier::Ipv6))));
}

#[test]
fn uw2_ipv4_round_trip_every_n_with_ihl_5_and_15() {
    for ihl_opts in [0usize, 40] {
        for n in 0..=127usize {
            let fair = FairRepr {
                carrier: Carrier::Ipv4,
                next_header: 6,
                timestamp: n as u16,
                seqno: n as u32 * 3,
                icv: n as u8,
                sb: n % 3 == 0,
                ptr: (n / 3) as u8,
                slots: FairSlots::new(&(0..n).map(|i| i as u8).collect::<Vec<_>>()).unwrap(),
            };
            let ip = Ipv4Repr {
                src: [10, 0, 0, 1].into(),
                dst: [10, 0, 0, 2].into(),
                protocol: 253,
                payload_len: (fair.buffer_len() + 4) as u16,
                ttl: 9,
                dscp: 0,
                ecn: 0,
                ident: 1,
                dont_frag: true,
                more_frags: false,
                frag_offset: 0,
                options: Ipv4Options::new(&[1u8; 40][..ihl_opts]).unwrap(),
            };
            let mut pkt = vec![0u8; ip.buffer_len() + ip.payload_len as usize];
            ip.emit(&mut Ipv4::new_unchecked(&mut pkt[..])).unwrap();
            let off = ip.buffer_len();
            fair.emit(&mut Fair::new_unchecked(&mut pkt[off..], Carrier::Ipv4)).unwrap();
            let loc = locate_ipv4(&pkt, 253).unwrap().unwrap();
            assert_eq!((loc.offset, loc.len), (20 + ihl_opts, 9 + n));
            assert_eq!(FairRepr::parse(&loc.view(&pkt)).unwrap(), fair);
        }
    }
}

#[test]
fn uw5_slot_packing() {
    for nonce in 0u8..16 {
        for mac in 0u8..16 {
            let s = Slot::new(nonce, mac);
            assert_eq!(s.0, (nonce << 4) | mac);
            assert_eq!((s.nonce(), s.mac4()), (nonce, mac));
        }
    }
    assert_eq!(Slot::new(0x1f, 0xf3), Slot(0xf3));
}

#[test]
fn uw6_sb_isolation() {
    // 127 slots over IPv6 so that ptr can reach 127.
    let mut buf = [0u8; 136];
    let r = FairRepr {
        carrier: Carrier::Ipv6,
        next_header: 17,
        timestamp: 0,
        seqno: 0,
        icv: 0,
        sb: true,
        ptr: 126,
        slots: FairSlots::zeroed(127),
    };
    r.emit(&mut Fair::new_unchecked(&mut buf[..], Carrier::Ipv6)).unwrap();
    let mut f = Fair::new_checked(&mut buf[..], Carrier::Ipv6).unwrap();
    assert_eq!(f.next_as(), 0x80 | 126);
    // 126 -> 127 works and keeps SB.
    assert_eq!(f.push_mark(Slot(0xab)), Ok(126));
    assert_eq!(f.next_as(), 0xff);
    assert_eq!(f.slot(126), Some(Slot(0xab)));
    // ptr == N: overflow, header unchanged.
    assert!(is_malformed(f.push_mark(Slot(0xcd))));
    assert_eq!(f.next_as(), 0xff);
    // Setting/clearing SB never changes the pointer; set_ptr never changes SB.
    f.set_sb(false);
    assert_eq!((f.sb(), f.ptr()), (false, 127));
    f.set_sb(true);
    assert_eq!((f.sb(), f.ptr()), (true, 127));
    f.set_ptr(0);
    assert_eq!((f.sb(), f.ptr()), (true, 0));
    f.set_ptr(0xff);
    assert_eq!((f.sb(), f.ptr()), (true, 127));
    // Increment from every pointer value with SB clear never sets SB.
    let mut b4 = [0u8; 136];
    b4[1] = 136;
    let mut f = Fair::new_checked(&mut b4[..], Carrier::Ipv4).unwrap();
    for p in 0..127u8 {
        assert_eq!(f.push_mark(Slot(p)), Ok(p as usize));
        assert!(!f.sb());
    }
    assert_eq!(f.ptr(), 127);
    assert!(f.set_slot(127, Slot(1)).is_err());
}

// ------------------------------------------------------------ reference (F-7)

/// A deliberately plain re-statement of §2.5/§2.6/§2.9 with `get`-based
/// indexing: `Err(())` for any error, `Ok(None)` for NotFair, otherwise the
/// header's offset and length.
fn reference_locate(pkt: &[u8], v6: bool, fair: u8) -> Result<Option<(usize, usize)>, ()> {
    let byte = |i: usize| pkt.get(i).copied().ok_or(());
    let (mut nxt, mut off, end);
    if v6 {
        if pkt.len() < 40 || byte(0)? >> 4 != 6 {
            return Err(());
        }
        end = 40 + u16::from_be_bytes([byte(4)?, byte(5)?]) as usize;
        nxt = byte(6)?;
        off = 40;
        if nxt == 0 && fair != 0 {
            let hbh = (byte(off + 1)? as usize + 1) * 8;
            if off + 2 > end || off + hbh > end {
                return Err(());
            }
            nxt = byte(off)?;
            off += hbh;
        }
    } else {
        if pkt.len() < 20 || byte(0)? >> 4 != 4 || byte(0)? & 0xf < 5 {
            return Err(());
        }
        off = (byte(0)? & 0xf) as usize * 4;
        end = u16::from_be_bytes([byte(2)?, byte(3)?]) as usize;
        nxt = byte(9)?;
        if end < off {
            return Err(());
        }
    }
    if end > pkt.len() {
        return Err(());
    }
    if nxt != fair {
        return Ok(None);
    }
    if off + 9 > end {
        return Err(());
    }
    let hl = byte(off + 1)? as usize;
    let len = if v6 {
        if !(1..=16).contains(&hl) {
            return Err(());
        }
        (hl + 1) * 8
    } else {
        if !(9..=136).contains(&hl) {
            return Err(());
        }
        hl
    };
    if off + len > end || (byte(off + 8)? & 0x7f) as usize > len - 9 {
        return Err(());
    }
    Ok(Some((off, len)))
}

fn as_ref_result(
    r: Result<Option<packet::fair::FairLocation>, Error>,
) -> Result<Option<(usize, usize)>, ()> {
    r.map(|o| o.map(|l| (l.offset, l.len))).map_err(|_| ())
}

// ------------------------------------------------------------ properties

fn arb_repr() -> impl Strategy<Value = FairRepr> {
    (any::<bool>(), 0usize..=127).prop_flat_map(|(v6, n)| {
        let n = if v6 { ((n + 9).div_ceil(8) * 8 - 9).min(127) } else { n };
        (
            Just(v6),
            proptest::collection::vec(any::<u8>(), n),
            0..=n as u8,
            any::<u8>(),
            any::<u16>(),
            0u32..0x100_0000,
            any::<u8>(),
            any::<bool>(),
        )
            .prop_map(|(v6, slots, ptr, next_header, timestamp, seqno, icv, sb)| {
                FairRepr {
                    carrier: if v6 { Carrier::Ipv6 } else { Carrier::Ipv4 },
                    next_header,
                    timestamp,
                    seqno,
                    icv,
                    sb,
                    ptr,
                    slots: FairSlots::new(&slots).unwrap(),
                }
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn round_trip(r in arb_repr()) {
        let mut b = vec![0u8; r.buffer_len()];
        r.emit(&mut Fair::new_unchecked(&mut b[..], r.carrier)).unwrap();
        let f = Fair::new_checked(&b[..], r.carrier).unwrap();
        prop_assert_eq!(f.header_len(), b.len());
        prop_assert_eq!(FairRepr::parse(&f).unwrap(), r);
        for n in 0..b.len() {
            prop_assert_eq!(Fair::new_checked(&b[..n], r.carrier).unwrap_err(), Error::Truncated);
        }
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200), nh in any::<u8>()) {
        for c in [Carrier::Ipv6, Carrier::Ipv4] {
            if let Ok(f) = Fair::new_checked(&data[..], c) {
                let _ = (f.timestamp(), f.seqno(), f.icv(), f.sb(), f.body().len(), f.payload().len());
                for i in 0..=f.n_slots() { let _ = f.slot(i); }
                let r = FairRepr::parse(&f).unwrap();
                let mut b = vec![0u8; r.buffer_len()];
                r.emit(&mut Fair::new_unchecked(&mut b[..], c)).unwrap();
                prop_assert_eq!(&b[..], f.header());
            }
            let _ = FairRepr::parse(&Fair::new_unchecked(&data[..], c));
        }
        for r in [locate_ipv6(&data, nh), locate_ipv4(&data, nh)] {
            if let Ok(Some(loc)) = r {
                prop_assert!(loc.offset + loc.len <= data.len());
                prop_assert!(FairRepr::parse(&loc.view(&data)).is_ok());
            }
        }
    }

    #[test]
    fn differential_against_reference(
        v6 in any::<bool>(),
        edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
        cut in 0usize..80,
        hbh in any::<bool>(),
    ) {
        // Start from a valid FAIR packet (optionally with HBH), mutate a few bytes, cut it.
        let mut b = if v6 { h(V6_SEND) } else { h(V4_SEND) };
        if v6 && hbh {
            let mut x = b[..40].to_vec();
            x[6] = 0;
            x.extend_from_slice(&h("fd 00 05 02 00 00 01 00"));
            x.extend_from_slice(&b[40..]);
            x[5] += 8;
            b = x;
        }
        for (i, v) in edits {
            if i < b.len() {
                b[i] = v;
            }
        }
        b.truncate(b.len().min(cut.max(b.len() / 2)));
        let got = if v6 { locate_ipv6(&b, 253) } else { locate_ipv4(&b, 253) };
        prop_assert_eq!(as_ref_result(got), reference_locate(&b, v6, 253));
    }

    #[test]
    fn mutated_send_packets_never_panic(i in 0usize..68, v in any::<u8>(), j in 0usize..45, w in any::<u8>()) {
        let mut b = h(V6_SEND);
        b[i] = v;
        if let Ok(Some(loc)) = locate_ipv6(&b, 253) {
            prop_assert!(loc.offset + loc.len <= b.len());
            let mut f = loc.view_mut(&mut b);
            let _ = f.push_mark(Slot(0x11));
        }
        let mut b = h(V4_SEND);
        b[j] = w;
        if let Ok(Some(loc)) = locate_ipv4(&b, 253) {
            prop_assert!(loc.offset + loc.len <= b.len());
        }
    }
}
