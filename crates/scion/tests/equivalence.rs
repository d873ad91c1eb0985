//! The burst forwarder against a packet-at-a-time model of the same rules.
//!
//! The model (`support/model.rs`) is the straightforward form of SCION's
//! processing of a standard path: locate, check the path, MAC the current
//! hop, verify it, chain the SegID, check the ingress interface, cross over
//! at a segment end, decide the exit, advance. It reads the packet again at
//! every step and uses only the per-hop building blocks (`process_hop`,
//! `current_input`, `ScionPath::advance`). The `ScionForward` stage parses
//! each packet once, MACs a burst at once and reuses the parse of a packet
//! that repeats the previous one's hop; on random bursts (valid paths at
//! random positions, with MACs that verify, plus random corruption,
//! duplicates, expiry, interface bindings and addresses) both must reach
//! the same verdict and leave the same bytes.

use mac::Key;
use packet::scion::{AddrHdrRepr, PathRepr, RawHostAddr, ScionHeader, ScionPath, ScionRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Class, Now, Stage, Verdict, BURST};
use proptest::prelude::*;
use scion::build::{self, HopSpec};
use scion::{
    current_input, is_peering_hop, ForwardConfig, Forwarder, ForwardingKey, InterfaceTable,
    ScionForward,
};

const T0: u32 = 1_700_000_000;
const LOCAL: Ia = Ia::new(1, 0xff00_0000_0110);
const OTHER: Ia = Ia::new(1, 0xff00_0000_0111);

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

#[path = "support/model.rs"]
mod model;
use model::model;

fn router_key() -> ForwardingKey {
    ForwardingKey::new(&Key::from([0x42; 16]))
}

/// Interface IDs the generator draws from (1..=6); the router binds some.
fn ifid(r: &mut Rng) -> u16 {
    r.below(7) as u16
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
    if cons || peering {
        // The field holds β_i; the MAC is over it.
        let sigma = key.mac(&current_input(&p));
        p.current_hop_mut().set_mac(sigma);
    } else {
        // Against construction the field holds β_i ⊕ σ[0:2]: MAC over β_i
        // (with a zero MAC in place, so `current_input` sees β_i), then
        // store the chained value.
        let sigma = key.mac(&current_input(&p));
        p.current_hop_mut().set_mac(sigma);
        p.current_info_mut().set_seg_id(beta ^ u16::from_be_bytes([sigma[0], sigma[1]]));
    }
}

/// A random SCION packet (bare, at offset 0).
fn packet(r: &mut Rng, key: &ForwardingKey) -> Vec<u8> {
    let other = ForwardingKey::new(&Key::from([7; 16]));
    let n_seg = 1 + r.below(3) as usize;
    let peering = n_seg == 2 && r.chance(30);
    let mut segs = Vec::new();
    for _ in 0..n_seg {
        let len = 1 + r.below(4) as usize;
        let hops: Vec<HopSpec> = (0..len)
            .map(|_| HopSpec {
                key: other.clone(),
                cons_ingress: ifid(r),
                cons_egress: ifid(r),
                exp_time: r.below(256) as u8,
            })
            .collect();
        let (mut info, hops) =
            build::segment(r.chance(50), r.next() as u16, T0 - r.below(100_000) as u32, &hops);
        info.peering = peering;
        segs.push((info, hops));
    }
    let path = build::path(&segs).expect("1 to 3 segments");
    let host = RawHostAddr::from(HostAddr::V4([10, 0, 0, r.below(4) as u8]));
    let ias = [LOCAL, OTHER, Ia::new(2, 1)];
    let hdr = AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 8,
        dst_ia: ias[r.below(3) as usize],
        src_ia: ias[r.below(3) as usize],
        dst_host: host,
        src_host: host,
    };
    let repr = ScionRepr { hdr, path: PathRepr::Scion(path.repr()) };
    let mut pkt = vec![0u8; repr.buffer_len() + 8];
    repr.emit(&mut pkt).expect("valid packet");
    let h = ScionHeader::new_checked(&pkt[..]).expect("emitted");
    let range = h.path_offset()..h.header_len();
    // A random position; its hop (and, for a cross-over, the next one)
    // made valid under the router's key most of the time.
    let n_hf: usize = segs.iter().map(|s| s.1.len()).sum();
    let hf = r.below(n_hf as u64) as usize;
    let (mut inf, mut end) = (0, segs[0].1.len());
    while hf >= end {
        inf += 1;
        end += segs[inf].1.len();
    }
    let p = &mut pkt[range.clone()];
    if r.chance(85) {
        make_valid(p, inf as u8, hf as u8, key, r.next() as u16);
        if hf + 1 == end && inf + 1 < n_seg {
            make_valid(p, inf as u8 + 1, hf as u8 + 1, key, r.next() as u16);
        }
    }
    let _ = ScionPath::new_unchecked(&mut p[..]).set_curr(inf as u8, hf as u8);
    if r.chance(15) {
        // Corruption anywhere in the header or path.
        for _ in 0..1 + r.below(3) {
            let at = r.below(range.end as u64) as usize;
            pkt[at] ^= 1 << r.below(8);
        }
    }
    if r.chance(5) {
        pkt.truncate(r.below(pkt.len() as u64) as usize);
    }
    pkt
}

fn forwarder(r: &mut Rng) -> Forwarder {
    let mut ifaces = InterfaceTable::new();
    for ifid in 1..=6u16 {
        if r.chance(70) {
            ifaces.bind(ifid, ifid + 10);
        }
    }
    let cfg = ForwardConfig {
        local_port: 99,
        check_ingress: r.chance(80),
        local_ia: r.chance(50).then_some(LOCAL),
        ..ForwardConfig::default()
    };
    Forwarder::new(router_key(), ifaces, cfg)
}

/// One random burst through the stage and through the model.
fn check_burst(seed: u64) {
    let mut r = Rng(seed);
    let fwd = forwarder(&mut r);
    let key = router_key();
    let now = (u64::from(T0) + r.below(200_000)) * 1_000_000_000;
    let mut pkts: Vec<(Vec<u8>, u16)> = Vec::new();
    let n = 1 + r.below(BURST as u64) as usize;
    while pkts.len() < n {
        let pkt = packet(&mut r, &key);
        // Runs of the same hop (a flow), sometimes with one byte changed.
        for _ in 0..1 + r.below(4) {
            let mut p = pkt.clone();
            if r.chance(20) && !p.is_empty() {
                let at = r.below(p.len() as u64) as usize;
                p[at] ^= 1 << r.below(8);
            }
            let port = [0, 11, 12, 13, 14, 15, 16, 99][r.below(8) as usize];
            pkts.push((p, port));
        }
    }
    pkts.truncate(n);
    let mut batch = Batch::new();
    for (p, port) in &pkts {
        batch.push(p.clone(), *port).expect("at most a burst");
    }
    let mut stage = ScionForward::new(fwd.clone());
    stage.process(&mut batch, Now::from_unix_ns(now));
    let mut got = Vec::new();
    batch.drain(|buf, m| got.push((buf, m.verdict)));
    for (k, ((pkt, port), (out, verdict))) in pkts.iter().zip(got).enumerate() {
        let mut want = pkt.clone();
        let v = model(&fwd, &mut want, *port, now)
            .unwrap_or(Verdict::Forward { port: *port, class: Class::default() });
        assert_eq!(verdict, v, "seed {seed} packet {k}");
        if matches!(v, Verdict::Forward { .. }) {
            assert_eq!(out, want, "seed {seed} packet {k}: bytes");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn bursts_decide_as_the_model(seed in any::<u64>()) {
        check_burst(seed);
    }
}

/// The generator reaches every outcome the rules have (so the comparison
/// above is not only about drops).
#[test]
fn the_generator_covers_the_outcomes() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..3000u64 {
        let mut r = Rng(seed);
        let fwd = forwarder(&mut r);
        let now = (u64::from(T0) + r.below(200_000)) * 1_000_000_000;
        let mut pkt = packet(&mut r, &router_key());
        let port = [0, 11, 12, 13][r.below(4) as usize];
        if let Some(v) = model(&fwd, &mut pkt, port, now) {
            seen.insert(match v {
                Verdict::Forward { port: 99, .. } => "local".to_string(),
                Verdict::Forward { .. } => "forward".to_string(),
                Verdict::Drop(r) => r.label().to_string(),
                other => format!("{other:?}"),
            });
        }
    }
    for want in [
        "local",
        "forward",
        "bad_mac",
        "expired",
        "wrong_interface",
        "no_route",
        "policy",
        "malformed",
        "truncated",
        "unsupported",
    ] {
        assert!(seen.contains(want), "{want} never reached: {seen:?}");
    }
}
