//! Capabilities: `C = P_id ‖ f ‖ ts ‖ MAC_K(P_id ‖ f ‖ ts)` (thesis eq. 3.1).
//!
//! The MAC is AES-128 CBC-MAC over exactly one block (`P_id ‖ flow_id ‖ ts ‖ 00 00`,
//! 14 + 2 bytes), i.e. one AES encryption, truncated to its first 8 bytes. The input
//! length is fixed, so CBC-MAC is sound here.

use aesni::{Aes128, LANES};
use mac::{Block, Key};
pub use packet::flowpolice::{Capability, MAC_LEN};
use pipeline::BURST;

/// The router's capability key (expanded once; its round keys zeroized on
/// drop by `aesni`).
#[derive(Clone, Debug)]
pub struct CapabilityKey {
    aes: Aes128,
}

/// The MAC input block of a capability: `P_id ‖ flow_id ‖ ts ‖ 00 00`.
#[inline]
pub fn mac_block(p_id: u16, flow_id: u64, ts: u32) -> Block {
    // One 128-bit big-endian store instead of three byte-swapped copies.
    let v = (u128::from(p_id) << 112) | (u128::from(flow_id) << 48) | (u128::from(ts) << 16);
    v.to_be_bytes()
}

impl CapabilityKey {
    /// Expands the router secret.
    pub fn new(key: &Key) -> Self {
        CapabilityKey { aes: Aes128::new(key.as_bytes()) }
    }

    /// The truncated MAC of `(p_id, flow_id, ts)`.
    #[inline]
    pub fn mac(&self, p_id: u16, flow_id: u64, ts: u32) -> [u8; MAC_LEN] {
        let mut b = mac_block(p_id, flow_id, ts);
        // One-block CBC-MAC with a zero IV is a single AES encryption.
        self.aes.encrypt_block(&mut b);
        mac::truncate::<MAC_LEN>(&b)
    }

    /// Issues a capability.
    #[inline]
    pub fn stamp(&self, p_id: u16, flow_id: u64, ts: u32) -> Capability {
        Capability { p_id, flow_id, ts, mac: self.mac(p_id, flow_id, ts) }
    }

    /// Whether the capability's MAC verifies (constant-time compare).
    #[inline]
    pub fn verify(&self, c: &Capability) -> bool {
        mac::ct_eq(&self.mac(c.p_id, c.flow_id, c.ts), &c.mac)
    }

    /// Encrypts MAC input blocks in place (one per capability); AES-NI runs eight
    /// at a time, which is what makes per-burst verification cheap. The first
    /// [`MAC_LEN`] bytes of each block are then the capability MACs.
    #[inline]
    pub fn mac_blocks(&self, blocks: &mut [Block]) {
        // Whole groups of eight under one round-key pointer, then the rest.
        let (groups, rest) = blocks.as_chunks_mut::<LANES>();
        self.aes.encrypt_groups(groups);
        if !rest.is_empty() {
            self.aes.encrypt_blocks(rest);
        }
    }

    /// [`mac_blocks`](Self::mac_blocks) on the first `n` blocks of a
    /// burst's array, in whole groups of eight: the blocks after them up to
    /// the next multiple of eight are encrypted too (scratch to the caller;
    /// cheaper than a shorter last group).
    #[inline]
    pub fn mac_burst(&self, blocks: &mut [Block; BURST], n: usize) {
        const { assert!(BURST.is_multiple_of(LANES)) };
        let (groups, _) = blocks.as_chunks_mut::<LANES>();
        let g = n.div_ceil(LANES).min(groups.len());
        self.aes.encrypt_groups(&mut groups[..g]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mac::Aes;

    #[test]
    fn known_answer_is_one_aes_block() {
        // FIPS-197 C.1 key; the MAC is AES_K(block) truncated.
        let key = Key::from_hex("000102030405060708090a0b0c0d0e0f").unwrap();
        let k = CapabilityKey::new(&key);
        let c = k.stamp(0x0102, 0x0304_0506_0708_090a, 0x0b0c_0d0e);
        let mut b = [
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0,
            0,
        ];
        assert_eq!(mac_block(c.p_id, c.flow_id, c.ts), b);
        assert_eq!(c.mac_block(), b);
        Aes::new(&key).encrypt_block(&mut b);
        assert_eq!(c.mac, b[..8]);
        assert_eq!(Aes::new(&key).cbc_mac(&c.mac_block()[..14])[..8], c.mac);
        assert!(k.verify(&c));
    }

    #[test]
    fn any_changed_field_breaks_the_mac() {
        let k = CapabilityKey::new(&Key::from([5u8; 16]));
        let c = k.stamp(7, 42, 1000);
        for bad in [
            Capability { p_id: 8, ..c },
            Capability { flow_id: 43, ..c },
            Capability { ts: 1001, ..c },
            Capability { mac: [0; 8], ..c },
        ] {
            assert!(!k.verify(&bad));
        }
        let other = CapabilityKey::new(&Key::from([6u8; 16]));
        assert!(!other.verify(&c));
    }

    #[test]
    fn batch_equals_single() {
        let k = CapabilityKey::new(&Key::from([9u8; 16]));
        let mut blocks: Vec<Block> =
            (0..20u16).map(|i| mac_block(i, u64::from(i) * 77, 5)).collect();
        k.mac_blocks(&mut blocks);
        for (i, b) in blocks.iter().enumerate() {
            assert_eq!(b[..8], k.mac(i as u16, i as u64 * 77, 5));
        }
    }

    /// The first `n` blocks of a burst's array MACed as one by one; those
    /// past the last group of eight untouched.
    #[test]
    fn burst_equals_single() {
        let k = CapabilityKey::new(&Key::from([3u8; 16]));
        for n in 0..=BURST {
            let input: [Block; BURST] =
                core::array::from_fn(|i| mac_block(i as u16, (i * n) as u64, 9));
            let mut blocks = input;
            k.mac_burst(&mut blocks, n);
            for (i, (b, x)) in blocks.iter().zip(&input).enumerate() {
                if i < n {
                    assert_eq!(b[..8], k.mac(i as u16, (i * n) as u64, 9), "{n} {i}");
                } else if i >= n.div_ceil(LANES) * LANES {
                    assert_eq!(b, x, "{n} {i}");
                }
            }
        }
    }
}
