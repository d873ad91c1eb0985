//! FAIR's cryptography (spec §3): data-plane MAC blocks, control MAC, SHA3-256,
//! K_SD derivation (X25519 + HKDF-SHA3-256) and Ed25519 signatures.

use hmac::{KeyInit, Mac as _};
use mac::{Aes, Block, Key};
use sha3::{Digest, Sha3_256};

/// A 32-byte SHA3-256 digest.
pub type Digest32 = [u8; 32];

/// Domain tag of the ICV block (§3.4, byte 0 bits 7..4).
pub const TAG_ICV: u8 = 0x1;
/// Domain tag of a slot MAC in `Paper` binding.
pub const TAG_SLOT_PAPER: u8 = 0x2;
/// Domain tag of a slot MAC in `Bound` binding.
pub const TAG_SLOT_BOUND: u8 = 0x3;

/// What a transit AS's slot MAC covers besides `(len, ts, seqno, nonce)` (§3.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum MarkBinding {
    /// The paper's input: no addresses (default, faithful).
    #[default]
    Paper,
    /// PROPOSED hardening: also the top 32 bits of source and destination address.
    Bound,
}

/// The ICV input block: tag 1, `len ‖ ts ‖ seqno`, zero padding.
#[inline(always)]
pub fn icv_block(len: u16, ts: u16, seqno: u32) -> Block {
    (u128::from(icv_hi(len, ts, seqno)) << 64).to_be_bytes()
}

/// The first 8 bytes of [`icv_block`] as a big-endian word. Every such
/// word holds the tag, so the word of `(0, ts, 0)` ORed with that of
/// `(len, 0, seqno)` is the word of `(len, ts, seqno)`: a burst hoists its
/// constant part.
#[inline(always)]
pub(crate) fn icv_hi(len: u16, ts: u16, seqno: u32) -> u64 {
    // Composed in one 64-bit word: a handful of shifts instead of byte copies.
    ((TAG_ICV as u64) << 60)
        | ((len as u64) << 40)
        | ((ts as u64) << 24)
        | (seqno & 0x00FF_FFFF) as u64
}

/// The slot-MAC input block of §3.4; `src32`/`dst32` are only used in `Bound` mode.
#[inline(always)]
pub fn mark_block(
    binding: MarkBinding,
    len: u16,
    ts: u16,
    seqno: u32,
    nonce: u8,
    src32: [u8; 4],
    dst32: [u8; 4],
) -> Block {
    let (tag, lo) = match binding {
        MarkBinding::Paper => (TAG_SLOT_PAPER, 0u64),
        MarkBinding::Bound => (
            TAG_SLOT_BOUND,
            ((u32::from_be_bytes(src32) as u64) << 32) | u32::from_be_bytes(dst32) as u64,
        ),
    };
    let hi = ((((tag << 4) | (nonce & 0x0F)) as u64) << 56)
        | ((len as u64) << 40)
        | ((ts as u64) << 24)
        | (seqno & 0x00FF_FFFF) as u64;
    (((hi as u128) << 64) | lo as u128).to_be_bytes()
}

/// [`mark_block`] in `Paper` binding from the header word `w` of
/// [`crate::common::Hot::w`] (bytes 2..7 are `ts ‖ seqno`): the transit fast path.
#[inline(always)]
pub fn mark_block_paper_w(len: u16, w: u64, nonce: u8) -> Block {
    let hi = ((((TAG_SLOT_PAPER << 4) | (nonce & 0x0F)) as u64) << 56)
        | ((len as u64) << 40)
        | ((w >> 8) & 0xFF_FFFF_FFFF);
    ((hi as u128) << 64).to_be_bytes()
}

/// [`icv_block`] from the header word `w` of [`crate::common::Hot::w`].
#[inline(always)]
pub fn icv_block_w(len: u16, w: u64) -> Block {
    let hi = ((TAG_ICV as u64) << 60) | ((len as u64) << 40) | ((w >> 8) & 0xFF_FFFF_FFFF);
    ((hi as u128) << 64).to_be_bytes()
}

/// The 8-bit ICV: the leading byte of `AES_{K_SD}(icv_block)`.
#[inline]
pub fn icv(k_sd: &Aes, len: u16, ts: u16, seqno: u32) -> u8 {
    let mut b = icv_block(len, ts, seqno);
    k_sd.encrypt_block(&mut b);
    b[0]
}

/// A full slot byte `nonce << 4 | mac4` for the given inputs.
// One argument per field of the MAC block keeps call sites explicit.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn slot(
    key: &Aes,
    binding: MarkBinding,
    len: u16,
    ts: u16,
    seqno: u32,
    nonce: u8,
    src32: [u8; 4],
    dst32: [u8; 4],
) -> u8 {
    let mut b = mark_block(binding, len, ts, seqno, nonce, src32, dst32);
    key.encrypt_block(&mut b);
    ((nonce & 0x0F) << 4) | (b[0] >> 4)
}

/// Control-plane MAC: CBC-MAC-AES-128 over a 32-byte digest (two blocks), untruncated.
pub fn ctrl_mac(key: &Aes, d: &Digest32) -> Block {
    key.cbc_mac(d)
}

/// SHA3-256 over the concatenation of `parts`.
pub fn sha3(parts: &[&[u8]]) -> Digest32 {
    let mut h = Sha3_256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

type HmacSha3 = hmac::Hmac<Sha3_256>;

fn hmac_sha3(key: &[u8], parts: &[&[u8]]) -> Digest32 {
    // HMAC accepts keys of any length; this cannot fail.
    let mut m = <HmacSha3 as KeyInit>::new_from_slice(key).expect("hmac takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// HKDF (RFC 5869) with HMAC-SHA3-256, output of at most 32 bytes (one expand block).
pub fn hkdf_sha3_16(salt: &[u8], ikm: &[u8], info: &[u8]) -> [u8; 16] {
    let mut prk = hmac_sha3(salt, &[ikm]);
    let mut t = hmac_sha3(&prk, &[info, &[1u8]]);
    let mut out = [0u8; 16];
    out.copy_from_slice(&t[..16]);
    zeroize::Zeroize::zeroize(&mut prk);
    zeroize::Zeroize::zeroize(&mut t);
    out
}

/// Salt of the K_SD derivation (§3.3).
pub const KSD_SALT: &[u8] = b"FAIR-v1 K_SD";

/// K_SD for the direction `asn_s → asn_d` from an X25519 shared secret (§3.3).
pub fn kdf_ksd(shared: &[u8; 32], asn_s: u32, asn_d: u32, key_version: u32) -> Key {
    let mut info = [0u8; 12];
    info[0..4].copy_from_slice(&asn_s.to_be_bytes());
    info[4..8].copy_from_slice(&asn_d.to_be_bytes());
    info[8..12].copy_from_slice(&key_version.to_be_bytes());
    Key::from(hkdf_sha3_16(KSD_SALT, shared, &info))
}

/// An AS's static X25519 secret for non-interactive K_SD agreement.
pub struct DhSecret(x25519_dalek::StaticSecret);

impl DhSecret {
    /// From 32 secret bytes (from the OS CSPRNG or key storage).
    pub fn from_bytes(b: [u8; 32]) -> Self {
        DhSecret(x25519_dalek::StaticSecret::from(b))
    }

    /// The public key published in the trust store.
    pub fn public(&self) -> [u8; 32] {
        x25519_dalek::PublicKey::from(&self.0).to_bytes()
    }

    /// K_SD for traffic `asn_s → asn_d`, given the other side's public key.
    /// Symmetric: S with D's public key and D with S's public key agree.
    pub fn k_sd(&self, peer_public: &[u8; 32], asn_s: u32, asn_d: u32, key_version: u32) -> Key {
        let ss = self.0.diffie_hellman(&x25519_dalek::PublicKey::from(*peer_public));
        kdf_ksd(ss.as_bytes(), asn_s, asn_d, key_version)
    }
}

impl core::fmt::Debug for DhSecret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DhSecret(<redacted>)")
    }
}

/// An Ed25519 signing key (policies, verdicts, protests).
pub struct Signer(ed25519_dalek::SigningKey);

impl Signer {
    /// From a 32-byte seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Signer(ed25519_dalek::SigningKey::from_bytes(&seed))
    }

    /// The verifying key published in the trust store.
    pub fn public(&self) -> [u8; 32] {
        self.0.verifying_key().to_bytes()
    }

    /// Signs a digest (the spec signs hashes, §3.1).
    pub fn sign(&self, digest: &Digest32) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        self.0.sign(digest).to_bytes()
    }
}

impl core::fmt::Debug for Signer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Signer(<redacted>)")
    }
}

/// Verifies an Ed25519 signature over a digest with a 32-byte public key.
pub fn verify_sig(public: &[u8; 32], digest: &Digest32, sig: &[u8]) -> bool {
    let Ok(vk) = ed25519_dalek::VerifyingKey::from_bytes(public) else { return false };
    let Ok(sig) = <[u8; 64]>::try_from(sig) else { return false };
    vk.verify_strict(digest, &ed25519_dalek::Signature::from_bytes(&sig)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }
    fn h16(s: &str) -> [u8; 16] {
        h(s).try_into().unwrap()
    }
    fn aes(s: &str) -> Aes {
        Aes::from_bytes(&h16(s))
    }
    const KSD: &str = "000102030405060708090a0b0c0d0e0f";
    const KI: &str = "101112131415161718191a1b1c1d1e1f";
    const KHAT: &str = "202122232425262728292a2b2c2d2e2f";

    #[test]
    fn u_c1_fips197() {
        let mut b = h16("00112233445566778899aabbccddeeff");
        aes(KSD).encrypt_block(&mut b);
        assert_eq!(b, h16("69c4e0d86a7b0430d8cdb78070b4c55a"));
    }

    fn enc(k: &str, b: Block) -> Block {
        let mut b = b;
        aes(k).encrypt_block(&mut b);
        b
    }

    #[test]
    fn u_c2_known_answers() {
        let b = icv_block(0x1c, 0xbeef, 1);
        assert_eq!(b, h16("10001cbeef0000010000000000000000"));
        assert_eq!(enc(KSD, b), h16("5d34d2eb7c706dd8e30f998df7f8737a"));
        assert_eq!(icv(&aes(KSD), 0x1c, 0xbeef, 1), 0x5d);

        let z = [0u8; 4];
        for (nonce, blk, out, sl) in [
            (0xa, "2a001cbeef0000010000000000000000", "3b36affa81643f66c685a71627887c11", 0xa3),
            (0x0, "20001cbeef0000010000000000000000", "b7ba3eb4754d0ede342bf038e6274a16", 0x0b),
            (0xf, "2f001cbeef0000010000000000000000", "d9ec5bc867489e91153b8a5dff07bb8c", 0xfd),
        ] {
            let b = mark_block(MarkBinding::Paper, 0x1c, 0xbeef, 1, nonce, z, z);
            assert_eq!(b, h16(blk));
            assert_eq!(enc(KI, b), h16(out));
            assert_eq!(slot(&aes(KI), MarkBinding::Paper, 0x1c, 0xbeef, 1, nonce, z, z), sl);
        }
        let b = mark_block(
            MarkBinding::Bound,
            0x1c,
            0xbeef,
            1,
            0xa,
            [0x20, 0x01, 0x0d, 0xb8],
            [0x20, 0x01, 0x0d, 0xb9],
        );
        assert_eq!(b, h16("3a001cbeef00000120010db820010db9"));
        assert_eq!(enc(KI, b), h16("c230edc51fd55673c9f928491e80cf38"));
        let b = mark_block(
            MarkBinding::Bound,
            0x30,
            0x0001,
            0xffffff,
            0x5,
            [192, 0, 2, 1],
            [198, 51, 100, 7],
        );
        assert_eq!(b, h16("3500300001ffffffc0000201c6336407"));
        assert_eq!(enc(KI, b), h16("5a548723d3d14a3bb9f7ab2786994231"));
        assert_eq!(
            slot(
                &aes(KI),
                MarkBinding::Bound,
                0x30,
                1,
                0xffffff,
                5,
                [192, 0, 2, 1],
                [198, 51, 100, 7]
            ),
            0x55
        );
        // The header-word forms agree with the field forms.
        let w = u64::from_be_bytes([0x11, 0x01, 0xbe, 0xef, 0, 0, 1, 0x5d]);
        assert_eq!(icv_block_w(0x1c, w), icv_block(0x1c, 0xbeef, 1));
        assert_eq!(
            mark_block_paper_w(0x1c, w, 0xa),
            mark_block(MarkBinding::Paper, 0x1c, 0xbeef, 1, 0xa, z, z)
        );
        // IPv4 worked example of §2.8.
        assert_eq!(enc(KSD, icv_block(0x2d, 1, 0xffffff)), h16("c00aada6c6d77459bf9a890f68265b7d"));
        assert_eq!(icv(&aes(KSD), 0x2d, 1, 0xffffff), 0xc0);
        assert_eq!(
            enc(KI, mark_block(MarkBinding::Paper, 0x2d, 1, 0xffffff, 5, z, z)),
            h16("d93bf509c3efe143445bb301f471dfe3")
        );
        // Control MAC.
        let d: Digest32 = core::array::from_fn(|i| i as u8);
        assert_eq!(ctrl_mac(&aes(KHAT), &d), h16("4a7a2d1c467886121eb7ce42f0899cd0"));
    }

    #[test]
    fn u_c3_sha3_and_ed25519() {
        assert_eq!(
            sha3(&[]).to_vec(),
            h("a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a")
        );
        assert_eq!(
            sha3(&[b"a", b"bc"]).to_vec(),
            h("3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532")
        );
        let s = Signer::from_seed([7; 32]);
        let d = sha3(&[b"policy"]);
        let sig = s.sign(&d);
        assert!(verify_sig(&s.public(), &d, &sig));
        let mut d2 = d;
        d2[0] ^= 1;
        assert!(!verify_sig(&s.public(), &d2, &sig));
        assert!(!verify_sig(&s.public(), &d, &sig[..63]));
    }

    #[test]
    fn u_c4_ksd_symmetric_directional_versioned() {
        let s = DhSecret::from_bytes([1; 32]);
        let d = DhSecret::from_bytes([2; 32]);
        let a = s.k_sd(&d.public(), 64500, 64511, 0);
        let b = d.k_sd(&s.public(), 64500, 64511, 0);
        assert_eq!(a, b);
        assert_ne!(a, s.k_sd(&d.public(), 64511, 64500, 0));
        assert_ne!(a, s.k_sd(&d.public(), 64500, 64511, 1));
    }
}
