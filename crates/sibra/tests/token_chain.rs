//! Exact-byte test of a 3-hop SOF chain. The MAC inputs are written out by
//! hand from the sheet's layout; the expected tags were computed with an
//! independent AES-CBC implementation (OpenSSL via Python `cryptography`).

use mac::{Aes, Key};
use sibra::token::{issue_chain, mac_input, SofKeys};
use sibra::{BwClass, ResvIdx, ResvInfo, Sof, SteadyId, Tick};

fn info() -> ResvInfo {
    ResvInfo {
        exp_tick: Tick(0x0102_0304),
        bw_fwd: BwClass::new(10).unwrap(),
        bw_rev: BwClass::new(9).unwrap(),
        index: ResvIdx::new(3).unwrap(),
        fwd: true,   // zeroed in the MAC input
        fail_hop: 7, // zeroed in the MAC input
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[rustfmt::skip]
fn expected_inputs() -> [Vec<u8>; 3] {
    [
        // ingress 0, egress 11 | ResvInfo (F, fail_hop zeroed) | steady ID + 16 zero bytes | no previous SOF | pad
        hex(concat!("0000", "000b", "010203040a093000", "ff00000001100001", "00000000000000000000000000000000",
                    "0000000000000000", "00000000")),
        // ingress 21, egress 22 | ... | SOF of hop 0 = 0000 000b b5764565
        hex(concat!("0015", "0016", "010203040a093000", "ff00000001100001", "00000000000000000000000000000000",
                    "0000000bb5764565", "00000000")),
        // ingress 31, egress 0 | ... | SOF of hop 1 = 0015 0016 530b8260
        hex(concat!("001f", "0000", "010203040a093000", "ff00000001100001", "00000000000000000000000000000000",
                    "00150016530b8260", "00000000")),
    ]
}

#[test]
fn three_hop_chain_exact_bytes() {
    let id = SteadyId::new(0xff00_0000_0110, 1);
    assert_eq!(id.0, [0xff, 0, 0, 0, 0x01, 0x10, 0, 0x01]);
    let keys: Vec<SofKeys> =
        [0x11u8, 0x22, 0x33].iter().map(|&b| SofKeys::new(&Key::from([b; 16]))).collect();
    let refs: Vec<&SofKeys> = keys.iter().collect();
    let hops = [(0u16, 11u16), (21, 22), (31, 0)];
    let chain = issue_chain(&refs, &hops, &info(), &id.0);
    let macs = [[0xb5, 0x76, 0x45, 0x65], [0x53, 0x0b, 0x82, 0x60], [0x46, 0xc4, 0x44, 0x92]];
    let inputs = expected_inputs();
    let mut prev = [0u8; 8];
    for (n, sof) in chain.iter().enumerate() {
        assert_eq!((sof.ingress, sof.egress), hops[n]);
        assert_eq!(sof.mac, macs[n], "hop {n}");
        let blocks = mac_input(hops[n].0, hops[n].1, &info().mac_bytes(), &id.0, &prev);
        let flat: Vec<u8> = blocks.iter().flatten().copied().collect();
        assert_eq!(flat, inputs[n], "hop {n} input");
        // The plain CBC-MAC over the hand-written bytes gives the same tag.
        let aes = Aes::new(&Key::from([[0x11u8, 0x22, 0x33][n]; 16]));
        assert_eq!(aes.cbc_mac(&inputs[n])[..4], macs[n]);
        assert!(keys[n].check_mac(sof, &info(), &id.0, (n > 0).then(|| &chain[n - 1]), Tick(0)));
        prev = sof.to_bytes();
    }
    assert_eq!(chain[1].to_bytes(), [0x00, 0x15, 0x00, 0x16, 0x53, 0x0b, 0x82, 0x60]);
}

#[test]
fn chain_rejects_splicing_and_changes() {
    let id = SteadyId::new(0xff00_0000_0110, 1);
    let other = SteadyId::new(0xff00_0000_0110, 2);
    let keys: Vec<SofKeys> =
        [0x11u8, 0x22, 0x33].iter().map(|&b| SofKeys::new(&Key::from([b; 16]))).collect();
    let refs: Vec<&SofKeys> = keys.iter().collect();
    let hops = [(0u16, 11u16), (21, 22), (31, 0)];
    let a = issue_chain(&refs, &hops, &info(), &id.0);
    let b = issue_chain(&refs, &hops, &info(), &other.0);
    // Hop 1 of reservation B spliced after hop 0 of A: wrong ID and wrong chain.
    assert!(!keys[1].check_mac(&b[1], &info(), &id.0, Some(&a[0]), Tick(0)));
    // Even with A's ID, B's hop-1 SOF is chained to B's hop 0.
    assert!(!keys[1].check_mac(&b[1], &info(), &id.0, Some(&b[0]), Tick(0)));
    // Changing the class, index or expiry breaks the MAC; F and fail_hop do not.
    let mut i2 = info();
    i2.bw_fwd = BwClass::new(11).unwrap();
    assert!(!keys[0].check_mac(&a[0], &i2, &id.0, None, Tick(0)));
    let mut i3 = info();
    i3.index = ResvIdx::new(4).unwrap();
    assert!(!keys[0].check_mac(&a[0], &i3, &id.0, None, Tick(0)));
    let mut i4 = info();
    i4.fwd = false;
    i4.fail_hop = 0;
    assert!(keys[0].check_mac(&a[0], &i4, &id.0, None, Tick(0)));
    // Changed interfaces.
    let moved = Sof { egress: 12, ..a[0] };
    assert!(!keys[0].check_mac(&moved, &info(), &id.0, None, Tick(0)));
}
