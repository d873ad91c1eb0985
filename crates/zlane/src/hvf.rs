//! EPIC-Z hop validation fields: host-level V_i, AS-level Ṽ_i, freshness.

use mac::{Aes, Block, Cmac};
use packet::Ia;
use pipeline::DropReason;

/// Length of an HVF.
pub const HVF_LEN: usize = 4;
/// Length of the host-level HVF input.
pub const INPUT_LEN: usize = 40;
/// TsRel unit in nanoseconds (4 µs).
pub const TS_UNIT_NS: u64 = 4_000;

/// A 4-byte HVF.
pub type Hvf = [u8; HVF_LEN];

/// The 40-byte input of V_i:
/// `PktID(8) ‖ A_0(8) ‖ H_S zero-padded(16) ‖ σ_i(6) ‖ PayloadLen(2)`.
///
/// `zlane.md` also lists "6 zero bytes" after PayloadLen, which contradicts its
/// own total of 40 bytes; this crate MACs exactly the 40 listed field bytes
/// (CMAC pads the last partial block itself).
#[inline]
pub fn host_input(
    pkt_id: &[u8; 8],
    src_ia: Ia,
    src_host: &[u8; 16],
    sigma: &[u8; 6],
    payload_len: u16,
) -> [u8; INPUT_LEN] {
    let mut b = [0u8; INPUT_LEN];
    b[..8].copy_from_slice(pkt_id);
    b[8..16].copy_from_slice(&src_ia.to_bytes());
    b[16..32].copy_from_slice(src_host);
    b[32..38].copy_from_slice(sigma);
    b[38..40].copy_from_slice(&payload_len.to_be_bytes());
    b
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

/// Freshness window for EPIC-Z packet timestamps: `freshness = { past_ns,
/// future_ns }` of a `zlane-classify` stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct Freshness {
    /// Oldest accepted packet age (default 2 s).
    pub past_ns: u64,
    /// Largest accepted lead into the future (default 1 s).
    pub future_ns: u64,
}

impl Default for Freshness {
    fn default() -> Self {
        Freshness { past_ns: 2_000_000_000, future_ns: 1_000_000_000 }
    }
}

/// Absolute packet time: first info field's Timestamp plus TsRel × 4 µs.
#[inline]
pub fn packet_time_ns(info0_timestamp: u32, ts_rel: u32) -> u64 {
    u64::from(info0_timestamp) * 1_000_000_000 + u64::from(ts_rel) * TS_UNIT_NS
}

/// The packet times [`Freshness`] accepts at one instant, computed once
/// (per burst) so that each packet costs two comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreshWindow {
    /// Oldest accepted packet time.
    pub oldest_ns: u64,
    /// Newest accepted packet time.
    pub newest_ns: u64,
}

impl FreshWindow {
    /// Exactly [`Freshness::check`] at the window's instant.
    #[inline]
    pub fn check(&self, pkt_ns: u64) -> Result<(), DropReason> {
        if pkt_ns > self.newest_ns {
            Err(DropReason::FromFuture)
        } else if pkt_ns < self.oldest_ns {
            Err(DropReason::Expired)
        } else {
            Ok(())
        }
    }
}

impl Freshness {
    /// The window of packet times accepted at `now_unix_ns`
    /// (`now − past ..= now + future`, saturating).
    #[inline]
    pub fn window(&self, now_unix_ns: u64) -> FreshWindow {
        FreshWindow {
            // `now − pkt > past` ⇔ `pkt < now − past` (never when now ≤ past).
            oldest_ns: now_unix_ns.saturating_sub(self.past_ns),
            newest_ns: now_unix_ns.saturating_add(self.future_ns),
        }
    }

    /// Checks a packet time against `now_unix_ns`.
    #[inline]
    pub fn check(&self, pkt_ns: u64, now_unix_ns: u64) -> Result<(), DropReason> {
        if pkt_ns > now_unix_ns.saturating_add(self.future_ns) {
            Err(DropReason::FromFuture)
        } else if now_unix_ns.saturating_sub(pkt_ns) > self.past_ns {
            Err(DropReason::Expired)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mac::Key;

    #[test]
    fn window_decides_like_check() {
        let edges = [0, 1, 999_999_999, 1_000_000_000, 2_000_000_000, u64::MAX - 1, u64::MAX];
        for f in [Freshness::default(), Freshness { past_ns: 0, future_ns: u64::MAX }] {
            for now in edges.iter().copied().chain([5_000_000_000, 1_700_000_000_000_000_000]) {
                let w = f.window(now);
                for base in [now, 0, u64::MAX] {
                    for d in [0u64, 1, 999_999_999, 1_000_000_000, 1_000_000_001, 2_000_000_001] {
                        for pkt in [base.wrapping_sub(d), base.wrapping_add(d)] {
                            assert_eq!(
                                w.check(pkt),
                                f.check(pkt, now),
                                "{f:?} now {now} pkt {pkt}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn as_hvf_on_a_bare_schedule_equals_cmac() {
        for i in 0..64u8 {
            let key = Key::from([i.wrapping_mul(37); 16]);
            let v = [i, i ^ 0x5a, 0xff - i, 3];
            assert_eq!(as_hvf_aes(&Aes::new(&key), &v), as_hvf(&Cmac::new(&key), &v), "{i}");
        }
    }
}
