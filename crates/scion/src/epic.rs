//! EPIC at the border router: packet freshness (shared by EPIC-HP and
//! Z-Lane's EPIC-Z) and the hop validation fields of EPIC-HP (SCION
//! PathType 3, "EPIC for hidden paths").
//!
//! # EPIC-HP, as SCION defines it
//! The path carries a packet ID (EpicTS ‖ Counter), a PHVF, an LHVF and a
//! complete SCION path. Every AS forwards it as a SCION path; the AS at the
//! penultimate hop field (CurrHF = n − 2 on arrival) also checks the PHVF,
//! the AS at the last (CurrHF = n − 1) the LHVF:
//!
//! ```text
//! HVF = CBC-MAC_σ(Flags ‖ Timestamp₀ ‖ PktID ‖ SrcIA ‖ SrcHost ‖ PayloadLen ‖ 0-pad)[0:4]
//! ```
//!
//! keyed with σ, the full 16-byte hop-field MAC the router just verified
//! (at a segment cross-over, that of the second hop field, the down
//! segment's), over the input [`HvfOrigin::epic_hp_input`] lays out.
//! Timestamp₀ is the first info field's Timestamp; the packet was sent at
//! `Timestamp₀ + (EpicTS + 1) × 21 µs` ([`EpicClock::EPIC_HP`]), and SCION
//! accepts it up to 1 s ahead of the router's clock and up to 2 s + 1 s
//! behind it ([`Freshness::EPIC_HP`]).
//!
//! The source computes both HVFs with [`hvf`]; the router checks with
//! [`verify_hvf`] (the [`ScionForward`](crate::ScionForward) stage does it
//! for every EPIC-HP packet at those two hops).

use mac::{Aes, Block};
use packet::scion::{EpicClock, EpicHpInput, HvfOrigin, PktId};
use pipeline::DropReason;

/// Length of an EPIC-HP hop validation field.
pub const HVF_LEN: usize = 4;

/// The EPIC-HP HVF under hop authenticator `sigma` (the full 16-byte
/// hop-field MAC): `CBC-MAC_σ(input)[0:4]` with a zero IV.
///
/// σ is a different key for every path, so the AES key schedule is expanded
/// here, per call (about the cost of two blocks).
#[inline]
pub fn hvf(sigma: &Block, input: &EpicHpInput) -> [u8; HVF_LEN] {
    hvf_with(&Aes::from_bytes(sigma), input)
}

/// [`hvf`] with σ's key schedule expanded by the caller (who may keep it
/// for the next packet of the same path).
#[inline]
pub fn hvf_with(sigma: &Aes, input: &EpicHpInput) -> [u8; HVF_LEN] {
    mac::truncate::<HVF_LEN>(&sigma.cbc_mac_blocks(input.blocks()))
}

/// Whether `got` is the HVF of `input` under `sigma` (constant-time compare).
#[inline]
pub fn verify_hvf(sigma: &Block, input: &EpicHpInput, got: &[u8; HVF_LEN]) -> bool {
    mac::ct_eq(&hvf(sigma, input), got)
}

/// Both HVFs a source writes into an EPIC-HP packet, given the full hop
/// authenticators of the penultimate (`sigma_ph`) and the last hop
/// (`sigma_lh`), the packet ID, the first info field's Timestamp and the
/// packet's origin: `(PHVF, LHVF)`.
pub fn source_hvfs(
    sigma_ph: &Block,
    sigma_lh: &Block,
    pkt_id: &PktId,
    info0_ts: u32,
    origin: &HvfOrigin,
) -> ([u8; HVF_LEN], [u8; HVF_LEN]) {
    let input = origin.epic_hp_input(&pkt_id.to_bytes(), info0_ts);
    (hvf(sigma_ph, &input), hvf(sigma_lh, &input))
}

/// The accepted age of an EPIC packet's send time (a field of its path
/// plus the first info field's Timestamp) relative to the router's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct Freshness {
    /// Oldest accepted packet age.
    pub past_ns: u64,
    /// Largest accepted lead into the future.
    pub future_ns: u64,
}

impl Freshness {
    /// EPIC-Z (`zlane.md`): 2 s old, 1 s ahead.
    pub const EPIC_Z: Freshness = Freshness { past_ns: 2_000_000_000, future_ns: 1_000_000_000 };
    /// EPIC-HP (SCION): a packet lifetime of 2 s plus a clock skew of 1 s
    /// behind, the clock skew of 1 s ahead.
    pub const EPIC_HP: Freshness = Freshness { past_ns: 3_000_000_000, future_ns: 1_000_000_000 };

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

/// EPIC-Z's window (what Z-Lane's configuration defaults to).
impl Default for Freshness {
    fn default() -> Self {
        Freshness::EPIC_Z
    }
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

    /// Checks an EPIC-HP packet: EpicTS `epic_ts` after the first info
    /// field's Timestamp `info0_ts`.
    #[inline]
    pub fn check_epic_hp(&self, info0_ts: u32, epic_ts: u32) -> Result<(), DropReason> {
        self.check(EpicClock::EPIC_HP.packet_time_ns(info0_ts, epic_ts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_decides_like_check() {
        let edges = [0, 1, 999_999_999, 1_000_000_000, 2_000_000_000, u64::MAX - 1, u64::MAX];
        for f in
            [Freshness::EPIC_Z, Freshness::EPIC_HP, Freshness { past_ns: 0, future_ns: u64::MAX }]
        {
            for now in edges.iter().copied().chain([5_000_000_000, 1_700_000_000_000_000_000]) {
                let w = f.window(now);
                for base in [now, 0, u64::MAX] {
                    for d in [0u64, 1, 999_999_999, 1_000_000_000, 1_000_000_001, 3_000_000_001] {
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

    /// SCION's `TestVerifyTimestamp`: with the info field one minute old
    /// and EpicTS stamped now, EpicTS − (skew + lifetime) in units is too
    /// old and one unit more is fresh; EpicTS + skew is fresh and one unit
    /// more is in the future; 0 (a minute old) is expired.
    #[test]
    fn epic_hp_freshness_edges() {
        let now = 1_700_000_060 * 1_000_000_000u64;
        let info0 = 1_700_000_000u32;
        let ts = EpicClock::EPIC_HP.timestamp(info0, now).unwrap();
        let w = Freshness::EPIC_HP.window(now);
        let (cs, cs_pl) = (1_000_000 / 21, 3_000_000 / 21);
        assert_eq!(w.check_epic_hp(info0, 0), Err(DropReason::Expired));
        assert_eq!(w.check_epic_hp(info0, ts - cs_pl), Err(DropReason::Expired));
        assert_eq!(w.check_epic_hp(info0, ts - cs_pl + 1), Ok(()));
        assert_eq!(w.check_epic_hp(info0, ts), Ok(()));
        assert_eq!(w.check_epic_hp(info0, ts + cs), Ok(()));
        assert_eq!(w.check_epic_hp(info0, ts + cs + 1), Err(DropReason::FromFuture));
        assert_eq!(w.check_epic_hp(info0, u32::MAX), Err(DropReason::FromFuture));
    }
}

#[cfg(test)]
mod kat {
    use super::*;
    use packet::scion::{AddrHdrRepr, RawHostAddr};
    use packet::{HostAddr, Ia};

    /// SCION's EPIC test values (`pkg/experimental/epic`): source
    /// 2-ff00:0:222, PayloadLen 120, PktID {EpicTS 1, core 2, counter 3},
    /// Timestamp₀ 1257894000, authenticators "fcdc8202502d452e" (penultimate)
    /// and "f5fcc4ce2250db36" (last). The HVFs were computed independently
    /// (OpenSSL AES-128-CBC, zero IV, over the input SCION's
    /// `TestPrepareMacInput` lists).
    fn origin(host: HostAddr) -> HvfOrigin {
        HvfOrigin::from_repr(&AddrHdrRepr {
            qos: 0,
            flow_id: 0,
            next_hdr: 17,
            payload_len: 120,
            dst_ia: Ia::new(1, 1),
            src_ia: Ia::new(2, 0xff00_0000_0222),
            dst_host: RawHostAddr::from(HostAddr::V4([10, 0, 0, 1])),
            src_host: RawHostAddr::from(host),
        })
    }

    const PH: &Block = b"fcdc8202502d452e";
    const LH: &Block = b"f5fcc4ce2250db36";
    const ID: PktId = PktId::from_counter_word(1, 0x0200_0003);
    const TS0: u32 = 1_257_894_000;

    #[test]
    fn hvfs_of_scions_test_packet() {
        let o = origin(HostAddr::V4([10, 0, 0, 100]));
        let (phvf, lhvf) = source_hvfs(PH, LH, &ID, TS0, &o);
        assert_eq!(phvf, [0x4c, 0xcd, 0xb5, 0xb6]);
        assert_eq!(lhvf, [0x04, 0x35, 0x8f, 0x95]);
        let input = o.epic_hp_input(&ID.to_bytes(), TS0);
        assert!(verify_hvf(PH, &input, &phvf));
        assert!(!verify_hvf(LH, &input, &phvf), "wrong authenticator");
        assert!(!verify_hvf(PH, &o.epic_hp_input(&[0; 8], TS0), &phvf), "empty PktID");
        assert!(!verify_hvf(PH, &o.epic_hp_input(&ID.to_bytes(), TS0 - 10), &phvf), "timestamp");
        assert!(!verify_hvf(PH, &input, b"706c"), "another HVF");
    }

    /// A 16-byte source address makes the input three blocks long.
    #[test]
    fn hvf_with_an_ipv6_source() {
        let mut v6 = [0u8; 16];
        v6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        v6[15] = 1;
        let o = origin(HostAddr::V6(v6));
        assert_eq!(o.epic_hp_input(&ID.to_bytes(), TS0).blocks().len(), 3);
        assert_eq!(source_hvfs(PH, LH, &ID, TS0, &o).0, [0x60, 0x4a, 0x24, 0x37]);
    }
}
