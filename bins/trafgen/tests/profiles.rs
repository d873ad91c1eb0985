//! Every built-in profile, written to a pcap and read back, is classified as
//! its `expect` keys say by the real stages of the router configuration it
//! names: legitimate senders forwarded, forged, replayed and flooding
//! attackers dropped for the stated reason.

use std::path::{Path, PathBuf};

use trafgen::check::{read_pcap, replay_through, write_pcap};
use trafgen::profile::{self, Profile};
use trafgen::{GenOptions, Generator};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory of the test's own, removed when the test passes.
struct Tmp(PathBuf);

impl Tmp {
    fn new(test: &str) -> Self {
        let d = std::env::temp_dir().join(format!("trafgen-test-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn every_builtin_profile_is_classified_as_expected() {
    let tmp = Tmp::new("builtin");
    for (name, _) in profile::BUILTIN {
        let prof = profile::builtin(name).unwrap().unwrap();
        let groups = prof.groups().unwrap();
        let opts = GenOptions { duration_ns: Some(150_000_000), seed: 7, ..Default::default() };
        let mut gen = Generator::new(&prof, opts.clone()).unwrap();
        let path = tmp.join(&format!("{name}.pcap"));
        let n = write_pcap(&mut gen, &path, |_| {}).unwrap();
        let frames = read_pcap(&path).unwrap();
        assert_eq!(frames.len() as u64, n);
        // Timestamps: inside the capture window, in order.
        assert!(frames.windows(2).all(|w| w[0].0 <= w[1].0), "{name}");
        assert!(frames
            .iter()
            .all(|f| f.0 >= opts.start_unix_ns && f.0 < opts.start_unix_ns + 150_000_000));
        let cfg = runtime::config::load_file(&root().join(prof.router.as_ref().unwrap())).unwrap();
        let tallies = replay_through(&cfg, &frames).unwrap();
        assert!(!tallies.contains_key(&None), "{name}: untagged packets");
        for g in &groups {
            let t = tallies
                .get(&Some(g.index))
                .unwrap_or_else(|| panic!("{name}/{}: no packets", g.name));
            assert!(
                t.meets(g.expect),
                "{name}/{}: expected {:?}, got {}",
                g.name,
                g.expect,
                t.summary()
            );
        }
    }
}

#[test]
fn rates_follow_the_options() {
    let prof = profile::builtin("epic-z").unwrap().unwrap();
    let opts = GenOptions {
        rate_pps: Some(20_000.0),
        mix: Some(trafgen::gen::parse_mix("guaranteed-as=1,forged-hvf=3").unwrap()),
        duration_ns: Some(100_000_000),
        ..Default::default()
    };
    let mut gen = Generator::new(&prof, opts).unwrap();
    let mut per = [0u32; 8];
    while let Some(e) = gen.next_packet().unwrap() {
        per[usize::from(e.group)] += 1;
    }
    assert_eq!(&per[..3], &[500, 1500, 0]);
}

#[test]
fn router_config_groups_generate() {
    for f in
        ["flowpolice-edge.toml", "sibra-transit.toml", "zlane-border.toml", "fair-transit.toml"]
    {
        let text = std::fs::read_to_string(root().join("config").join(f)).unwrap();
        let prof = Profile::from_router_config(&text).unwrap();
        let opts = GenOptions { count: Some(200), duration_ns: None, ..Default::default() };
        let mut gen = Generator::new(&prof, opts).unwrap();
        let mut n = 0;
        while gen.next_packet().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 200, "{f}");
    }
}
