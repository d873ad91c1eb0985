//! The Internet checksum (RFC 1071) and the IPv4/IPv6 pseudo-header sums.
//!
//! Sums are kept as unfolded `u64` accumulators so several pieces (pseudo
//! header, transport header, payload) can be added before one final fold.
//! The word loop adds 32-bit big-endian words: because `2^16 ≡ 1 (mod 2^16-1)`
//! a one's-complement sum over 32-bit words folds to the same 16-bit value as
//! the textbook loop over 16-bit words, with half the iterations.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` to a running unfolded sum.
///
/// `data` is treated as a sequence of big-endian 16-bit words; an odd final
/// byte is padded with a zero low byte (RFC 1071). Pieces of odd length may
/// therefore only be the *last* piece of a sum.
#[inline]
pub fn accumulate(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_be_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    let rest = words.remainder();
    let mut tail = [0u8; 4];
    tail[..rest.len()].copy_from_slice(rest);
    acc + u32::from_be_bytes(tail) as u64
}

/// Folds an unfolded sum into 16 bits with end-around carries.
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    let mut s = (acc & 0xffff) + (acc >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The Internet checksum of `data`: the one's complement of its folded sum.
///
/// Writing this value into a zeroed checksum field makes the sum over the
/// whole header `0xffff`, which is what [`verify`] checks.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(accumulate(0, data))
}

/// Whether `data`, with its checksum field filled in, sums to `0xffff`.
#[inline]
pub fn verify(data: &[u8]) -> bool {
    fold(accumulate(0, data)) == 0xffff
}

/// Unfolded sum of the IPv4 pseudo header (RFC 768 / RFC 793).
#[inline]
pub fn pseudo_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: u8, length: u16) -> u64 {
    u32::from_be_bytes(src.octets()) as u64
        + u32::from_be_bytes(dst.octets()) as u64
        + protocol as u64
        + length as u64
}

/// Unfolded sum of the IPv6 pseudo header (RFC 8200 §8.1).
#[inline]
pub fn pseudo_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, length: u32) -> u64 {
    let acc = accumulate(0, &src.octets());
    let acc = accumulate(acc, &dst.octets());
    acc + length as u64 + next_header as u64
}

/// Incrementally updates checksum `old_sum` after a 16-bit word of the
/// covered data changed from `old` to `new` (RFC 1624, eqn. 3).
#[inline]
pub fn update16(old_sum: u16, old: u16, new: u16) -> u16 {
    // HC' = ~(~HC + ~m + m')
    !fold(!old_sum as u64 + !old as u64 + new as u64)
}

/// The checksum of an IPv4 header after its TTL went down by one, from the
/// checksum `old_sum` before: [`update16`] of the TTL's word (the TTL is its
/// high byte, so `~m + m'` is `0xFEFF` whatever the word), in closed form:
/// `old_sum + 0x0100`, plus the end-around carry when that passes `0xFFFF`
/// (`old_sum >= 0xFEFF`).
#[inline(always)]
pub fn ttl_decremented(old_sum: u16) -> u16 {
    old_sum.wrapping_add(0x0100 + u16::from(old_sum >= 0xFEFF))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Straightforward 16-bit reference loop.
    fn reference(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        let mut i = 0;
        while i + 1 < data.len() {
            s += u16::from_be_bytes([data[i], data[i + 1]]) as u32;
            i += 2;
        }
        if i < data.len() {
            s += (data[i] as u32) << 8;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(accumulate(0, &d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn matches_reference_for_all_lengths() {
        let mut d = [0u8; 67];
        for (i, b) in d.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(97).wrapping_add(0xf1);
        }
        for n in 0..=d.len() {
            assert_eq!(checksum(&d[..n]), reference(&d[..n]), "len {n}");
        }
        // All-ones data exercises carries.
        let ones = [0xffu8; 33];
        for n in 0..=ones.len() {
            assert_eq!(checksum(&ones[..n]), reference(&ones[..n]), "ones len {n}");
        }
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut h = [
            0x45, 0x00, 0x00, 0x20, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0x00,
            0x02, 0x01, 0xc6, 0x33, 0x64, 0x07,
        ];
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(verify(&h));
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[9] = 0xfd;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let c2 = update16(c, old, new);
        h[10..12].fill(0);
        assert_eq!(c2, checksum(&h));
    }

    /// The closed form equals RFC 1624's update of the TTL's word for every
    /// checksum and every TTL/protocol word with a TTL of at least 1.
    #[test]
    fn ttl_decrement_is_the_incremental_update() {
        for old_sum in 0..=u16::MAX {
            let want = update16(old_sum, 0x4011, 0x3f11);
            assert_eq!(ttl_decremented(old_sum), want, "checksum {old_sum:#06x}");
            // RFC 1624 eqn. 3 written out: ~(~HC + ~0x0100), folded.
            let mut sum = u32::from(!old_sum) + u32::from(!0x0100u16);
            sum = (sum & 0xffff) + (sum >> 16);
            sum = (sum & 0xffff) + (sum >> 16);
            assert_eq!(ttl_decremented(old_sum), !(sum as u16), "checksum {old_sum:#06x}");
            for word in [0x0100u16, 0x01ff, 0x8006, 0xff3a] {
                assert_eq!(update16(old_sum, word, word - 0x0100), want);
            }
        }
    }
}
