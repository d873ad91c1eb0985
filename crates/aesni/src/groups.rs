//! Same-key batches in whole groups of [`LANES`] blocks: the caller's
//! array is cut into groups of eight at compile time, so the `xmm` path
//! runs one fixed eight-lane body per group under one round-key pointer
//! (no per-lane key lookups, no tail of variable length).

use crate::{Aes128, Block, Inner, LANES};

impl Aes128 {
    /// Encrypts every block of `groups` in place, each independently under
    /// this key: the result equals [`encrypt_blocks`](Self::encrypt_blocks)
    /// on the same blocks. A caller with a variable count of blocks in a
    /// fixed array encrypts the groups that hold them (the few blocks past
    /// its count, in the last group, are encrypted too and ignored): one
    /// group costs about what eight single blocks cost in
    /// [`encrypt_blocks`](Self::encrypt_blocks) without its per-lane set-up.
    ///
    /// With VAES and AVX-512F the blocks take the wide path of
    /// [`cbc_lanes_one_key`](Self::cbc_lanes_one_key); without AES-NI, the
    /// portable one.
    #[inline]
    #[allow(unsafe_code)]
    pub fn encrypt_groups(&self, groups: &mut [[Block; LANES]]) {
        #[cfg(target_arch = "x86_64")]
        if let Inner::Ni(rk, false) = &self.inner {
            // SAFETY: `Ni` round keys exist only if AES-NI was detected
            // (`ni::RoundKeys::new`), the target feature `same_key_groups`
            // needs.
            unsafe { crate::ni::groups::same_key_groups(rk, groups) };
            return;
        }
        self.encrypt_blocks(groups.as_flattened_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Whole groups against the per-block batch and single blocks, on
        /// the accelerated key, the portable one and (with AES-NI) one
        /// held to the `xmm` path.
        #[test]
        fn groups_equal_single_blocks(
            key in proptest::prelude::any::<[u8; 16]>(),
            seed in proptest::prelude::any::<u64>(),
            n in 0usize..5,
        ) {
            let mut x = seed | 1;
            let mut groups = [[[0u8; 16]; LANES]; 4];
            for b in groups.as_flattened_mut() {
                for v in b.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *v = x as u8;
                }
            }
            // The `xmm` body even where VAES would be taken.
            #[cfg(target_arch = "x86_64")]
            let xmm = crate::ni::RoundKeys::new(&key).map(|rk| Aes128 { inner: Inner::Ni(rk, false) });
            #[cfg(not(target_arch = "x86_64"))]
            let xmm = None;
            let xmm = xmm.unwrap_or_else(|| Aes128::new_portable(&key));
            for a in [Aes128::new(&key), Aes128::new_portable(&key), xmm] {
                let mut got = groups;
                a.encrypt_groups(&mut got[..n]);
                let mut batch = groups;
                a.encrypt_blocks(batch[..n].as_flattened_mut());
                proptest::prop_assert_eq!(got, batch);
                for (g, (o, e)) in got.iter().zip(&groups).enumerate() {
                    for (b, (o, e)) in o.iter().zip(e).enumerate() {
                        let mut one = *e;
                        if g < n {
                            a.encrypt_block(&mut one);
                        }
                        proptest::prop_assert_eq!(*o, one, "group {} block {}", g, b);
                    }
                }
            }
        }
    }
}
