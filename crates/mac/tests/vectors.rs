//! Known answers: RFC 4493 (AES-CMAC) and cross-checks against RustCrypto's `cmac`.

use ::cmac::Mac as _;
use mac::{Cmac, Key};
use proptest::prelude::*;

fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).unwrap()
}

fn rfc_key() -> Key {
    Key::from_hex("2b7e151628aed2a6abf7158809cf4f3c").unwrap()
}

const M64: &str = "6bc1bee22e409f96e93d7e117393172a ae2d8a571e03ac9c9eb76fac45af8e51 \
                   30c81c46a35ce411e5fbc1191a0a52ef f69f2445df4f9b17ad2b417be66c3710";

/// RFC 4493 §4: examples 1–4 (lengths 0, 16, 40, 64).
#[test]
fn rfc4493_examples() {
    let c = Cmac::new(&rfc_key());
    let m = h(M64);
    let cases = [
        (0, "bb1d6929 e9593728 7fa37d12 9b756746"),
        (16, "070a16b4 6b4d4144 f79bdd9d d04a287c"),
        (40, "dfa66747 de9ae630 30ca3261 1497c827"),
        (64, "51f0bebf 7e3b9d92 fc497417 79363cfe"),
    ];
    for (len, tag) in cases {
        assert_eq!(c.mac(&m[..len]).to_vec(), h(tag), "len {len}");
    }
}

/// RFC 4493 §4: subkey generation (K1, K2) checked through one-block messages.
#[test]
fn rfc4493_subkeys_via_batch() {
    let c = Cmac::new(&rfc_key());
    let m = h(M64);
    let msgs: Vec<&[u8]> = vec![&m[..40]; 33];
    let mut tags = vec![[0u8; 16]; 33];
    c.mac_batch(40, |i| msgs[i], &mut tags);
    for t in tags {
        assert_eq!(t.to_vec(), h("dfa66747de9ae63030ca32611497c827"));
    }
}

/// RFC 4493 §4 example 2 (one complete block) through the one-block path.
#[test]
fn rfc4493_example2_via_mac_block() {
    let c = Cmac::new(&rfc_key());
    let m: [u8; 16] = h(M64)[..16].try_into().unwrap();
    assert_eq!(c.mac_block(&m).to_vec(), h("070a16b4 6b4d4144 f79bdd9d d04a287c"));
}

/// `cbc_chain` reproduces CMAC example 3 (40 bytes) when fed RFC 4493's
/// steps by hand: two full blocks, then the padded last block ⊕ K2
/// (K2 = f7ddac30 6ae266cc f90bc11e e46d513b, RFC 4493 §4).
#[test]
fn cbc_chain_reproduces_rfc4493_example3() {
    let aes = mac::Aes::new(&rfc_key());
    let m = h(M64);
    let k2 = h("f7ddac30 6ae266cc f90bc11e e46d513b");
    let mut last = [0u8; 16];
    last[..8].copy_from_slice(&m[32..40]);
    last[8] = 0x80;
    last.iter_mut().zip(&k2).for_each(|(x, k)| *x ^= k);
    let mut state = [0u8; 16];
    aes.cbc_chain(&mut state, &m[..32], Some(&last));
    assert_eq!(state.to_vec(), h("dfa66747 de9ae630 30ca3261 1497c827"));
    // No blocks: the state is left alone.
    let mut s2 = [7u8; 16];
    aes.cbc_chain(&mut s2, &[], None);
    assert_eq!(s2, [7u8; 16]);
}

proptest! {
    #[test]
    fn cmac_agrees_with_rustcrypto(key in any::<[u8; 16]>(), msg in proptest::collection::vec(any::<u8>(), 0..100)) {
        let ours = Cmac::new(&Key::from(key)).mac(&msg);
        let mut theirs = <::cmac::Cmac<aes::Aes128> as ::cmac::KeyInit>::new_from_slice(&key).unwrap();
        theirs.update(&msg);
        prop_assert_eq!(ours.to_vec(), theirs.finalize().into_bytes().to_vec());
    }

    #[test]
    fn mac_block_equals_mac(key in any::<[u8; 16]>(), b in any::<[u8; 16]>()) {
        let c = Cmac::new(&Key::from(key));
        prop_assert_eq!(c.mac_block(&b), c.mac(&b));
    }

    #[test]
    fn batch_cmac_equals_single(key in any::<[u8; 16]>(), len in 0usize..70, n in 0usize..40, seed in any::<u8>()) {
        let c = Cmac::new(&Key::from(key));
        let msgs: Vec<Vec<u8>> = (0..n).map(|i| (0..len).map(|k| seed ^ (i * 13 + k) as u8).collect()).collect();
        let mut tags = vec![[0u8; 16]; n];
        c.mac_batch(len, |i| &msgs[i], &mut tags);
        for (m, t) in msgs.iter().zip(&tags) {
            prop_assert_eq!(*t, c.mac(m));
        }
    }

    #[test]
    fn multi_key_cmac_equals_single(
        keys in proptest::collection::vec(any::<[u8; 16]>(), 1..5),
        len in 0usize..70,
        n in 0usize..40,
        seed in any::<u8>(),
    ) {
        let cs: Vec<Cmac> = keys.iter().map(|k| Cmac::new(&Key::from(*k))).collect();
        let msgs: Vec<Vec<u8>> = (0..n).map(|i| (0..len).map(|k| seed ^ (i * 7 + k) as u8).collect()).collect();
        let mut tags = vec![[0xa5u8; 16]; n];
        Cmac::mac_multi(len, |i| &cs[i % cs.len()], |i| &msgs[i], &mut tags);
        for (i, (m, t)) in msgs.iter().zip(&tags).enumerate() {
            prop_assert_eq!(*t, cs[i % cs.len()].mac(m));
        }
        // The same messages as pre-padded blocks.
        let nb = len.div_ceil(16).max(1);
        let padded = len % 16 != 0 || len == 0;
        let blocks_of = |i: usize, j: usize| -> [u8; 16] {
            let mut b = [0u8; 16];
            let m = &msgs[i];
            let end = (16 * j + 16).min(m.len());
            let start = (16 * j).min(end);
            b[..end - start].copy_from_slice(&m[start..end]);
            if padded && j + 1 == nb {
                b[end - start] = 0x80;
            }
            b
        };
        let mut tags2 = vec![[0u8; 16]; n];
        Cmac::mac_blocks_multi(nb, padded, |i| &cs[i % cs.len()], blocks_of, &mut tags2);
        prop_assert_eq!(&tags2, &tags);
        // Padded messages, each tag masked, whitened and encrypted once
        // more under an outer key, K2 folded in (see `Cmac::k2_last`).
        if padded {
            let outer = mac::Aes::from_bytes(&[seed; 16]);
            let mask: [u8; 16] = core::array::from_fn(|k| if k < 4 { 0xff } else { 0 });
            let whiten: [u8; 16] = core::array::from_fn(|k| seed.wrapping_add(k as u8 * 9));
            let k2: Vec<mac::LastBlock> = cs.iter().map(Cmac::k2_last).collect();
            let mut nested = vec![[0u8; 16]; n];
            Cmac::mac_padded_multi_nested(
                nb,
                |i| &cs[i % cs.len()],
                |i| &k2[i % cs.len()],
                blocks_of,
                &outer,
                &mask,
                &whiten,
                &mut nested,
            );
            for (t, want) in nested.iter().zip(&tags) {
                let mut w: [u8; 16] = core::array::from_fn(|b| (want[b] & mask[b]) ^ whiten[b]);
                outer.encrypt_block(&mut w);
                prop_assert_eq!(*t, w);
            }
        }
        // One-block messages in place, and `encrypt_each`.
        let mut blocks: Vec<[u8; 16]> = (0..n).map(|i| [seed ^ i as u8; 16]).collect();
        let orig = blocks.clone();
        Cmac::mac_block_multi(|i| &cs[i % cs.len()], &mut blocks);
        let mut enc = orig.clone();
        mac::Aes::encrypt_each(|i| cs[i % cs.len()].aes(), &mut enc);
        for i in 0..n {
            prop_assert_eq!(blocks[i], cs[i % cs.len()].mac_block(&orig[i]));
            let mut e = orig[i];
            cs[i % cs.len()].aes().encrypt_block(&mut e);
            prop_assert_eq!(enc[i], e);
        }
    }
}
