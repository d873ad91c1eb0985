//! The bytes the gateway rewrites in an EPIC-Z path (the Q flag and the
//! HVFs) and the incremental patch of the checksum that covers them.
//!
//! The rewrite changes bytes covered by the underlay UDP checksum; the
//! [`ZlaneGateway`](crate::ZlaneGateway) stage patches that checksum
//! incrementally (RFC 1624) from the [`Rewrite`] the gateway reports, so no
//! full recomputation over the payload is needed. A zero IPv4 UDP checksum
//! ("none") is left zero. The SCION-level L4 checksum does not cover the
//! path and needs no update.

use packet::checksum::{accumulate, fold, update16};
use packet::scion::epic::{FLAG_Q, HVF_LEN};

/// Offset of the flags word (Q) in an EPIC-Z path.
pub(crate) const FLAGS_OFF: usize = 8;
/// Offset of the first HVF in an EPIC-Z path.
pub(crate) const HVFS_OFF: usize = 12;

/// Bytes of an EPIC-Z path rewritten by the gateway, with the folded
/// one's-complement sums of that span before and after, so the caller can
/// patch any checksum covering the path (RFC 1624) without re-summing the
/// packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrite {
    /// Offset of the span in the SCION packet (even: flags byte onwards).
    pub offset: usize,
    /// Folded sum of the span (16-bit words from `offset`) before the rewrite.
    pub old_sum: u16,
    /// Folded sum after the rewrite.
    pub new_sum: u16,
}

impl Rewrite {
    /// Patches an Internet checksum `ck` covering the span. `odd` says the
    /// span starts at an odd offset from the start of the checksummed data
    /// (its bytes then sit in the other half of each 16-bit word). A zero
    /// checksum (UDP over IPv4: none) stays zero; a result of zero is sent as
    /// `0xffff` (RFC 768).
    #[inline]
    pub fn patch(&self, ck: u16, odd: bool) -> u16 {
        if ck == 0 {
            return 0;
        }
        let (o, n) = if odd {
            (self.old_sum.swap_bytes(), self.new_sum.swap_bytes())
        } else {
            (self.old_sum, self.new_sum)
        };
        match update16(ck, o, n) {
            0 => 0xffff,
            c => c,
        }
    }
}

/// The folded sum of the flags word and the first `n` HVFs of `path`.
#[inline]
pub(crate) fn span_sum(path: &[u8], n: usize) -> u16 {
    fold(accumulate(0, &path[FLAGS_OFF..HVFS_OFF + n * HVF_LEN]))
}

/// Clears Q in the EPIC-Z path `path` (at `path_off` in the SCION packet):
/// the packet goes on as best effort with its host HVFs.
#[inline]
pub(crate) fn clear_q(path: &mut [u8], path_off: usize) -> Rewrite {
    // Only the flags word changes: it is the whole span.
    let word = |p: &[u8]| u16::from_be_bytes([p[FLAGS_OFF], p[FLAGS_OFF + 1]]);
    let old_sum = word(path);
    path[FLAGS_OFF] &= !FLAG_Q;
    Rewrite { offset: path_off + FLAGS_OFF, old_sum, new_sum: word(path) }
}

/// Patches the UDP checksum of the datagram at `udp` after the gateway
/// rewrote the span described by `rw`, which starts at `at` in `frame`.
#[inline]
pub(crate) fn patch_udp_checksum(frame: &mut [u8], udp: usize, at: usize, rw: &Rewrite) {
    if at < udp + 8 {
        // Not inside the datagram's payload (inconsistent metadata): leave it.
        return;
    }
    let c = udp + 6;
    if let Some(field) = frame.get_mut(c..c + 2) {
        let ck = u16::from_be_bytes([field[0], field[1]]);
        let new = rw.patch(ck, (at - udp) % 2 == 1);
        field.copy_from_slice(&new.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::checksum::{checksum, verify};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Patching with the span's old/new sums (at either parity) gives a
        /// checksum that verifies, like a full recomputation.
        #[test]
        fn patch_equals_recompute(
            body in prop::collection::vec(any::<u8>(), 1..80),
            start in 0usize..80,
            new in prop::collection::vec(any::<u8>(), 1..40),
        ) {
            let start = start % body.len();
            let end = (start + new.len()).min(body.len());
            let mut data = vec![0, 0];
            data.extend_from_slice(&body);
            let ck = checksum(&data);
            prop_assume!(ck != 0);
            data[..2].copy_from_slice(&ck.to_be_bytes());
            let at = 2 + start;
            let old_sum = fold(accumulate(0, &data[at..2 + end]));
            data[at..2 + end].copy_from_slice(&new[..end - start]);
            let new_sum = fold(accumulate(0, &data[at..2 + end]));
            let rw = Rewrite { offset: at, old_sum, new_sum };
            let patched = rw.patch(ck, at % 2 == 1);
            data[..2].copy_from_slice(&patched.to_be_bytes());
            prop_assert!(verify(&data));
        }
    }

    #[test]
    fn zero_checksum_means_none() {
        let rw = Rewrite { offset: 8, old_sum: 1, new_sum: 2 };
        assert_eq!(rw.patch(0, false), 0);
    }
}
