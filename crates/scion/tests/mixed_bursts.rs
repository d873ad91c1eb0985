//! Mixed bursts through one `ScionForward` stage against each packet
//! processed alone by the packet-at-a-time model (`support/model.rs`).
//!
//! The bursts are what a transit router sees: packets on paths of their own
//! (each with other hop-field MACs), copies of the packet before (a flow)
//! and of packets further back, packets whose current hop field has a bad
//! MAC, is expired or names another ingress interface, truncated and
//! corrupted packets, two header layouts (IPv4 and IPv6 host addresses),
//! paths of a few shapes at hops inside a segment (which the stage finishes
//! in its lane: header recognised from the last one's layout, hop fields
//! read at offsets the meta header fixes), at segment ends (cross-over) and
//! at the last hop, with and without the parse stage's header hint, and
//! several bursts through the same stage (whose layout and run memory carry
//! over). EPIC-Z packets (PathType 201, whose embedded SCION path the
//! stage forwards) come the same ways, mixed with standard paths or alone,
//! and also with their EPIC part corrupted (another HVF count, a count
//! left to inference, any bit of it flipped). Every verdict, every byte of
//! every packet and the counters must be the model's.

use mac::Key;
use packet::scion::{AddrHdrRepr, EpicPathRepr, PathRepr, RawHostAddr, ScionPath, ScionRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Class, Now, ScionHint, Stage, Verdict, BURST};
use proptest::prelude::*;
use scion::build::{self, HopSpec};
use scion::{
    current_input, is_peering_hop, locate, ForwardConfig, Forwarder, ForwardingKey, InterfaceTable,
    ScionForward,
};

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

#[path = "support/model.rs"]
mod model;
use model::model;

const T0: u32 = 1_700_000_000;
/// When the bursts are forwarded (Unix s).
const NOW_S: u64 = T0 as u64 + 1_000;
const LOCAL: Ia = Ia::new(1, 0xff00_0000_0110);
const OTHER: Ia = Ia::new(1, 0xff00_0000_0111);
/// The port of local delivery (no interface is bound to it).
const LOCAL_PORT: u16 = 99;

/// Path shapes: segment lengths and the current hop field.
const SHAPES: &[(&[usize], usize)] = &[
    // Hops inside a segment (not its last): the stage's lane.
    (&[3], 1),
    (&[3], 0),
    (&[4], 2),
    (&[2, 3], 2),
    (&[2, 2, 3], 4),
    (&[3, 2], 0),
    // The end of a segment (a cross-over) and the last hop.
    (&[2, 3], 1),
    (&[3], 2),
    (&[2, 3], 4),
];

fn router_key() -> ForwardingKey {
    ForwardingKey::new(&Key::from([0x42; 16]))
}

/// Sets the SegID and MAC of hop `hf` (under info field `inf`) so that it
/// verifies under `key` when the path is at that position.
fn make_valid(path: &mut [u8], inf: u8, hf: u8, key: &ForwardingKey, beta: u16) {
    let mut p = ScionPath::new_unchecked(&mut path[..]);
    if p.set_curr(inf, hf).is_err() {
        return;
    }
    let peering = is_peering_hop(&p);
    let cons = p.current_info().cons_dir();
    p.current_info_mut().set_seg_id(beta);
    p.current_hop_mut().set_mac([0; 6]);
    let sigma = key.mac(&current_input(&p));
    p.current_hop_mut().set_mac(sigma);
    if !(cons || peering) {
        // Against construction the field holds β_i ⊕ σ[0:2].
        p.current_info_mut().set_seg_id(beta ^ u16::from_be_bytes([sigma[0], sigma[1]]));
    }
}

/// What a fresh packet is made to fail, if anything.
#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    None,
    /// A bit of the current hop field's MAC flipped.
    BadMac,
    /// Stamped long ago, with the shortest hop expiry.
    Expired,
    /// For EPIC-Z, the EPIC part corrupted: another HVF count, a count of
    /// zero (inferred from the length), or a bit flipped.
    Epic,
}

/// A fresh SCION packet (bare, at offset 0) of shape `shape`, with IPv6
/// host addresses if `v6`, an EPIC-Z path embedding its SCION path if
/// `epic_z`; its current hop (and at a cross-over the next) verifies under
/// `key`, except for `flaw`.
fn fresh(
    r: &mut Rng,
    key: &ForwardingKey,
    shape: usize,
    v6: bool,
    epic_z: bool,
    flaw: Flaw,
) -> Vec<u8> {
    let other = ForwardingKey::new(&Key::from([7; 16]));
    let (lens, hf) = SHAPES[shape];
    let peering = lens.len() == 2 && r.chance(30);
    let expired = flaw == Flaw::Expired;
    let ts = if expired { T0 - 100_000 } else { T0 - r.below(2_000) as u32 };
    let mut segs = Vec::new();
    for &len in lens {
        let hops: Vec<HopSpec> = (0..len)
            .map(|_| HopSpec {
                key: other.clone(),
                cons_ingress: r.below(7) as u16,
                cons_egress: r.below(7) as u16,
                exp_time: if expired { 0 } else { 8 + r.below(248) as u8 },
            })
            .collect();
        let (mut info, hops) = build::segment(r.chance(50), r.next() as u16, ts, &hops);
        info.peering = peering;
        segs.push((info, hops));
    }
    let path = build::path(&segs).expect("1 to 3 segments");
    let host = |k: u8| {
        RawHostAddr::from(if v6 { HostAddr::V6([k; 16]) } else { HostAddr::V4([10, 0, 0, k]) })
    };
    let ias = [LOCAL, OTHER, Ia::new(2, 1)];
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 8,
        dst_ia: ias[r.below(3) as usize],
        src_ia: ias[r.below(3) as usize],
        dst_host: host(r.below(4) as u8),
        src_host: host(r.below(4) as u8),
    };
    let hvfs: Vec<[u8; 4]> = (0..path.num_hf()).map(|_| (r.next() as u32).to_be_bytes()).collect();
    let path = if epic_z {
        PathRepr::EpicZ(EpicPathRepr {
            ts_rel: r.next() as u32,
            counter: r.below(1 << 24) as u32,
            hvfs: (&hvfs[..]).into(),
            path: path.repr(),
            ..EpicPathRepr::default()
        })
    } else {
        PathRepr::Scion(path.repr())
    };
    let repr = ScionRepr { hdr, path };
    let mut pkt = vec![0u8; repr.buffer_len() + 8];
    repr.emit(&mut pkt).expect("valid packet");
    let loc = locate(&pkt, 0).expect("emitted");
    let range = loc.scion.clone();
    let (mut inf, mut end) = (0, lens[0]);
    while hf >= end {
        inf += 1;
        end += lens[inf];
    }
    let p = &mut pkt[range];
    make_valid(p, inf as u8, hf as u8, key, r.next() as u16);
    if hf + 1 == end && inf + 1 < lens.len() {
        make_valid(p, inf as u8 + 1, hf as u8 + 1, key, r.next() as u16);
    }
    let mut view = ScionPath::new_unchecked(&mut p[..]);
    view.set_curr(inf as u8, hf as u8).expect("a position of the path");
    if flaw == Flaw::BadMac {
        let mut mac = view.current_hop().mac();
        mac[r.below(6) as usize] ^= 1 << r.below(8);
        view.current_hop_mut().set_mac(mac);
    }
    if flaw == Flaw::Epic && epic_z {
        // NumHVF is byte 9 of the EPIC part.
        let (epic, num) = (loc.path.start, loc.path.start + 9);
        match r.below(4) {
            0 => pkt[num] = 0,
            1 => pkt[num] = pkt[num].wrapping_add(1),
            2 => pkt[num] = pkt[num].wrapping_sub(1),
            _ => {
                let at = epic + r.below((loc.scion.start - epic) as u64) as usize;
                pkt[at] ^= 1 << r.below(8);
            }
        }
    }
    pkt
}

/// The router: interfaces 1-6 bound to ports 11-16 (some of them).
fn forwarder(r: &mut Rng) -> Forwarder {
    let mut ifaces = InterfaceTable::new();
    for ifid in 1..=6u16 {
        if r.chance(75) {
            ifaces.bind(ifid, ifid + 10);
        }
    }
    let cfg = ForwardConfig {
        local_port: LOCAL_PORT,
        check_ingress: r.chance(85),
        // Mostly without addresses (where the stage has its lane).
        local_ia: r.chance(20).then_some(LOCAL),
        ..ForwardConfig::default()
    };
    Forwarder::new(router_key(), ifaces, cfg)
}

/// A burst: packets and their arrival ports.
fn burst(r: &mut Rng, key: &ForwardingKey) -> Vec<(Vec<u8>, u16)> {
    let n = 1 + r.below(BURST as u64) as usize;
    let mut pkts: Vec<(Vec<u8>, u16)> = Vec::new();
    // Mostly one header layout and one path type, as on one link.
    let v6_share = [0, 10, 50, 100][r.below(4) as usize];
    let epic_z_share = [0, 10, 50, 100][r.below(4) as usize];
    while pkts.len() < n {
        let port = [0, 11, 12, 13, 14, 15, 16, 17][r.below(8) as usize];
        let shape = r.below(SHAPES.len() as u64) as usize;
        let v6 = r.chance(v6_share);
        let z = r.chance(epic_z_share);
        let fresh = |r: &mut Rng, flaw| fresh(r, key, shape, v6, z, flaw);
        let pkt = match r.below(100) {
            // A packet of its own path.
            0..=41 => fresh(r, Flaw::None),
            42..=44 => fresh(r, Flaw::Epic),
            // The packet before again (the next of a flow), or a run of it.
            45..=59 if !pkts.is_empty() => pkts[pkts.len() - 1].0.clone(),
            60..=64 if !pkts.is_empty() => {
                let p = pkts[pkts.len() - 1].clone();
                for _ in 0..r.below(6) {
                    pkts.push(p.clone());
                }
                p.0
            }
            // A packet from further back.
            65..=69 if !pkts.is_empty() => pkts[r.below(pkts.len() as u64) as usize].0.clone(),
            70..=77 => fresh(r, Flaw::BadMac),
            78..=83 => fresh(r, Flaw::Expired),
            84..=89 => {
                let mut p = fresh(r, Flaw::None);
                p.truncate(r.below(p.len() as u64) as usize);
                p
            }
            90..=95 => {
                // A byte of the headers and path.
                let mut p = fresh(r, Flaw::None);
                let at = r.below(p.len() as u64 - 8) as usize;
                p[at] ^= 1 << r.below(8);
                p
            }
            _ => {
                // The packet before with one byte changed.
                let mut p = match pkts.last() {
                    Some(last) => last.0.clone(),
                    None => fresh(r, Flaw::None),
                };
                if !p.is_empty() {
                    let at = r.below(p.len() as u64) as usize;
                    p[at] ^= 1 << r.below(8);
                }
                p
            }
        };
        pkts.push((pkt, port));
    }
    pkts.truncate(n);
    pkts
}

/// Counts of the model's outcomes, as the stage counts them.
#[derive(Debug, Default, PartialEq)]
struct Counts {
    forwarded: u64,
    local: u64,
    skipped: u64,
}

/// Several bursts through one stage, each packet against the model.
fn check_bursts(seed: u64) {
    let mut r = Rng(seed);
    let fwd = forwarder(&mut r);
    let key = router_key();
    let now = NOW_S * 1_000_000_000;
    let mut stage = ScionForward::new(fwd.clone());
    let mut want_counts = Counts::default();
    for b in 0..3 {
        let pkts = burst(&mut r, &key);
        let hinted = r.chance(30);
        let mut batch = Batch::new();
        for (k, (p, port)) in pkts.iter().enumerate() {
            batch.push(p.clone(), *port).expect("at most a burst");
            if hinted {
                batch.meta_mut(k).scion = ScionHint::of_header(p);
            }
        }
        stage.process(&mut batch, Now::from_unix_ns(now));
        let mut got = Vec::new();
        batch.drain(|buf, m| got.push((buf, m.verdict)));
        for (k, ((pkt, port), (out, verdict))) in pkts.iter().zip(got).enumerate() {
            let mut want = pkt.clone();
            let v = match model(&fwd, &mut want, *port, now) {
                Some(v) => {
                    match v {
                        Verdict::Forward { port: LOCAL_PORT, .. } => want_counts.local += 1,
                        Verdict::Forward { .. } => want_counts.forwarded += 1,
                        _ => {}
                    }
                    v
                }
                None => {
                    want_counts.skipped += 1;
                    Verdict::Forward { port: *port, class: Class::default() }
                }
            };
            assert_eq!(verdict, v, "seed {seed} burst {b} packet {k}");
            assert_eq!(out, want, "seed {seed} burst {b} packet {k}: bytes");
        }
    }
    let c = stage.counters();
    let got_counts = Counts { forwarded: c.forwarded, local: c.local, skipped: c.skipped };
    assert_eq!(got_counts, want_counts, "seed {seed}: counters");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn mixed_bursts_decide_as_each_packet_alone(seed in any::<u64>()) {
        check_bursts(seed);
    }
}

/// The generator reaches every outcome the lane decides, and the others.
#[test]
fn the_generator_covers_the_outcomes() {
    let mut seen = std::collections::BTreeSet::new();
    let key = router_key();
    for seed in 0..300u64 {
        let mut r = Rng(seed);
        let fwd = forwarder(&mut r);
        for (mut pkt, port) in burst(&mut r, &key) {
            // PathType 201 (EPIC-Z), for the packets whose common header
            // is whole.
            let epic_z = pkt.len() > 8 && pkt[8] == 201;
            if let Some(v) = model(&fwd, &mut pkt, port, NOW_S * 1_000_000_000) {
                let outcome = match v {
                    Verdict::Forward { port: LOCAL_PORT, .. } => "local".to_string(),
                    Verdict::Forward { .. } => "forward".to_string(),
                    Verdict::Drop(r) => r.label().to_string(),
                    other => format!("{other:?}"),
                };
                if epic_z {
                    seen.insert(format!("epic_z {outcome}"));
                }
                seen.insert(outcome);
            }
        }
    }
    for want in [
        "local",
        "forward",
        "bad_mac",
        "expired",
        "wrong_interface",
        "no_route",
        "malformed",
        "truncated",
    ] {
        assert!(seen.contains(want), "{want} never reached: {seen:?}");
    }
    for want in
        ["forward", "bad_mac", "expired", "wrong_interface", "no_route", "malformed", "truncated"]
    {
        let want = format!("epic_z {want}");
        assert!(seen.contains(&want), "{want} never reached: {seen:?}");
    }
}
