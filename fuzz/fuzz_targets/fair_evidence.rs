//! F-5/F-6: policy packets, raw header records and protest requests from
//! arbitrary bytes: decoders never panic, a relayed request decodes with one
//! more transit entry, and verification always yields a signed verdict.
#![no_main]

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use fair::crypto::{MarkBinding, Signer};
use fair::keys::KeyRing;
use fair::policy::{setup_relay, AsEntry, PolicyPacket, TrustStore};
use fair::protest::{ProtestRequest, Verifier, VerifyConfig};
use fair::record::Record;
use fair::Key;
use libfuzzer_sys::fuzz_target;

const NOW: u64 = 1_700_000_000;

fn world() -> &'static (TrustStore, Verifier, KeyRing) {
    static W: OnceLock<(TrustStore, Verifier, KeyRing)> = OnceLock::new();
    W.get_or_init(|| {
        let mut trust = TrustStore::new();
        for i in 0..3u8 {
            let s = Signer::from_seed([i + 1; 32]);
            trust.insert(
                100 + i as u32,
                AsEntry {
                    sign_pk: s.public(),
                    dh_pk: [0; 32],
                    prefixes: vec![(IpAddr::from([10, i, 0, 0]), 16)],
                },
            );
        }
        let mut data = KeyRing::data(60, 43_200).unwrap();
        data.install(NOW / 60, &Key::from([2; 16]), MarkBinding::Paper).unwrap();
        let mut ctrl = KeyRing::control(86_400, 3 * 86_400);
        ctrl.install(NOW / 86_400, &Key::from([9; 16]), MarkBinding::Paper).unwrap();
        let v = Verifier {
            asn: 101,
            data_keys: Arc::new(data),
            ctrl_keys: ctrl.clone(),
            signer: Signer::from_seed([2; 32]),
            cfg: VerifyConfig { max_records: 10_000, ..Default::default() },
        };
        (trust, v, ctrl)
    })
}

fuzz_target!(|data: &[u8]| {
    let (trust, v, ctrl) = world();
    if let Some(p) = PolicyPacket::decode(data) {
        assert_eq!(PolicyPacket::decode(&p.encode()).as_ref(), Some(&p));
        if let Ok(out) = setup_relay(data, 101, ctrl, None, NOW) {
            let q = PolicyPacket::decode(&out).expect("relayed packet decodes");
            assert_eq!(q.transit.len(), p.transit.len() + 1);
        }
    }
    let _ = Record::from_wire(data, 253, 0, 0);
    if let Some(req) = ProtestRequest::decode(data, 10_000) {
        let verdict = v.verify_protest(&req, trust, NOW);
        assert_eq!(verdict.body.asn, 101);
        assert_eq!(verdict.sig.len(), 64);
    }
});
