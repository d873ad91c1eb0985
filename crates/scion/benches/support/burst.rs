//! The transit workload of the forwarding measurements, shared by the
//! `forward_burst` bench and the `scion_profile` example (included into both
//! with `#[path]`, so the two measure the same packets): bursts of 32
//! packets arriving at the transit AS of a one-segment path, as SCION over
//! UDP/IPv4 in Ethernet frames, with the metadata the parse stage leaves
//! for them (as in the router's SCION pipelines, where the parse stage runs
//! first).

#![allow(dead_code)]

use mac::Key;
use packet::scion::{AddrHdrRepr, EpicPathRepr, PathRepr, RawHostAddr, ScionRepr};
use packet::{HostAddr, Ia};
use pipeline::{Batch, Meta, Now, Parse, ParseConfig, Proto, Stage, BURST};
use scion::build::{self, HopSpec};
use scion::{ForwardConfig, Forwarder, ForwardingKey, InterfaceTable, ScionForward};

/// When the forwarded packets' info fields were stamped (Unix s).
pub const T0: u32 = 1_700_000_000;
/// When they are forwarded (Unix ns).
pub const NOW: u64 = (T0 as u64 + 60) * 1_000_000_000;

/// The transit AS (key 2) of a one-segment path over ASes 1, 2, 3;
/// interface 21 on port 0, 23 on port 1.
pub fn transit() -> ScionForward {
    let key = ForwardingKey::new(&Key::from([2; 16]));
    let ifaces = InterfaceTable::new().with(21, 0).with(23, 1);
    ScionForward::new(Forwarder::new(key, ifaces, ForwardConfig::default()))
}

/// A burst's frames as they arrive and the metadata the parse stage leaves
/// for them.
pub struct Workload {
    pub frames: Vec<Vec<u8>>,
    pub metas: Vec<Meta>,
}

/// 32 packets of host `i` over the path of [`transit`], as they arrive at
/// AS 2 (CurrHF 1 of 3 hops, so for EPIC-HP AS 2 is the penultimate hop
/// and checks the PHVF): one path, as a burst of one flow (or of flows
/// that share their path) brings it. Bare SCION packets: [`workload`]
/// puts them in frames.
pub fn burst_packets(epic_hp: bool) -> Vec<Vec<u8>> {
    packets(if epic_hp { Kind::EpicHp } else { Kind::Scion }, false)
}

/// As [`burst_packets`], but each packet on a path of its own (another
/// SegID, so other hop-field MACs): nothing of one packet's parse or MAC
/// applies to the next.
pub fn burst_packets_distinct(epic_hp: bool) -> Vec<Vec<u8>> {
    packets(if epic_hp { Kind::EpicHp } else { Kind::Scion }, true)
}

/// As [`burst_packets_distinct`], as EPIC-Z packets (PathType 201): the
/// stage forwards their embedded SCION path (their HVFs are Z-Lane's).
pub fn burst_packets_distinct_epic_z() -> Vec<Vec<u8>> {
    packets(Kind::EpicZ, true)
}

/// The path type of a workload's packets.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Scion,
    EpicHp,
    EpicZ,
}

/// The SCION packets `scion` in Ethernet frames over UDP/IPv4 (port
/// 30041), with the parse stage's metadata (all arrived on port 0).
pub fn workload(scion: Vec<Vec<u8>>) -> Workload {
    let frames: Vec<Vec<u8>> = scion.iter().enumerate().map(|(i, p)| underlay(i, p)).collect();
    let mut b = Batch::new();
    for f in &frames {
        b.push(f.clone(), 0).expect("32 fit");
    }
    Parse::new(ParseConfig::default()).process(&mut b, Now::from_unix_ns(NOW));
    let metas = b.metas().to_vec();
    assert!(
        metas.iter().all(|m| m.proto == Proto::Scion && m.scion.get().is_some()),
        "the parse stage checked every SCION header"
    );
    Workload { frames, metas }
}

/// SCION packet `p` of host `i` in an Ethernet frame over UDP/IPv4.
fn underlay(i: usize, p: &[u8]) -> Vec<u8> {
    let mut udp = vec![0u8; 8];
    udp[0..2].copy_from_slice(&(30042 + i as u16).to_be_bytes());
    udp[2..4].copy_from_slice(&30041u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + p.len()) as u16).to_be_bytes());
    udp.extend_from_slice(p);
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
    let mut f = vec![0u8; 14];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&udp);
    f
}

fn packets(kind: Kind, distinct: bool) -> Vec<Vec<u8>> {
    let hs = |k: u8, i, e| HopSpec {
        key: ForwardingKey::new(&Key::from([k; 16])),
        cons_ingress: i,
        cons_egress: e,
        exp_time: 255,
    };
    (0..BURST as u8)
        .map(|i| {
            let beta0 = if distinct { 0x1234 + u16::from(i) * 0x0101 } else { 0x1234 };
            let (info, hops, auth) = build::segment_with_authenticators(
                true,
                beta0,
                T0,
                &[hs(1, 0, 12), hs(2, 21, 23), hs(3, 32, 0)],
            );
            let mut path = build::path(&[(info, hops)]).expect("path");
            path.curr_hf = 1;
            path.info_fields[0].seg_id = scion::chain_seg_id(beta0, &path.hops()[0].mac);
            let hdr = AddrHdrRepr {
                qos: 0,
                flow_id: 1,
                next_hdr: 17,
                payload_len: 0,
                dst_ia: Ia::new(1, 3),
                src_ia: Ia::new(1, 1),
                dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 3])),
                src_host: RawHostAddr::from(HostAddr::V4([10, 0, 1, i])),
            };
            if kind == Kind::EpicHp {
                build::epic_hp_packet(&hdr, &path, &auth[1], &auth[2], NOW, 0, 1, &[0; 64])
                    .expect("EPIC-HP packet")
            } else {
                let hvfs = [[0xee; 4]; 3];
                let path = match kind {
                    Kind::EpicZ => PathRepr::EpicZ(EpicPathRepr {
                        counter: u32::from(i),
                        hvfs: (&hvfs[..]).into(),
                        path: path.repr(),
                        ..EpicPathRepr::default()
                    }),
                    _ => PathRepr::Scion(path.repr()),
                };
                let r = ScionRepr { hdr: AddrHdrRepr { payload_len: 64, ..hdr }, path };
                let mut b = vec![0; r.buffer_len() + 64];
                r.emit(&mut b).expect("SCION packet");
                b
            }
        })
        .collect()
}

/// A burst of `w`'s frames, all arrived on port 0.
pub fn burst(w: &Workload) -> Batch<Vec<u8>> {
    let mut b = Batch::new();
    for p in &w.frames {
        b.push(p.clone(), 0).expect("32 fit");
    }
    b
}

/// Puts the frames of `w` back into `b` as they arrived, with the parse
/// stage's metadata.
#[inline(always)]
pub fn restore(b: &mut Batch<Vec<u8>>, w: &Workload) {
    for (i, p) in w.frames.iter().enumerate() {
        b.buf_mut(i).copy_from_slice(p);
    }
    b.metas_mut().copy_from_slice(&w.metas);
}
