//! AES-CMAC (RFC 4493) with subkeys derived once per key.
//!
//! RustCrypto's `cmac` crate recomputes nothing per message either, but it
//! hides the key schedule; owning it here lets routers batch CMACs of many
//! packets under one key and keep one cached object per key. The `cmac` crate
//! is the oracle in this crate's tests.

use crate::aes128::{padded_block, xor_into, Aes, Block, BLOCK};
use crate::{Key, LastBlock};

/// An AES-CMAC key: the expanded AES key plus the two RFC 4493 subkeys.
#[derive(Clone)]
pub struct Cmac {
    aes: Aes,
    k1: Block,
    k2: Block,
}

/// Doubling in GF(2^128) as RFC 4493 §2.3 defines it.
fn dbl(b: &Block) -> Block {
    let v = u128::from_be_bytes(*b);
    let carry = (v >> 127) as u8;
    let mut out = (v << 1).to_be_bytes();
    // Constant-time conditional XOR with R_b = 0x87.
    out[15] ^= 0x87 & carry.wrapping_neg();
    out
}

impl Cmac {
    /// Expands `key` and derives the subkeys.
    pub fn new(key: &Key) -> Self {
        Self::from_aes(Aes::new(key))
    }

    /// Derives the subkeys for an already expanded key.
    pub fn from_aes(aes: Aes) -> Self {
        let mut l = [0u8; BLOCK];
        aes.encrypt_block(&mut l);
        let k1 = dbl(&l);
        let k2 = dbl(&k1);
        Cmac { aes, k1, k2 }
    }

    /// The underlying expanded AES key.
    pub fn aes(&self) -> &Aes {
        &self.aes
    }

    /// The RFC 4493 subkeys (K1, K2), for callers that assemble masked
    /// final blocks themselves and run the chains through
    /// [`Aes::cbc_mac_multi`] (e.g. fixed-layout inputs of a whole burst).
    pub fn subkeys(&self) -> (&Block, &Block) {
        (&self.k1, &self.k2)
    }

    /// K2 prepared as the last-block whitening of this key's lanes in
    /// [`mac_padded_multi_nested`](Self::mac_padded_multi_nested) (callers
    /// that MAC under a key often keep it next to the key).
    pub fn k2_last(&self) -> LastBlock {
        self.aes.native().last_block(&self.k2)
    }

    /// The final block of `msg`, masked with K1 (complete) or padded and masked with K2.
    #[inline]
    fn last_block(&self, msg: &[u8]) -> (Block, usize) {
        let (mut last, n_blocks, k) = self.last_unmasked(msg);
        xor_into(&mut last, k);
        (last, n_blocks)
    }

    /// The final block of `msg` (padded if partial), the block count, and
    /// the subkey it must be masked with.
    #[inline]
    fn last_unmasked(&self, msg: &[u8]) -> (Block, usize, &Block) {
        let n_blocks = msg.len().div_ceil(BLOCK).max(1);
        let tail = &msg[(n_blocks - 1) * BLOCK..];
        let mut last = [0u8; BLOCK];
        last[..tail.len()].copy_from_slice(tail);
        if tail.len() == BLOCK {
            (last, n_blocks, &self.k1)
        } else {
            last[tail.len()] = 0x80;
            (last, n_blocks, &self.k2)
        }
    }

    /// The full 16-byte tag of `msg`.
    pub fn mac(&self, msg: &[u8]) -> Block {
        let (last, n_blocks, k) = self.last_unmasked(msg);
        let mut state = [0u8; BLOCK];
        // One cipher dispatch for the whole chain, subkey XORed inside it.
        self.aes.cbc_chain_masked(&mut state, &msg[..(n_blocks - 1) * BLOCK], &last, k);
        state
    }

    /// The tag of a message that is exactly one complete block:
    /// `AES_K(block ⊕ K1)`. Equal to [`mac`](Self::mac) over those 16 bytes,
    /// without the generic padding logic (e.g. EPIC-Z's AS-level HVFs).
    #[inline]
    pub fn mac_block(&self, block: &Block) -> Block {
        let mut state = [0u8; BLOCK];
        self.aes.cbc_chain_masked(&mut state, &[], block, &self.k1);
        state
    }

    /// CMACs `tags.len()` independent messages of the same length `len` under
    /// this key; `message(i)` yields message `i`. Each chaining step encrypts
    /// one block of up to 32 messages together so AES-NI pipelines them.
    pub fn mac_batch<'m>(
        &self,
        len: usize,
        message: impl Fn(usize) -> &'m [u8],
        tags: &mut [Block],
    ) {
        let n_blocks = len.div_ceil(BLOCK).max(1);
        self.aes.cbc_mac_batch(
            n_blocks,
            |i, j| {
                let msg = message(i);
                debug_assert_eq!(msg.len(), len);
                if j + 1 == n_blocks {
                    self.last_block(msg).0
                } else {
                    msg[j * BLOCK..(j + 1) * BLOCK].try_into().unwrap_or([0; BLOCK])
                }
            },
            tags,
        );
    }
}

impl Cmac {
    /// CMACs `tags.len()` independent messages of the same length `len`,
    /// message `i` under its **own** key `key(i)` (per-host DRKeys), writing
    /// one tag per message. Eight messages' chains run interleaved whatever
    /// their keys; same results as `key(i).mac(message(i))`.
    pub fn mac_multi<'k, 'm>(
        len: usize,
        key: impl Fn(usize) -> &'k Cmac,
        message: impl Fn(usize) -> &'m [u8],
        tags: &mut [Block],
    ) {
        let n_blocks = len.div_ceil(BLOCK).max(1);
        tags.fill([0u8; BLOCK]);
        Aes::cbc_chain_multi(
            n_blocks,
            |i| &key(i).aes,
            |i, j| {
                let msg = message(i);
                debug_assert_eq!(msg.len(), len);
                if j + 1 == n_blocks {
                    key(i).last_block(msg).0
                } else {
                    padded_block(msg, j)
                }
            },
            tags,
        );
    }

    /// CMACs of messages the caller supplies as `n_blocks` (≥ 1) whole
    /// blocks each, message `i` under its own key `key(i)`; `padded` says
    /// the messages' length is not a multiple of 16, so the caller already
    /// appended CMAC's `10*` padding to the last block (which is then masked
    /// with K2 instead of K1). Eight messages run interleaved. For
    /// fixed-layout inputs gathered straight from packet fields, without
    /// byte-level slicing per block.
    #[inline]
    pub fn mac_blocks_multi<'k>(
        n_blocks: usize,
        padded: bool,
        key: impl Fn(usize) -> &'k Cmac,
        block: impl Fn(usize, usize) -> Block,
        tags: &mut [Block],
    ) {
        let last = n_blocks.max(1) - 1;
        tags.fill([0u8; BLOCK]);
        Aes::cbc_chain_multi(
            n_blocks.max(1),
            |i| &key(i).aes,
            |i, j| {
                let b = block(i, j);
                if j < last {
                    b
                } else {
                    let k = key(i);
                    crate::aes128::xor(&b, if padded { &k.k2 } else { &k.k1 })
                }
            },
            tags,
        );
    }

    /// [`mac_blocks_multi`](Self::mac_blocks_multi) of padded messages
    /// (their length not a multiple of 16, the last of the `n_blocks`
    /// blocks carrying CMAC's `10*` padding) followed by one more block per
    /// message under `outer`: `tags[i] = AES_outer((t_i & mask) ^ whiten)`
    /// for message `i`'s CMAC `t_i` under `key(i)` (as
    /// [`Aes::cbc_mac_multi_nested`] over CBC-MACs). `k2(i)` must be
    /// `key(i)`'s [`k2_last`](Self::k2_last): its K2 is then XORed into
    /// the last block at no cost of its own (see [`LastBlock`]). Each first
    /// tag stays in its register (it is not returned).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn mac_padded_multi_nested<'k>(
        n_blocks: usize,
        key: impl Fn(usize) -> &'k Cmac,
        k2: impl Fn(usize) -> &'k LastBlock,
        block: impl FnMut(usize, usize) -> Block,
        outer: &Aes,
        mask: &Block,
        whiten: &Block,
        tags: &mut [Block],
    ) {
        aesni::cbc_lanes_nested_native_last(
            |i| key(i).aes.native(),
            k2,
            outer.native(),
            mask,
            whiten,
            tags,
            n_blocks.max(1),
            block,
        );
    }

    /// The tags of one-block messages, block `i` under its own key `key(i)`,
    /// in place: `blocks[i] = CMAC_{key(i)}(blocks[i])` (each equal to
    /// [`mac_block`](Self::mac_block)); eight run interleaved. E.g. a
    /// gateway's AS-level HVFs, one per on-path AS.
    #[inline]
    pub fn mac_block_multi<'k>(key: impl Fn(usize) -> &'k Cmac, blocks: &mut [Block]) {
        Aes::cbc_chain_multi(1, |i| &key(i).aes, |i, _| key(i).k1, blocks);
    }
}

impl core::fmt::Debug for Cmac {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Cmac(<key schedule>)")
    }
}

impl Drop for Cmac {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.k1.zeroize();
        self.k2.zeroize();
    }
}
