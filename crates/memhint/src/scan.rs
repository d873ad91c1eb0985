//! Byte-match masks over 32 bytes: one vector compare instead of a byte loop.
//!
//! Open-addressing tables with one tag byte per slot (FlowPolice's flow table)
//! ask, per lookup, "which of these 32 slots carry my tag, and which are
//! empty (tag 0)?". Done eight bytes at a time with SWAR arithmetic that costs
//! about 35 instructions per word inside a packet loop (counted with
//! callgrind on the FlowPolice request benchmark); SSE2 answers it for 32 bytes with
//! two loads, four compares and four mask moves. SSE2 is in the x86_64
//! baseline, but Rust only lets its intrinsics be called from `unsafe` code
//! (or from `#[target_feature]` functions, which are themselves unsafe to
//! call from ordinary ones), so the call lives here, behind a safe function.

/// Which of 32 bytes equal a needle, and which are zero: bit `i` stands for
/// byte `i`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteMasks {
    /// Bytes equal to the needle.
    pub eq: u32,
    /// Bytes equal to zero.
    pub zero: u32,
}

/// The [`ByteMasks`] of `bytes` for `needle` (SSE2 on x86_64, a byte loop
/// elsewhere; both give the same masks).
#[inline(always)]
pub fn byte_masks(bytes: &[u8; 32], needle: u8) -> ByteMasks {
    #[cfg(target_arch = "x86_64")]
    {
        sse2(bytes, needle)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        portable(bytes, needle)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn sse2(bytes: &[u8; 32], needle: u8) -> ByteMasks {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        _mm_setzero_si128,
    };
    // SAFETY: SSE2 is enabled on every x86_64 target (it is in the baseline),
    // so the intrinsics' target-feature requirement holds. The two unaligned
    // 16-byte loads read `bytes[0..16]` and `bytes[16..32]`, inside the
    // borrowed 32-byte array (`loadu` has no alignment requirement). The rest
    // is register arithmetic; `movemask` yields 16 bits in a non-negative i32.
    unsafe {
        let p = bytes.as_ptr().cast::<__m128i>();
        let lo = _mm_loadu_si128(p);
        let hi = _mm_loadu_si128(p.add(1));
        let n = _mm_set1_epi8(needle as i8);
        let z = _mm_setzero_si128();
        let eq = (_mm_movemask_epi8(_mm_cmpeq_epi8(lo, n)) as u32)
            | ((_mm_movemask_epi8(_mm_cmpeq_epi8(hi, n)) as u32) << 16);
        let zero = (_mm_movemask_epi8(_mm_cmpeq_epi8(lo, z)) as u32)
            | ((_mm_movemask_epi8(_mm_cmpeq_epi8(hi, z)) as u32) << 16);
        ByteMasks { eq, zero }
    }
}

/// The reference: one byte at a time (also the non-x86_64 path).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn portable(bytes: &[u8; 32], needle: u8) -> ByteMasks {
    let mut m = ByteMasks { eq: 0, zero: 0 };
    for (i, &b) in bytes.iter().enumerate() {
        m.eq |= u32::from(b == needle) << i;
        m.zero |= u32::from(b == 0) << i;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every needle against arrays holding every byte value at every position.
    #[test]
    fn equals_the_byte_loop() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..2000u32 {
            let mut bytes = [0u8; 32];
            for b in &mut bytes {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Few distinct values, so matches and zeros are common.
                *b = (state % 5) as u8 * 61;
            }
            bytes[(round % 32) as usize] = round as u8;
            for needle in [0u8, 1, 61, 122, 183, 244, 255, round as u8] {
                assert_eq!(
                    byte_masks(&bytes, needle),
                    portable(&bytes, needle),
                    "{bytes:?} {needle}"
                );
            }
        }
    }

    #[test]
    fn bit_order_is_byte_order() {
        let mut bytes = [7u8; 32];
        bytes[0] = 0;
        bytes[17] = 9;
        bytes[31] = 9;
        assert_eq!(byte_masks(&bytes, 9), ByteMasks { eq: (1 << 17) | (1 << 31), zero: 1 });
        assert_eq!(byte_masks(&bytes, 7).eq, !((1 << 0) | (1 << 17) | (1 << 31)));
    }
}
