//! A hundred-odd mistakes an operator can make in a router configuration,
//! each starting from a working example in `config/` with one value changed
//! or removed: every one is refused by `router check`'s path (parse, check,
//! control section) with an error that names the file, the line and the
//! key, and none panics or allocates what it asks for.

use std::path::{Path, PathBuf};

/// One mistake: in example `base`, set the dotted `key` (with `[i]` indices)
/// to the TOML `value` (`None` removes the key), and expect an error whose
/// key contains `expect`.
struct Case {
    base: &'static str,
    key: &'static str,
    value: Option<&'static str>,
    expect: &'static str,
}

const fn set(
    base: &'static str,
    key: &'static str,
    value: &'static str,
    expect: &'static str,
) -> Case {
    Case { base, key, value: Some(value), expect }
}

const fn unset(base: &'static str, key: &'static str, expect: &'static str) -> Case {
    Case { base, key, value: None, expect }
}

const D: &str = "default.toml";
const SB: &str = "scion-border.toml";
const ZB: &str = "zlane-border.toml";
const ZG: &str = "zlane-gateway.toml";
const ZS: &str = "zlane-scheduler.toml";
const ST: &str = "sibra-transit.toml";
const FP: &str = "flowpolice-edge.toml";
const FT: &str = "fair-transit.toml";
const FD: &str = "fair-destination.toml";

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Types and unknown keys.
    set(D, "io.backend", "\"nope\"", "io.backend"),
    set(D, "io.synthetic.pacing", "\"fast\"", "io.synthetic.pacing"),
    set(D, "workers.count", "\"two\"", "workers.count"),
    set(D, "workers.pin", "1", "workers.pin"),
    set(D, "ports[0].id", "-1", "ports[0].id"),
    set(D, "ports[0].id", "70000", "ports[0].id"),
    set(D, "ports[0].colour", "\"red\"", "ports[0]"),
    set(D, "run.duration_ms", "-5", "run.duration_ms"),
    set(D, "run.unknown", "1", "run"),
    set(D, "router.name", "7", "router.name"),
    set(D, "pipeline[0].kind", "\"no-such-stage\"", "pipeline[0].kind"),
    unset(D, "pipeline[0].kind", "pipeline[0]"),
    set(D, "pipeline[0].routes[0].port", "\"one\"", "pipeline[0].routes[0].port"),
    set(D, "pipeline[1].rules[0].class", "300", "pipeline[1].rules[0].class"),
    set(D, "ports[1].egress.kind", "\"no-such-egress\"", "ports[1].egress.kind"),
    set(D, "ports[1].egress.order", "\"1\"", "ports[1].egress.order"),
    set(D, "io.synthetic.traffic[0].template", "\"no-such-template\"", "io.synthetic.traffic[0]"),
    set(D, "io.synthetic.traffic[0].size", "\"big\"", "io.synthetic.traffic[0].size"),
    set(D, "io.synthetic.traffic[0].nonsense", "1", "io.synthetic.traffic[0]"),
    // Ranges and sizes.
    set(D, "workers.count", "0", "workers.count"),
    set(D, "workers.count", "100000", "workers.count"),
    set(D, "workers.command_queue", "0", "workers.command_queue"),
    set(D, "workers.command_queue", "1_000_000_000", "workers.command_queue"),
    set(D, "workers.publish_every", "0", "workers.publish_every"),
    set(D, "run.duration_ms", "100_000_000_000_000", "run.duration_ms"),
    set(D, "io.synthetic.pool", "0", "io.synthetic.pool"),
    set(D, "io.synthetic.pool", "1_000_000_000_000", "io.synthetic.pool"),
    set(D, "io.synthetic.traffic[0].rate_pps", "1e30", "io.synthetic.traffic[0].rate_pps"),
    set(D, "io.synthetic.traffic[0].rate_pps", "-1", "io.synthetic.traffic[0].rate_pps"),
    set(D, "io.synthetic.traffic[0].rate_pps", "nan", "io.synthetic.traffic[0].rate_pps"),
    set(D, "io.synthetic.traffic[0].flows", "0", "io.synthetic.traffic[0].flows"),
    set(D, "io.synthetic.traffic[0].flows", "100_000_000", "io.synthetic.traffic[0].flows"),
    set(D, "io.synthetic.traffic[0].size", "20", "io.synthetic.traffic[0].size"),
    set(D, "io.synthetic.traffic[0].size", "9000", "io.synthetic.traffic[0].size"),
    set(D, "io.synthetic.traffic[0].dscp", "64", "io.synthetic.traffic[0].dscp"),
    set(D, "io.synthetic.traffic[0].src_mac", "\"02:00\"", "io.synthetic.traffic[0].src_mac"),
    set(D, "ports[1].egress.capacity", "0", "ports[1].egress.capacity"),
    set(D, "ports[1].egress.capacity", "100_000_000_000_000", "ports[1].egress.capacity"),
    set(D, "ports[1].egress.rate_pps", "1e300", "ports[1].egress.rate_pps"),
    set(D, "ports[1].egress.rate_pps", "-5", "ports[1].egress.rate_pps"),
    set(D, "ports[1].egress.rate_pps", "inf", "ports[1].egress.rate_pps"),
    set(D, "ports[1].egress.burst", "0", "ports[1].egress.burst"),
    set(D, "ports[1].egress.order", "[]", "ports[1].egress.order"),
    set(ST, "ports[1].egress.rate_mbps", "1e12", "ports[1].egress.rate_mbps"),
    set(FP, "ports[1].egress.queues[0].capacity", "0", "ports[1].egress.queues[0].capacity"),
    set(FP, "ports[1].egress.caps.request.rate_mbps", "-1", "ports[1].egress.caps.request.rate_mbps"),
    set(ZS, "ports[1].egress.capacity_bps", "0", "ports[1].egress"),
    set(ZS, "ports[1].egress.queue_packets", "[0, 1, 1, 1, 1]", "ports[1].egress"),
    set(ZS, "ports[1].egress.queue_packets", "[1_000_000_000_000, 1, 1, 1, 1]", "ports[1].egress"),
    set(ZS, "ports[1].egress.bounds", "{ r = 2.0, n = 0.1, g = 0.2, a = 0.1, u = 0.1 }", "ports[1].egress"),
    // Duplicates.
    set(D, "ports[1].id", "0", "ports[1].id"),
    set(D, "io.synthetic.traffic[1].name", "\"guaranteed-as\"", "io.synthetic.traffic[1].name"),
    set(D, "ports[1].egress.order", "[1, 1]", "ports[1].egress.order[1]"),
    set(FP, "ports[1].egress.queues[1].classes", "[2, 2]", "ports[1].egress.queues"),
    set(SB, "pipeline[3].interfaces[1].ifid", "2", "pipeline[3].interfaces"),
    set(SB, "pipeline[1].interfaces[1].ifid", "2", "pipeline[1].interfaces"),
    set(ZB, "pipeline[1].rates[1]", "{ as = \"1-ff00:0:111\", bps = 1000 }", "pipeline[1].rates"),
    set(ZG, "pipeline[1].prefixes[1].prefix", "\"10.0.0.0/24\"", "pipeline[1].prefixes"),
    set(FD, "pipeline[3].channels[1].src_prefix", "\"10.1.0.0/16\"", "pipeline[3].channels"),
    // References.
    set(D, "io.synthetic.traffic[0].port", "9", "io.synthetic.traffic[0].port"),
    set(D, "pipeline[0].routes[0].port", "9", "pipeline[0].routes[0].port"),
    set(ZG, "pipeline[2].port", "9", "pipeline[2].port"),
    set(SB, "pipeline[1].interfaces[0].port", "9", "pipeline[1].interfaces[0].port"),
    set(SB, "pipeline[3].interfaces[0].port", "9", "pipeline[3].interfaces"),
    set(SB, "pipeline[3].local_ia", "\"1-ff00:0:1:2\"", "pipeline[3].local_ia"),
    set(FD, "pipeline[3].port_neighbors[0].port", "9", "pipeline[3].port_neighbors"),
    set(FD, "pipeline[2].external_ports", "[9]", "pipeline[2].external_ports"),
    // Prefixes and addresses.
    set(D, "pipeline[0].routes[0].prefix", "\"10.2.0.1/16\"", "pipeline[0].routes[0].prefix"),
    set(D, "pipeline[0].routes[0].prefix", "\"10.2.0.0/33\"", "pipeline[0].routes[0].prefix"),
    set(D, "pipeline[0].routes[0].prefix", "\"ten/8\"", "pipeline[0].routes[0].prefix"),
    set(D, "pipeline[1].rules[0].src", "\"10.1.0.0\"", "pipeline[1].rules[0].src"),
    set(D, "io.synthetic.traffic[0].src", "\"10.1.0\"", "io.synthetic.traffic[0].src"),
    set(ZG, "pipeline[1].prefixes[0].prefix", "\"10.0.0.1/24\"", "pipeline[1].prefixes[0].prefix"),
    set(FD, "pipeline[3].channels[0].src_prefix", "\"10.1.0.1/16\"", "pipeline[3].channels[0].src_prefix"),
    set(FD, "pipeline[2].suspicious_sources", "[\"10.66.0.0/40\"]", "pipeline[2].suspicious_sources"),
    set(SB, "pipeline[2].local_ia", "\"1-\"", "pipeline[2].local_ia"),
    set(ZB, "pipeline[1].rates[0].as", "\"not-an-ia\"", "pipeline[1].rates[0].as"),
    // Keys.
    set(SB, "pipeline[3].key", "\"0011\"", "pipeline[3].key"),
    set(SB, "pipeline[1].key", "\"zz\"", "pipeline[1].key"),
    set(SB, "pipeline[2].sv", "\"00112233445566778899aabbccddeeffaa\"", "pipeline[2].sv"),
    unset(SB, "pipeline[2].sv", "pipeline[2]"),
    set(FP, "pipeline[2].capability_key", "\"c0ffee\"", "pipeline[2].capability_key"),
    set(FP, "pipeline[2].seeds.root", "\"5eed\"", "pipeline[2].seeds"),
    set(FT, "pipeline[2].data_key", "\"\"", "pipeline[2].data_key"),
    set(FD, "pipeline[3].channels[0].k_sd", "\"0f\"", "pipeline[3].channels[0].k_sd"),
    set(ZG, "pipeline[1].as_keys[0].key", "\"7b\"", "pipeline[1].as_keys[0].key"),
    // Protocol values that make no sense.
    set(SB, "pipeline[2].mu_g", "2.0", "pipeline[2].mu_g"),
    set(SB, "pipeline[2].mu_g", "-0.1", "pipeline[2].mu_g"),
    set(SB, "pipeline[2].mu_g", "nan", "pipeline[2].mu_g"),
    set(SB, "pipeline[2].capacity_bps", "0", "pipeline[2].capacity_bps"),
    set(SB, "pipeline[2].epoch", "[1_900_000_000, 1_700_000_000]", "pipeline[2].epoch"),
    set(SB, "pipeline[2].rates[0].bps", "0", "pipeline[2].rates[0]"),
    set(SB, "pipeline[2].rates[0].bps", "10_000_000_000", "pipeline[2].rates"),
    set(SB, "pipeline[2].rates[0].percent_of_g", "150.0", "pipeline[2].rates[0]"),
    set(SB, "pipeline[2].host_key_cache", "1_000_000_000_000", "pipeline[2].host_key_cache"),
    set(SB, "pipeline[2].host_key_cache", "0", "pipeline[2].host_key_cache"),
    set(SB, "pipeline[2].replay_pps", "1e30", "pipeline[2].replay_pps"),
    set(SB, "pipeline[3].interfaces[0].ifid", "0", "pipeline[3].interfaces[0].ifid"),
    set(ZG, "pipeline[1].default_rate_bps", "-1", "pipeline[1].default_rate_bps"),
    set(ZG, "pipeline[1].overuse", "\"explode\"", "pipeline[1].overuse"),
    set(ZG, "pipeline[1].hops[0].mac", "\"42\"", "pipeline[1].hops[0].mac"),
    set(FP, "pipeline[2].slots", "0", "pipeline[2].slots"),
    set(FP, "pipeline[2].slots", "1_000_000_000_000_000", "pipeline[2].slots"),
    set(FP, "pipeline[2].slots", "4_000_000_000", "pipeline[2]"),
    set(FP, "pipeline[2].params.beta", "2.0", "pipeline[2].params.beta"),
    set(FP, "pipeline[2].params.beta", "0.0", "pipeline[2].params.beta"),
    set(FP, "pipeline[2].params.k_th", "0", "pipeline[2].params.k_th"),
    set(FP, "pipeline[2].params.k_th", "1000", "pipeline[2].params.k_th"),
    set(FP, "pipeline[2].params.period_ms", "1", "pipeline[2].params.period_ms"),
    set(FP, "pipeline[2].params.lambda", "1.5", "pipeline[2].params.lambda"),
    set(FP, "pipeline[2].params.l_up", "0.5", "pipeline[2].params"),
    set(FP, "pipeline[2].seeds.epochs", "0", "pipeline[2].seeds"),
    set(FP, "pipeline[2].seeds.epochs", "10_000_000", "pipeline[2].seeds"),
    set(FP, "pipeline[2].puzzle.min_level", "65", "pipeline[2].puzzle"),
    set(FT, "pipeline[2].key_period_s", "0", "pipeline[2].key_period_s"),
    set(FT, "pipeline[2].keys_until", "1_700_000_000", "pipeline[2]"),
    set(FT, "pipeline[2].keys_until", "1_999_999_999_999", "pipeline[2]"),
    set(FD, "pipeline[3].channels[0].cir_bps", "0", "pipeline[3].channels[0].cir_bps"),
    set(FD, "pipeline[3].channels[0].cbs_bytes", "10", "pipeline[3].channels[0].cbs_bytes"),
    set(FD, "pipeline[3].channels[0].m", "200", "pipeline[3].channels[0]"),
    set(FD, "pipeline[3].channels[0].n_slots", "1", "pipeline[3].channels[0].n_slots"),
    set(FD, "pipeline[2].action", "\"shout\"", "pipeline[2].action"),
    set(ST, "pipeline[1].interfaces[0].ifid", "0", "pipeline[1].interfaces[0].ifid"),
    // Whole sections missing or empty.
    unset(D, "io.synthetic", "io.synthetic"),
    set(D, "io.synthetic.traffic", "[]", "io.synthetic.traffic"),
    set(D, "pipeline", "[]", "pipeline"),
    set(D, "ports", "[]", "ports"),
    unset(D, "ports", "ports"),
    unset(D, "io", "io"),
    set(D, "io.backend", "\"pcap\"", "io.pcap"),
    set(D, "workers.cores", "[999]", "workers.cores[0]"),
    // The control section.
    set(D, "control", "{ token_file = \"/nonexistent/token\" }", "control"),
    set(D, "control", "{ listen = \"0.0.0.0:50051\", allow_unauthenticated = true }", "control"),
    set(D, "control", "{ allow_unauthenticated = true, metrics_listen = \"0.0.0.0:9464\" }", "control"),
    set(D, "control", "{ allow_unauthenticated = true, apply_timeout_ms = 0 }", "control"),
    set(D, "control", "{ allow_unauthenticated = true, listen = \"nowhere\" }", "control"),
    set(D, "control", "{ allow_unauthenticated = true, colour = 1 }", "control"),
    set(D, "control", "{ allow_unauthenticated = true, nothing = { a = 1 } }", "control"),
];

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

/// Splits `a.b[1].c` into steps.
fn steps(key: &str) -> Vec<Result<String, usize>> {
    let mut v = Vec::new();
    for part in key.split('.') {
        let (name, rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            v.push(Ok(name.to_string()));
        }
        for ix in rest.split(['[', ']']).filter(|s| !s.is_empty()) {
            v.push(Err(ix.parse().unwrap()));
        }
    }
    v
}

/// Sets (or removes) the value at `key` in `doc`.
fn edit(doc: &mut toml::Value, key: &str, value: Option<toml::Value>) {
    let steps = steps(key);
    let (last, path) = steps.split_last().unwrap();
    let mut cur = doc;
    for s in path {
        cur = match s {
            Ok(k) => cur
                .as_table_mut()
                .unwrap()
                .entry(k.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new())),
            Err(i) => &mut cur.as_array_mut().unwrap()[*i],
        };
    }
    match (last, value) {
        (Ok(k), Some(v)) => {
            cur.as_table_mut().unwrap().insert(k.clone(), v);
        }
        (Ok(k), None) => {
            cur.as_table_mut().unwrap().remove(k);
        }
        (Err(i), Some(v)) => {
            let a = cur.as_array_mut().unwrap();
            if *i < a.len() {
                a[*i] = v;
            } else {
                a.push(v);
            }
        }
        (Err(i), None) => {
            cur.as_array_mut().unwrap().remove(*i);
        }
    }
}

/// What `router check` does with the file at `path`.
fn check(path: &Path) -> Result<(), runtime::ConfigError> {
    let cfg = runtime::config::load_file(path)?;
    if let Some(t) = &cfg.control {
        let located = |key: String, reason: String| {
            cfg.locate(runtime::ConfigError::at(format!("control.{key}"), reason))
        };
        let c = control::ControlConfig::from_toml(t).map_err(|e| located(e.key, e.reason))?;
        <adapters::All as control::Services>::check(&c).map_err(|e| located(e.key, e.reason))?;
        c.check_resources().map_err(|e| located(e.key, e.reason))?;
    }
    runtime::check::<adapters::All>(&cfg).map(|_| ())
}

#[test]
fn every_example_passes_the_check() {
    for base in [D, SB, ZB, ZG, ZS, ST, FP, FT, FD] {
        check(&config_dir().join(base)).unwrap_or_else(|e| panic!("{base}: {e}"));
    }
}

#[test]
fn every_mistake_is_refused_with_file_line_and_key() {
    assert!(CASES.len() >= 100, "{} cases", CASES.len());
    let dir = std::env::temp_dir().join(format!("broken-configs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for (n, c) in CASES.iter().enumerate() {
        let text = std::fs::read_to_string(config_dir().join(c.base)).unwrap();
        let mut doc: toml::Value = toml::from_str(&text).unwrap();
        let value = c.value.map(|v| {
            let t: toml::Table = toml::from_str(&format!("v = {v}")).unwrap();
            t["v"].clone()
        });
        edit(&mut doc, c.key, value);
        let path = dir.join(format!("case-{n}.toml"));
        std::fs::write(&path, toml::to_string(&doc).unwrap()).unwrap();
        let what = format!("#{n} {} {} = {:?}", c.base, c.key, c.value);
        match check(&path) {
            Ok(()) => failures.push(format!("{what}: accepted")),
            Err(e) => {
                let shown = e.to_string();
                if !e.key.contains(c.expect) {
                    failures
                        .push(format!("{what}: key `{}`, expected `{}`: {shown}", e.key, c.expect));
                } else if e.file != path || !shown.starts_with(&path.display().to_string()) {
                    failures.push(format!("{what}: does not name the file: {shown}"));
                } else if e.line.is_none() && c.value.is_some() {
                    failures.push(format!("{what}: no line: {shown}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}
