//! Every example configuration starts and forwards on the synthetic and pcap
//! backends; pcap replays are checked packet by packet; malformed packets are
//! dropped and counted without stopping the worker.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use pipeline::{DropReason, StageCounters};
use runtime::config::{self, BackendKind, RouterConfig};
use runtime::pcap::{PcapConfig, PcapFile, PcapPacing};
use runtime::stats::GroupSnapshot;
use runtime::templates::{tag_for, TemplateCtx, Templates};
use runtime::Snapshot;

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

fn example_configs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(config_dir())
        .expect("config/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    assert!(!v.is_empty());
    v
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runtime-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// Shrinks a configuration for a test run: 1 worker, unpinned, short, slower traffic.
fn shrink(cfg: &mut RouterConfig, duration_ms: u64) {
    cfg.workers.pin = false;
    cfg.run.duration_ms = Some(duration_ms);
    cfg.run.packets = None;
    if let Some(s) = cfg.io.synthetic.as_mut() {
        for t in &mut s.traffic {
            t.rate_pps = t.rate_pps.min(200_000.0);
        }
    }
}

/// Runs example `file` of `config/` unpinned for `ms` of its clock, after
/// `edit`, to the end.
fn run_example_with(file: &str, ms: u64, edit: impl FnOnce(&mut RouterConfig)) -> Snapshot {
    let mut cfg = config::load_file(&config_dir().join(file)).unwrap();
    cfg.workers.pin = false;
    cfg.run.duration_ms = Some(ms);
    edit(&mut cfg);
    runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap()
}

/// [`run_example_with`] the example as it is.
fn run_example(file: &str, ms: u64) -> Snapshot {
    run_example_with(file, ms, |_| {})
}

/// Traffic group `name` of a run.
fn group<'a>(s: &'a Snapshot, name: &str) -> &'a GroupSnapshot {
    s.groups.iter().find(|g| g.name == name).unwrap_or_else(|| panic!("no group {name}"))
}

/// The counters of the stage `kind` of a run.
fn stage<'a>(s: &'a Snapshot, kind: &str) -> &'a StageCounters {
    &s.stages.iter().find(|(k, _)| k == kind).unwrap_or_else(|| panic!("no stage {kind}")).1
}

/// The share of its offered packets group `name` got delivered.
fn delivered_ratio(s: &Snapshot, name: &str) -> f64 {
    let g = group(s, name);
    g.delivered as f64 / g.offered as f64
}

/// Groups `names` offered packets and got every one delivered.
fn all_delivered(s: &Snapshot, names: &[&str]) {
    for name in names {
        let g = group(s, name);
        assert!(g.offered > 0, "{name} offered nothing");
        assert_eq!(g.delivered, g.offered, "{name}");
    }
}

/// Groups `names` got at least 99 % of what they offered delivered.
fn mostly_delivered(s: &Snapshot, names: &[&str]) {
    for name in names {
        let ratio = delivered_ratio(s, name);
        assert!(ratio >= 0.99, "{name} got {ratio:.4} of its offered load");
    }
}

/// Group `name` got nothing delivered: stage `kind` dropped all of it for `reason`.
fn all_dropped(s: &Snapshot, name: &str, kind: &str, reason: DropReason) {
    let g = group(s, name);
    assert_eq!(g.delivered, 0, "{name} got through");
    assert_eq!(stage(s, kind).drops.get(reason), g.offered, "{name}: {kind} drops for {reason:?}");
}

#[test]
fn every_example_config_checks_starts_and_forwards_on_synthetic() {
    for path in example_configs() {
        let mut cfg = config::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
        if cfg.io.backend != BackendKind::Synthetic {
            continue;
        }
        runtime::check::<adapters::All>(&cfg).unwrap_or_else(|e| panic!("{e}"));
        shrink(&mut cfg, 20);
        let s = runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap();
        assert!(s.rx() > 0, "{}: received nothing", path.display());
        assert!(s.tx() > 0, "{}: forwarded nothing", path.display());
        let offered: u64 = s.groups.iter().map(|g| g.offered).sum();
        assert_eq!(offered, s.rx(), "{}", path.display());
        // Conservation: everything received was sent, dropped, queued or
        // handed to control; what the slow path forwarded was sent as well.
        let back = s.slow_path.as_ref().map_or(0, |sp| sp.forwarded);
        assert_eq!(
            s.rx() + back,
            s.tx() + s.drops().total() + s.queued() + s.to_control,
            "{}",
            path.display()
        );
    }
}

fn write_capture(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        // Captures start at the virtual epoch the templates stamp their timestamps with.
        let ts = Duration::from_nanos(runtime::synthetic::VIRTUAL_UNIX_START_NS)
            + Duration::from_micros(i as u64 * 10);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f)).unwrap();
    }
}

fn read_capture(path: &Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet() {
        v.push(p.unwrap().data.into_owned());
    }
    v
}

/// Replaces the backend with pcap: one capture per ingress port, built from the
/// configuration's own synthetic traffic templates, one output per port.
fn to_pcap(cfg: &mut RouterConfig, tag: &str) -> Vec<(u16, PathBuf)> {
    let templates = Templates::with::<adapters::All>();
    let synth = cfg.io.synthetic.clone().expect("example configs are synthetic");
    let mut per_port: std::collections::BTreeMap<u16, Vec<Vec<u8>>> = Default::default();
    for (g, t) in synth.traffic.iter().enumerate() {
        let ctx = TemplateCtx::new(t.flows.min(8), tag_for(g as u16));
        let frames = templates.build(&t.template, &t.params, &ctx).unwrap();
        per_port.entry(t.port).or_default().extend(frames);
    }
    let mut inputs = Vec::new();
    for (port, frames) in &per_port {
        let file = tmp(&format!("{tag}-in{port}.pcap"));
        write_capture(&file, frames);
        inputs.push(PcapFile::new(*port, file));
    }
    let outputs: Vec<(u16, PathBuf)> =
        cfg.ports.iter().map(|p| (p.id, tmp(&format!("{tag}-out{}.pcap", p.id)))).collect();
    let files = outputs.iter().map(|(port, file)| PcapFile::new(*port, file.clone()));
    replay(cfg, inputs, files.collect());
    outputs
}

/// Switches `cfg` to the pcap backend, replaying `inputs` at their capture
/// times into `outputs`, unpinned, until the captures end.
fn replay(cfg: &mut RouterConfig, inputs: Vec<PcapFile>, outputs: Vec<PcapFile>) {
    cfg.io.backend = BackendKind::Pcap;
    cfg.io.pcap = Some(PcapConfig { inputs, outputs, pacing: PcapPacing::Capture, pool: 256 });
    cfg.workers.pin = false;
    cfg.run = Default::default();
}

#[test]
fn every_example_config_forwards_on_pcap() {
    for (i, path) in example_configs().into_iter().enumerate() {
        let mut cfg = config::load_file(&path).unwrap();
        if cfg.io.synthetic.is_none() {
            continue;
        }
        let outputs = to_pcap(&mut cfg, &format!("example{i}"));
        runtime::check::<adapters::All>(&cfg).unwrap_or_else(|e| panic!("{e}"));
        let s = runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap();
        let written: usize = outputs.iter().map(|(_, f)| read_capture(f).len()).sum();
        assert!(s.rx() > 0 && written > 0, "{}: nothing forwarded", path.display());
        assert_eq!(written as u64, s.tx(), "{}", path.display());
    }
}

#[test]
fn zlane_border_keeps_the_guaranteed_as_rate_under_attack() {
    let s = run_example("zlane-border.toml", 200);
    mostly_delivered(&s, &["guaranteed-as"]);
    assert_eq!(group(&s, "forged-hvf").delivered, 0, "forged HVFs are dropped");
    let over = group(&s, "overusing-as");
    assert!((over.delivered as f64) < 0.6 * over.offered as f64, "overuse is cut");
}

const ROUTER: &str = r#"
[io]
backend = "pcap"
[io.pcap]
inputs = [{ port = 0, file = "IN" }]
outputs = [{ port = 1, file = "OUT1" }, { port = 2, file = "OUT2" }]
[workers]
pin = false
[[ports]]
id = 0
[[ports]]
id = 1
[[ports]]
id = 2
[[pipeline]]
kind = "ipv4-forward"
routes = [{ prefix = "10.2.0.0/16", port = 1 }, { prefix = "10.3.0.0/16", port = 2 }]
"#;

fn udp(dst: &str, sport: u16) -> Vec<u8> {
    let t: toml::Table =
        toml::from_str(&format!("dst = \"{dst}\"\nsport = {sport}\nsize = 80")).unwrap();
    Templates::with::<adapters::All>()
        .build("ipv4-udp", &t, &TemplateCtx::new(1, tag_for(0)))
        .unwrap()
        .remove(0)
}

#[test]
fn pcap_replay_is_exact_and_malformed_packets_are_counted() {
    let malformed = Templates::with::<adapters::All>()
        .build("malformed", &toml::Table::new(), &TemplateCtx::new(6, tag_for(9)))
        .unwrap();
    let mut input = Vec::new();
    let mut want1 = Vec::new();
    let mut want2 = Vec::new();
    for i in 0..40u16 {
        let dst = if i % 3 == 0 { "10.3.0.7" } else { "10.2.0.7" };
        let f = udp(dst, 1000 + i);
        let mut out = f.clone();
        out[22] -= 1; // TTL
        let sum = u32::from(u16::from_be_bytes([out[24], out[25]])) + 0x0100;
        let sum = (sum & 0xffff) + (sum >> 16);
        out[24..26].copy_from_slice(&(sum as u16).to_be_bytes());
        if i % 3 == 0 {
            want2.push(out)
        } else {
            want1.push(out)
        }
        input.push(f);
        // Interleave the malformed frames with good ones: the worker must go on.
        if i % 7 == 3 {
            input.push(malformed[usize::from(i) % 6].clone());
        }
    }
    let (inp, out1, out2) = (tmp("exact-in.pcap"), tmp("exact-out1.pcap"), tmp("exact-out2.pcap"));
    write_capture(&inp, &input);
    let text = ROUTER
        .replace("IN", inp.to_str().unwrap())
        .replace("OUT1", out1.to_str().unwrap())
        .replace("OUT2", out2.to_str().unwrap());
    let cfg = config::parse(&text, Path::new("exact.toml")).unwrap();
    let s = runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap();
    let got1 = read_capture(&out1);
    let got2 = read_capture(&out2);
    assert_eq!(got1.len(), want1.len());
    for (i, (g, w)) in got1.iter().zip(&want1).enumerate() {
        assert_eq!(g, w, "port 1 packet {i}");
        assert_eq!(runtime::templates::checksum(0, &g[14..34]), 0);
    }
    assert_eq!(got2, want2);
    let malformed_in = input.len() - 40;
    assert_eq!(s.rx(), input.len() as u64);
    assert_eq!(s.drops().total(), malformed_in as u64);
    let stage = &s.stages[0].1;
    assert_eq!(
        stage.drops.get(DropReason::Truncated)
            + stage.drops.get(DropReason::Malformed)
            + stage.drops.get(DropReason::BadChecksum),
        malformed_in as u64
    );
}

#[test]
fn two_workers_shard_flows_and_sum_counters_exactly() {
    let text = r#"
[io]
backend = "synthetic"
[io.synthetic]
traffic = [
  { name = "a", port = 0, rate_pps = 64000, flows = 64, template = "ipv4-udp", dst = "10.2.0.1" },
  { name = "b", port = 0, rate_pps = 32000, flows = 64, template = "ipv6-udp" },
]
[workers]
count = 2
pin = false
publish_every = 1
[[ports]]
id = 0
[[ports]]
id = 1
[[pipeline]]
kind = "ipv4-forward"
routes = [{ prefix = "10.2.0.0/16", port = 1 }]
[run]
duration_ms = 100
"#;
    let cfg = config::parse(text, Path::new("two.toml")).unwrap();
    let router = runtime::start::<adapters::All>(cfg).unwrap();
    // A command applied between bursts on every worker.
    let (tx, rx) = std::sync::mpsc::channel();
    for (w, q) in router.commands().iter().enumerate() {
        let tx = tx.clone();
        let _ = q.send(runtime::Command::Apply(Box::new(move |e, _now| {
            let ports = (0..).take_while(|&i| e.egress(i).is_some()).count();
            let _ = tx.send((w, e.stages(), ports));
        })));
    }
    let s = router.wait().unwrap();
    let mut seen: Vec<_> = rx.try_iter().collect();
    seen.sort();
    // Workers may finish before reading the command; those that ran it saw their own pipeline.
    assert!(seen.iter().all(|&(_, stages, ports)| stages == 1 && ports == 2));
    assert_eq!(s.groups[0].offered, 6400);
    assert_eq!(s.groups[1].offered, 3200);
    assert_eq!(s.groups[0].delivered, 6400);
    assert_eq!(s.stages[0].1.drops.get(DropReason::WrongProtocol), 3200);
    assert_eq!(s.ports[1].counters.tx, 6400);
}

#[test]
fn config_errors_name_stage_key() {
    let text = ROUTER.replace("port = 1 }, {", "port = 9 }, {");
    let mut cfg = config::parse(&text, Path::new("bad.toml")).unwrap();
    cfg.io.pcap.as_mut().unwrap().inputs.clear();
    let e = runtime::check::<adapters::All>(&cfg).unwrap_err();
    assert_eq!(e.key, "pipeline[0].routes[0].port");
    assert_eq!(e.file, Path::new("bad.toml"));
    let text = ROUTER.replace("kind = \"ipv4-forward\"", "kind = \"ipv4-forwad\"");
    let e = runtime::check::<adapters::All>(&config::parse(&text, Path::new("bad.toml")).unwrap())
        .unwrap_err();
    assert_eq!(e.key, "pipeline[0].kind");
}

#[test]
fn sibra_transit_forwards_reserved_traffic_in_class_r_and_drops_forged_sofs() {
    let s = run_example("sibra-transit.toml", 50);
    // Valid reservations all get through.
    all_delivered(&s, &["reserved"]);
    // Forged SOFs are dropped.
    all_dropped(&s, "forged-sof", "sibra-transit", DropReason::BadMac);
}

#[test]
fn scion_border_serves_reservations_and_guarantees_and_drops_forgeries() {
    let s = run_example("scion-border.toml", 100);
    mostly_delivered(&s, &["sibra-reserved", "guaranteed-as"]);
    all_dropped(&s, "sibra-forged", "sibra-transit", DropReason::BadMac);
    all_dropped(&s, "forged-hvf", "zlane-classify", DropReason::BadMac);
    let plain = group(&s, "plain-scion");
    assert!(plain.delivered > 0 && plain.delivered < plain.offered, "U gets the rest");
}

#[test]
fn flowpolice_edge_serves_requests_and_capabilities_and_caps_the_rest() {
    let s = run_example("flowpolice-edge.toml", 100);
    mostly_delivered(&s, &["requests", "regular"]);
    all_dropped(&s, "unsolved-puzzles", "flowpolice", DropReason::BadPuzzle);
    all_dropped(&s, "forged-capabilities", "flowpolice", DropReason::BadMac);
    // Legacy: 10 % of 1 Gbit/s over 100 ms at 200-byte frames, plus the cap's burst.
    let legacy = group(&s, "legacy-flood").delivered;
    assert!(legacy > 5_000 && legacy < 8_000, "legacy delivered {legacy}");
}

#[test]
fn fair_transit_marks_fresh_packets_and_drops_stale_and_slotless_ones() {
    let s = run_example("fair-transit.toml", 50);
    all_delivered(&s, &["fair", "plain-udp"]);
    all_dropped(&s, "stale", "fair-transit", DropReason::Expired);
    all_dropped(&s, "no-slot", "fair-transit", DropReason::Policy);
}

#[test]
fn zlane_gateway_authorizes_hosts_within_rate_and_drops_an_overusing_one() {
    let s = run_example("zlane-gateway.toml", 200);
    all_delivered(&s, &["hosts-within-rate", "plain-scion"]);
    let over = group(&s, "overusing-host");
    // 1 Mbit/s of 158-byte SCION packets for 0.2 s plus a 3000-byte burst: ~177 packets.
    assert!(over.delivered > 100 && over.delivered < 260, "overusing host got {}", over.delivered);
    let dropped = stage(&s, "zlane-gateway").drops.get(DropReason::OverRate);
    assert_eq!(dropped, over.offered - over.delivered);
}

/// The guaranteed AS of `zlane-border` alone, at a low rate, for `ms` of `pacing`.
fn epic_only(pacing: &str, ms: u64, refresh_ms: u64) -> f64 {
    let s = run_example_with("zlane-border.toml", ms, |cfg| {
        let s = cfg.io.synthetic.as_mut().unwrap();
        s.traffic.retain(|t| t.name == "guaranteed-as");
        s.traffic[0].rate_pps = 4_000.0;
        s.pacing = toml::Value::from(pacing).try_into().unwrap();
        s.refresh_ms = refresh_ms;
    });
    assert_eq!(s.groups.len(), 1);
    assert!(s.groups[0].offered > 0);
    delivered_ratio(&s, "guaranteed-as")
}

/// EPIC-Z timestamps are only fresh for 2 s: the generator rebuilds the
/// templates as its clock advances, so 5 s of virtual time still deliver.
#[test]
fn epic_z_templates_stay_fresh_over_long_virtual_runs() {
    let ratio = epic_only("virtual", 5_000, 500);
    assert!(ratio >= 0.99, "delivered {ratio:.4} of the offered load");
    // Without the refresh the packets go stale after ~2 s (the bug this guards).
    let stale = epic_only("virtual", 5_000, 0);
    assert!(stale < 0.6, "without refresh {stale:.4} was delivered");
}

/// The same on the wall clock (templates rebuilt on a background thread).
#[test]
fn epic_z_templates_stay_fresh_over_long_wall_runs() {
    let ratio = epic_only("wall", 3_500, 500);
    assert!(ratio >= 0.98, "delivered {ratio:.4} of the offered load");
}

/// `capture_frames` + `pcap::write_capture` (what `router gen` does) make a
/// capture that the FAIR transit pipeline forwards completely when replayed
/// at the capture's time: the input of `scripts/bench-dpdk.sh`.
#[test]
fn generated_capture_replays_through_fair_transit() {
    let mut cfg = config::load_file(&config_dir().join("fair-transit.toml")).unwrap();
    let unix_s = runtime::synthetic::VIRTUAL_UNIX_START_NS / 1_000_000_000;
    let frames = runtime::synthetic::capture_frames(
        &cfg,
        &Templates::with::<adapters::All>(),
        &["fair".into(), "plain-udp".into()],
        unix_s,
    )
    .unwrap();
    // One frame per flow of each group, interleaved.
    assert_eq!(frames.len(), 128);
    assert_ne!(frames[0].1, frames[1].1);
    assert!(runtime::synthetic::capture_frames(
        &cfg,
        &Templates::with::<adapters::All>(),
        &["nope".into()],
        unix_s
    )
    .is_err());
    let input = tmp("gen-fair.pcap");
    let n = runtime::pcap::write_capture(
        &input,
        frames.iter().map(|(_, f)| f.as_slice()),
        unix_s * 1_000_000_000,
    )
    .unwrap();
    assert_eq!(n, 128);
    let output = tmp("gen-fair-out1.pcap");
    let outputs = vec![PcapFile::new(1, output.clone())];
    replay(&mut cfg, vec![PcapFile::new(0, input)], outputs);
    let s = runtime::start::<adapters::All>(cfg).unwrap().wait().unwrap();
    assert_eq!(s.rx(), 128);
    assert_eq!(s.drops().total(), 0);
    assert_eq!(read_capture(&output).len(), 128);
}
