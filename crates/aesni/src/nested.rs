//! Nested MACs over interleaved lanes: a CBC-MAC per lane under its own
//! key, and that tag (masked and whitened) encrypted once more under one
//! shared key, e.g. an AS-level MAC over a truncated host-level one.

use crate::{Aes128, Block};

/// For every lane `i` of `out`: `t` = the CBC-MAC (zero IV) of the `steps`
/// blocks `block(i, j)` under `key(i)`, then
/// `out[i] = AES_outer((t & mask) ^ whiten)`.
///
/// The same as [`cbc_lanes`](crate::cbc_lanes) from zero states, each tag
/// ANDed with `mask` and XORed with `whiten`, and then
/// [`Aes128::encrypt_blocks`] under `outer`, in one pass: eight lanes run
/// interleaved, and each tag goes from its first encryption to its second
/// without leaving its register. `block` is called once per (lane, step),
/// `key` at least once per lane.
#[inline]
#[allow(unsafe_code)]
pub fn cbc_lanes_nested<'k>(
    key: impl Fn(usize) -> &'k Aes128,
    outer: &Aes128,
    mask: &Block,
    whiten: &Block,
    out: &mut [Block],
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) {
    #[allow(unused_mut)]
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if let Some(ork) = outer.round_keys() {
        // SAFETY: `outer` has AES-NI round keys, which exist only if AES-NI
        // was detected (`ni::RoundKeys::new`): the target feature
        // `ni::nested::nested` needs.
        done = unsafe {
            crate::ni::nested::nested::<false>(
                |i| key(i).round_keys(),
                |_| &[0; 16],
                ork,
                mask,
                whiten,
                out,
                steps,
                &mut block,
            )
        };
    }
    if done < out.len() {
        nested_from(key, outer, mask, whiten, out, done, steps, block);
    }
}

/// An [`Aes128`] expanded by [`Aes128::new`]: it has AES-NI round keys
/// whenever the CPU has AES-NI (never a portable key on such a CPU, as
/// [`Aes128::new_portable`] makes). Lane kernels over such keys
/// ([`cbc_lanes_nested_native`]) look at one key per call to choose their
/// path instead of checking every lane's.
#[derive(Clone)]
pub struct NativeAes128(Aes128);

impl NativeAes128 {
    /// Expands `key`, with AES-NI if the CPU has it ([`Aes128::new`]).
    #[inline]
    pub fn new(key: &[u8; 16]) -> Self {
        NativeAes128(Aes128::new(key))
    }

    /// The key as an [`Aes128`].
    #[inline(always)]
    pub fn aes(&self) -> &Aes128 {
        &self.0
    }

    /// This key's AES-NI round keys.
    ///
    /// # Safety
    /// Some [`NativeAes128`] has AES-NI round keys. (Then AES-NI was
    /// detected when it was expanded, so it is detected for every key:
    /// detection is fixed for the process, and every [`NativeAes128`] was
    /// expanded by [`Aes128::new`], which takes AES-NI whenever detected.)
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    #[allow(unsafe_code)]
    unsafe fn round_keys_unchecked(&self) -> &crate::ni::RoundKeys {
        match self.0.round_keys() {
            Some(rk) => rk,
            // SAFETY: the caller's promise (see above).
            None => unsafe { core::hint::unreachable_unchecked() },
        }
    }
}

impl core::fmt::Debug for NativeAes128 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// [`cbc_lanes_nested`] over [`NativeAes128`] keys: the outer key alone
/// decides the path (AES-NI for every lane, or the portable one for
/// every lane), with no check per lane.
#[inline]
#[allow(unsafe_code)]
pub fn cbc_lanes_nested_native<'k>(
    key: impl Fn(usize) -> &'k NativeAes128,
    outer: &NativeAes128,
    mask: &Block,
    whiten: &Block,
    out: &mut [Block],
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(ork) = outer.0.round_keys() {
        // SAFETY: `outer` has AES-NI round keys, which exist only if AES-NI
        // was detected (`ni::RoundKeys::new`): the target feature
        // `ni::nested::nested` needs; and so every lane's key has them too
        // (`round_keys_unchecked`).
        unsafe {
            crate::ni::nested::nested::<false>(
                |i| Some(key(i).round_keys_unchecked()),
                |_| &[0; 16],
                ork,
                mask,
                whiten,
                out,
                steps,
                &mut block,
            )
        };
        return;
    }
    nested_from(|i| &key(i).0, &outer.0, mask, whiten, out, 0, steps, block);
}

/// A block XORed into a lane's last message block (e.g. CMAC's subkey K2
/// for a message that ends in a padded partial block), prepared for the
/// lane's key by [`NativeAes128::last_block`] (for
/// [`cbc_lanes_nested_native_last`]): with AES-NI it holds the block XOR
/// the key's first round key, so that the kernel's XOR of it replaces that
/// round key's (no instruction of its own). Zeroized on drop.
#[derive(Clone)]
pub struct LastBlock(Block);

impl Drop for LastBlock {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.0);
    }
}

impl core::fmt::Debug for LastBlock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LastBlock(..)")
    }
}

impl NativeAes128 {
    /// `b` prepared as the last-block whitening of lanes under this key
    /// (see [`LastBlock`]).
    #[inline]
    pub fn last_block(&self, b: &Block) -> LastBlock {
        #[cfg(target_arch = "x86_64")]
        if let Some(rk) = self.0.round_keys() {
            return LastBlock(crate::ni::nested::fold_round_key0(rk, b));
        }
        LastBlock(*b)
    }
}

/// [`cbc_lanes_nested_native`] with lane `i`'s last block (step
/// `steps - 1`) XORed with the block `last(i)` was prepared from (by
/// `key(i)`'s [`NativeAes128::last_block`]): e.g. CMACs of messages that end
/// in a padded partial block, `last(i)` from their subkeys K2. With AES-NI
/// that XOR takes the place of round key 0's in the last step.
#[inline]
#[allow(unsafe_code)]
#[allow(clippy::too_many_arguments)]
pub fn cbc_lanes_nested_native_last<'k>(
    key: impl Fn(usize) -> &'k NativeAes128,
    last: impl Fn(usize) -> &'k LastBlock,
    outer: &NativeAes128,
    mask: &Block,
    whiten: &Block,
    out: &mut [Block],
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(ork) = outer.0.round_keys() {
        // SAFETY: as in `cbc_lanes_nested_native`. Every lane's key has
        // AES-NI round keys, so every `last(i)` (prepared by it) holds its
        // block XOR round key 0, which `FOLD` takes.
        unsafe {
            crate::ni::nested::nested::<true>(
                |i| Some(key(i).round_keys_unchecked()),
                |i| &last(i).0,
                ork,
                mask,
                whiten,
                out,
                steps,
                &mut block,
            )
        };
        return;
    }
    // Portable keys: `last(i)` is the block itself.
    let with_last = |i: usize, j: usize| {
        let b = block(i, j);
        if j + 1 == steps {
            core::array::from_fn(|k| b[k] ^ last(i).0[k])
        } else {
            b
        }
    };
    nested_from(|i| &key(i).0, &outer.0, mask, whiten, out, 0, steps, with_last);
}

/// [`cbc_lanes_nested`] one lane at a time from lane `first` on (keys
/// without AES-NI round keys). Out of line: the caller stays small.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn nested_from<'k>(
    key: impl Fn(usize) -> &'k Aes128,
    outer: &Aes128,
    mask: &Block,
    whiten: &Block,
    out: &mut [Block],
    first: usize,
    steps: usize,
    mut block: impl FnMut(usize, usize) -> Block,
) {
    for (i, o) in out.iter_mut().enumerate().skip(first) {
        let mut t = [0; 16];
        key(i).cbc_chain(&mut t, steps, |j| block(i, j));
        *o = core::array::from_fn(|b| (t[b] & mask[b]) ^ whiten[b]);
        outer.encrypt_block(o);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected outputs of the first `n` lanes: one CBC-MAC chain per
    /// lane under `keys[i]`, masked, whitened and encrypted once more under
    /// `outer`, lane by lane (the rest of the 40 zero).
    fn two_steps(
        keys: &[Aes128; 40],
        outer: &Aes128,
        mask: &Block,
        whiten: &Block,
        n: usize,
        steps: usize,
        msg: impl Fn(usize, usize) -> Block,
    ) -> [Block; 40] {
        let mut want = [[0u8; 16]; 40];
        for (i, w) in want[..n].iter_mut().enumerate() {
            let mut t = [0; 16];
            keys[i].cbc_chain(&mut t, steps, |j| msg(i, j));
            *w = core::array::from_fn(|b| (t[b] & mask[b]) ^ whiten[b]);
            outer.encrypt_block(w);
        }
        want
    }

    /// Every lane count up to 40 (whole groups, a partial last one) and 0
    /// to 4 steps, with AES-NI keys, portable keys and a mix: the same as
    /// one chain per lane on the portable path, masked, whitened and
    /// encrypted once more.
    #[test]
    fn nested_lanes_equal_the_two_steps_one_lane_at_a_time() {
        let raw = |i: usize| -> Block { core::array::from_fn(|k| (i * 37 + k * 5) as u8) };
        let fast: [Aes128; 40] = core::array::from_fn(|i| Aes128::new(&raw(i)));
        let slow: [Aes128; 40] = core::array::from_fn(|i| Aes128::new_portable(&raw(i)));
        let mixed: [Aes128; 40] = core::array::from_fn(|i| {
            if i % 13 == 9 {
                Aes128::new_portable(&raw(i))
            } else {
                Aes128::new(&raw(i))
            }
        });
        let outer = [Aes128::new(&[0x77; 16]), Aes128::new_portable(&[0x77; 16])];
        let mask: Block = core::array::from_fn(|k| if k < 4 { 0xff } else { 0x0f });
        let whiten: Block = core::array::from_fn(|k| (k * 19 + 3) as u8);
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 23 + j * 17 + k) as u8) };
        for steps in 0..=4 {
            for n in 0..=40 {
                let want = two_steps(&slow, &outer[1], &mask, &whiten, n, steps, msg);
                for keys in [&fast, &slow, &mixed] {
                    for o in &outer {
                        let mut got = [[0u8; 16]; 40];
                        cbc_lanes_nested(
                            |i| &keys[i],
                            o,
                            &mask,
                            &whiten,
                            &mut got[..n],
                            steps,
                            msg,
                        );
                        assert_eq!(got, want, "n={n} steps={steps}");
                    }
                }
            }
        }
    }

    /// The entry over keys expanded with AES-NI whenever the CPU has it:
    /// every lane count up to 40 and 0 to 4 steps, the same as one chain
    /// per lane on the portable path, masked, whitened and encrypted once
    /// more; the keys' path follows the CPU.
    #[test]
    fn native_lanes_equal_the_two_steps_one_lane_at_a_time() {
        let raw = |i: usize| -> Block { core::array::from_fn(|k| (i * 41 + k * 3 + 1) as u8) };
        let keys: [NativeAes128; 40] = core::array::from_fn(|i| NativeAes128::new(&raw(i)));
        let slow: [Aes128; 40] = core::array::from_fn(|i| Aes128::new_portable(&raw(i)));
        let outer = NativeAes128::new(&[0x3c; 16]);
        let outer_slow = Aes128::new_portable(&[0x3c; 16]);
        #[cfg(all(target_arch = "x86_64", feature = "std"))]
        assert_eq!(outer.aes().is_accelerated(), std::is_x86_feature_detected!("aes"));
        let mask: Block = core::array::from_fn(|k| if k < 4 { 0xff } else { 0x3c });
        let whiten: Block = core::array::from_fn(|k| (k * 7 + 11) as u8);
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 19 + j * 29 + k) as u8) };
        for steps in 0..=4 {
            for n in 0..=40 {
                let want = two_steps(&slow, &outer_slow, &mask, &whiten, n, steps, msg);
                let mut got = [[0u8; 16]; 40];
                cbc_lanes_nested_native(
                    |i| &keys[i],
                    &outer,
                    &mask,
                    &whiten,
                    &mut got[..n],
                    steps,
                    msg,
                );
                assert_eq!(got, want, "n={n} steps={steps}");
            }
        }
    }

    /// The entry with a last-block whitening per lane: every lane count up
    /// to 40 and 1 to 4 steps, the same as the general kernel (portable
    /// keys, one lane at a time) over messages whose last block has that
    /// whitening XORed in; on AES-NI the whitening is folded into round
    /// key 0 of the last step.
    #[test]
    fn lanes_with_a_last_block_equal_the_general_kernel_over_whitened_blocks() {
        let raw = |i: usize| -> Block { core::array::from_fn(|k| (i * 43 + k * 7 + 5) as u8) };
        let keys: [NativeAes128; 40] = core::array::from_fn(|i| NativeAes128::new(&raw(i)));
        let slow: [Aes128; 40] = core::array::from_fn(|i| Aes128::new_portable(&raw(i)));
        let white = |i: usize| -> Block { core::array::from_fn(|k| (i * 13 + k * 31 + 9) as u8) };
        let last: [LastBlock; 40] = core::array::from_fn(|i| keys[i].last_block(&white(i)));
        let outer = NativeAes128::new(&[0x5a; 16]);
        let outer_slow = Aes128::new_portable(&[0x5a; 16]);
        let mask: Block = core::array::from_fn(|k| if k < 4 { 0xff } else { 0 });
        let whiten: Block = core::array::from_fn(|k| (k * 3 + 1) as u8);
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 17 + j * 11 + k) as u8) };
        for steps in 1..=4 {
            let whitened = |i: usize, j: usize| -> Block {
                let b = msg(i, j);
                if j + 1 == steps {
                    core::array::from_fn(|k| b[k] ^ white(i)[k])
                } else {
                    b
                }
            };
            for n in 0..=40 {
                let want = two_steps(&slow, &outer_slow, &mask, &whiten, n, steps, whitened);
                let mut got = [[0u8; 16]; 40];
                cbc_lanes_nested_native_last(
                    |i| &keys[i],
                    |i| &last[i],
                    &outer,
                    &mask,
                    &whiten,
                    &mut got[..n],
                    steps,
                    msg,
                );
                assert_eq!(got, want, "n={n} steps={steps}");
            }
        }
    }
}
