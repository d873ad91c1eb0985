//! AES-128 MAC primitives for the data planes.
//!
//! * [`Key`]: 16 bytes of key material, zeroized on drop.
//! * [`Aes`]: an expanded AES-128 key schedule (expand once per key, reuse per
//!   packet); one-block encryption, fixed-length [CBC-MAC](Aes::cbc_mac) with a zero
//!   IV, and **batched** CBC-MAC over many independent inputs under one key,
//!   which runs up to 32 chains side by side (four blocks per VAES instruction
//!   where the CPU has it) instead of waiting on each chained block;
//!   [`Aes::cbc_mac_multi`], [`Aes::encrypt_each`], [`Cmac::mac_multi`] and
//!   [`Cmac::mac_block_multi`] interleave MACs of many packets under
//!   *different* keys (per-host DRKeys, per-AS keys), eight at a time.
//! * [`Cmac`]: RFC 4493 AES-CMAC with the subkeys derived once per key.
//! * [`ct_eq`] and [`truncate`]: constant-time comparison and tag truncation.
//!
//! The AES implementation is the workspace's `aesni` crate: AES-NI intrinsics
//! detected at run time (once per key expansion; no `target-cpu=native`
//! needed), whose multi-lane calls interleave up to eight independent chains
//! even under different keys (32 under one key with VAES), and which falls
//! back to RustCrypto's `aes` (constant-time software) elsewhere. This crate itself stays free of
//! `unsafe`.
//!
//! CBC-MAC is only secure for inputs of a fixed length per use; every caller in
//! this project MACs fixed-size layouts (SIBRA SOFs, FlowPolice capabilities,
//! FAIR marks, DRKey derivations).
//!
//! ```
//! use mac::{Aes, Key};
//!
//! let aes = Aes::new(&Key::from([7u8; 16]));
//! let tag = aes.cbc_mac(b"fixed-length message of 32 bytes");
//! assert!(mac::ct_eq(&tag[..4], &aes.cbc_mac(b"fixed-length message of 32 bytes")[..4]));
//! ```
#![no_std]
#![forbid(unsafe_code)]

mod aes128;
mod cmac;
mod key;

pub use aes128::{Aes, Block, BLOCK};
pub use cmac::Cmac;
pub use key::Key;

/// A block XORed into the last block of a MAC lane, prepared for the
/// lane's key (see [`Cmac::k2_last`]).
pub use aesni::LastBlock;

/// Compares two byte strings in constant time (for equal lengths).
///
/// Strings of different lengths compare unequal (their length is not secret).
#[inline]
pub fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// The leading `N` bytes of a tag (MACs are truncated to their most significant bytes).
#[inline]
pub fn truncate<const N: usize>(tag: &Block) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&tag[..N]);
    out
}

/// The leading `bits` bits of a tag as an integer (`bits` ≤ 32), for sub-byte
/// MACs such as FAIR's 4-bit marks.
#[inline]
pub fn truncate_bits(tag: &Block, bits: u32) -> u32 {
    debug_assert!(bits <= 32);
    let lead = u32::from_be_bytes([tag[0], tag[1], tag[2], tag[3]]);
    if bits == 0 {
        0
    } else {
        lead >> (32 - bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_leading_bits() {
        let mut t = [0u8; 16];
        t[0] = 0xAB;
        t[1] = 0xCD;
        assert_eq!(truncate::<2>(&t), [0xAB, 0xCD]);
        assert_eq!(truncate_bits(&t, 4), 0xA);
        assert_eq!(truncate_bits(&t, 12), 0xABC);
        assert_eq!(truncate_bits(&t, 0), 0);
    }

    #[test]
    fn ct_eq_semantics() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
