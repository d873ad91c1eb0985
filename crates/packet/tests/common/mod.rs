//! Helpers shared by the test files (`mod common;` in each).
//!
//! Every test file is its own crate and compiles its own copy of this module,
//! using only part of it; hence the `dead_code` allowance.
#![allow(dead_code)]

use packet::scion::{EpicPathRepr, Fields, HopFieldRepr, InfoFieldRepr, ScionPathRepr};
use proptest::prelude::*;

/// Decodes hex written with spaces and line breaks between the bytes.
pub fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace([' ', '\n'], "")).unwrap()
}

/// Any info field (every flag, SegID and timestamp).
pub fn arb_info() -> impl Strategy<Value = InfoFieldRepr> {
    (any::<bool>(), any::<bool>(), any::<u16>(), any::<u32>()).prop_map(
        |(peering, cons_dir, seg_id, timestamp)| InfoFieldRepr {
            peering,
            cons_dir,
            seg_id,
            timestamp,
        },
    )
}

/// Any hop field (every flag, ExpTime, interface and MAC).
pub fn arb_hop() -> impl Strategy<Value = HopFieldRepr> {
    (any::<bool>(), any::<bool>(), any::<u8>(), any::<u16>(), any::<u16>(), any::<[u8; 6]>())
        .prop_map(|(ingress_alert, egress_alert, exp_time, cons_ingress, cons_egress, mac)| {
            HopFieldRepr { ingress_alert, egress_alert, exp_time, cons_ingress, cons_egress, mac }
        })
}

/// The parts of a SCION path, owned (a `ScionPathRepr` borrows its hop
/// fields, so strategies yield these and tests take the representation).
#[derive(Clone, Debug, Default)]
pub struct PathParts {
    pub curr_inf: u8,
    pub curr_hf: u8,
    pub seg_lens: [u8; 3],
    pub info_fields: [InfoFieldRepr; 3],
    pub hops: Vec<HopFieldRepr>,
}

impl PathParts {
    /// The representation over these parts.
    pub fn repr(&self) -> ScionPathRepr<'_> {
        ScionPathRepr {
            curr_inf: self.curr_inf,
            curr_hf: self.curr_hf,
            seg_lens: self.seg_lens,
            info_fields: self.info_fields,
            hop_fields: Fields::Decoded(&self.hops),
        }
    }
}

/// The parts of an EPIC-Z path, owned.
#[derive(Clone, Debug, Default)]
pub struct EpicParts {
    pub ts_rel: u32,
    pub core_id: u8,
    pub counter: u32,
    pub q: bool,
    pub hvfs: Vec<[u8; 4]>,
    pub path: PathParts,
}

impl EpicParts {
    /// The representation over these parts.
    pub fn repr(&self) -> EpicPathRepr<'_> {
        EpicPathRepr {
            ts_rel: self.ts_rel,
            core_id: self.core_id,
            counter: self.counter,
            q: self.q,
            hvfs: Fields::Decoded(&self.hvfs),
            path: self.path.repr(),
        }
    }
}

/// A path of `segs` (SegLen and info field each) positioned by the two
/// indices, with hops taken from `hops` (at least as many as the SegLens sum).
pub fn path_parts(
    segs: &[(u8, InfoFieldRepr)],
    ci: prop::sample::Index,
    ch: prop::sample::Index,
    hops: &[HopFieldRepr],
) -> PathParts {
    let mut r = PathParts::default();
    for (i, (s, inf)) in segs.iter().enumerate() {
        r.seg_lens[i] = *s;
        r.info_fields[i] = *inf;
    }
    let curr_inf = ci.index(segs.len());
    let start: usize = segs[..curr_inf].iter().map(|s| usize::from(s.0)).sum();
    r.curr_inf = curr_inf as u8;
    r.curr_hf = (start + ch.index(usize::from(segs[curr_inf].0))) as u8;
    let n: usize = segs.iter().map(|s| usize::from(s.0)).sum();
    r.hops = hops[..n].to_vec();
    r
}
