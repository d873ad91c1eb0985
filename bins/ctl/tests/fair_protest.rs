//! FAIR protests end to end: a transit router (AS 101) running
//! `fair-transit` with `[control.fair]` verifies protests built with the
//! `fair` crate's public API (signed policy, evidence records marked with
//! the router's configured data key, the destination's signature),
//! submitted through `ctl` and the client library.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use adapters::pb;
use adapters::ProtocolClients;
use common::Env;
use common::{config, counters, ctl, scratch_dir, start_in, total_drops, unix_now, wall_clock};
use control::client::Client;
use fair::crypto::{slot, MarkBinding, Signer};
use fair::policy::TrustStore;
use fair::policy::{setup_complete, setup_initiate, setup_relay, AsEntry, Grant, PolicyPacket};
use fair::protest::{ProtestRequest, SignedVerdict};
use fair::record::{Record, RECORD_SLOTS};
use tonic::Code;

const DATA_KEY: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const CTRL_KEY: [u8; 16] = [0x42; 16];
const ME: u32 = 101;
const SRC: u32 = 100;
const DST: u32 = 105;
const DST2: u32 = 104;

fn seed(asn: u32) -> [u8; 32] {
    [(asn - 99) as u8; 32]
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The trust store every party uses (the RPKI stand-in).
fn trust() -> TrustStore {
    let mut t = TrustStore::new();
    for (asn, pfx) in
        [(SRC, [10, 1, 0, 0]), (ME, [10, 9, 0, 0]), (DST2, [10, 4, 0, 0]), (DST, [10, 2, 0, 0])]
    {
        t.insert(
            asn,
            AsEntry {
                sign_pk: Signer::from_seed(seed(asn)).public(),
                dh_pk: [0; 32],
                prefixes: vec![(IpAddr::from(pfx), 16)],
            },
        );
    }
    t
}

/// The data key of `epoch` as the `fair-transit` stage derives it from its
/// master `data_key`.
fn data_key(epoch: u64) -> mac::Aes {
    mac::Aes::new(&fair::keys::data_epoch_key(&mac::Key::from(DATA_KEY), epoch))
}

/// A complete policy AS 100 → (AS 101) → `dst` set up at `t0`: CIR 10 kB/s,
/// CBS 20 kB; AS 101's entry made with its control key of `t0`.
fn policy(dst: u32, t0: u64) -> PolicyPacket {
    let t = trust();
    let req = setup_initiate(&Signer::from_seed(seed(SRC)), SRC, dst, vec![ME], t0);
    let ring = fair::keys::control_key_ring(&mac::Key::from(CTRL_KEY), 86_400, t0);
    let b1 = setup_relay(&req.encode(), ME, &ring, None, t0).unwrap();
    let g = Grant { cir: 10_000, cbs: 20_000, expiration: t0 + 7200, l_min: 100 };
    setup_complete(&b1, dst, &Signer::from_seed(seed(dst)), &t, g, t0).unwrap()
}

/// 60 packets of 1000 bytes in each of the 5 seconds before `now`, marked by
/// AS 101 in slot 0: 60 kB/s against CIR 10 kB/s + CBS 20 kB, a violation.
fn records(now: u64, dst: [u8; 4]) -> Vec<Record> {
    records_with(now, dst, &data_key)
}

fn records_with(now: u64, dst: [u8; 4], key: &dyn Fn(u64) -> mac::Aes) -> Vec<Record> {
    let mut v = Vec::new();
    let mut seq = 0u32;
    for sec in now - 5..now {
        let aes = key(sec / 60);
        for i in 0..60u8 {
            seq += 1;
            let (src32, ts, len) = ([10, 1, 0, 5], (sec & 0xFFFF) as u16, 1000u16);
            let mut slots = [0u8; RECORD_SLOTS];
            slots[0] = slot(&aes, MarkBinding::Paper, len, ts, seq, i & 0x0F, src32, dst);
            let mut s16 = [0u8; 16];
            s16[..4].copy_from_slice(&src32);
            let mut d16 = [0u8; 16];
            d16[..4].copy_from_slice(&dst);
            v.push(Record {
                channel: 0,
                arrival: sec as u32,
                v6: false,
                truncated: false,
                n_slots: 1,
                len_field: len,
                ts,
                seqno: seq,
                icv: 0,
                next_as: 0,
                src: s16,
                dst: d16,
                slots,
            });
        }
    }
    v
}

fn protest(dst: u32, now: u64, forge: bool) -> ProtestRequest {
    let pol = policy(dst, now - 60);
    let mut recs = records(now, [10, (dst - 100) as u8, 0, 9]);
    if forge {
        // Fabricated marks: every MAC nibble flipped.
        for r in &mut recs {
            r.slots[0] ^= 0x05;
        }
    }
    ProtestRequest::build(&pol, recs, (now - 5, now - 1), now, &Signer::from_seed(seed(dst)))
}

fn start() -> Env {
    start_with("main", unix_now() + 3600)
}

/// A router whose configured data keys end at `keys_until` (Unix seconds).
fn start_with(name: &str, keys_until: u64) -> Env {
    let dir = scratch_dir(&format!("fair-protest-{name}"));
    let key_file = dir.join("fair.ed25519");
    std::fs::write(&key_file, format!("{}\n", hex(&seed(ME)))).unwrap();
    let now = unix_now();
    let router = wall_clock(
        r#"traffic = [{ name = "plain", port = 0, rate_pps = 20000, flows = 16, template = "ipv4-udp", dst = "10.2.0.1", size = 200 }]"#,
        1,
        "",
    );
    let toml = format!(
        r#"{router}
        [[pipeline]]
        kind = "parse"
        [[pipeline]]
        kind = "ipv4-forward"
        routes = [{{ prefix = "10.2.0.0/16", port = 1 }}]
        [[pipeline]]
        kind = "fair-transit"
        data_key = "{}"
        keys_from = {}
        keys_until = {}
        "#,
        hex(&DATA_KEY),
        now - 3600,
        keys_until
    );
    let cfg = config("fair-protest", &toml);
    let t = trust();
    let trust_toml: String = [SRC, DST2, DST]
        .iter()
        .map(|a| {
            let e = t.get(*a).unwrap();
            format!(
                "[[trust]]\nasn = {a}\npublic_key_hex = \"{}\"\nprefixes = [\"{}/{}\"]\n",
                hex(&e.sign_pk),
                e.prefixes[0].0,
                e.prefixes[0].1
            )
        })
        .collect();
    let fair: toml::Table = toml::from_str(&format!(
        "asn = {ME}\nsigning_key_file = \"{}\"\ncontrol_key = \"{}\"\n\
         per_complainant_burst = 6\nper_complainant_per_hour = 1\nverdicts_kept = 8\n{trust_toml}",
        key_file.display(),
        hex(&CTRL_KEY)
    ))
    .unwrap();
    start_in(dir, cfg, |c| {
        c.protocols.insert("fair".into(), fair);
    })
}

async fn submit(c: &Client, p: &ProtestRequest) -> Result<pb::ProtestReceipt, tonic::Status> {
    c.fair()
        .submit_protest(pb::SubmitProtestRequest { protest: p.encode(), ..Default::default() })
        .await
        .map(|r| r.into_inner())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protests_are_verified_signed_listed_and_rate_limited() {
    let env = start();
    let c = env.client().await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    let c0 = counters(&c).await;
    let now = unix_now();
    let me_trust = {
        let mut t = trust();
        t.insert(
            ME,
            AsEntry { sign_pk: Signer::from_seed(seed(ME)).public(), ..Default::default() },
        );
        t
    };

    // 1. A valid protest through `ctl` (binary file, JSON output): ACK.
    let good = protest(DST, now, false);
    let f = env.dir.join("good.protest");
    std::fs::write(&f, good.encode()).unwrap();
    let (ok, out, err) =
        ctl(&env, &["--json", "fair", "submit-protest", "--file", f.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["verdict"], "ACK", "{out}");
    assert_eq!(j["detail"]["reason"], "NONE", "{out}");
    assert_eq!(j["detail"]["records"], 300, "{out}");
    assert_eq!(j["detail"]["considered"], 300, "{out}");
    assert_eq!(j["detail"]["failed"], 0, "{out}");
    assert_eq!(j["detail"]["first_violation_unix"], now - 5, "{out}");
    assert_eq!(j["detail"]["protest_id_hex"], hex(&good.protest_id), "{out}");

    // ... listed, with a signature that verifies under AS 101's key.
    let l =
        c.fair().list_verdicts(pb::ListVerdictsRequest { limit: 0 }).await.unwrap().into_inner();
    assert_eq!(l.verifier_public_key_hex, hex(&Signer::from_seed(seed(ME)).public()));
    assert_eq!(l.verdicts.len(), 1);
    let v = &l.verdicts[0];
    assert_eq!(
        (v.verdict.as_str(), v.source_asn, v.complainant_asn, v.verifier_asn),
        ("ACK", SRC, DST, ME)
    );
    assert_eq!(v.source_prefix, "10.1.0.0/16");
    assert_eq!(v.misplaced, None); // no failed marks, no histogram
    let sv = SignedVerdict::decode(&unhex(&v.signed_verdict_hex)).unwrap();
    assert!(sv.verify(&me_trust));
    assert_eq!(sv.body.protest_id, good.protest_id);
    let mut bad_sig = sv.clone();
    bad_sig.body.max_excess_bytes += 1;
    assert!(!bad_sig.verify(&me_trust));

    // 2. Forged marks (hex text file, human output): REJECT MARK_FAILURES.
    let forged = protest(DST, now, true);
    let f = env.dir.join("forged.hex");
    std::fs::write(&f, format!("{}\n", hex(&forged.encode()))).unwrap();
    let (ok, out, err) = ctl(&env, &["fair", "submit-protest", "--file", f.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("REJECT MARK_FAILURES") && out.contains("failed 300"), "{out}");
    // The signed SEC-21 histogram is shown (every failed record was probed).
    assert!(out.contains("misplaced marks: own slot") && out.contains("probed 300"), "{out}");

    // 3. A bad complainant signature: REJECT BAD_POLICY_SIGNATURE.
    let mut badsig = protest(DST, now, false);
    badsig.dest_sig[10] ^= 1;
    let r = submit(&c, &badsig).await.unwrap();
    assert_eq!(r.verdict, "REJECT BAD_POLICY_SIGNATURE");
    assert!(SignedVerdict::decode(&unhex(&r.detail.unwrap().signed_verdict_hex))
        .unwrap()
        .verify(&me_trust));

    // 4. Undecodable input: INVALID_ARGUMENT, nothing stored, no quota used.
    let mut cut = good.encode();
    cut.truncate(cut.len() - 3);
    let e = c
        .fair()
        .submit_protest(pb::SubmitProtestRequest { protest: cut, ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(e.message().starts_with("protest: "), "{e:?}");
    let e = c
        .fair()
        .submit_protest(pb::SubmitProtestRequest { protest_hex: "zz".into(), protest: vec![1] })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    let (ok, _, err) = ctl(&env, &["fair", "submit-protest", "--hex", "0000"]);
    assert!(!ok && err.contains("InvalidArgument"), "{err}");

    // 5. A flood from AS 105: its burst is 6 (3 used), then RESOURCE_EXHAUSTED.
    let mut results = Vec::new();
    for _ in 0..20 {
        results.push(submit(&c, &good).await.map(|r| r.verdict).map_err(|s| s.code()));
    }
    let ack = || Ok("ACK".to_string());
    assert_eq!(results[..3], [ack(), ack(), ack()], "{results:?}");
    assert!(results[3..].iter().all(|r| *r == Err(Code::ResourceExhausted)), "{results:?}");
    let (ok, _, err) = ctl(
        &env,
        &["fair", "submit-protest", "--file", env.dir.join("good.protest").to_str().unwrap()],
    );
    assert!(!ok && err.contains("ResourceExhausted") && err.contains("AS 105"), "{err}");
    // ... another complainant is not affected.
    let other = protest(DST2, now, false);
    assert_eq!(submit(&c, &other).await.unwrap().verdict, "ACK");

    // 6. ListVerdicts: newest first, bounded (verdicts_kept = 8), limit honoured,
    //    rate-limited protests not stored.
    let l =
        c.fair().list_verdicts(pb::ListVerdictsRequest { limit: 0 }).await.unwrap().into_inner();
    let ids: Vec<u64> = l.verdicts.iter().map(|v| v.id).collect();
    assert_eq!(ids, vec![7, 6, 5, 4, 3, 2, 1], "{l:?}");
    assert_eq!(l.verdicts[0].complainant_asn, DST2);
    assert_eq!(l.refused, 18);
    assert_eq!(l.admitted, 7);
    let (ok, out, err) = ctl(&env, &["fair", "verdicts", "--limit", "2"]);
    assert!(ok, "{err}");
    assert!(out.contains("#7 ACK") && out.contains("#6 ACK") && !out.contains("#5 "), "{out}");
    let (ok, out, _) = ctl(&env, &["--json", "fair", "verdicts"]);
    assert!(ok);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["verdicts"].as_array().unwrap().len(), 7);
    assert_eq!(j["verdicts"][4]["reason"], "BAD_POLICY_SIGNATURE");
    assert_eq!(j["verdicts"][5]["reason"], "MARK_FAILURES");

    // 7. Forwarding was not disturbed: packets kept flowing, nothing dropped.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let c1 = counters(&c).await;
    assert!(c1.tx > c0.tx + 1000, "{} -> {}", c0.tx, c1.tx);
    assert_eq!(total_drops(&c1), total_drops(&c0), "{c1:?}");
}

/// The verifier uses the keys the live stage holds: keys installed with
/// `ctl fair rotate-key` (never in the configuration) verify marks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_verify_marks() {
    let now = unix_now();
    let e = now / 60;
    // Configured keys end two epochs ago; the last two are rotated in.
    let env = start_with("rotated", (e - 1) * 60);
    let rotated = |epoch: u64| [(epoch as u8) ^ 0x5a; 16];
    for epoch in [e - 1, e] {
        let (ok, out, err) = ctl(
            &env,
            &[
                "fair",
                "rotate-key",
                "--epoch",
                &epoch.to_string(),
                "--key-hex",
                &hex(&rotated(epoch)),
            ],
        );
        assert!(ok, "{out}{err}");
    }
    let c = env.client().await;
    let pol = policy(DST, now - 60);
    let signer = Signer::from_seed(seed(DST));
    let build = |recs| ProtestRequest::build(&pol, recs, (now - 5, now - 1), now, &signer);
    let key = |epoch: u64| mac::Aes::new(&mac::Key::from(rotated(epoch)));
    let r = submit(&c, &build(records_with(now, [10, 5, 0, 9], &key))).await.unwrap();
    assert_eq!(r.verdict, "ACK", "{r:?}");
    assert_eq!(r.detail.unwrap().considered, 300);
    // Marks under the configuration's derivation for those epochs fail.
    let r = submit(&c, &build(records(now, [10, 5, 0, 9]))).await.unwrap();
    assert_eq!(r.verdict, "REJECT MARK_FAILURES", "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protests_need_a_verifier_and_a_transit_stage() {
    // Without [control.fair]: FAILED_PRECONDITION naming the table.
    let toml = r#"
        [io]
        backend = "synthetic"
        [[io.synthetic.traffic]]
        name = "plain"
        port = 0
        rate_pps = 1000
        flows = 4
        template = "ipv4-udp"
        dst = "10.2.0.1"
        [[ports]]
        id = 0
        [[pipeline]]
        kind = "parse"
        [[pipeline]]
        kind = "fair-transit"
        data_key = "000102030405060708090a0b0c0d0e0f"
        keys_from = 1767225600
        keys_until = 1767229200
        "#;
    let env = common::start("fair-noverifier", toml);
    let c = env.client().await;
    let e = c.fair().list_verdicts(pb::ListVerdictsRequest { limit: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("[control.fair]"), "{e:?}");
    let p = protest(DST, unix_now(), false);
    let e = submit(&c, &p).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    env.plane.stop();
}
