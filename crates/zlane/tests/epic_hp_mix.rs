//! A border pipeline `[zlane-classify, scion-forward]` carrying EPIC-Z and
//! SCION's EPIC-HP side by side: Z-Lane checks EPIC-Z HVFs and classes
//! EPIC-HP as unauthenticated (U); `scion-forward` checks the EPIC-HP PHVF
//! at the penultimate hop and forwards both.

mod common;

use common::*;
use packet::scion::ScionHeader;
use packet::Ia;
use pipeline::{Batch, DropReason, Pipeline, Verdict};
use scion::build::{self, HopSpec};
use scion::{ForwardConfig, Forwarder, InterfaceTable, ScionForward};
use zlane::class::{A, U};
use zlane::config::{Origin, Rate, RateConfig, RouterConfig};
use zlane::{Classifier, ZlaneClassify};

const SRC: Ia = Ia::new(1, 10);

/// The EPIC-HP packet over [`path`] (at its hop 1 of 3: the penultimate),
/// HVFs keyed with the authenticators of hop fields 1 and 2.
fn epic_hp_packet() -> Vec<u8> {
    let hops: Vec<HopSpec> = [(0, 1), (2, 3), (4, 0)]
        .iter()
        .map(|&(i, e)| HopSpec { key: fwd_key(), cons_ingress: i, cons_egress: e, exp_time: 255 })
        .collect();
    let (_, _, auth) = build::segment_with_authenticators(true, 7, INFO_TS, &hops);
    build::epic_hp_packet(&hdr(SRC, host(5)), &path(), &auth[1], &auth[2], T0, 0, 1, &[0; 10])
        .unwrap()
}

#[test]
fn epic_z_and_epic_hp_share_the_border_pipeline() {
    let cfg = RouterConfig {
        local_ia: TRANSIT,
        rates: vec![RateConfig { origin: Origin::As(SRC), rate: Some(Rate::Bps(1_000_000_000)) }],
        ..Default::default()
    };
    let classify = ZlaneClassify::new(Classifier::new(&cfg, sv(), now(0).mono_ns).unwrap());
    let ifaces = InterfaceTable::new().with(2, 0).with(3, 1);
    let forward = ScionForward::new(Forwarder::new(fwd_key(), ifaces, ForwardConfig::default()));
    let mut border: Pipeline<Vec<u8>> = Pipeline::new().with(classify).with(forward);

    let epic_z = packet(SRC, host(5), 0, 1, 10);
    let epic_hp = epic_hp_packet();
    let mut forged_z = epic_z.clone();
    let po = ScionHeader::new_checked(&epic_z[..]).unwrap().path_offset();
    forged_z[po + 12 + 4] ^= 1; // the transit AS's HVF (hop 1)
    let mut forged_hp = epic_hp.clone();
    forged_hp[po + 8] ^= 1; // PHVF
    let mut b = Batch::new();
    for p in [epic_z, epic_hp, forged_z, forged_hp] {
        b.push(p, 0).unwrap();
    }
    border.run(&mut b, now(0));
    let mut out = Vec::new();
    b.drain(|_, m| out.push(m.verdict));
    assert_eq!(
        out,
        [
            Verdict::Forward { port: 1, class: A },
            Verdict::Forward { port: 1, class: U },
            Verdict::Drop(DropReason::BadMac),
            Verdict::Drop(DropReason::BadMac),
        ]
    );
}
