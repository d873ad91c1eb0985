//! Harness shared by the FAIR integration tests (and the protest benchmark):
//! AS identities in a trust store, the key rings, stages and verifiers of
//! transit ASes, policy setup along a path, packets, and a whole path
//! AS_0 → c1 … cm → AS_n of real stages driven by virtual time.

// Each test file uses a different subset of the harness.
#![allow(dead_code)]

use std::net::IpAddr;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use fair::common::Framing;
use fair::crypto::{MarkBinding, Signer};
use fair::dest::{DestChannel, DestConfig, FairDestination};
use fair::keys::{KeyRing, TestKeySource, T_M};
use fair::policy::{self, AsEntry, Grant, PolicyPacket, TrustStore};
use fair::protest::{
    evaluate_outcome, Attribution, ProtestOutcome, ProtestRequest, SignedVerdict, Verifier,
    VerifyConfig,
};
use fair::record::Record;
use fair::source::{FairSource, NonConforming, SourceChannel, SourceConfig};
use fair::transit::{FairTransit, TransitConfig};
use mac::Key;
use pipeline::{Batch, Now, Stage, Verdict};

/// The start of every scenario (Unix seconds).
pub const T0: u64 = 1_700_000_000;
/// Length of the packets the sources send before FAIR (bytes).
pub const PKT: u64 = 100;

/// Registers `asn` in `trust`: signing key from seed `[seed; 32]`, prefix
/// 10.`net`.0.0/16. Returns its signer.
pub fn member(trust: &mut TrustStore, asn: u32, seed: u8, net: u8) -> Signer {
    let s = Signer::from_seed([seed; 32]);
    let e = AsEntry {
        sign_pk: s.public(),
        dh_pk: [0; 32],
        prefixes: vec![(IpAddr::from([10, net, 0, 0]), 16)],
    };
    trust.insert(asn, e);
    s
}

/// `n` ASes 100, 101, … with seeds 1, 2, … and prefixes 10.0/16, 10.1/16, …
pub fn members(n: u8) -> (TrustStore, Vec<Signer>) {
    let mut trust = TrustStore::new();
    let signers = (0..n).map(|i| member(&mut trust, 100 + u32::from(i), i + 1, i)).collect();
    (trust, signers)
}

/// The control key ring of the `k`-th transit AS of a path: key
/// `[0x40 + k; 16]`, installed for the day of [`T0`].
pub fn control_ring(k: usize) -> KeyRing {
    let mut c = KeyRing::control(86_400, 3 * 86_400);
    c.install(T0 / 86_400, &Key::from([0x40 + k as u8; 16]), MarkBinding::Paper).unwrap();
    c
}

/// A data key ring of 60-second epochs with keys for `secs` seconds from
/// [`T0`], drawn from `TestKeySource::new(seed)`.
pub fn data_ring(seed: u64, secs: u64, binding: MarkBinding) -> Arc<KeyRing> {
    let mut d = KeyRing::data(60, T_M).unwrap();
    let mut ks = TestKeySource::new(seed);
    d.rotate(T0, secs, binding, || ks.next_key());
    Arc::new(d)
}

/// The transit stage of the `k`-th transit AS of a path (bare IP).
pub fn transit(k: usize, data: &Arc<KeyRing>) -> FairTransit {
    FairTransit::new(
        TransitConfig { framing: Framing::Ip, ..Default::default() },
        data.clone(),
        99 + k as u64,
    )
}

/// The protest verifier of transit AS `asn`, signing with seed `[seed; 32]`.
pub fn verifier(asn: u32, data: &Arc<KeyRing>, ctrl: KeyRing, seed: u8) -> Verifier {
    Verifier {
        asn,
        data_keys: data.clone(),
        ctrl_keys: ctrl,
        signer: Signer::from_seed([seed; 32]),
        cfg: VerifyConfig::default(),
    }
}

/// Policy setup (§5.6) at [`T0`]: `src` initiates towards `dst` over `path`
/// (each transit AS with its control ring relays), `dst` grants `grant`,
/// and the source finalizes the response.
pub fn setup_policy(
    src: (u32, &Signer),
    path: &[(u32, &KeyRing)],
    dst: (u32, &Signer),
    trust: &TrustStore,
    grant: Grant,
) -> PolicyPacket {
    let asns = path.iter().map(|(a, _)| *a).collect();
    let req = policy::setup_initiate(src.1, src.0, dst.0, asns, T0);
    let mut bytes = req.encode();
    for (asn, ctrl) in path {
        bytes = policy::setup_relay(&bytes, *asn, ctrl, None, T0).unwrap();
    }
    let resp = policy::setup_complete(&bytes, dst.0, dst.1, trust, grant, T0).unwrap();
    policy::setup_finalize(&req, &resp.encode(), trust).unwrap()
}

/// Channel 0 of a source towards `dst` with key `k_sd`, room for `m`
/// cooperating ASes, and its shaper at (`cir`, `cbs`), full at [`T0`].
pub fn channel(dst: u32, k_sd: &Key, m: u8, cir: u64, cbs: u64) -> SourceChannel {
    let seq = Arc::new(AtomicU32::new(0));
    SourceChannel::new(0, dst, k_sd, m, cir, cbs, T0 * 1_000_000_000, seq)
}

/// A bare-IP source stage sending `ch`'s traffic to 10.`dst_net`.0.0/16.
pub fn source(nonconforming: NonConforming, ch: SourceChannel, dst_net: u8) -> FairSource {
    let mut src =
        FairSource::new(SourceConfig { framing: Framing::Ip, nonconforming, ..Default::default() });
    let idx = src.add_channel(ch);
    src.route(IpAddr::from([10, dst_net, 0, 0]), 16, idx);
    src
}

/// A bare-IP destination stage that keeps every record.
pub fn destination() -> FairDestination<Vec<Record>> {
    FairDestination::new(DestConfig { framing: Framing::Ip, ..Default::default() }, Vec::new())
}

/// A [`PKT`]-byte IPv4/UDP packet `src` → `dst` (before FAIR).
pub fn ipv4_packet(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0u8; PKT as usize];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(PKT as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    packet::ipv4::Ipv4::new_unchecked(&mut p[..]).fill_checksum();
    p
}

/// Round 2 of a protest: the attribution from `req`'s verdicts.
pub fn attribute(
    req: &ProtestRequest,
    verdicts: Vec<SignedVerdict>,
    trust: &TrustStore,
) -> Attribution {
    let out = ProtestOutcome { protest_id: req.protest_id, policy: req.policy.clone(), verdicts };
    evaluate_outcome(&out, trust).unwrap()
}

/// Source AS 100 (10.0/16) → cooperating transit ASes → a destination AS,
/// one channel, all stages real.
pub struct World {
    pub trust: TrustStore,
    /// The source's signer first, the destination's last.
    pub signers: Vec<Signer>,
    pub policy: PolicyPacket,
    pub transit: Vec<FairTransit>,
    pub verifiers: Vec<Verifier>,
    pub src: FairSource,
    pub dst: FairDestination<Vec<Record>>,
}

/// The source AS of a [`World`].
pub const SRC: u32 = 100;
/// The rate the destination grants in a [`World`] (bytes/s) …
pub const CIR: u64 = 10_000;
/// … and the burst.
pub const CBS: u64 = 2_000;

/// What the test files' [`World`]s differ in.
pub struct PathSpec {
    /// The cooperating transit ASes in path order.
    pub path: Vec<u32>,
    /// The destination AS and its /16 (10.`net`.0.0).
    pub dst: (u32, u8),
    /// Slots the source reserves in each header.
    pub slots: u8,
    pub binding: MarkBinding,
    pub nonconforming: NonConforming,
    /// Data keys of every transit AS cover this many seconds from [`T0`].
    pub key_secs: u64,
    /// The destination's duplicate-suppression window (bits), if not the default.
    pub dup_window: Option<u32>,
}

impl World {
    /// The path of `spec` over `trust` (which holds every AS of it);
    /// `signers` are the source's first and the destination's last. Transit
    /// AS k has control key `[0x40 + k; 16]`, data keys from `TestKeySource(k
    /// + 10)` and signs verdicts with seed `[k + 2; 32]`; the destination
    /// grants [`CIR`]/[`CBS`] for two hours.
    pub fn new(spec: PathSpec, trust: TrustStore, signers: Vec<Signer>) -> World {
        let m = spec.path.len();
        let ctrl: Vec<KeyRing> = (0..m).map(control_ring).collect();
        let data: Vec<Arc<KeyRing>> =
            (0..m).map(|k| data_ring(k as u64 + 10, spec.key_secs, spec.binding)).collect();
        let hops: Vec<(u32, &KeyRing)> = spec.path.iter().copied().zip(&ctrl).collect();
        let grant = Grant { cir: CIR, cbs: CBS, expiration: T0 + 7200, l_min: 32 };
        let (src_signer, dst_signer) = (&signers[0], signers.last().unwrap());
        let policy =
            setup_policy((SRC, src_signer), &hops, (spec.dst.0, dst_signer), &trust, grant);
        let k_sd = Key::from([0x77; 16]);
        let ch = channel(spec.dst.0, &k_sd, spec.slots, CIR, CBS);
        let src = source(spec.nonconforming, ch, spec.dst.1);
        let mut dst = destination();
        dst.add_source_prefix(IpAddr::from([10, 0, 0, 0]), 16, SRC);
        let mut dch = DestChannel::new(1, SRC, &k_sd, m as u8, CIR, CBS, T0 * 1_000_000_000);
        if let Some(bits) = spec.dup_window {
            dch = dch.with_dup_window(bits);
        }
        dst.add_channel(dch, 0, spec.slots);
        let transit = data.iter().enumerate().map(|(k, d)| transit(k, d)).collect();
        let verifiers = ctrl
            .into_iter()
            .enumerate()
            .map(|(k, c)| verifier(spec.path[k], &data[k], c, k as u8 + 2))
            .collect();
        World { trust, signers, policy, transit, verifiers, src, dst }
    }

    /// The destination's protest over `records` at `now`, signed.
    pub fn protest_request(&self, records: Vec<Record>, now: u64) -> ProtestRequest {
        ProtestRequest::build(&self.policy, records, (0, 0), now, self.signers.last().unwrap())
    }
}

/// A hook run on the burst after transit `k` marked it (k = usize::MAX: after the source).
pub type Hook<'a> = &'a mut dyn FnMut(usize, &mut Batch<Vec<u8>>);

/// The hook that changes nothing.
pub fn no_hook(_: usize, _: &mut Batch<Vec<u8>>) {}

/// Runs `secs` seconds (from T0 + 1) at `pps` copies of `pkt` per second
/// through the path, in bursts of at most `burst`; then the destination's
/// monitor ticks 20 s past the end.
pub fn run(w: &mut World, secs: u64, pps: u64, burst: u64, pkt: &[u8], hook: Hook) {
    for t in 0..secs {
        let mut sent = 0;
        while sent < pps {
            let n = (pps - sent).min(burst);
            let now =
                Now::from_unix_ns((T0 + 1 + t) * 1_000_000_000 + sent * (1_000_000_000 / pps));
            let mut b: Batch<Vec<u8>> = Batch::new();
            for _ in 0..n {
                b.push(pkt.to_vec(), 0).unwrap();
            }
            w.src.process(&mut b, now);
            hook(usize::MAX, &mut b);
            for (k, tr) in w.transit.iter_mut().enumerate() {
                tr.process(&mut b, now);
                hook(k, &mut b);
            }
            w.dst.process(&mut b, now);
            sent += n;
        }
    }
    w.dst.tick(T0 + secs + 20);
}

/// Replaces the burst by `copies` copies of each forwarded packet (a replay).
pub fn duplicate(b: &mut Batch<Vec<u8>>, copies: usize) {
    let mut nb: Batch<Vec<u8>> = Batch::new();
    b.drain(|buf, meta| {
        if matches!(meta.verdict, Verdict::Forward { .. }) {
            for _ in 0..copies {
                let _ = nb.push(buf.clone(), 0);
            }
        }
    });
    *b = nb;
}
