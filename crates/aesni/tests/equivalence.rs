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
    fn blocks_equal_reference(key in any::<[u8; 16]>(), blocks in prop::collection::vec(any::<[u8; 16]>(), 0..40)) {
        let mut a = blocks.clone();
        Aes128::new(&key).encrypt_blocks(&mut a);
        for (x, b) in a.iter().zip(&blocks) {
            prop_assert_eq!(*x, reference_chain(&key, &[*b]));
        }
    }
}
