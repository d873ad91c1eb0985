//! `[control.fair]` checked key by key, and undecodable protests.

use super::*;
use control::config::ControlConfigError;
use fair::crypto::Signer;

const SEED: &str = "0202020202020202020202020202020202020202020202020202020202020202";

fn cfg(extra: &str) -> Result<Loaded, ControlConfigError> {
    let c: FairProtestConfig = toml::from_str(&format!("asn = 101\n{extra}")).unwrap();
    c.load()
}

fn key_of(extra: &str) -> String {
    match cfg(extra) {
        Ok(_) => "ok".into(),
        Err(e) => e.key,
    }
}

#[test]
fn every_key_is_validated_with_its_path() {
    let s = format!("signing_key_hex = \"{SEED}\"\n");
    assert_eq!(key_of(&s), "ok");
    assert_eq!(key_of(""), "fair.signing_key_file");
    assert_eq!(key_of(&format!("{s}signing_key_file = \"/x\"")), "fair.signing_key_file");
    assert_eq!(key_of("signing_key_hex = \"00\""), "fair.signing_key_hex");
    assert_eq!(key_of(&format!("{s}control_key = \"0011\"")), "fair.control_key");
    assert_eq!(key_of(&format!("{s}control_key_period_s = 5")), "fair.control_key_period_s");
    assert_eq!(key_of(&format!("{s}fail_rel = 1.5")), "fair.fail_rel");
    assert_eq!(key_of(&format!("{s}t_m_s = 0")), "fair.t_m_s");
    assert_eq!(key_of(&format!("{s}max_records = 70000")), "fair.max_records");
    assert_eq!(key_of(&format!("{s}verdicts_kept = 0")), "fair.verdicts_kept");
    assert_eq!(key_of(&format!("{s}global_burst = 0")), "fair.global_burst");
    assert_eq!(key_of(&format!("{s}max_tracked = 0")), "fair.max_tracked");
    let pk = hex::encode(Signer::from_seed([1; 32]).public());
    let t = |asn: u32, pk: &str, pfx: &str| {
        format!("[[trust]]\nasn = {asn}\npublic_key_hex = \"{pk}\"\nprefixes = [\"{pfx}\"]\n")
    };
    assert_eq!(key_of(&format!("{s}{}", t(100, &pk, "10.1.0.0/16"))), "ok");
    assert_eq!(
        key_of(&format!("{s}{}", t(100, "ab", "10.1.0.0/16"))),
        "fair.trust[0].public_key_hex"
    );
    assert_eq!(
        key_of(&format!("{s}{}{}", t(100, &pk, "10.1.0.0/16"), t(102, &pk, "10.1.0.0/33"))),
        "fair.trust[1].prefixes[0]"
    );
    assert_eq!(
        key_of(&format!("{s}{}{}", t(100, &pk, "10.1.0.0/16"), t(100, &pk, "10.1.0.0/16"))),
        "fair.trust[1].asn"
    );
    // This AS listed with a key that is not its signing key.
    assert_eq!(
        key_of(&format!("{s}{}", t(101, &pk, "10.1.0.0/16"))),
        "fair.trust[0].public_key_hex"
    );
    // Unknown keys are refused by name.
    let e: Result<FairProtestConfig, _> = toml::from_str("asn = 1\nsigning_key = \"x\"");
    assert!(e.unwrap_err().to_string().contains("signing_key"));
}

#[test]
fn key_file_is_raw_or_hex_and_errors_name_the_path() {
    let dir = std::env::temp_dir().join(format!("control-protest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (raw, hx, bad) = (dir.join("raw"), dir.join("hex"), dir.join("bad"));
    std::fs::write(&raw, [2u8; 32]).unwrap();
    std::fs::write(&hx, format!("  {SEED}\n")).unwrap();
    std::fs::write(&bad, "not a key").unwrap();
    let pk = |p: &std::path::Path| {
        cfg(&format!("signing_key_file = \"{}\"", p.display())).map(|l| l.signer.public())
    };
    let want = Signer::from_seed([2; 32]).public();
    assert_eq!(pk(&raw).unwrap(), want);
    assert_eq!(pk(&hx).unwrap(), want);
    let e = pk(&bad).unwrap_err();
    assert!(e.reason.contains("32-byte Ed25519 seed") && e.reason.contains("bad"), "{e}");
    let e = pk(&dir.join("missing")).unwrap_err();
    assert_eq!(e.key, "fair.signing_key_file");
    assert!(e.reason.contains("missing"), "{e}");
    // Debug output never shows key material.
    let c: FairProtestConfig =
        toml::from_str(&format!("asn = 1\nsigning_key_hex = \"{SEED}\"")).unwrap();
    assert!(!format!("{c:?}").contains("0202"), "{c:?}");
}

#[test]
fn undecodable_protests_are_invalid_with_a_reason() {
    let mut d = Desk::new(cfg(&format!("signing_key_hex = \"{SEED}\"")).unwrap());
    let keys = Arc::new(KeyRing::control(60, 0));
    let mut msg = |b: &[u8]| match d.submit(b, keys.clone(), 1_800_000_000) {
        Err(CtlError::InvalidArgument(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(msg(&[0, 0]).contains("4-byte policy length"));
    assert!(msg(&[0, 0, 0, 200, 1]).contains("runs past the end"));
    let mut many = vec![0, 0, 0, 0];
    many.extend_from_slice(&100_000u32.to_be_bytes());
    assert!(msg(&many).contains("exceed max_records"));
    let empty_policy = [0u8, 0, 0, 0, 0, 0, 0, 0];
    assert!(msg(&empty_policy).contains("not a FAIR protest request"));
    // A decodable request with a policy that is not a SETUP_RESPONSE.
    let req = ProtestRequest {
        policy: vec![1, 2, 3],
        records: vec![],
        window_start: 0,
        window_end: 0,
        protest_time: 0,
        protest_id: [0; 32],
        dest_sig: vec![],
    };
    assert!(msg(&req.encode()).contains("not a decodable FAIR policy"));
    assert!(d.list(0).verdicts.is_empty());
}
