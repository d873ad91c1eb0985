//! Expanded AES-128 key schedules, CBC-MAC, and batched CBC-MAC.

use crate::Key;

/// Size of an AES block in bytes.
pub const BLOCK: usize = 16;

/// One AES block.
pub type Block = [u8; BLOCK];

/// An expanded AES-128 key schedule, zeroized on drop.
///
/// Encryption-only: every MAC here only encrypts. The cipher is the
/// workspace's `aesni` crate: AES-NI intrinsics with run-time detection
/// (checked once, when the key is expanded) and a fallback through
/// RustCrypto's `aes` crate; every call is one direct call, with no
/// per-call dispatch or round-key set-up.
///
/// Expanding a key costs about as much as encrypting a few blocks, so routers
/// keep one `Aes` per key (or cache them, as DRKey does) instead of expanding
/// per packet.
#[derive(Clone)]
pub struct Aes(aesni::NativeAes128);

impl Aes {
    /// Expands `key`.
    pub fn new(key: &Key) -> Self {
        Self::from_bytes(key.as_bytes())
    }

    /// Expands raw key bytes (prefer [`Aes::new`] with a zeroizing [`Key`]).
    #[inline]
    pub fn from_bytes(key: &[u8; 16]) -> Self {
        Aes(aesni::NativeAes128::new(key))
    }

    /// The key as the `aesni` crate's type (for kernels this crate wraps).
    #[inline(always)]
    pub(crate) fn native(&self) -> &aesni::NativeAes128 {
        &self.0
    }

    /// Encrypts one block in place.
    #[inline]
    pub fn encrypt_block(&self, block: &mut Block) {
        self.0.aes().encrypt_block(block);
    }

    /// Encrypts independent blocks in place, interleaved: 32 per pass as
    /// eight 4-block `zmm` registers on VAES-512 CPUs, else eight `xmm`.
    #[inline]
    pub fn encrypt_blocks(&self, blocks: &mut [Block]) {
        self.0.aes().encrypt_blocks(blocks);
    }

    /// Encrypts independent blocks in place, block `i` under its own key
    /// `key(i)` (e.g. one per on-path AS or per source host); eight run
    /// interleaved, whatever their keys.
    #[inline]
    pub fn encrypt_each<'k>(key: impl Fn(usize) -> &'k Aes, blocks: &mut [Block]) {
        aesni::cbc_lanes(|i| key(i).0.aes(), blocks, 1, |_, _| [0; BLOCK]);
    }

    /// CBC-MAC with a zero IV over `msg` zero-padded to a multiple of 16 bytes;
    /// returns the last ciphertext block. An empty message MACs one zero block.
    ///
    /// Only for inputs whose length is fixed per use (see the crate docs).
    pub fn cbc_mac(&self, msg: &[u8]) -> Block {
        let mut state = [0u8; BLOCK];
        if msg.is_empty() {
            self.encrypt_block(&mut state);
        } else {
            self.cbc_chain(&mut state, msg, None);
        }
        state
    }

    /// CBC-MAC over a message given as whole blocks.
    #[inline]
    pub fn cbc_mac_blocks(&self, blocks: &[Block]) -> Block {
        let mut state = [0u8; BLOCK];
        self.0.aes().cbc_chain(&mut state, blocks.len(), |j| blocks[j]);
        state
    }

    /// CBC chaining of `msg` (zero-padded to whole blocks) starting from
    /// `state`, then one more block `last` if given (an empty `msg` and no
    /// `last` leave `state` as is); one cipher call for the whole chain.
    /// The building block of CMAC.
    #[inline]
    pub fn cbc_chain(&self, state: &mut Block, msg: &[u8], last: Option<&Block>) {
        let n = msg.len().div_ceil(BLOCK);
        let steps = n + usize::from(last.is_some());
        self.0.aes().cbc_chain(state, steps, |j| match last {
            Some(l) if j == n => *l,
            _ => padded_block(msg, j),
        });
    }

    /// [`cbc_chain`](Self::cbc_chain) whose final block is `last ⊕ mask`
    /// (CMAC's subkey), XORed inside the cipher call.
    #[inline]
    pub fn cbc_chain_masked(&self, state: &mut Block, msg: &[u8], last: &Block, mask: &Block) {
        let n = msg.len().div_ceil(BLOCK);
        self.0.aes().cbc_chain(state, n + 1, |j| {
            if j == n {
                xor(last, mask)
            } else {
                padded_block(msg, j)
            }
        });
    }

    /// CBC-MACs `tags.len()` independent messages of `blocks` blocks each under
    /// this key, writing one tag per message.
    ///
    /// `block(i, j)` supplies block `j` of message `i` (so callers can gather
    /// fields straight from packet headers without copying whole messages).
    /// Messages are processed side by side, interleaved (32 chains as eight
    /// 4-block `zmm` registers on VAES-512 CPUs, else eight `xmm` chains).
    pub fn cbc_mac_batch(
        &self,
        blocks: usize,
        block: impl FnMut(usize, usize) -> Block,
        tags: &mut [Block],
    ) {
        tags.fill([0u8; BLOCK]);
        self.0.aes().cbc_lanes_one_key(tags, blocks, block);
    }
}

impl Aes {
    /// CBC-MACs `tags.len()` independent messages of `blocks` blocks each,
    /// message `i` under its **own** key `key(i)` (e.g. per-source-host DRKeys
    /// in Z-Lane/EPIC), writing one tag per message.
    ///
    /// Same results as `key(i).cbc_mac_blocks(..)` per message, but eight
    /// messages' chains run interleaved, so the CPU overlaps their AES rounds
    /// (a single CBC-MAC is one serial chain of AES latencies).
    pub fn cbc_mac_multi<'k>(
        blocks: usize,
        key: impl Fn(usize) -> &'k Aes,
        block: impl FnMut(usize, usize) -> Block,
        tags: &mut [Block],
    ) {
        tags.fill([0u8; BLOCK]);
        aesni::cbc_lanes(|i| key(i).0.aes(), tags, blocks, block);
    }

    /// [`cbc_mac_multi`](Self::cbc_mac_multi) with one more block per
    /// message under `outer`: `tags[i] = AES_outer((t_i & mask) ^ whiten)`
    /// for message `i`'s CBC-MAC `t_i` under `key(i)` (e.g. a CMAC of one
    /// complete block over a truncated first MAC: `mask` keeps the
    /// truncated bytes, `whiten` is the CMAC subkey K1).
    ///
    /// The same tags as `cbc_mac_multi` followed by
    /// [`encrypt_blocks`](Self::encrypt_blocks) of the masked, whitened
    /// tags, in one pass: each first tag stays in its register (it is not
    /// returned). Every [`Aes`] is expanded on AES-NI whenever the CPU has
    /// it, so the pass looks at `outer` alone to choose its path, not at
    /// every message's key.
    #[inline]
    pub fn cbc_mac_multi_nested<'k>(
        blocks: usize,
        key: impl Fn(usize) -> &'k Aes,
        block: impl FnMut(usize, usize) -> Block,
        outer: &Aes,
        mask: &Block,
        whiten: &Block,
        tags: &mut [Block],
    ) {
        aesni::cbc_lanes_nested_native(|i| &key(i).0, &outer.0, mask, whiten, tags, blocks, block);
    }

    /// Like [`cbc_mac_multi`](Self::cbc_mac_multi), but each lane's chain
    /// starts from the value already in `states[i]` (e.g. a block to
    /// encrypt, or a partial chain) instead of zero.
    #[inline]
    pub fn cbc_chain_multi<'k>(
        blocks: usize,
        key: impl Fn(usize) -> &'k Aes,
        block: impl FnMut(usize, usize) -> Block,
        states: &mut [Block],
    ) {
        aesni::cbc_lanes(|i| key(i).0.aes(), states, blocks, block);
    }
}

impl core::fmt::Debug for Aes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Aes(<key schedule>)")
    }
}

/// Block `j` of `msg`, zero-padded if it is the partial last one.
#[inline(always)]
pub(crate) fn padded_block(msg: &[u8], j: usize) -> Block {
    let start = (j * BLOCK).min(msg.len());
    let end = (start + BLOCK).min(msg.len());
    let chunk = &msg[start..end];
    match <&Block>::try_from(chunk) {
        Ok(b) => *b,
        Err(_) => {
            let mut b = [0u8; BLOCK];
            b[..chunk.len()].copy_from_slice(chunk);
            b
        }
    }
}

/// `a ⊕ b` as one 128-bit operation.
#[inline(always)]
pub(crate) fn xor(a: &Block, b: &Block) -> Block {
    (u128::from_ne_bytes(*a) ^ u128::from_ne_bytes(*b)).to_ne_bytes()
}

/// `state ^= data` over `data.len()` (≤ 16) bytes; missing bytes count as zero padding.
#[inline(always)]
pub(crate) fn xor_into(state: &mut Block, data: &[u8]) {
    if let Ok(b) = <&Block>::try_from(data) {
        *state = xor(state, b);
    } else {
        for (s, d) in state.iter_mut().zip(data) {
            *s ^= d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex16(s: &str) -> Block {
        let mut b = [0u8; 16];
        for i in 0..16 {
            b[i] = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
        }
        b
    }

    /// FIPS-197 Appendix C.1 (AES-128).
    #[test]
    fn fips197_c1() {
        let aes = Aes::from_bytes(&hex16("000102030405060708090a0b0c0d0e0f"));
        let mut b = hex16("00112233445566778899aabbccddeeff");
        aes.encrypt_block(&mut b);
        assert_eq!(b, hex16("69c4e0d86a7b0430d8cdb78070b4c55a"));
    }

    /// FIPS-197 Appendix B (the worked example).
    #[test]
    fn fips197_appendix_b() {
        let aes = Aes::from_bytes(&hex16("2b7e151628aed2a6abf7158809cf4f3c"));
        let mut b = hex16("3243f6a8885a308d313198a2e0370734");
        aes.encrypt_block(&mut b);
        assert_eq!(b, hex16("3925841d02dc09fbdc118597196a0b32"));
    }

    #[test]
    fn cbc_mac_matches_manual_chaining_and_pads_with_zeros() {
        let aes = Aes::from_bytes(&[9u8; 16]);
        let msg: [u8; 40] = core::array::from_fn(|i| i as u8);
        let mut expect = [0u8; 16];
        for chunk in msg.chunks(16) {
            xor_into(&mut expect, chunk);
            aes.encrypt_block(&mut expect);
        }
        assert_eq!(aes.cbc_mac(&msg), expect);
        let mut padded = [0u8; 48];
        padded[..40].copy_from_slice(&msg);
        assert_eq!(aes.cbc_mac(&padded), expect);
        let blocks: [Block; 3] =
            core::array::from_fn(|j| padded[16 * j..16 * j + 16].try_into().unwrap());
        assert_eq!(aes.cbc_mac_blocks(&blocks), expect);
    }

    #[test]
    fn multi_key_equals_single_key_path() {
        let keys: [Aes; 5] = core::array::from_fn(|i| Aes::from_bytes(&[i as u8 * 17; 16]));
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 13 + j * 5 + k) as u8) };
        for blocks in [0usize, 1, 3] {
            for n in [0usize, 1, 5, 32, 33, 70] {
                let mut tags = [[0xffu8; 16]; 70];
                Aes::cbc_mac_multi(blocks, |i| &keys[i % 5], msg, &mut tags[..n]);
                for (i, tag) in tags[..n].iter().enumerate() {
                    let m: [Block; 3] = core::array::from_fn(|j| msg(i, j));
                    assert_eq!(
                        *tag,
                        keys[i % 5].cbc_mac_blocks(&m[..blocks]),
                        "b={blocks} n={n} i={i}"
                    );
                }
            }
        }
    }

    #[test]
    fn nested_multi_equals_multi_then_one_block() {
        let keys: [Aes; 5] = core::array::from_fn(|i| Aes::from_bytes(&[i as u8 * 29 + 1; 16]));
        let outer = Aes::from_bytes(&[0x42; 16]);
        let mask: Block = core::array::from_fn(|k| if k < 4 { 0xff } else { 0 });
        let whiten: Block = core::array::from_fn(|k| (k * 11 + 5) as u8);
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 7 + j * 3 + k) as u8) };
        for blocks in [0usize, 1, 3] {
            for n in [0usize, 1, 5, 8, 32, 33, 70] {
                let mut want = [[0u8; 16]; 70];
                Aes::cbc_mac_multi(blocks, |i| &keys[i % 5], msg, &mut want[..n]);
                for t in &mut want[..n] {
                    *t = core::array::from_fn(|b| (t[b] & mask[b]) ^ whiten[b]);
                }
                outer.encrypt_blocks(&mut want[..n]);
                let mut got = [[0xffu8; 16]; 70];
                Aes::cbc_mac_multi_nested(
                    blocks,
                    |i| &keys[i % 5],
                    msg,
                    &outer,
                    &mask,
                    &whiten,
                    &mut got[..n],
                );
                assert_eq!(got[..n], want[..n], "b={blocks} n={n}");
            }
        }
    }

    #[test]
    fn batch_equals_single_for_every_lane_count() {
        let aes = Aes::from_bytes(&[3u8; 16]);
        let msg =
            |i: usize, j: usize| -> Block { core::array::from_fn(|k| (i * 31 + j * 7 + k) as u8) };
        for n in [0usize, 1, 7, 8, 9, 32, 33, 70] {
            let mut tags = [[0u8; 16]; 70];
            aes.cbc_mac_batch(3, msg, &mut tags[..n]);
            for (i, tag) in tags[..n].iter().enumerate() {
                let blocks = [msg(i, 0), msg(i, 1), msg(i, 2)];
                assert_eq!(*tag, aes.cbc_mac_blocks(&blocks), "n={n} i={i}");
            }
        }
    }
}
