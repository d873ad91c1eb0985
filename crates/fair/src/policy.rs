//! The setup phase (spec §2.10, §3.5, §5.6): sending-policy packets, their
//! hash chain, Ed25519 signatures of source and destination, stateless
//! control MACs of transit ASes, and the trust store that stands in for the RPKI.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::crypto::{ctrl_mac, sha3, verify_sig, Digest32, Signer};
use crate::keys::KeyRing;
use crate::lpm::{key_of, PrefixTable};

/// Message types of the policy packet header.
pub mod msg {
    /// Source → destination, collecting transit entries.
    pub const SETUP_REQUEST: u8 = 1;
    /// The complete signed policy, destination → source.
    pub const SETUP_RESPONSE: u8 = 2;
    /// Refusal, destination → source (body: P0 and a reason byte).
    pub const SETUP_REJECT: u8 = 3;
}

/// Allowed skew of `P0.time` at relays and at the destination (T_setup).
pub const T_SETUP: u64 = 10;
/// Upper bound on `expiration − P0.time`.
pub const MAX_POLICY_LIFETIME: u64 = 86_400;
const MAX_SIG: usize = 512;
const MAX_PATH: usize = 127;

/// One AS's entry in the trust store (resource certificate + ROAs stand-in).
#[derive(Clone, Debug, Default)]
pub struct AsEntry {
    /// Ed25519 verifying key.
    pub sign_pk: [u8; 32],
    /// X25519 public key for K_SD.
    pub dh_pk: [u8; 32],
    /// Announced prefixes.
    pub prefixes: Vec<(IpAddr, u8)>,
}

/// ASN → keys and prefixes (PROPOSED RPKI model, §3.1).
#[derive(Clone, Debug, Default)]
pub struct TrustStore {
    ases: HashMap<u32, AsEntry>,
    owners: PrefixTable<u32>,
}

impl TrustStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an AS.
    pub fn insert(&mut self, asn: u32, e: AsEntry) {
        for (a, l) in &e.prefixes {
            self.owners.insert(*a, *l, asn);
        }
        self.ases.insert(asn, e);
    }

    /// The entry of `asn`.
    pub fn get(&self, asn: u32) -> Option<&AsEntry> {
        self.ases.get(&asn)
    }

    /// The AS announcing the longest prefix covering `addr`.
    pub fn owner(&self, addr: IpAddr) -> Option<u32> {
        self.owners.lookup(key_of(addr)).copied()
    }

    /// Whether `addr` lies in a prefix of `asn`.
    pub fn prefix_of(&self, asn: u32, addr: IpAddr) -> bool {
        self.owner(addr) == Some(asn)
    }

    /// Verifies `sig` by `asn` over `digest`.
    pub fn verify(&self, asn: u32, digest: &Digest32, sig: &[u8]) -> bool {
        self.get(asn).is_some_and(|e| verify_sig(&e.sign_pk, digest, sig))
    }
}

/// P\[0\]: the source's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct P0 {
    /// ASN_0.
    pub asn: u32,
    /// ASN_n (A17).
    pub dst_asn: u32,
    /// Start of the channel, Unix seconds.
    pub time: u64,
    /// Cooperating transit ASes in path order.
    pub path: Vec<u32>,
    /// `Sign_0(h_0)`.
    pub sig: Vec<u8>,
}

/// P\[k\]: a transit entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitEntry {
    /// ASN_k.
    pub asn: u32,
    /// `CBC-MAC_{K̂_k}(h_k)`.
    pub mac: [u8; 16],
}

/// P\[n\]: the destination's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pn {
    /// ASN_n.
    pub asn: u32,
    /// End of the channel, Unix seconds.
    pub expiration: u64,
    /// Bytes per second.
    pub cir: u64,
    /// Bytes.
    pub cbs: u64,
    /// `Sign_n(h_n)`.
    pub sig: Vec<u8>,
}

/// A sending-policy packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyPacket {
    /// One of [`msg`].
    pub msg_type: u8,
    /// Source entry.
    pub p0: P0,
    /// Transit entries.
    pub transit: Vec<TransitEntry>,
    /// Destination entry (responses only).
    pub pn: Option<Pn>,
    /// Reject reason (rejects only).
    pub reason: Option<RejectReason>,
}

/// Why the destination refuses a policy (`SETUP_REJECT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[repr(u8)]
pub enum RejectReason {
    /// `Sign_0` does not verify.
    #[error("bad source signature")]
    BadSignature = 1,
    /// `P0.time` too far from now, or not addressed to this AS.
    #[error("bad time or destination")]
    BadTime = 2,
    /// Transit entries differ from `P0.path`.
    #[error("path mismatch")]
    PathMismatch = 3,
    /// `expiration − P0.time` exceeds the maximum lifetime.
    #[error("lifetime too long")]
    LifetimeTooLong = 4,
    /// `CBS + CIR ≥ 2^24 · L_min` (sequence-space soundness, §5.2).
    #[error("sequence space too small for the rate")]
    SequenceSpace = 5,
    /// Undecodable or wrong message type.
    #[error("malformed policy packet")]
    Malformed = 6,
}

impl RejectReason {
    fn from_u8(v: u8) -> Option<Self> {
        use RejectReason::*;
        [BadSignature, BadTime, PathMismatch, LifetimeTooLong, SequenceSpace, Malformed]
            .into_iter()
            .find(|r| *r as u8 == v)
    }
}

struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    fn sig(&mut self) -> Option<Vec<u8>> {
        let n = self.u16()? as usize;
        if n > MAX_SIG {
            return None;
        }
        Some(self.take(n)?.to_vec())
    }
}

impl P0 {
    /// The signed fields `u32 asn ‖ u32 dst_asn ‖ u64 time ‖ u8 path_len ‖ u32 path[m]`.
    fn signed_fields(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.asn.to_be_bytes());
        out.extend_from_slice(&self.dst_asn.to_be_bytes());
        out.extend_from_slice(&self.time.to_be_bytes());
        out.push(self.path.len() as u8);
        for a in &self.path {
            out.extend_from_slice(&a.to_be_bytes());
        }
    }

    /// `h_0`.
    pub fn h0(&self) -> Digest32 {
        let mut v = Vec::new();
        self.signed_fields(&mut v);
        sha3(&[&v])
    }

    /// `enc(P0)`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.signed_fields(out);
        out.extend_from_slice(&(self.sig.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.sig);
    }

    fn decode(r: &mut Rd<'_>) -> Option<P0> {
        let asn = r.u32()?;
        let dst_asn = r.u32()?;
        let time = r.u64()?;
        let m = r.u8()? as usize;
        if m > MAX_PATH {
            return None;
        }
        let path = (0..m).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
        Some(P0 { asn, dst_asn, time, path, sig: r.sig()? })
    }
}

impl TransitEntry {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.asn.to_be_bytes());
        out.extend_from_slice(&self.mac);
    }
}

impl Pn {
    fn fields(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.asn.to_be_bytes());
        out.extend_from_slice(&self.expiration.to_be_bytes());
        out.extend_from_slice(&self.cir.to_be_bytes());
        out.extend_from_slice(&self.cbs.to_be_bytes());
    }
    fn encode(&self, out: &mut Vec<u8>) {
        self.fields(out);
        out.extend_from_slice(&(self.sig.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.sig);
    }
}

impl PolicyPacket {
    /// The binary encoding of §2.10.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![1, self.msg_type, self.transit.len() as u8, 0];
        self.p0.encode(&mut v);
        for t in &self.transit {
            t.encode(&mut v);
        }
        if let Some(pn) = &self.pn {
            pn.encode(&mut v);
        }
        if let Some(r) = self.reason {
            v.push(r as u8);
        }
        v
    }

    /// Decodes and checks the structure (not the cryptography).
    pub fn decode(b: &[u8]) -> Option<PolicyPacket> {
        let mut r = Rd(b);
        let (ver, msg_type, n, flags) = (r.u8()?, r.u8()?, r.u8()? as usize, r.u8()?);
        if ver != 1 || flags != 0 || n > MAX_PATH || !(1..=3).contains(&msg_type) {
            return None;
        }
        let p0 = P0::decode(&mut r)?;
        let mut transit = Vec::with_capacity(n);
        for _ in 0..n {
            let asn = r.u32()?;
            let mac = r.take(16)?.try_into().ok()?;
            transit.push(TransitEntry { asn, mac });
        }
        let mut pn = None;
        let mut reason = None;
        match msg_type {
            msg::SETUP_RESPONSE => {
                let (asn, expiration, cir, cbs) = (r.u32()?, r.u64()?, r.u64()?, r.u64()?);
                pn = Some(Pn { asn, expiration, cir, cbs, sig: r.sig()? });
            }
            msg::SETUP_REJECT => reason = Some(RejectReason::from_u8(r.u8()?)?),
            _ => {}
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(PolicyPacket { msg_type, p0, transit, pn, reason })
    }

    fn prefix(&self, k: usize) -> Vec<u8> {
        let mut v = Vec::new();
        self.p0.encode(&mut v);
        for t in &self.transit[..k] {
            t.encode(&mut v);
        }
        v
    }

    /// `h_k = H(enc(P0) ‖ enc(P1..P_{k−1}) ‖ u32 ASN_k)` for 1-based k.
    pub fn h_k(&self, k: usize, asn: u32) -> Digest32 {
        let v = self.prefix(k.saturating_sub(1).min(self.transit.len()));
        sha3(&[&v, &asn.to_be_bytes()])
    }

    /// `h_n` over all transit entries and the destination's fields.
    pub fn h_n(&self, pn: &Pn) -> Digest32 {
        let mut v = self.prefix(self.transit.len());
        pn.fields(&mut v);
        sha3(&[&v])
    }

    /// `policy_id` (responses only).
    pub fn policy_id(&self) -> Digest32 {
        let mut v = self.prefix(self.transit.len());
        if let Some(pn) = &self.pn {
            pn.encode(&mut v);
        }
        sha3(&[&v])
    }

    /// Checks both signatures of a complete policy.
    pub fn verify_signatures(&self, trust: &TrustStore) -> bool {
        let Some(pn) = &self.pn else { return false };
        self.msg_type == msg::SETUP_RESPONSE
            && trust.verify(self.p0.asn, &self.p0.h0(), &self.p0.sig)
            && trust.verify(pn.asn, &self.h_n(pn), &pn.sig)
    }
}

/// Source: builds and signs a `SETUP_REQUEST`.
pub fn setup_initiate(
    signer: &Signer,
    asn: u32,
    dst_asn: u32,
    path: Vec<u32>,
    now: u64,
) -> PolicyPacket {
    let mut p0 = P0 { asn, dst_asn, time: now, path, sig: Vec::new() };
    p0.sig = signer.sign(&p0.h0()).to_vec();
    PolicyPacket { msg_type: msg::SETUP_REQUEST, p0, transit: Vec::new(), pn: None, reason: None }
}

/// Why a relay refuses to extend a policy packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RelayError {
    /// Undecodable or not a request.
    #[error("malformed setup request")]
    Malformed,
    /// `P0.time` outside ±T_setup.
    #[error("setup time out of range")]
    BadTime,
    /// No control key for the epoch.
    #[error("no control key")]
    NoKey,
    /// Source signature invalid (only when checked).
    #[error("bad source signature")]
    BadSignature,
}

/// Transit AS: appends its entry (stateless). `verify_source` enables the
/// optional `Sign_0` check.
pub fn setup_relay(
    bytes: &[u8],
    asn: u32,
    ctrl: &KeyRing,
    trust: Option<&TrustStore>,
    now: u64,
) -> Result<Vec<u8>, RelayError> {
    let mut pp = PolicyPacket::decode(bytes).ok_or(RelayError::Malformed)?;
    if pp.msg_type != msg::SETUP_REQUEST || pp.transit.len() >= MAX_PATH {
        return Err(RelayError::Malformed);
    }
    if pp.p0.time.abs_diff(now) > T_SETUP {
        return Err(RelayError::BadTime);
    }
    if let Some(t) = trust {
        if !t.verify(pp.p0.asn, &pp.p0.h0(), &pp.p0.sig) {
            return Err(RelayError::BadSignature);
        }
    }
    let key = ctrl.for_time(pp.p0.time).ok_or(RelayError::NoKey)?;
    let h = pp.h_k(pp.transit.len() + 1, asn);
    pp.transit.push(TransitEntry { asn, mac: ctrl_mac(&key.aes, &h) });
    Ok(pp.encode())
}

/// The destination's choice for a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    /// Bytes per second.
    pub cir: u64,
    /// Bytes.
    pub cbs: u64,
    /// Unix seconds.
    pub expiration: u64,
    /// Smallest `net_len` of a FAIR packet on the channel (sequence-space check).
    pub l_min: u64,
}

/// Destination: validates a request and signs the complete policy, or builds a reject.
pub fn setup_complete(
    bytes: &[u8],
    asn: u32,
    signer: &Signer,
    trust: &TrustStore,
    grant: Grant,
    now: u64,
) -> Result<PolicyPacket, Box<(RejectReason, Option<PolicyPacket>)>> {
    let Some(mut pp) = PolicyPacket::decode(bytes).filter(|p| p.msg_type == msg::SETUP_REQUEST)
    else {
        return Err(Box::new((RejectReason::Malformed, None)));
    };
    let reject = |pp: &PolicyPacket, r: RejectReason| {
        let rej = PolicyPacket {
            msg_type: msg::SETUP_REJECT,
            p0: pp.p0.clone(),
            transit: Vec::new(),
            pn: None,
            reason: Some(r),
        };
        Err(Box::new((r, Some(rej))))
    };
    if !trust.verify(pp.p0.asn, &pp.p0.h0(), &pp.p0.sig) {
        return reject(&pp, RejectReason::BadSignature);
    }
    if pp.p0.dst_asn != asn || pp.p0.time.abs_diff(now) > T_SETUP {
        return reject(&pp, RejectReason::BadTime);
    }
    if pp.transit.iter().map(|t| t.asn).ne(pp.p0.path.iter().copied()) {
        return reject(&pp, RejectReason::PathMismatch);
    }
    if grant.expiration.saturating_sub(pp.p0.time) > MAX_POLICY_LIFETIME {
        return reject(&pp, RejectReason::LifetimeTooLong);
    }
    if (grant.cbs as u128 + grant.cir as u128) >= (1u128 << 24) * grant.l_min as u128 {
        return reject(&pp, RejectReason::SequenceSpace);
    }
    let mut pn =
        Pn { asn, expiration: grant.expiration, cir: grant.cir, cbs: grant.cbs, sig: Vec::new() };
    pn.sig = signer.sign(&pp.h_n(&pn)).to_vec();
    pp.pn = Some(pn);
    pp.msg_type = msg::SETUP_RESPONSE;
    Ok(pp)
}

/// Source: accepts a response iff it is signed, carries the exact P0 it sent
/// and the transit list equals `P0.path`.
pub fn setup_finalize(
    sent: &PolicyPacket,
    response: &[u8],
    trust: &TrustStore,
) -> Option<PolicyPacket> {
    let pp = PolicyPacket::decode(response)?;
    (pp.verify_signatures(trust)
        && pp.p0 == sent.p0
        && pp.transit.iter().map(|t| t.asn).eq(pp.p0.path.iter().copied()))
    .then_some(pp)
}

/// Test fixtures shared by the crate's unit tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// Six ASes 100..=105 with signing keys seeded 1..=6 and prefixes 10.i.0.0/16.
    pub(crate) fn world() -> (TrustStore, Vec<Signer>) {
        let mut t = TrustStore::new();
        let signers: Vec<Signer> = (0..6u8).map(|i| Signer::from_seed([i + 1; 32])).collect();
        for (i, s) in signers.iter().enumerate() {
            t.insert(
                100 + i as u32,
                AsEntry {
                    sign_pk: s.public(),
                    dh_pk: [0; 32],
                    prefixes: vec![(IpAddr::from([10, i as u8, 0, 0]), 16)],
                },
            );
        }
        (t, signers)
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::world;
    use super::*;
    use crate::crypto::MarkBinding;
    use mac::Key;
    use proptest::prelude::*;

    fn ctrl(seed: u8, now: u64) -> KeyRing {
        let mut r = KeyRing::control(86_400, 86_400 * 3);
        r.install(now / 86_400, &Key::from([seed; 16]), MarkBinding::Paper).unwrap();
        r
    }

    fn grant(now: u64) -> Grant {
        Grant { cir: 125_000_000, cbs: 12_500_000, expiration: now + 3600, l_min: 33 }
    }

    #[test]
    fn u_s2_round_trip_and_rejects() {
        let (t, s) = world();
        let now = 1_700_000_000;
        let req = setup_initiate(&s[0], 100, 105, vec![101, 102], now);
        let b1 = setup_relay(&req.encode(), 101, &ctrl(1, now), None, now + 1).unwrap();
        let b2 = setup_relay(&b1, 102, &ctrl(2, now), Some(&t), now + 2).unwrap();
        let resp = setup_complete(&b2, 105, &s[5], &t, grant(now), now + 2).unwrap();
        let fin = setup_finalize(&req, &resp.encode(), &t).unwrap();
        assert_eq!(fin, resp);
        assert_eq!(PolicyPacket::decode(&fin.encode()), Some(fin.clone()));
        // Each transit MAC recomputes.
        assert_eq!(
            fin.transit[1].mac,
            ctrl_mac(&ctrl(2, now).get(now / 86_400).unwrap().aes, &fin.h_k(2, 102))
        );

        let rej =
            |b: &[u8], g: Grant, at: u64| setup_complete(b, 105, &s[5], &t, g, at).unwrap_err().0;
        // Bad signature.
        let mut bad = PolicyPacket::decode(&b2).unwrap();
        bad.p0.time += 1;
        assert_eq!(rej(&bad.encode(), grant(now), now), RejectReason::BadSignature);
        // Bad time.
        assert_eq!(rej(&b2, grant(now), now + 100), RejectReason::BadTime);
        // Path mismatch: the source omitted 102 (SEC-17).
        let req2 = setup_initiate(&s[0], 100, 105, vec![101], now);
        let x = setup_relay(
            &setup_relay(&req2.encode(), 101, &ctrl(1, now), None, now).unwrap(),
            102,
            &ctrl(2, now),
            None,
            now,
        )
        .unwrap();
        assert_eq!(rej(&x, grant(now), now), RejectReason::PathMismatch);
        // Truncation by a relay (SEC-16).
        let mut tr = PolicyPacket::decode(&b2).unwrap();
        tr.transit.remove(0);
        assert_eq!(rej(&tr.encode(), grant(now), now), RejectReason::PathMismatch);
        // Lifetime.
        assert_eq!(
            rej(&b2, Grant { expiration: now + 2 * 86_400, ..grant(now) }, now),
            RejectReason::LifetimeTooLong
        );
        // Sequence space (SEC-23a).
        assert_eq!(
            rej(&b2, Grant { cir: 600_000_000, ..grant(now) }, now),
            RejectReason::SequenceSpace
        );
        let r = setup_complete(&b2, 105, &s[5], &t, Grant { cir: 600_000_000, ..grant(now) }, now)
            .unwrap_err()
            .1
            .unwrap();
        assert_eq!(PolicyPacket::decode(&r.encode()), Some(r));
        // The relay refuses stale requests.
        assert_eq!(
            setup_relay(&req.encode(), 101, &ctrl(1, now), None, now + 11),
            Err(RelayError::BadTime)
        );
    }

    #[test]
    fn u_w9_truncation_rejected() {
        let (t, s) = world();
        let now = 1_700_000_000;
        let req = setup_initiate(&s[0], 100, 105, vec![101], now);
        let b1 = setup_relay(&req.encode(), 101, &ctrl(1, now), None, now).unwrap();
        let resp = setup_complete(&b1, 105, &s[5], &t, grant(now), now).unwrap().encode();
        for k in 0..resp.len() {
            assert!(PolicyPacket::decode(&resp[..k]).is_none(), "k={k}");
        }
    }

    proptest! {
        #[test]
        fn decode_never_panics(b in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Some(p) = PolicyPacket::decode(&b) {
                prop_assert_eq!(PolicyPacket::decode(&p.encode()), Some(p));
            }
        }
    }
}
