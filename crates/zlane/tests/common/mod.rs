//! Shared fixtures: a transit AS with a forwarding key and DRKey SV, and
//! EPIC-Z packets from a source host.
#![allow(dead_code)]

use drkey::{Epoch, Protocol, SecretValue};
use mac::{Cmac, Key};
use packet::scion::{AddrHdrRepr, RawHostAddr};
use packet::{HostAddr, Ia};
use pipeline::Now;
use scion::build::{self, HopSpec, ScionPathBuf};
use scion::ForwardingKey;
use zlane::keys::{SvKeys, EPIC_Z_PROTOCOL};

pub const T0: u64 = 1_700_000_000_000_000_000;
pub const INFO_TS: u32 = 1_700_000_000;
pub const TRANSIT: Ia = Ia::new(1, 20);

pub fn now(offset_ns: u64) -> Now {
    Now::from_unix_ns(T0 + offset_ns)
}

/// The transit AS's router keys: one fixed generic SV over a long window.
pub fn sv() -> SvKeys {
    SvKeys::new(&Key::from([2; 16]), 1_699_999_000, 1_700_100_000)
}

/// The same SV through `drkey`'s uncached API (the epoch does not enter the
/// derivation), the reference for every expected key.
pub fn drkey_sv() -> SecretValue {
    SecretValue::from_key(
        Key::from([2; 16]),
        Protocol::GENERIC,
        Epoch::new(1_699_999_000, 1_700_050_000).unwrap(),
    )
}

pub fn fwd_key() -> ForwardingKey {
    ForwardingKey::new(&Key::from([1; 16]))
}

/// A 3-hop path positioned at hop 1 (the transit AS).
pub fn path() -> ScionPathBuf {
    let hops: Vec<HopSpec> = [(0, 1), (2, 3), (4, 0)]
        .iter()
        .map(|&(i, e)| HopSpec { key: fwd_key(), cons_ingress: i, cons_egress: e, exp_time: 255 })
        .collect();
    let mut p = build::path(&[build::segment(true, 7, INFO_TS, &hops)]).unwrap();
    p.curr_hf = 1;
    p.info_fields[0].seg_id = scion::chain_seg_id(7, &p.hops()[0].mac);
    p
}

pub fn host(n: u32) -> RawHostAddr {
    RawHostAddr::from(HostAddr::V4(n.to_be_bytes()))
}

pub fn hdr(src: Ia, h: RawHostAddr) -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr: 17,
        payload_len: 0,
        dst_ia: Ia::new(1, 30),
        src_ia: src,
        dst_host: h,
        src_host: h,
    }
}

/// Host-level AS-host key of the transit AS for (src, h): `drkey`'s generic
/// level-2 AS-host derivation with protocol id 64, uncached.
pub fn host_key(sv: &SecretValue, src: Ia, h: &RawHostAddr) -> Cmac {
    let host = h.decode().unwrap();
    Cmac::new(&sv.level1(src).generic_as_host(Protocol(EPIC_Z_PROTOCOL), &host))
}

/// An EPIC-Z packet with host-level HVFs, timestamp `ts_rel` (4 µs units).
pub fn packet(src: Ia, h: RawHostAddr, ts_rel: u32, counter: u32, payload: usize) -> Vec<u8> {
    packet_under(&drkey_sv(), src, h, ts_rel, counter, payload)
}

/// [`packet`] with the host keys derived from `sv`.
pub fn packet_under(
    sv: &SecretValue,
    src: Ia,
    h: RawHostAddr,
    ts_rel: u32,
    counter: u32,
    payload: usize,
) -> Vec<u8> {
    let k = host_key(sv, src, &h);
    zlane::host::epic_packet(
        &hdr(src, h),
        &path(),
        &[&k, &k, &k],
        ts_rel,
        0,
        counter,
        &vec![0u8; payload],
    )
    .unwrap()
}

/// K_{transit,src} as the source AS's gateway receives it.
pub fn as_key(src: Ia) -> Key {
    drkey_sv().level1_key(src)
}

/// A gateway of `src` knowing the transit AS's key for every hop of [`path`].
pub fn gateway(src: Ia, cfg: zlane::GatewayConfig) -> zlane::Gateway {
    let mut g = zlane::Gateway::new(cfg).unwrap();
    g.set_as_key(TRANSIT, &as_key(src));
    for h in path().hops() {
        assert!(g.register_hop(h.mac, TRANSIT));
    }
    g
}

/// Runs `bursts` through a `ZlaneClassify` stage and through
/// [`zlane::Classifier::classify`] one by one (burst `b` at `b * step_ns`),
/// compares every verdict and the counters after each burst, then calls
/// `after(b, stage's classifier, per-packet classifier)` for more checks.
pub fn check_stage_against_classify(
    cfg: &zlane::config::RouterConfig,
    bursts: &[Vec<Vec<u8>>],
    step_ns: u64,
    mut after: impl FnMut(
        usize,
        &zlane::Classifier,
        &zlane::Classifier,
    ) -> Result<(), proptest::test_runner::TestCaseError>,
) -> Result<(), proptest::test_runner::TestCaseError> {
    use pipeline::{Batch, Stage, Verdict};
    let mut one = zlane::Classifier::new(cfg, sv(), now(0).mono_ns).unwrap();
    let mut stage =
        zlane::ZlaneClassify::new(zlane::Classifier::new(cfg, sv(), now(0).mono_ns).unwrap());
    for (b, pkts) in bursts.iter().enumerate() {
        let t = now(b as u64 * step_ns);
        let want: Vec<_> = pkts.iter().map(|p| one.classify(p, t)).collect();
        let mut batch: Batch<Vec<u8>> = Batch::new();
        for p in pkts {
            batch.push(p.clone(), 0).unwrap();
        }
        stage.process(&mut batch, t);
        for (i, w) in want.iter().enumerate() {
            let got = match batch.meta(i).verdict {
                Verdict::Drop(r) => Err(r),
                _ => Ok(batch.meta(i).class().unwrap()),
            };
            proptest::prop_assert_eq!(got, *w, "burst {} packet {}", b, i);
        }
        proptest::prop_assert_eq!(stage.classifier().counters(), one.counters(), "burst {}", b);
        after(b, stage.classifier(), &one)?;
    }
    Ok(())
}
