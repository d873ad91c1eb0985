//! The AES-NI kernel of [`cbc_lanes_nested`](crate::cbc_lanes_nested):
//! interleaved CBC-MACs under a key per lane, each tag then masked,
//! whitened and encrypted once more under one shared key while it is still
//! in its register.

use core::arch::x86_64::{
    __m128i, _mm_aesenc_si128, _mm_aesenclast_si128, _mm_and_si128, _mm_setzero_si128,
    _mm_xor_si128,
};

use super::{load, store, RoundKeys};
use crate::Block;

/// Lanes per interleaved group (as in [`super::lanes`]).
const N: usize = crate::LANES;

/// For every lane `l` of `out`: the CBC-MAC (zero IV) of the `steps` blocks
/// `block(l, j)` under `key(l)`, ANDed with `mask`, XORed with `whiten`
/// and encrypted under `outer`. Groups of [`N`] lanes, then the rest as
/// one padded group (padding lanes take the last lane's key and zero
/// blocks; their results are discarded). Returns the number of lanes
/// done: all, or up to the first group with a lane whose key has no AES-NI
/// round keys (that group and the ones after it untouched). `block` is
/// called once per (lane, step); lane `l` of a group is `base | l`, as in
/// [`super::lanes`].
///
/// # Safety
/// The CPU must support AES-NI.
#[inline]
#[target_feature(enable = "aes")]
pub(crate) unsafe fn nested<'k>(
    key: impl Fn(usize) -> Option<&'k RoundKeys>,
    outer: &RoundKeys,
    mask: &Block,
    whiten: &Block,
    out: &mut [Block],
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) -> usize {
    const _: () = assert!(N == 8);
    let (mask, whiten) = (load(mask), load(whiten));
    let mut done = 0;
    let mut groups = out.chunks_exact_mut(N);
    for full in groups.by_ref() {
        // (A multiple of `N`, as the mask tells the compiler.)
        let base = done & !(N - 1);
        let ks: [Option<&RoundKeys>; N] = core::array::from_fn(|l| key(base | l));
        let [Some(k0), Some(k1), Some(k2), Some(k3), Some(k4), Some(k5), Some(k6), Some(k7)] = ks
        else {
            return done;
        };
        let rk = [&k0.0, &k1.0, &k2.0, &k3.0, &k4.0, &k5.0, &k6.0, &k7.0];
        // SAFETY: AES-NI is this function's precondition.
        let s = unsafe { group(rk, outer, mask, whiten, steps, |l, j| block(base | l, j)) };
        for (o, v) in full.iter_mut().zip(s) {
            store(o, v);
        }
        done += N;
    }
    let tail = groups.into_remainder();
    let (base, n) = (done, tail.len());
    if n == 0 {
        return done;
    }
    let mut ks = [None; N];
    for (l, k) in ks.iter_mut().enumerate() {
        // (Padding lanes past the end take the last lane's key.)
        *k = key(base + l.min(n - 1));
    }
    let [Some(k0), Some(k1), Some(k2), Some(k3), Some(k4), Some(k5), Some(k6), Some(k7)] = ks
    else {
        return done;
    };
    let rk = [&k0.0, &k1.0, &k2.0, &k3.0, &k4.0, &k5.0, &k6.0, &k7.0];
    let b = |l: usize, j: usize| if l < n { block(base + l, j) } else { [0; 16] };
    // SAFETY: AES-NI is this function's precondition.
    let s = unsafe { group(rk, outer, mask, whiten, steps, b) };
    for (o, v) in tail.iter_mut().zip(s) {
        store(o, v);
    }
    done + n
}

/// One group of [`N`] lanes of [`nested`]: the states after the outer
/// encryption.
///
/// # Safety
/// The CPU must support AES-NI.
#[inline]
#[target_feature(enable = "aes")]
unsafe fn group(
    rk: [&[__m128i; 11]; N],
    outer: &RoundKeys,
    mask: __m128i,
    whiten: __m128i,
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) -> [__m128i; N] {
    let mut s = [_mm_setzero_si128(); N];
    // One step; the first starts from the block itself (zero IV). The key
    // pointers pass an optimisation barrier every step, as in
    // `super::lanes` (else their round keys are copied to the stack).
    macro_rules! step {
        ($j:expr, $first:expr) => {{
            let rk = *core::hint::black_box(&rk);
            for l in 0..N {
                let b = load(&block(l, $j));
                s[l] = if $first { b } else { _mm_xor_si128(s[l], b) };
            }
            encrypt!(s, rk, N);
        }};
    }
    // Up to three steps written out: each step's index is then a constant
    // in `block`.
    match steps {
        0 => {}
        1 => step!(0, true),
        2 => {
            step!(0, true);
            step!(1, false);
        }
        3 => {
            step!(0, true);
            step!(1, false);
            step!(2, false);
        }
        _ => {
            step!(0, true);
            for j in 1..steps {
                step!(j, false);
            }
        }
    }
    // The mask and the outer key's pointer (one per lane) pass the
    // barrier too: as constants, the compiler built the mask from two
    // instructions per lane and kept the round keys in registers, which it
    // then spilled and reloaded (instead of one memory operand per round).
    // The whitening block is folded into round key 0 once per group.
    let (mask, ork) = *core::hint::black_box(&(mask, [&outer.0; N]));
    let w0 = _mm_xor_si128(whiten, ork[0][0]);
    for l in 0..N {
        s[l] = _mm_xor_si128(_mm_and_si128(s[l], mask), w0);
    }
    for r in 1..10 {
        for l in 0..N {
            s[l] = _mm_aesenc_si128(s[l], ork[l][r]);
        }
    }
    for l in 0..N {
        s[l] = _mm_aesenclast_si128(s[l], ork[l][10]);
    }
    s
}
