//! The AES-NI paths equal the portable path (the `aes` crate) on random
//! keys, blocks, lane counts and chain lengths.

use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use aesni::{Aes128, Block};
use proptest::prelude::*;

/// Reference: the `aes` crate directly, one block at a time.
fn reference_chain(key: &[u8; 16], blocks: &[Block]) -> Block {
    let a = aes::Aes128Enc::new(&Array::from(*key));
    let mut s = [0u8; 16];
    for b in blocks {
        s.iter_mut().zip(b).for_each(|(s, b)| *s ^= b);
        a.encrypt_block(Array::cast_from_core_mut(&mut s));
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn lanes_equal_reference(
        keys in prop::collection::vec(any::<[u8; 16]>(), 1..4),
        msgs in prop::collection::vec(prop::collection::vec(any::<[u8; 16]>(), 3), 0..21),
        steps in 0usize..4,
    ) {
        let fast: Vec<Aes128> = keys.iter().map(Aes128::new).collect();
        let slow: Vec<Aes128> = keys.iter().map(Aes128::new_portable).collect();
        let n = msgs.len();
        let key_of = |i: usize| i % keys.len();
        let mut a = vec![[0u8; 16]; n];
        let mut b = vec![[0u8; 16]; n];
        aesni::cbc_lanes(|i| &fast[key_of(i)], &mut a, steps, |i, j| msgs[i][j]);
        aesni::cbc_lanes(|i| &slow[key_of(i)], &mut b, steps, |i, j| msgs[i][j]);
        prop_assert_eq!(&a, &b);
        for i in 0..n {
            prop_assert_eq!(a[i], reference_chain(&keys[key_of(i)], &msgs[i][..steps]));
            let mut one = [0u8; 16];
            fast[key_of(i)].cbc_chain(&mut one, steps, |j| msgs[i][j]);
            prop_assert_eq!(one, a[i]);
        }
        // Mixed fast and portable keys in one call still agree.
        let mut c = vec![[0u8; 16]; n];
        aesni::cbc_lanes(
            |i| if i % 2 == 0 { &fast[key_of(i)] } else { &slow[key_of(i)] },
            &mut c,
            steps,
            |i, j| msgs[i][j],
        );
        prop_assert_eq!(&a, &c);
    }

    #[test]
    fn one_key_lanes_equal_portable(
        key in any::<[u8; 16]>(),
        n in 1usize..=70,
        steps in 1usize..=4,
        seed in any::<u64>(),
        init in any::<[u8; 16]>(),
    ) {
        // Message bytes and start states derived from a seed: cheap to
        // generate for 70 lanes × 4 steps.
        let msg = |i: usize, j: usize| -> Block {
            core::array::from_fn(|k| (seed >> ((i + j + k) % 57)) as u8 ^ (i * 7 + j * 3 + k) as u8)
        };
        let start: Vec<Block> =
            (0..n).map(|i| core::array::from_fn(|k| init[k] ^ i as u8)).collect();
        let fast = Aes128::new(&key);
        let slow = Aes128::new_portable(&key);
        let mut a = start.clone();
        let mut b = start.clone();
        let mut calls = vec![0u32; n * steps];
        fast.cbc_lanes_one_key(&mut a, steps, |i, j| {
            calls[i * steps + j] += 1;
            msg(i, j)
        });
        slow.cbc_lanes_one_key(&mut b, steps, msg);
        prop_assert_eq!(&a, &b);
        prop_assert!(calls.iter().all(|&c| c == 1), "block called once per (lane, step)");
        // And the multi-key path under the same key.
        let mut c = start.clone();
        aesni::cbc_lanes(|_| &fast, &mut c, steps, msg);
        prop_assert_eq!(&a, &c);
        for i in [0, n / 2, n - 1] {
            let mut one = start[i];
            slow.cbc_chain(&mut one, steps, |j| msg(i, j));
            prop_assert_eq!(one, a[i]);
        }
    }

    #[test]
    fn blocks_equal_reference(key in any::<[u8; 16]>(), blocks in prop::collection::vec(any::<[u8; 16]>(), 0..75)) {
        let mut a = blocks.clone();
        Aes128::new(&key).encrypt_blocks(&mut a);
        for (x, b) in a.iter().zip(&blocks) {
            prop_assert_eq!(*x, reference_chain(&key, &[*b]));
        }
    }
}
