//! Helpers shared by the test files (`mod common;` in each).
//!
//! Every test file is its own crate and compiles its own copy of this module,
//! using only part of it; hence the `dead_code` allowance.
#![allow(dead_code)]

use packet::scion::{HopFieldRepr, InfoFieldRepr};
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
