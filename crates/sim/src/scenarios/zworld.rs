//! SCION/EPIC-Z packet construction for the Z-Lane scenarios: ASes with
//! forwarding keys and DRKey secret values, paths with real hop-field MACs,
//! and packets with real host- or AS-level HVFs.
//!
//! A source AS's gateway is simulated with the real `ZlaneGateway` stage
//! where the scenario tracks that AS; other (attacking or background)
//! ASes' traffic is built already AS-authenticated (as their own gateway
//! would emit it), since only the on-path routers matter for them.

use mac::{Cmac, Key};
use packet::scion::{
    next_hdr, AddrHdrRepr, EpicPath, HopFieldRepr, InfoFieldRepr, PathRepr, PathType, RawHostAddr,
    ScionHeader, ScionRepr,
};
use packet::{HostAddr, Ia};
use scion::build::{self, HopSpec, ScionPathBuf};
use scion::ForwardingKey;
use zlane::hvf::{as_hvf, TS_UNIT_NS};
use zlane::keys::{Level1, SvKeys, EPIC_Z_PROTOCOL};

use crate::net::TAG_LEN;
use crate::rng::Rng;

/// One AS: identity, forwarding key, DRKey secret value.
#[derive(Clone, Debug)]
pub struct AsKeys {
    /// ISD-AS.
    pub ia: Ia,
    /// Hop-field MAC key.
    pub fwd: ForwardingKey,
    sv: [u8; 16],
}

/// DRKey epoch used by every scenario (wide enough for any run).
pub const EPOCH: (u64, u64) = (1_600_000_000, 1_900_000_000);

impl AsKeys {
    /// Random keys for `ia`.
    pub fn new(ia: Ia, rng: &mut Rng) -> Self {
        let mut k = [0u8; 16];
        let mut s = [0u8; 16];
        k[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        k[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        s[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        s[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        AsKeys { ia, fwd: ForwardingKey::new(&Key::from(k)), sv: s }
    }

    /// The router-side DRKey state of this AS.
    pub fn sv_keys(&self) -> SvKeys {
        SvKeys::new(&Key::from(self.sv), EPOCH.0, EPOCH.1)
    }

    /// Level-1 key K_{self, src}.
    pub fn level1(&self, src: Ia) -> Level1 {
        self.sv_keys().derive(src)
    }

    /// Raw level-1 key K_{self, src} (what the DRKey service hands to `src`).
    pub fn level1_raw(&self, src: Ia) -> [u8; 16] {
        self.sv_keys().derive_key(src)
    }

    /// Host-level EPIC-Z key K_{self, src:host}.
    pub fn host_key(&self, src: Ia, host: &RawHostAddr) -> Cmac {
        self.level1(src).host_cmac(EPIC_Z_PROTOCOL, host.type_len(), host.as_bytes())
    }
}

/// Interface of every AS on a path towards the previous AS.
pub const IF_IN: u16 = 1;
/// Interface of every AS on a path towards the next AS.
pub const IF_OUT: u16 = 2;

/// A one-segment path over `ases` (construction = travel direction): the
/// first AS is the source (ingress 0), the last the destination (egress 0),
/// all others enter on [`IF_IN`] and leave on [`IF_OUT`]. Positioned at hop
/// `at` with the SegID chained accordingly.
pub fn path(ases: &[&AsKeys], info_ts: u32, at: usize) -> ScionPathBuf {
    let n = ases.len();
    let hops: Vec<HopSpec> = ases
        .iter()
        .enumerate()
        .map(|(i, a)| HopSpec {
            key: a.fwd.clone(),
            cons_ingress: if i == 0 { 0 } else { IF_IN },
            cons_egress: if i + 1 == n { 0 } else { IF_OUT },
            exp_time: 255,
        })
        .collect();
    let beta0 = 0x5a5a;
    let seg: (InfoFieldRepr, Vec<HopFieldRepr>) = build::segment(true, beta0, info_ts, &hops);
    let mut p = build::path(&[seg]).unwrap_or_default();
    let mut beta = beta0;
    for h in p.hops()[..at].iter() {
        beta = scion::chain_seg_id(beta, &h.mac);
    }
    p.curr_hf = at as u8;
    p.info_fields[0].seg_id = beta;
    p
}

/// The IPv4 host address 10.a.b.c.
pub fn host(a: u8, b: u8, c: u8) -> RawHostAddr {
    RawHostAddr::from(HostAddr::V4([10, a, b, c]))
}

/// Header fields of a packet from `src` to `dst`.
pub fn addr(src: Ia, src_host: RawHostAddr, dst: Ia, next_hdr: u8) -> AddrHdrRepr {
    AddrHdrRepr {
        qos: 0,
        flow_id: 1,
        next_hdr,
        payload_len: 0,
        dst_ia: dst,
        src_ia: src,
        dst_host: host(255, 0, 1),
        src_host,
    }
}

/// Builds EPIC-Z packets of one sender at a given time (fresh timestamps).
#[derive(Clone)]
pub struct EpicBuilder {
    /// Address header.
    pub hdr: AddrHdrRepr,
    /// The SCION path inside.
    pub path: ScionPathBuf,
    /// Host keys per hop field.
    pub host_keys: Vec<Cmac>,
    /// Hop indices to turn AS-level (Q set), with K_{A_i, src}; empty: host-level.
    pub as_keys: Vec<(usize, Cmac)>,
    /// Whole packet length in bytes (payload sized to fit, ≥ the tag).
    pub packet_bytes: usize,
    /// Info-field timestamp (Unix s).
    pub info_ts: u32,
}

impl EpicBuilder {
    /// The UDP packets of `src`'s host `host` over the three-AS path
    /// `src → router → dst`, positioned at `router` (hop 1), with host-level
    /// HVFs; with `q`, the router's HVF is AS-level and Q is set (as `src`'s
    /// gateway marks a packet within its guaranteed rate).
    pub fn via(
        src: &AsKeys,
        router: &AsKeys,
        dst: &AsKeys,
        host: RawHostAddr,
        q: bool,
        packet_bytes: usize,
        info_ts: u32,
    ) -> Self {
        EpicBuilder {
            hdr: addr(src.ia, host, dst.ia, next_hdr::UDP),
            path: path(&[src, router, dst], info_ts, 1),
            host_keys: vec![
                src.host_key(src.ia, &host),
                router.host_key(src.ia, &host),
                dst.host_key(src.ia, &host),
            ],
            as_keys: if q {
                vec![(1, Cmac::new(&Key::from(router.level1_raw(src.ia))))]
            } else {
                Vec::new()
            },
            packet_bytes,
            info_ts,
        }
    }

    /// The packet at Unix time `unix_ns`.
    pub fn build(&self, unix_ns: u64) -> Vec<u8> {
        let rel = unix_ns.saturating_sub(u64::from(self.info_ts) * 1_000_000_000) / TS_UNIT_NS;
        let keys: Vec<&Cmac> = self.host_keys.iter().collect();
        let hdr_len = ScionRepr {
            hdr: self.hdr,
            path: PathRepr::EpicZ(packet::scion::EpicPathRepr {
                path: self.path.repr(),
                ..Default::default()
            }),
        }
        .buffer_len();
        let payload = vec![0u8; self.packet_bytes.saturating_sub(hdr_len).max(TAG_LEN)];
        let Some(mut pkt) =
            zlane::host::epic_packet(&self.hdr, &self.path, &keys, rel as u32, 0, 1, &payload)
        else {
            return Vec::new();
        };
        if !self.as_keys.is_empty() {
            set_as_level(&mut pkt, &self.as_keys);
        }
        pkt
    }
}

/// Replaces the HVFs of the listed hops by their AS-level form and sets Q.
fn set_as_level(pkt: &mut [u8], keys: &[(usize, Cmac)]) {
    let Ok(h) = ScionHeader::new_checked(&*pkt) else { return };
    let range = h.path_offset()..h.header_len();
    let Ok(mut e) = EpicPath::new_checked(&mut pkt[range]) else { return };
    for (i, k) in keys {
        if let Some(v) = e.hvf(*i) {
            let _ = e.set_hvf(*i, as_hvf(k, &v));
        }
    }
    e.set_q(true);
}

/// A plain SCION packet (PathType 1) of `packet_bytes` over `path`.
pub fn scion_packet(hdr: &AddrHdrRepr, path: &ScionPathBuf, packet_bytes: usize) -> Vec<u8> {
    emit(ScionRepr { hdr: *hdr, path: PathRepr::Scion(path.repr()) }, packet_bytes, None)
}

/// A packet with path type `ty` and an empty path (e.g. SIBRA-typed
/// traffic that Z-Lane alone classifies by type).
pub fn typed_packet(hdr: &AddrHdrRepr, ty: PathType, packet_bytes: usize) -> Vec<u8> {
    emit(ScionRepr { hdr: *hdr, path: PathRepr::Empty }, packet_bytes, Some(ty))
}

fn emit(repr: ScionRepr<'_>, packet_bytes: usize, ty: Option<PathType>) -> Vec<u8> {
    let hl = repr.buffer_len();
    let payload = packet_bytes.saturating_sub(hl).max(TAG_LEN);
    let mut r = repr;
    r.hdr.payload_len = payload as u16;
    let mut buf = vec![0u8; hl + payload];
    if r.emit(&mut buf).is_err() {
        return Vec::new();
    }
    if let Some(t) = ty {
        if let Ok(mut h) = ScionHeader::new_checked(&mut buf[..]) {
            h.set_path_type(t);
        }
    }
    buf
}
