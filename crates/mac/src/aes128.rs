//! Expanded AES-128 key schedules, CBC-MAC, and batched CBC-MAC.

use aes::cipher::consts::U16;
use aes::cipher::{
    Array, BlockCipherEncBackend, BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser, KeyInit,
};

use crate::Key;

/// Size of an AES block in bytes.
pub const BLOCK: usize = 16;

/// One AES block.
pub type Block = [u8; BLOCK];

/// Most messages MACed in one pass of [`Aes::cbc_mac_batch`]; matches a burst.
const LANES: usize = 32;

/// An expanded AES-128 key schedule (176 bytes), zeroized on drop.
///
/// Encryption-only (`aes::Aes128Enc`): every MAC here only encrypts, and
/// skipping the decryption round keys makes expansion cheaper and halves the
/// size (176 instead of 352 bytes), which matters for key caches.
///
/// Expanding a key costs about as much as encrypting a few blocks, so routers
/// keep one `Aes` per key (or cache them, as DRKey does) instead of expanding
/// per packet.
#[derive(Clone)]
pub struct Aes(aes::Aes128Enc);

impl Aes {
    /// Expands `key`.
    pub fn new(key: &Key) -> Self {
        Self::from_bytes(key.as_bytes())
    }

    /// Expands raw key bytes (prefer [`Aes::new`] with a zeroizing [`Key`]).
    pub fn from_bytes(key: &[u8; 16]) -> Self {
        Aes(aes::Aes128Enc::new(&Array::from(*key)))
    }

    /// Encrypts one block in place.
    #[inline]
    pub fn encrypt_block(&self, block: &mut Block) {
        self.0.encrypt_block(Array::cast_from_core_mut(block));
    }

    /// Encrypts independent blocks in place; AES-NI runs eight at a time.
    #[inline]
    pub fn encrypt_blocks(&self, blocks: &mut [Block]) {
        self.0.encrypt_blocks(Array::cast_slice_from_core_mut(blocks));
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
        self.0.encrypt_with_backend(ChainBlocks { state: &mut state, blocks });
        state
    }

    /// CBC chaining of `msg` (zero-padded to whole blocks) starting from
    /// `state`, then one more block `last` if given (an empty `msg` and no
    /// `last` leave `state` as is); one cipher dispatch for
    /// the whole chain (the `aes` crate's per-call CPU-feature dispatch and
    /// round-key set-up dominate a lone block). The building block of CMAC.
    #[inline]
    pub fn cbc_chain(&self, state: &mut Block, msg: &[u8], last: Option<&Block>) {
        self.0.encrypt_with_backend(Chain { state, msg, last, mask: None });
    }

    /// [`cbc_chain`](Self::cbc_chain) whose final block is `last ⊕ mask`
    /// (CMAC's subkey), XORed inside the cipher call: a block assembled in
    /// memory right before the call would stall on store forwarding.
    #[inline]
    pub fn cbc_chain_masked(&self, state: &mut Block, msg: &[u8], last: &Block, mask: &Block) {
        self.0.encrypt_with_backend(Chain { state, msg, last: Some(last), mask: Some(mask) });
    }

    /// CBC-MACs `tags.len()` independent messages of `blocks` blocks each under
    /// this key, writing one tag per message.
    ///
    /// `block(i, j)` supplies block `j` of message `i` (so callers can gather
    /// fields straight from packet headers without copying whole messages).
    /// Messages are processed side by side: each chaining step encrypts one block
    /// of up to 32 messages in a single [`encrypt_blocks`](Self::encrypt_blocks)
    /// call, which AES-NI pipelines.
    pub fn cbc_mac_batch(
        &self,
        blocks: usize,
        mut block: impl FnMut(usize, usize) -> Block,
        tags: &mut [Block],
    ) {
        for (chunk_no, chunk) in tags.chunks_mut(LANES).enumerate() {
            let base = chunk_no * LANES;
            chunk.fill([0u8; BLOCK]);
            for j in 0..blocks {
                for (k, state) in chunk.iter_mut().enumerate() {
                    xor_into(state, &block(base + k, j));
                }
                self.encrypt_blocks(chunk);
            }
        }
    }
}

impl Aes {
    /// CBC-MACs `tags.len()` independent messages of `blocks` blocks each,
    /// message `i` under its **own** key `key(i)` (e.g. per-source-host DRKeys
    /// in Z-Lane/EPIC), writing one tag per message.
    ///
    /// Same results as `key(i).cbc_mac_blocks(..)` per message, but the loop
    /// runs block `j` of every message before block `j + 1` of any, so
    /// consecutive AES calls never depend on each other and the CPU overlaps
    /// their rounds (a single CBC-MAC is one serial chain of AES latencies).
    pub fn cbc_mac_multi<'k>(
        blocks: usize,
        key: impl Fn(usize) -> &'k Aes,
        mut block: impl FnMut(usize, usize) -> Block,
        tags: &mut [Block],
    ) {
        for (chunk_no, chunk) in tags.chunks_mut(LANES).enumerate() {
            let base = chunk_no * LANES;
            chunk.fill([0u8; BLOCK]);
            for j in 0..blocks {
                for (k, state) in chunk.iter_mut().enumerate() {
                    xor_into(state, &block(base + k, j));
                    key(base + k).encrypt_block(state);
                }
            }
        }
    }
}

impl core::fmt::Debug for Aes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Aes(<key schedule>)")
    }
}

/// `state ^= data` over `data.len()` (≤ 16) bytes; missing bytes count as zero padding.
#[inline(always)]
pub(crate) fn xor_into(state: &mut Block, data: &[u8]) {
    if let Ok(b) = <&Block>::try_from(data) {
        xor_block(state, b);
    } else {
        for (s, d) in state.iter_mut().zip(data) {
            *s ^= d;
        }
    }
}

/// `state ^= b` as one 128-bit operation.
#[inline(always)]
pub(crate) fn xor_block(state: &mut Block, b: &Block) {
    *state = (u128::from_ne_bytes(*state) ^ u128::from_ne_bytes(*b)).to_ne_bytes();
}

/// CBC chain over a byte message (zero-padded) plus an optional final block,
/// run inside one backend call.
struct Chain<'a> {
    state: &'a mut Block,
    msg: &'a [u8],
    last: Option<&'a Block>,
    mask: Option<&'a Block>,
}

impl BlockSizeUser for Chain<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for Chain<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        for c in self.msg.chunks(BLOCK) {
            xor_into(self.state, c);
            backend.encrypt_block_inplace(Array::cast_from_core_mut(self.state));
        }
        if let Some(l) = self.last {
            xor_block(self.state, l);
            if let Some(m) = self.mask {
                xor_block(self.state, m);
            }
            backend.encrypt_block_inplace(Array::cast_from_core_mut(self.state));
        }
    }
}

/// CBC chain over whole blocks inside one backend call.
struct ChainBlocks<'a> {
    state: &'a mut Block,
    blocks: &'a [Block],
}

impl BlockSizeUser for ChainBlocks<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for ChainBlocks<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, backend: &B) {
        for b in self.blocks {
            xor_block(self.state, b);
            backend.encrypt_block_inplace(Array::cast_from_core_mut(self.state));
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
