//! The layout memo ([`sibra_fields_memo`], remembered layouts) against the
//! uncached [`sibra_fields`] over sequences of valid and mutated packets.

use packet::scion::sibra::{
    FLAG_ACCEPTED, FLAG_ERROR, FLAG_FORWARD, FLAG_REQUEST, FLAG_SETUP, FLAG_STEADY, MAX_BLOCKS,
};
use packet::scion::{
    next_hdr, sibra_fields, AddrHdrRepr, BlockRepr, PathIds, PathRepr, RawHostAddr, RequestRepr,
    ResvInfoRepr, ScionRepr, SibraHop, SibraPathRepr, SofRepr,
};
use packet::Ia;
use proptest::prelude::*;

use super::{sibra_fields_memo, SibraShape, WINDOW_LEN, WINDOW_SPAN};
use crate::mutate::{apply, arb_mutation};

/// A SCION packet carrying `path`, host type codes `dt`/`st`, `payload` bytes.
fn packet(path: SibraPathRepr, dt: u8, st: u8, payload: usize) -> Vec<u8> {
    let host = [7u8; 16];
    let repr = ScionRepr {
        hdr: AddrHdrRepr {
            qos: 0,
            flow_id: 1,
            next_hdr: next_hdr::UDP,
            payload_len: payload as u16,
            dst_ia: Ia::new(1, 0xc),
            src_ia: Ia::new(1, 0xa),
            dst_host: RawHostAddr::new(dt, &host).unwrap(),
            src_host: RawHostAddr::new(st, &host).unwrap(),
        },
        path: PathRepr::Sibra((&path).into()),
    };
    let mut b = vec![0u8; repr.buffer_len() + payload];
    repr.emit(&mut b).unwrap();
    for (i, x) in b[repr.buffer_len()..].iter_mut().enumerate() {
        *x = i as u8;
    }
    b
}

prop_compose! {
    /// A valid SIBRA path of any kind (steady, ephemeral, ephemeral setup,
    /// with or without request block), 1..=3 blocks of 1..=5 hops.
    fn arb_path()(
        kind in 0u8..3,
        request in any::<bool>(),
        extra in any::<u8>(),
        hops in prop::collection::vec(1u8..=5, 1..=MAX_BLOCKS),
        curr in any::<u8>(),
        fill in any::<u64>(),
    ) -> SibraPathRepr {
        let (ids, kflags) = match kind {
            0 => (PathIds::Steady([1, 2, 3, 4, 5, 6, 7, 8]), FLAG_STEADY),
            1 => (PathIds::Ephemeral([9; 16]), 0),
            _ => (PathIds::EphemeralSetup { ephemeral: [3; 16], steady: [[4; 8], [5; 8], [6; 8]] }, FLAG_SETUP),
        };
        let flags = kflags
            | if request { FLAG_REQUEST } else { 0 }
            | (extra & (FLAG_ACCEPTED | FLAG_ERROR | FLAG_FORWARD));
        let total: u8 = hops.iter().sum();
        let mut r = SibraPathRepr {
            flags,
            curr_hop: curr % total,
            ids,
            num_blocks: hops.len() as u8,
            blocks: [BlockRepr::default(); MAX_BLOCKS],
            request: request.then(RequestRepr::default),
        };
        let mut x = fill;
        let mut next = || { x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); x };
        for (b, &h) in r.blocks.iter_mut().zip(&hops) {
            b.hops = h;
            let v = next();
            b.info = ResvInfoRepr { exp_tick: v as u32, bw_fwd: 20, bw_rev: 9, index: (v >> 40) as u8 & 0x0f, fwd: v & 1 == 1, fail_hop: 0 };
            for s in b.sofs.iter_mut().take(usize::from(h)) {
                let v = next().to_be_bytes();
                *s = SofRepr::from_bytes(&v);
            }
        }
        r
    }
}

/// Version/QoS, HdrLen, PayloadLen, path type, address types, and the
/// SIBRA flags, CurrHop, P0..P2 of a packet whose path is at `path_off`.
fn key_bytes(path_off: usize) -> [usize; 11] {
    let p = path_off;
    [0, 5, 6, 7, 8, 9, p, p + 1, p + 2, p + 3, p + 4]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn memo_equals_uncached_over_mutated_sequences(
        templates in prop::collection::vec((arb_path(), 0u8..4, 0u8..4, 0usize..24), 1..4),
        steps in prop::collection::vec((any::<usize>(), arb_mutation()), 1..48),
        pad in prop_oneof![Just(0usize), 0usize..200],
    ) {
        let pkts: Vec<(Vec<u8>, usize)> = templates
            .into_iter()
            .map(|(p, dt, st, pl)| {
                let off = 12 + 16 + (usize::from(dt) + 1) * 4 + (usize::from(st) + 1) * 4;
                (packet(p, dt, st, pl), off)
            })
            .collect();
        let mut shape = SibraShape::default();
        for (t, m) in &steps {
            let (base, off) = &pkts[t % pkts.len()];
            let mut pkt = apply(base.clone(), m, &key_bytes(*off));
            // Bytes after the payload: long packets also go through the
            // window's shape check.
            pkt.resize(pkt.len() + pad, 0x77);
            if let Some(w) = pkt.first_chunk::<WINDOW_LEN>() {
                // The window finds what `find` finds, for the layouts that
                // fit it (and only those).
                let exact = shape.find(&pkt).map(|v| *shape.learned(v)).filter(|l| l.plan.window);
                prop_assert_eq!(shape.find_window(w, pkt.len()).copied(), exact);
            }
            let want = sibra_fields(&pkt);
            prop_assert_eq!(sibra_fields_memo(&pkt, &mut shape), want);
            if let Ok(Some(f)) = want {
                // A layout said to fit the window: every read the transit
                // path makes starts below `WINDOW_SPAN` (so a masked read
                // is the exact one) and ends inside the window.
                let v = shape.find(&pkt).unwrap_or(0);
                if shape.learned(v).plan.window {
                    let reads = [Some(f.active), f.next].into_iter().flatten().flat_map(|h| {
                        [Some((h.sof, 8)), Some((h.info, 8)), Some((h.ids, h.ids_len)),
                            h.prev.map(|p| (p, 8))]
                    });
                    for (at, n) in reads.flatten().chain([(f.path, 8)]) {
                        prop_assert!(at < WINDOW_SPAN);
                        prop_assert!(usize::from(at) + usize::from(n) <= WINDOW_LEN);
                    }
                }
                // It is remembered: the same packet again is a memo hit.
                let learned = shape;
                prop_assert_eq!(sibra_fields_memo(&pkt, &mut shape), want);
                prop_assert_eq!(shape, learned);
            }
        }
    }

    /// Whatever a shape remembers, it never panics and never disagrees on
    /// arbitrary bytes.
    #[test]
    fn memo_on_garbage(
        tpl in (arb_path(), 0u8..4, 0u8..4, 0usize..24),
        raw in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let (p, dt, st, pl) = tpl;
        let good = packet(p, dt, st, pl);
        let mut shape = SibraShape::default();
        prop_assert!(sibra_fields_memo(&good, &mut shape).unwrap().is_some());
        let mut glued = good[..good.len().min(raw.len())].to_vec();
        glued.extend_from_slice(&raw[glued.len()..]);
        for pkt in [&raw[..], &glued[..]] {
            let mut s = shape;
            prop_assert_eq!(sibra_fields_memo(pkt, &mut s), sibra_fields(pkt));
        }
    }
}

/// The memo path is taken: a remembered packet is answered without
/// relearning, and a packet of another kind replaces the shape.
#[test]
fn memo_remembers_and_relearns() {
    let mut r = SibraPathRepr {
        flags: FLAG_FORWARD,
        curr_hop: 1,
        ids: PathIds::Ephemeral([9; 16]),
        num_blocks: 1,
        blocks: [BlockRepr::default(); MAX_BLOCKS],
        request: None,
    };
    r.blocks[0].hops = 3;
    let eph = packet(r, 0, 0, 10);
    let mut shape = SibraShape::default();
    let f = sibra_fields_memo(&eph, &mut shape).unwrap().unwrap();
    assert_ne!(shape, SibraShape::default());
    // Ephemeral: 12 + 24 address, flags at 36, IDs at 44, ResvInfo at 60,
    // SOFs at 68, 76, 84.
    assert_eq!((f.path, f.header_len, f.total_hops), (36, 92, 3));
    assert_eq!(
        f.active,
        SibraHop {
            hop: 1,
            block: 0,
            index: 1,
            ids_len: 16,
            sof: 76,
            prev: Some(68),
            info: 60,
            ids: 44
        }
    );
    assert_eq!(f.next.map(|n| (n.hop, n.sof, n.prev)), Some((2, 84, Some(76))));
    assert_eq!((f.after_next, f.curr_hop_offset()), (None, 37));
    let learned = shape;
    // Another packet of the same shape (other SOF bytes, other payload bytes).
    let mut other = eph.clone();
    other[80] ^= 0xff;
    *other.last_mut().unwrap() ^= 1;
    assert_eq!(sibra_fields_memo(&other, &mut shape).unwrap(), Some(f));
    assert_eq!(shape, learned);
    // Per-packet checks still run: a payload past the buffer is truncated.
    let short = &other[..other.len() - 1];
    assert_eq!(sibra_fields_memo(short, &mut shape), sibra_fields(short));
    assert!(sibra_fields(short).is_err());
    // A steady packet replaces the shape.
    r.flags |= FLAG_STEADY;
    r.ids = PathIds::Steady([1; 8]);
    let st = packet(r, 0, 0, 10);
    let g = sibra_fields_memo(&st, &mut shape).unwrap().unwrap();
    assert_ne!(shape, learned);
    assert_eq!((g.active.ids, g.active.ids_len, g.active.info), (44, 8, 52));
}
