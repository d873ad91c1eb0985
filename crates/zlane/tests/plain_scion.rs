//! Traffic that is not EPIC-Z: the classifier checks the SCION common and
//! address headers exactly as `ScionHeader::new_checked` does (same drops,
//! same reasons) and classes by path type: SIBRA → R, one-hop and BFD → N,
//! SCION, EPIC-HP and empty paths → U, anything else unsupported.

mod common;

use common::*;
use packet::scion::{next_hdr, PathType, ScionHeader};
use packet::Ia;
use pipeline::{Batch, Class, DropReason, ScionHint, Stage, Verdict, BURST};
use zlane::class::{N, R, U};
use zlane::config::RouterConfig;
use zlane::{Classifier, ZlaneClassify};

/// What the header view and the path type decide for `pkt`.
fn reference(pkt: &[u8]) -> Result<Class, DropReason> {
    let h = ScionHeader::new_checked(pkt)?;
    Ok(match h.path_type() {
        PathType::SIBRA => R,
        PathType::ONE_HOP => N,
        _ if h.next_hdr() == next_hdr::BFD => N,
        PathType::SCION | PathType::EPIC_HP | PathType::EMPTY => U,
        _ => return Err(DropReason::Unsupported),
    })
}

fn classifier() -> Classifier {
    let cfg = RouterConfig { local_ia: TRANSIT, ..Default::default() };
    Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap()
}

/// Path types, next headers and header corruptions of a valid packet, and
/// truncations of it (every prefix up to past the address header).
fn cases() -> Vec<Vec<u8>> {
    let base = packet(Ia::new(1, 10), host(9), 0, 1, 40);
    let mut out = Vec::new();
    for pt in [0u8, 1, 2, 3, 4, 17, 200, 202, 255] {
        for nh in [17u8, next_hdr::BFD] {
            let mut p = base.clone();
            let mut h = ScionHeader::new_unchecked(&mut p[..]);
            h.set_path_type(PathType(pt));
            p[4] = nh;
            out.push(p.clone());
            // Version, HdrLen, address types, PayloadLen.
            let mut v = p.clone();
            v[0] |= 0x10;
            out.push(v);
            for hl in [0u8, 8, 9, 11, p[5] - 1, p[5] + 1, 255] {
                let mut v = p.clone();
                v[5] = hl;
                out.push(v);
            }
            for at in [0x00u8, 0x03, 0x30, 0x33, 0xff, 0x0f, 0xf0] {
                let mut v = p.clone();
                v[9] = at;
                out.push(v);
            }
            let payload = u16::from_be_bytes([p[6], p[7]]);
            for pl in [0u16, payload - 1, payload + 1, u16::MAX] {
                let mut v = p.clone();
                v[6..8].copy_from_slice(&pl.to_be_bytes());
                out.push(v);
            }
            // A frame longer than the packet (link-layer padding) is fine.
            let mut v = p.clone();
            v.extend_from_slice(&[0; 7]);
            out.push(v);
            for n in (0..48).chain([p.len() - 1]) {
                out.push(p[..n].to_vec());
            }
        }
    }
    out
}

#[test]
fn headers_and_classes_match_the_header_view() {
    let cases = cases();
    let mut one = classifier();
    let mut stage = ZlaneClassify::new(classifier());
    for (c, chunk) in cases.chunks(BURST).enumerate() {
        let mut batch: Batch<Vec<u8>> = Batch::new();
        for p in chunk {
            batch.push(p.clone(), 0).unwrap();
        }
        stage.process(&mut batch, now(0));
        let mut got = Vec::new();
        batch.drain(|_, m| got.push(m.verdict));
        for (i, (p, v)) in chunk.iter().zip(got).enumerate() {
            let want = reference(p);
            assert_eq!(one.classify(p, now(0)), want, "chunk {c} packet {i}");
            let want = match want {
                Ok(class) => Verdict::Forward { port: 0, class },
                Err(r) => Verdict::Drop(r),
            };
            assert_eq!(v, want, "chunk {c} packet {i}: {p:02x?}");
        }
    }
    // Every class and several drop reasons were exercised.
    let counts = stage.classifier().counters().classes;
    assert!(counts[0] > 0 && counts[1] > 0 && counts[4] > 0, "{counts:?}");
    assert_eq!(stage.classifier().counters(), one.counters());
}

#[test]
fn the_parse_stage_hint_gives_the_same_classes_and_counters() {
    // With the parse stage's hint the stage classes other path types
    // without reading the packet.
    let hint = ScionHint::of_header;
    let cases = cases();
    let mut plain = ZlaneClassify::new(classifier());
    let mut hinted = ZlaneClassify::new(classifier());
    let mut used = 0;
    for chunk in cases.chunks(BURST) {
        let (mut a, mut b): (Batch<Vec<u8>>, Batch<Vec<u8>>) = (Batch::new(), Batch::new());
        for (i, p) in chunk.iter().enumerate() {
            a.push(p.clone(), 0).unwrap();
            b.push(p.clone(), 0).unwrap();
            b.meta_mut(i).scion = hint(p);
            used += usize::from(hint(p).get().is_some());
        }
        plain.process(&mut a, now(0));
        hinted.process(&mut b, now(0));
        let (mut va, mut vb) = (Vec::new(), Vec::new());
        a.drain(|_, m| va.push(m.verdict));
        b.drain(|_, m| vb.push(m.verdict));
        assert_eq!(va, vb);
    }
    assert!(used > 100, "{used} hinted packets");
    assert_eq!(plain.classifier().counters(), hinted.classifier().counters());
}

#[test]
fn a_burst_sharing_one_best_effort_hint_is_classed_as_a_whole() {
    // Bursts of packets with one hint each (one burst per distinct hint):
    // those of best effort (empty, SCION and EPIC-HP paths without BFD) the
    // stage classes from the common hint without a walk of the packets,
    // with the same verdicts and counters as without the hint.
    let hint = ScionHint::of_header;
    let cases = cases();
    let mut hints: Vec<ScionHint> = cases.iter().map(|p| hint(p)).collect();
    hints.sort_by_key(|h| h.get().map(|(t, n)| (t.0, n)));
    hints.dedup();
    let mut plain = ZlaneClassify::new(classifier());
    let mut hinted = ZlaneClassify::new(classifier());
    let mut whole = 0;
    for h in hints {
        let same: Vec<_> = cases.iter().filter(|p| hint(p) == h).collect();
        for chunk in same.chunks(BURST) {
            let (mut a, mut b): (Batch<Vec<u8>>, Batch<Vec<u8>>) = (Batch::new(), Batch::new());
            for (i, p) in chunk.iter().enumerate() {
                a.push(p.to_vec(), 0).unwrap();
                b.push(p.to_vec(), 0).unwrap();
                b.meta_mut(i).scion = h;
            }
            whole += usize::from(b.common_scion_hint().is_some());
            plain.process(&mut a, now(0));
            hinted.process(&mut b, now(0));
            let (mut va, mut vb) = (Vec::new(), Vec::new());
            a.drain(|_, m| va.push(m.verdict));
            b.drain(|_, m| vb.push(m.verdict));
            assert_eq!(va, vb, "hint {h:?}");
        }
    }
    assert!(whole >= 6, "{whole} bursts with a common hint");
    assert_eq!(plain.classifier().counters(), hinted.classifier().counters());
    assert!(hinted.classifier().counters().classes[4] > 0);
}
