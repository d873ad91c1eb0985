//! The FAIR stage kinds through the registry: templates, stages built from
//! their tables, refused values, live changes.

use packet::fair::{Carrier, Fair};
use pipeline::{Batch, DropReason, Now, Verdict};
use runtime::registry::{BuildContext, Registry};
use runtime::templates::{tag_for, TemplateCtx, Templates};
use runtime::Catalog;

const STAGE: &str = "data_key = \"000102030405060708090a0b0c0d0e0f\"\n\
    keys_from = 1767225000\nkeys_until = 1767312000";

fn run(frames: Vec<Vec<u8>>) -> (Vec<Verdict>, Vec<Vec<u8>>) {
    let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
    let r = Registry::<Vec<u8>>::with::<crate::All>();
    let t: toml::Table = toml::from_str(STAGE).unwrap();
    let mut st = r.build_stage("fair-transit", &ctx, &t).unwrap();
    let mut b = Batch::new();
    for f in frames {
        b.push(f, 0).unwrap();
    }
    st.process(&mut b, Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS));
    let v = (0..b.len()).map(|i| b.meta(i).verdict).collect();
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    (v, out)
}

fn frames(extra: &str) -> Vec<Vec<u8>> {
    let t: toml::Table =
        toml::from_str(&format!("k_sd = \"0f0e0d0c0b0a09080706050403020100\"\n{extra}")).unwrap();
    Templates::with::<crate::All>().build("fair", &t, &TemplateCtx::new(3, tag_for(0))).unwrap()
}

#[test]
fn transit_marks_fresh_packets_and_drops_stale_ones() {
    let fresh = frames("m = 2");
    // IPv4 protocol 253: the source inserted the FAIR header.
    assert_eq!(fresh[0][14 + 9], 253);
    let (v, out) = run(fresh.clone());
    assert!(v.iter().all(|v| !matches!(v, Verdict::Drop(_))), "{v:?}");
    for (a, b) in fresh.iter().zip(&out) {
        assert_eq!(a.len(), b.len());
        assert_ne!(a, b, "the transit AS wrote its mark");
        let h = Fair::new_checked(&b[34..], Carrier::Ipv4).unwrap();
        let h0 = Fair::new_checked(&a[34..], Carrier::Ipv4).unwrap();
        assert_eq!(h.next_as(), h0.next_as() + 1);
    }
    let (v, _) = run(frames("age_s = 10"));
    assert_eq!(v, vec![Verdict::Drop(DropReason::Expired); 3]);
    let (v, _) = run(frames("m = 0"));
    assert_eq!(v, vec![Verdict::Drop(DropReason::Policy); 3]);
}

#[test]
fn fair_source_stage_stamps_like_the_template() {
    let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
    let r = Registry::<Vec<u8>>::with::<crate::All>();
    let t: toml::Table = toml::from_str(
        "channels = [{ prefix = \"10.2.0.0/16\", k_sd = \"0f0e0d0c0b0a09080706050403020100\", \
         m = 2, cir_bps = 1000000000, cbs_bytes = 100000 }]",
    )
    .unwrap();
    let mut st = r.build_stage("fair-source", &ctx, &t).unwrap();
    let want = frames("m = 2");
    let mut b = Batch::new();
    for i in 0..3u32 {
        let plain = runtime::templates::ipv4_udp_frame(
            &want[0][want[0].len() - 158..],
            std::net::Ipv4Addr::new(10, 1, 0, 1 + i as u8),
            std::net::Ipv4Addr::new(10, 2, 0, 1),
            1024 + i as u16,
            5000,
        );
        b.push(plain, 0).unwrap();
    }
    st.process(&mut b, Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS));
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    assert_eq!(out, want, "same header, timestamp, sequence numbers and ICVs");
    let two = BuildContext { worker: 0, workers: 2, ports: vec![0] };
    assert!(r.build_stage("fair-source", &two, &t).is_err());
}

#[test]
fn params_are_validated() {
    let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0] };
    let r = Registry::<Vec<u8>>::with::<crate::All>();
    let key = |extra: &str| {
        let t: toml::Table = toml::from_str(&format!("{STAGE}\n{extra}")).unwrap();
        r.build_stage("fair-transit", &ctx, &t).err().unwrap().key
    };
    assert_eq!(key("key_period_s = 4"), "key_period_s");
    assert_eq!(key("binding = \"loose\""), "binding");
    let t: toml::Table =
        toml::from_str(&STAGE.replace("keys_until = 1767312000", "keys_until = 1")).unwrap();
    assert_eq!(r.build_stage("fair-transit", &ctx, &t).err().unwrap().key, "keys_until");
}

#[test]
fn fair_destination_example_checks_polices_and_flags() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fair-destination.toml");
    let mut cfg = runtime::config::load_file(&path).unwrap();
    cfg.workers.pin = false;
    cfg.run.duration_ms = Some(50);
    runtime::check::<crate::All>(&cfg).unwrap();
    let s = runtime::start::<crate::All>(cfg).unwrap().wait().unwrap();
    let g = |name: &str| s.groups.iter().find(|g| g.name == name).unwrap();
    for name in ["policy", "suspicious", "plain-udp"] {
        assert!(g(name).offered > 0, "{name}");
        assert_eq!(g(name).delivered, g(name).offered, "{name}");
    }
    for name in ["forged-icv", "stale", "no-policy"] {
        assert_eq!(g(name).delivered, 0, "{name}");
    }
    let stage = &s.stages.iter().find(|(k, _)| k == "fair-destination").unwrap().1;
    // 1/256 of forged ICVs match by chance.
    let forged = g("forged-icv").offered;
    let bad = stage.drops.get(DropReason::BadMac);
    assert!(bad <= forged && bad * 256 >= forged * 240, "{bad} of {forged}");
    assert_eq!(stage.drops.get(DropReason::Expired), g("stale").offered);
    assert_eq!(stage.drops.get(DropReason::UnknownKey), g("no-policy").offered);
}

#[test]
fn destination_and_sb_params_are_validated() {
    let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
    let r = Registry::<Vec<u8>>::with::<crate::All>();
    let build = |kind: &str, text: &str| {
        let t: toml::Table = toml::from_str(text).unwrap();
        r.build_stage(kind, &ctx, &t).err().map(|e| e.key)
    };
    let ch = "channels = [{ src_prefix = \"10.1.0.0/16\", src_asn = 1, \
              k_sd = \"0f0e0d0c0b0a09080706050403020100\", m = 2, cir_bps = 8000000, \
              cbs_bytes = 100000";
    assert_eq!(build("fair-destination", &format!("{ch} }}]")), None);
    assert_eq!(
        build("fair-destination", &format!("{ch}, n_slots = 1 }}]")).as_deref(),
        Some("channels[0].n_slots")
    );
    assert_eq!(
        build("fair-destination", &format!("{} }}]", ch.replace("/16", "/40"))).as_deref(),
        Some("channels[0].src_prefix")
    );
    assert_eq!(build("suspicious-bit", "suspicious_sources = [\"10.66.0.0/16\"]"), None);
    assert_eq!(
        build("suspicious-bit", "external_ports = [7]").as_deref(),
        Some("external_ports[0]")
    );
    assert_eq!(build("suspicious-bit", "action = \"delay\"").as_deref(), Some("action"));
    let two = BuildContext { worker: 0, workers: 2, ports: vec![0] };
    let t: toml::Table = toml::from_str(&format!("{ch} }}]")).unwrap();
    assert!(r.build_stage("fair-destination", &two, &t).is_err());
}

/// `fair-source` frames (IPv4/UDP, 158 bytes of IP) from `n` flows to 10.2.0.1.
fn plain(n: u8) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            runtime::templates::ipv4_udp_frame(
                &[0; 130],
                std::net::Ipv4Addr::new(10, 1, 0, 1 + i),
                std::net::Ipv4Addr::new(10, 2, 0, 1),
                1024,
                5000,
            )
        })
        .collect()
}

fn counter(st: &dyn pipeline::Element, name: &str) -> u64 {
    let mut v = None;
    st.named_counters(&mut |k, x| {
        if k == name {
            v = Some(x);
        }
    });
    v.unwrap()
}

#[test]
fn live_changes_parse_like_the_file_and_keep_state() {
    use pipeline::{Reconfigured, Refused};
    let ctx = BuildContext { worker: 0, workers: 1, ports: vec![0, 1] };
    let r = Registry::<Vec<u8>>::with::<crate::All>();
    let now = Now::from_unix_ns(runtime::synthetic::VIRTUAL_UNIX_START_NS);
    let source = |cir: u64| -> toml::Table {
        toml::from_str(&format!(
            "channels = [{{ prefix = \"10.2.0.0/16\", k_sd = \"0f0e0d0c0b0a09080706050403020100\", \
             m = 2, cir_bps = {cir}, cbs_bytes = 100000 }}]"
        ))
        .unwrap()
    };
    let mut st = r.build_stage("fair-source", &ctx, &source(8_000_000)).unwrap();
    let mut b = Batch::new();
    for f in plain(3) {
        b.push(f, 0).unwrap();
    }
    st.process(&mut b, now);
    let same = r.parse_stage("fair-source", &ctx, &source(8_000_000)).unwrap();
    assert_eq!(st.reconfigure(&*same, now), Ok(Reconfigured::Unchanged));
    let faster = r.parse_stage("fair-source", &ctx, &source(16_000_000)).unwrap();
    assert_eq!(st.reconfigure(&*faster, now), Ok(Reconfigured::APPLIED));
    let mut b = Batch::new();
    for f in plain(2) {
        b.push(f, 0).unwrap();
    }
    st.process(&mut b, now);
    let mut out = Vec::new();
    b.drain(|buf, _| out.push(buf));
    // The sequence counter ran on (FAIR header behind Ethernet and IPv4).
    let seq = |f: &[u8]| u32::from_be_bytes([0, f[38], f[39], f[40]]);
    assert_eq!((seq(&out[0]), seq(&out[1])), (3, 4));
    assert_eq!(counter(&*st, "stamped"), 5);
    // A value the file would refuse is refused with its key, before any stage.
    let e = r.parse_stage("fair-source", &ctx, &source(0)).err().unwrap();
    assert_eq!(e.key, "channels[0].cir_bps");
    // Transit: a new seed needs a restart; the stage runs on as it was.
    let mut t = r.build_stage("fair-transit", &ctx, &toml::from_str(STAGE).unwrap()).unwrap();
    let seeded = r.parse_stage(
        "fair-transit",
        &ctx,
        &toml::from_str(&format!("{STAGE}\nseed = 7")).unwrap(),
    );
    assert_eq!(t.reconfigure(&*seeded.unwrap(), now), Err(Refused::NeedsRestart("seed".into())));
    // Destination: ports are checked on a live change too.
    let d = "channels = []\nport_neighbors = [{ port = 5, asn = 1 }]";
    let e = r.parse_stage("fair-destination", &ctx, &toml::from_str(d).unwrap()).err().unwrap();
    assert_eq!(e.key, "port_neighbors[0].port");
}
