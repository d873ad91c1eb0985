//! EPIC-Z hop validation fields: host-level V_i, AS-level Ṽ_i, freshness.

use mac::{Aes, Block, Cmac};
use packet::scion::{EpicClock, HvfOrigin};
use packet::Ia;

/// The freshness window, shared with EPIC-HP (`scion::epic`).
pub use scion::epic::{FreshWindow, Freshness};

/// Length of an HVF.
pub const HVF_LEN: usize = 4;
/// Length of the host-level HVF input.
pub const INPUT_LEN: usize = packet::scion::epic_common::EPIC_Z_INPUT_LEN;
/// TsRel unit in nanoseconds (4 µs).
pub const TS_UNIT_NS: u64 = EpicClock::EPIC_Z.unit_ns();

/// A 4-byte HVF.
pub type Hvf = [u8; HVF_LEN];

/// The 40-byte input of V_i:
/// `PktID(8) ‖ A_0(8) ‖ H_S zero-padded(16) ‖ σ_i(6) ‖ PayloadLen(2)`.
///
/// `zlane.md` also lists "6 zero bytes" after PayloadLen, which contradicts its
/// own total of 40 bytes; this crate MACs exactly the 40 listed field bytes
/// (CMAC pads the last partial block itself). The layout lives with EPIC-HP's
/// in `packet` ([`HvfOrigin::epic_z_input`]).
#[inline]
pub fn host_input(
    pkt_id: &[u8; 8],
    src_ia: Ia,
    src_host: &[u8; 16],
    sigma: &[u8; 6],
    payload_len: u16,
) -> [u8; INPUT_LEN] {
    // The type/length code is not part of this input.
    HvfOrigin { src_ia, src_type_len: 0, src_host: *src_host, payload_len }
        .epic_z_input(pkt_id, sigma)
}

/// `V_i = CMAC_{K_i}(input)[0:4]` with K_i the AS-host key of the on-path AS.
#[inline]
pub fn host_hvf(k: &Cmac, input: &[u8; INPUT_LEN]) -> Hvf {
    mac::truncate::<HVF_LEN>(&k.mac(input))
}

/// `Ṽ_i = CMAC_{K̃_i}(V_i ‖ 12 zero bytes)[0:4]` with K̃_i = K_{A_i,A_0} (level 1).
#[inline]
pub fn as_hvf(k: &Cmac, v: &Hvf) -> Hvf {
    let mut b = [0u8; 16];
    b[..HVF_LEN].copy_from_slice(v);
    mac::truncate::<HVF_LEN>(&k.mac(&b))
}

/// Ṽ_i under a `drkey` level-1 key (the router's cached schedule): CMAC
/// subkey derivation (one AES block) plus the one-block CMAC, straight on the
/// cached schedule (no copy of it).
#[inline]
pub fn as_hvf_level1(k: &drkey::Level1, v: &Hvf) -> Hvf {
    as_hvf_aes(k.aes(), v)
}

/// [`as_hvf`] under an expanded key without a precomputed CMAC subkey: the
/// message is one complete block, so the tag is `AES_K((V ‖ 0¹²) ⊕ K1)` with
/// `K1 = dbl(AES_K(0))`.
#[inline]
pub fn as_hvf_aes(k: &Aes, v: &Hvf) -> Hvf {
    let mut l = [0u8; 16];
    k.encrypt_block(&mut l);
    let mut blk = dbl(&l);
    blk.iter_mut().zip(v).for_each(|(x, b)| *x ^= b);
    k.encrypt_block(&mut blk);
    mac::truncate::<HVF_LEN>(&blk)
}

/// Doubling in GF(2^128) (RFC 4493 §2.3), for CMAC subkeys of batched MACs.
#[inline]
fn dbl(b: &Block) -> Block {
    let v = u128::from_be_bytes(*b);
    let carry = (v >> 127) as u8;
    let mut out = (v << 1).to_be_bytes();
    // Constant-time conditional XOR with R_b = 0x87.
    out[15] ^= 0x87 & carry.wrapping_neg();
    out
}

/// Absolute packet time: first info field's Timestamp plus TsRel × 4 µs.
#[inline]
pub fn packet_time_ns(info0_timestamp: u32, ts_rel: u32) -> u64 {
    EpicClock::EPIC_Z.packet_time_ns(info0_timestamp, ts_rel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mac::Key;

    #[test]
    fn as_hvf_on_a_bare_schedule_equals_cmac() {
        for i in 0..64u8 {
            let key = Key::from([i.wrapping_mul(37); 16]);
            let v = [i, i ^ 0x5a, 0xff - i, 3];
            assert_eq!(as_hvf_aes(&Aes::new(&key), &v), as_hvf(&Cmac::new(&key), &v), "{i}");
        }
    }
}
