//! SOF (SIBRA opaque field) MACs: issuing, chaining and verification.
//!
//! The MAC input is one fixed 48-byte layout (three AES blocks), so plain
//! CBC-MAC is sound here:
//!
//! ```text
//! 0..2   ingress          2..4   egress
//! 4..12  ResvInfo with F and fail_hop zeroed
//! 12..36 path IDs of the block, zero-padded to 24 bytes
//! 36..44 previous SOF of the same block (8 zero bytes at its first hop)
//! 44..48 zero padding
//! ```
//! The tag is the first 4 bytes of the CBC-MAC.

use std::collections::HashMap;

pub use mac::Key;
use mac::{Aes, Block};
use pipeline::DropReason;

use crate::types::{ResvIdx, ResvInfo, ResvKey, Sof, Tick};
use crate::Error;

/// Length of the MAC input in bytes.
pub const MAC_INPUT_LEN: usize = 48;
/// Room for path IDs in the MAC input.
pub const MAC_IDS_LEN: usize = 24;

/// The 48-byte MAC input of one SOF, as three AES blocks.
///
/// `ids` longer than 24 bytes are cut (a block's IDs are 8 or 16 bytes).
#[inline]
pub fn mac_input(
    ingress: u16,
    egress: u16,
    info_mac: &[u8; 8],
    ids: &[u8],
    prev: &[u8; 8],
) -> [Block; 3] {
    let mut m = [0u8; MAC_INPUT_LEN];
    m[0..2].copy_from_slice(&ingress.to_be_bytes());
    m[2..4].copy_from_slice(&egress.to_be_bytes());
    m[4..12].copy_from_slice(info_mac);
    let n = ids.len().min(MAC_IDS_LEN);
    m[12..12 + n].copy_from_slice(&ids[..n]);
    m[36..44].copy_from_slice(prev);
    let mut b = [[0u8; 16]; 3];
    for (j, blk) in b.iter_mut().enumerate() {
        blk.copy_from_slice(&m[16 * j..16 * j + 16]);
    }
    b
}

/// The 4-byte SOF MAC under one expanded key.
#[inline]
pub fn sof_mac(
    aes: &Aes,
    ingress: u16,
    egress: u16,
    info: &ResvInfo,
    ids: &[u8],
    prev: Option<&Sof>,
) -> [u8; 4] {
    let prev = prev.map_or([0u8; 8], Sof::to_bytes);
    let tag = aes.cbc_mac_blocks(&mac_input(ingress, egress, &info.mac_bytes(), ids, &prev));
    mac::truncate::<4>(&tag)
}

/// An AS's SOF keys: the current one, plus the previous one during a grace
/// period after rotation so tokens issued just before the rotation stay valid.
///
/// **Decision:** new tokens are always issued under the current key; the grace
/// period should cover the longest reservation (45 ticks for steady paths),
/// which is what [`SofKeys::rotate_default`] uses.
#[derive(Clone, Debug)]
pub struct SofKeys {
    current: Aes,
    previous: Option<(Aes, Tick)>,
}

impl SofKeys {
    /// Keys with `key` as the current key and no previous key.
    pub fn new(key: &Key) -> Self {
        SofKeys { current: Aes::new(key), previous: None }
    }

    /// The key new tokens are issued under.
    pub fn current(&self) -> &Aes {
        &self.current
    }

    /// The previous key if it is still inside its grace period at `now`.
    pub fn previous(&self, now: Tick) -> Option<&Aes> {
        self.previous.as_ref().filter(|(_, until)| now <= *until).map(|(a, _)| a)
    }

    /// Makes `key` current; the old key verifies until tick `now + grace` (inclusive).
    pub fn rotate(&mut self, key: &Key, now: Tick, grace: u32) {
        let old = core::mem::replace(&mut self.current, Aes::new(key));
        self.previous = Some((old, now.plus(grace)));
    }

    /// [`rotate`](Self::rotate) with a grace period of the steady horizon.
    pub fn rotate_default(&mut self, key: &Key, now: Tick) {
        self.rotate(key, now, crate::STEADY_HORIZON);
    }

    /// Issues the SOF for interfaces `(ingress, egress)` of a block with `info`
    /// and `ids`, chained to `prev` (the block's previous SOF, `None` at hop 0).
    pub fn issue(
        &self,
        ingress: u16,
        egress: u16,
        info: &ResvInfo,
        ids: &[u8],
        prev: Option<&Sof>,
    ) -> Sof {
        Sof { ingress, egress, mac: sof_mac(&self.current, ingress, egress, info, ids, prev) }
    }

    /// Whether `sof`'s MAC verifies (constant-time compare; previous key during grace).
    pub fn check_mac(
        &self,
        sof: &Sof,
        info: &ResvInfo,
        ids: &[u8],
        prev: Option<&Sof>,
        now: Tick,
    ) -> bool {
        let ok =
            mac::ct_eq(&sof_mac(&self.current, sof.ingress, sof.egress, info, ids, prev), &sof.mac);
        ok || self.previous(now).is_some_and(|a| {
            mac::ct_eq(&sof_mac(a, sof.ingress, sof.egress, info, ids, prev), &sof.mac)
        })
    }
}

/// Issues a whole block's SOF chain, one key per hop (tests and simulations:
/// in reality every AS issues its own SOF).
pub fn issue_chain(
    keys: &[&SofKeys],
    hops: &[(u16, u16)],
    info: &ResvInfo,
    ids: &[u8],
) -> Vec<Sof> {
    let mut out: Vec<Sof> = Vec::with_capacity(hops.len());
    for (k, &(i, e)) in keys.iter().zip(hops) {
        let s = k.issue(i, e, info, ids, out.last());
        out.push(s);
    }
    out
}

/// Why a token is rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reject {
    /// Interfaces do not match the packet's arrival/departure.
    WrongInterface,
    /// The MAC does not verify.
    BadMac,
    /// `exp_tick < now_tick`.
    Expired,
    /// The index was revoked.
    Revoked,
    /// The reservation is blacklisted by monitoring.
    Blacklisted,
    /// The reservation exceeds its rate.
    OverRate,
    /// Admission control denied a request.
    Denied,
    /// The packet is malformed.
    Malformed,
}

impl From<Reject> for DropReason {
    fn from(r: Reject) -> Self {
        match r {
            Reject::WrongInterface => DropReason::WrongInterface,
            Reject::BadMac => DropReason::BadMac,
            Reject::Expired => DropReason::Expired,
            Reject::Revoked => DropReason::Revoked,
            Reject::Blacklisted => DropReason::Blacklisted,
            Reject::OverRate => DropReason::OverRate,
            Reject::Denied => DropReason::Denied,
            Reject::Malformed => DropReason::Malformed,
        }
    }
}

/// Revoked reservation indices, bounded; entries lapse after their expiry.
#[derive(Debug)]
pub struct Revocations {
    map: HashMap<(ResvKey, u8), Tick>,
    capacity: usize,
}

impl Revocations {
    /// An empty set holding at most `capacity` revocations.
    pub fn new(capacity: usize) -> Self {
        Revocations { map: HashMap::with_capacity(capacity), capacity }
    }

    /// Revokes index `idx` of `key` until tick `until` (the reservation's expiry).
    pub fn revoke(
        &mut self,
        key: ResvKey,
        idx: ResvIdx,
        until: Tick,
        now: Tick,
    ) -> Result<(), Error> {
        if self.map.len() >= self.capacity && !self.map.contains_key(&(key, idx.get())) {
            self.map.retain(|_, u| *u >= now);
            if self.map.len() >= self.capacity {
                return Err(Error::TableFull { what: "revocation", capacity: self.capacity });
            }
        }
        self.map.insert((key, idx.get()), until);
        Ok(())
    }

    /// Whether index `idx` of `key` is revoked.
    #[inline]
    pub fn is_revoked(&self, key: &ResvKey, idx: ResvIdx) -> bool {
        // Empty in the common case: skip hashing.
        !self.map.is_empty() && self.map.contains_key(&(*key, idx.get()))
    }

    /// Number of revocations held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// One data-packet token check, prepared for [`verify_batch`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenCheck {
    /// The MAC input blocks.
    pub input: [Block; 3],
    /// The MAC carried by the packet.
    pub mac: [u8; 4],
}

impl TokenCheck {
    /// Prepares the check of `sof` (already matched against the interfaces).
    #[inline]
    pub fn new(sof: &Sof, info_mac: &[u8; 8], ids: &[u8], prev: &[u8; 8]) -> Self {
        TokenCheck { input: mac_input(sof.ingress, sof.egress, info_mac, ids, prev), mac: sof.mac }
    }

    /// Prepares the check of a SOF from wire bytes: the SOF (8), the
    /// block's ResvInfo as MACed (F and fail_hop zeroed, 8), its path IDs
    /// zero-padded to 16 bytes (a steady ID is 8) and the chaining input
    /// (previous SOF or zeros). Same as [`TokenCheck::new`] on the decoded
    /// values; fixed-size copies only.
    #[inline(always)]
    pub fn set_from_wire(
        &mut self,
        sof: &[u8; 8],
        info_mac: &[u8; 8],
        ids: &[u8; 16],
        prev: &[u8; 8],
    ) {
        // Field by field into place: building a whole `TokenCheck` and
        // moving it in cost an extra 52-byte copy per SOF (measured). Whole
        // sub-slices, not bytes: byte-wise the compiler kept each byte in
        // its own register (≈ 30 instructions per SOF, measured).
        // Over the 48 bytes as one array: the IDs in one 16-byte move
        // across the first two blocks (in pieces per block, they were
        // loaded back in pieces, measured).
        // (3 · 16 = 48 bytes: the `else` is not reachable.)
        let Some(m) = self.input.as_flattened_mut().first_chunk_mut::<MAC_INPUT_LEN>() else {
            return;
        };
        m[..4].copy_from_slice(&sof[..4]);
        m[4..12].copy_from_slice(info_mac);
        m[12..28].copy_from_slice(ids);
        m[28..36].fill(0);
        m[36..44].copy_from_slice(prev);
        m[44..].fill(0);
        self.mac.copy_from_slice(&sof[4..]);
    }

    /// [`set_from_wire`](Self::set_from_wire) as a new value.
    #[inline(always)]
    pub fn from_wire(sof: &[u8; 8], info_mac: &[u8; 8], ids: &[u8; 16], prev: &[u8; 8]) -> Self {
        let mut c = TokenCheck::default();
        c.set_from_wire(sof, info_mac, ids, prev);
        c
    }
}

/// Whether the first 4 bytes of `tag` equal `mac`, in constant time: one
/// 32-bit word compare through `subtle` (the byte-slice `mac::ct_eq` costs
/// ≈ 45 instructions per 4-byte tag, measured).
#[inline(always)]
fn tag_eq(tag: &[u8; 16], mac: &[u8; 4]) -> bool {
    use subtle::ConstantTimeEq;
    let [a, b, c, d, ..] = *tag;
    bool::from(u32::from_ne_bytes([a, b, c, d]).ct_eq(&u32::from_ne_bytes(*mac)))
}

/// Verifies the MACs of up to any number of prepared checks, pipelining AES
/// across them ([`Aes::cbc_mac_batch`]). Writes `ok[i]`; checks that fail under
/// the current key are retried under the previous key (during its grace period).
pub fn verify_batch(keys: &SofKeys, checks: &[TokenCheck], ok: &mut [bool], now: Tick) {
    const CHUNK: usize = 64;
    let mut tags = [[0u8; 16]; CHUNK];
    for (checks, ok) in checks.chunks(CHUNK).zip(ok.chunks_mut(CHUNK)) {
        let tags = &mut tags[..checks.len()];
        keys.current.cbc_mac_batch(3, |i, j| checks[i].input[j], tags);
        for ((chk, tag), ok) in checks.iter().zip(tags.iter()).zip(ok.iter_mut()) {
            *ok = tag_eq(tag, &chk.mac);
        }
        if let Some(prev) = keys.previous(now) {
            for (chk, ok) in checks.iter().zip(ok.iter_mut()) {
                if !*ok {
                    *ok = tag_eq(&prev.cbc_mac_blocks(&chk.input), &chk.mac);
                }
            }
        }
    }
}

/// Whether the first 4 bytes of `tag` differ from `mac`: the whole 32-bit
/// word at once (a compare and a flag move, no branch and no byte-wise
/// early exit, so the time tells nothing about how much of a forged MAC
/// is right). Without `subtle`'s per-call optimisation barrier (an
/// out-of-line call per tag, ≈ 8 instructions, measured): the result is a
/// bit merged into a mask, and whether a MAC is wrong is no secret (the
/// packet is dropped).
#[inline(always)]
fn tag_differs(tag: &[u8; 16], mac: &[u8; 4]) -> bool {
    let [a, b, c, d, ..] = *tag;
    u32::from_ne_bytes([a, b, c, d]) ^ u32::from_ne_bytes(*mac) != 0
}

/// [`verify_batch`] of `checks[..n]` (at most 64), answered as a mask: bit
/// `k` is set when check `k` fails (under the current key and, during its
/// grace period, the previous one). `tags` is working space (not cleared
/// first). The stages' form: a burst that verifies needs no walk over
/// per-check results, and the fixed-size arrays spare the AES lanes a
/// bounds test per block.
pub fn verify_batch_failed(
    keys: &SofKeys,
    checks: &[TokenCheck; 64],
    n: usize,
    tags: &mut [[u8; 16]; 64],
    now: Tick,
) -> u64 {
    let n = n.min(64);
    let checked = if n == 64 { u64::MAX } else { !(u64::MAX << n) };
    let mut failed = 0;
    // `i < n ≤ 64`: the remainder only proves it to the compiler.
    keys.current.cbc_mac_batch(3, |i, j| checks[i % 64].input[j], &mut tags[..n]);
    // Last check first, each shifting the earlier ones' bits up: a shift
    // by one and an OR per check instead of a shift by a variable count.
    for (tag, chk) in tags[..n].iter().zip(&checks[..n]).rev() {
        failed = failed << 1 | u64::from(tag_differs(tag, &chk.mac));
    }
    if let Some(prev) = keys.previous(now) {
        let mut retry = failed & checked;
        while retry != 0 {
            let k = retry.trailing_zeros() as usize;
            retry &= retry - 1;
            if let Some(chk) = checks.get(k) {
                if tag_eq(&prev.cbc_mac_blocks(&chk.input), &chk.mac) {
                    failed &= !(1 << k);
                }
            }
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{BwClass, SteadyId};

    fn info() -> ResvInfo {
        ResvInfo {
            exp_tick: Tick(100),
            bw_fwd: BwClass::new(10).unwrap(),
            bw_rev: BwClass::new(8).unwrap(),
            index: ResvIdx::new(3).unwrap(),
            fwd: true,
            fail_hop: 1,
        }
    }

    #[test]
    fn mac_input_layout() {
        let b = mac_input(0x0102, 0x0304, &info().mac_bytes(), &[0xAA; 8], &[0xBB; 8]);
        let flat: Vec<u8> = b.iter().flatten().copied().collect();
        let mut expect = vec![1, 2, 3, 4, 0, 0, 0, 100, 10, 8, 0x30, 0];
        expect.extend([0xAA; 8]);
        expect.extend([0u8; 16]);
        expect.extend([0xBB; 8]);
        expect.extend([0u8; 4]);
        assert_eq!(flat, expect);
    }

    #[test]
    fn from_wire_equals_new() {
        let sof = Sof { ingress: 0x0102, egress: 0x0304, mac: [9, 8, 7, 6] };
        let prev = [0xBB; 8];
        let mut eph = [0u8; 16];
        eph.iter_mut().enumerate().for_each(|(i, b)| *b = 0x40 + i as u8);
        let mut steady = [0u8; 16];
        steady[..8].copy_from_slice(&[0xAA; 8]);
        for (ids, len) in [(eph, 16), (steady, 8)] {
            let a = TokenCheck::new(&sof, &info().mac_bytes(), &ids[..len], &prev);
            let b = TokenCheck::from_wire(&sof.to_bytes(), &info().mac_bytes(), &ids, &prev);
            assert_eq!((a.input, a.mac), (b.input, b.mac));
            // In place over a dirty slot.
            let mut c = TokenCheck { input: [[0xff; 16]; 3], mac: [0xff; 4] };
            c.set_from_wire(&sof.to_bytes(), &info().mac_bytes(), &ids, &prev);
            assert_eq!((a.input, a.mac), (c.input, c.mac));
        }
    }

    #[test]
    fn rotation_grace() {
        let id = SteadyId::new(1, 1);
        let mut keys = SofKeys::new(&Key::from([1; 16]));
        let sof = keys.issue(1, 2, &info(), &id.0, None);
        keys.rotate(&Key::from([2; 16]), Tick(10), 5);
        assert!(keys.check_mac(&sof, &info(), &id.0, None, Tick(15)));
        assert!(!keys.check_mac(&sof, &info(), &id.0, None, Tick(16)));
        let fresh = keys.issue(1, 2, &info(), &id.0, None);
        assert_ne!(fresh.mac, sof.mac);
        assert!(keys.check_mac(&fresh, &info(), &id.0, None, Tick(16)));
        // The batch path honours the grace period too.
        let checks = [TokenCheck::new(&sof, &info().mac_bytes(), &id.0, &[0; 8]); 3];
        let mut ok = [false; 3];
        verify_batch(&keys, &checks, &mut ok, Tick(15));
        assert_eq!(ok, [true; 3]);
        verify_batch(&keys, &checks, &mut ok, Tick(16));
        assert_eq!(ok, [false; 3]);
    }

    /// The mask form against `verify_batch` (one `ok` per check): SOFs
    /// under the old key, the new key and forged, any count up to 64, in
    /// and after the grace period, over dirty working space.
    #[test]
    fn failed_mask_equals_verify_batch() {
        let id = SteadyId::new(1, 1);
        let mut keys = SofKeys::new(&Key::from([1; 16]));
        let old = keys.issue(1, 2, &info(), &id.0, None);
        keys.rotate(&Key::from([2; 16]), Tick(10), 5);
        let new = keys.issue(3, 4, &info(), &id.0, None);
        let mut x = 0x9E37_79B9u32;
        let mut checks = [TokenCheck::default(); 64];
        let mut tags = [[0xA5; 16]; 64];
        for round in 0..200 {
            let n = round % 65;
            for c in checks.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let mut sof = [old, new][(x & 1) as usize];
                if x & 6 == 0 {
                    sof.mac[(x >> 3) as usize % 4] ^= 1 << (x >> 5 & 7);
                }
                *c = TokenCheck::new(&sof, &info().mac_bytes(), &id.0, &[0; 8]);
            }
            for now in [Tick(15), Tick(16)] {
                let mut ok = [false; 64];
                verify_batch(&keys, &checks[..n], &mut ok[..n], now);
                let want = (0..n).filter(|&k| !ok[k]).fold(0u64, |m, k| m | 1 << k);
                assert_eq!(verify_batch_failed(&keys, &checks, n, &mut tags, now), want);
            }
        }
    }
}
