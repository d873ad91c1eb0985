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
/// With `FOLD`, the last step's block of lane `l` is XORed with `last(l)`
/// too, which holds a block already XORed with round key 0 of `key(l)`:
/// that step then starts with round 1 (the XOR replaces round key 0's).
/// Without it, `last` is not called.
///
/// # Safety
/// The CPU must support AES-NI.
#[inline]
#[target_feature(enable = "aes")]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn nested<'k, const FOLD: bool>(
    key: impl Fn(usize) -> Option<&'k RoundKeys>,
    last: impl Fn(usize) -> &'k Block,
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
        let last = |l: usize| last(base | l);
        // SAFETY: AES-NI is this function's precondition.
        let s = unsafe {
            group::<FOLD>(rk, last, outer, mask, whiten, steps, |l, j| block(base | l, j))
        };
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
    let last = |l: usize| last(base + l.min(n - 1));
    // SAFETY: AES-NI is this function's precondition.
    let s = unsafe { group::<FOLD>(rk, last, outer, mask, whiten, steps, b) };
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
unsafe fn group<'k, const FOLD: bool>(
    rk: [&[__m128i; 11]; N],
    last: impl Fn(usize) -> &'k Block,
    outer: &RoundKeys,
    mask: __m128i,
    whiten: __m128i,
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) -> [__m128i; N] {
    let mut s = [_mm_setzero_si128(); N];
    let (mut rk, mut mask) = (rk, mask);
    // One step; the first starts from the block itself (zero IV). Between
    // steps the key pointers and states pass `fence` (else the compiler
    // copies every lane's round keys to the stack once, or runs each lane's
    // chain on its own instead of the lanes side by side).
    // The last step, with `FOLD`, XORs `last(l)` in place of round key 0.
    macro_rules! step {
        ($j:expr, $first:expr, $last:expr) => {{
            if !$first {
                fence(&mut rk, &mut s, &mut mask);
            }
            for l in 0..N {
                let b = load(&block(l, $j));
                s[l] = if $first { b } else { _mm_xor_si128(s[l], b) };
                if FOLD && $last {
                    s[l] = _mm_xor_si128(s[l], load(last(l)));
                }
            }
            if FOLD && $last {
                encrypt!(@from1 s, rk, N);
            } else {
                encrypt!(s, rk, N);
            }
        }};
    }
    // Up to three steps written out: each step's index is then a constant
    // in `block`.
    match steps {
        0 => {}
        1 => step!(0, true, true),
        2 => {
            step!(0, true, false);
            step!(1, false, true);
        }
        3 => {
            step!(0, true, false);
            step!(1, false, false);
            step!(2, false, true);
        }
        _ => {
            step!(0, true, false);
            for j in 1..steps - 1 {
                step!(j, false, false);
            }
            step!(steps - 1, false, true);
        }
    }
    // The outer key's pointer (one per lane) passes the fence too: as one
    // constant, the compiler kept its round keys in registers, which it
    // then spilled and reloaded (instead of one memory operand per round).
    // So does the mask: as a constant, it was built from two instructions
    // per lane.
    // The whitening block is folded into round key 0 once per group.
    let mut ork = [&outer.0; N];
    fence(&mut ork, &mut s, &mut mask);
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

/// Hides the lanes' key pointers `p`, states `s` and the mask `m` from
/// the optimiser at this point: it can tell neither the pointers that come
/// back from the ones that went in (so it reads the round keys behind them
/// where they are, each as one memory operand, instead of keeping copies:
/// 11 per lane, more than there are registers) nor the states (so every
/// lane's step is done here, and the lanes' next steps run side by side).
/// An empty `asm!` with everything in registers: no instruction, where
/// `core::hint::black_box` stores the pointers and loads them again.
///
/// (The asm hands the pointers back and reads nothing behind them, so
/// `nomem` holds.)
#[inline(always)]
#[allow(clippy::pointers_in_nomem_asm_block)]
fn fence(p: &mut [&[__m128i; 11]; N], s: &mut [__m128i; N], m: &mut __m128i) {
    let mut q: [*const [__m128i; 11]; N] = p.map(core::ptr::from_ref);
    // SAFETY: the template is empty: every operand comes back unchanged,
    // and the asm touches no memory, stack or flags.
    unsafe {
        core::arch::asm!(
            "/* {0} {1} {2} {3} {4} {5} {6} {7} {8} {9} {10} {11} {12} {13} {14} {15} {16} */",
            inout(reg) q[0],
            inout(reg) q[1],
            inout(reg) q[2],
            inout(reg) q[3],
            inout(reg) q[4],
            inout(reg) q[5],
            inout(reg) q[6],
            inout(reg) q[7],
            inout(xmm_reg) s[0],
            inout(xmm_reg) s[1],
            inout(xmm_reg) s[2],
            inout(xmm_reg) s[3],
            inout(xmm_reg) s[4],
            inout(xmm_reg) s[5],
            inout(xmm_reg) s[6],
            inout(xmm_reg) s[7],
            inout(xmm_reg) *m,
            options(nomem, nostack, preserves_flags),
        );
    }
    for (r, q) in p.iter_mut().zip(q) {
        // SAFETY: `q` is still the pointer `*r` was, a live shared borrow
        // for the same lifetime.
        *r = unsafe { &*q };
    }
}

/// `b` XOR round key 0 of `rk`: the block [`nested`] takes from `last`
/// with `FOLD` for a lane under `rk` whose last block `b` is XORed into.
#[inline]
pub(crate) fn fold_round_key0(rk: &RoundKeys, b: &Block) -> Block {
    let mut k0 = [0; 16];
    store(&mut k0, rk.0[0]);
    core::array::from_fn(|i| b[i] ^ k0[i])
}
