//! The AES-NI body of [`Aes128::encrypt_groups`](crate::Aes128::encrypt_groups).

use core::arch::x86_64::{
    _mm_aesenc_si128, _mm_aesenclast_si128, _mm_setzero_si128, _mm_xor_si128,
};

use super::{load, store, RoundKeys};
use crate::{Block, LANES};

/// Encrypts every block of `groups` under `rk`, eight lanes interleaved
/// per group, every lane reading the round keys through one pointer (each
/// round key is loaded once per group: all eleven do not fit in the 16
/// `xmm` registers next to eight states).
///
/// # Safety
/// The CPU must support AES-NI.
#[inline]
#[target_feature(enable = "aes")]
pub(crate) unsafe fn same_key_groups(rk: &RoundKeys, groups: &mut [[Block; LANES]]) {
    const N: usize = LANES;
    for g in groups {
        // The pointer passes an optimisation barrier every group: otherwise
        // the compiler copies all eleven round keys to the stack at every
        // call and reloads them from there, more instructions than one load
        // per round key and group from where they are.
        let k = *core::hint::black_box(&&rk.0);
        let rk = [k; N];
        let mut s = [_mm_setzero_si128(); N];
        for l in 0..N {
            s[l] = load(&g[l]);
        }
        encrypt!(s, rk, N);
        for l in 0..N {
            store(&mut g[l], s[l]);
        }
    }
}
