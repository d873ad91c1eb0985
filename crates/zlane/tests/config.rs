//! The configuration types read the Z-Lane tables of the example
//! configurations, and `validate` refuses each bad value with its key.
#![cfg(feature = "serde")]

use std::path::Path;

use mac::Key;
use packet::Ia;
use pipeline::Validate;
use zlane::config::{
    GatewayConfig, HostPrefix, Origin, OverusePolicy, Rate, RouterConfig, SchedulerConfig,
};
use zlane::Bounds;

fn file(name: &str) -> toml::Table {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(name);
    toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The parameter tables of every stage of `kind` in `cfg`.
fn stages(cfg: &toml::Table, kind: &str) -> Vec<toml::Table> {
    let Some(p) = cfg.get("pipeline").and_then(|p| p.as_array()) else { return vec![] };
    p.iter()
        .filter_map(|s| s.as_table())
        .filter(|s| s.get("kind").and_then(|k| k.as_str()) == Some(kind))
        .map(|s| {
            let mut t = s.clone();
            t.remove("kind");
            t
        })
        .collect()
}

/// The parameter tables of every `zlane` egress in `cfg`.
fn zlane_egress(cfg: &toml::Table) -> Vec<toml::Table> {
    let ports = cfg["ports"].as_array().unwrap();
    ports
        .iter()
        .filter_map(|p| p.get("egress").and_then(|e| e.as_table()))
        .filter(|e| e.get("kind").and_then(|k| k.as_str()) == Some("zlane"))
        .map(|e| {
            let mut t = e.clone();
            t.remove("kind");
            t
        })
        .collect()
}

fn typed<T: serde::de::DeserializeOwned + Validate>(t: &toml::Table) -> T {
    let c: T = toml::Value::Table(t.clone()).try_into().unwrap_or_else(|e| panic!("{e}: {t}"));
    c.validate().unwrap_or_else(|e| panic!("{e}: {t}"));
    c
}

#[test]
fn example_configs_parse() {
    let border = file("zlane-border.toml");
    let c: RouterConfig = typed(&stages(&border, "zlane-classify")[0]);
    assert_eq!(c.local_ia, "1-ff00:0:110".parse::<Ia>().unwrap());
    assert_eq!(c.sv, Some(Key::from_hex("f0e0d0c0b0a090807060504030201000").unwrap()));
    assert_eq!(c.epoch, Some([1_700_000_000, 1_900_000_000]));
    assert_eq!(
        (c.capacity_bps, c.mu_g, c.host_key_cache, c.strict_flags),
        (1_000_000_000, 0.2, 2048, true)
    );
    assert_eq!(c.rates[1].origin, Origin::As("1-ff00:0:666".parse().unwrap()));
    assert_eq!(c.rates[1].rate, Some(Rate::Bps(50_000_000)));
    assert_eq!(c.burst, RouterConfig::default().burst);
    assert_eq!(c.replay_pps, None);
    let s: SchedulerConfig = typed(&zlane_egress(&border)[0]);
    assert_eq!(s, SchedulerConfig { capacity_bps: 1_000_000_000, ..Default::default() });

    let gw: GatewayConfig = typed(&stages(&file("zlane-gateway.toml"), "zlane-gateway")[0]);
    assert_eq!((gw.default_rate_bps, gw.overuse), (0, OverusePolicy::Drop));
    assert_eq!(gw.prefixes[1].prefix, HostPrefix::v4([10, 66, 0, 0], 16));
    assert_eq!(gw.as_keys[0].ia, "1-ff00:0:110".parse::<Ia>().unwrap());
    assert_eq!(gw.hops[0].mac, [0x42, 0x23, 0x6e, 0xa2, 0x90, 0x41]);
    assert_eq!(gw.host_capacity, GatewayConfig::default().host_capacity);

    let scion = file("scion-border.toml");
    let c: RouterConfig = typed(&stages(&scion, "zlane-classify")[0]);
    assert_eq!(c.rates.len(), 1);
    let _: SchedulerConfig = typed(&zlane_egress(&scion)[0]);
    let _: SchedulerConfig = typed(&zlane_egress(&file("zlane-scheduler.toml"))[0]);
}

#[test]
fn every_key_of_every_kind_parses() {
    let c: RouterConfig = typed(
        &toml::from_str(
            r#"
            local_ia = "1-ff00:0:110"
            sv = "000102030405060708090a0b0c0d0e0f"
            epoch = [0, 4000000000]
            capacity_bps = 100_000_000
            mu_g = 0.5
            burst = 3000
            rates = [{ as = "1-ff00:0:111", bps = 1000000 }, { isd = 2, percent_of_g = 10.0 }, { as = "3-ff00:0:1" }]
            freshness = { past_ns = 1_000_000_000, future_ns = 500_000_000 }
            protocol_id = 65
            strict_flags = false
            host_key_cache = 64
            replay_pps = 1000
            "#,
        )
        .unwrap(),
    );
    // The other ISD's AS is policed with its ISD's bucket: 50 % of 50 Mbit/s,
    // less 1 and 5 Mbit/s.
    let r = c.resolve().unwrap();
    assert_eq!(r[2], (Origin::Isd(3), 44_000_000));
    assert!(c.replay_filter().is_some());
    let s: SchedulerConfig = typed(
        &toml::from_str(
            "capacity_bps = 1000\nbounds = { r = 0.1, n = 0.1, g = 0.1, a = 0.1, u = 0.1 }\n\
             queue_packets = [1, 2, 3, 4, 5]\nburst_bytes = 1500\ng_burst_bytes = 3000\nquantum_bytes = 1500",
        )
        .unwrap(),
    );
    assert_eq!(s.queue_packets, [1, 2, 3, 4, 5]);
    let g: GatewayConfig = typed(
        &toml::from_str(
            r#"
            host_capacity = 16
            burst = 1500
            default_rate_bps = 0
            prefixes = [{ prefix = "2001:db8::/32", bps = 1000000 }]
            hosts = [{ host = "10.0.0.1", bps = 2000000 }, { host = "2001:db8::1", bps = 0 }]
            overuse = "demote"
            idle_evict_s = 5
            as_keys = [{ ia = "1-ff00:0:110", key = "000102030405060708090a0b0c0d0e0f" }]
            hops = [{ mac = "0102030405ff", ia = "1-ff00:0:110" }]
            "#,
        )
        .unwrap(),
    );
    assert_eq!(g.hosts[1].bps, 0);
}

/// `base` with `change` (TOML lines) merged in, parsed and validated: the
/// offending key, or `parse: ` and the parser's message.
fn refused<T: serde::de::DeserializeOwned + Validate>(base: &str, change: &str) -> String {
    let mut t: toml::Table = toml::from_str(base).unwrap();
    t.extend(toml::from_str::<toml::Table>(change).unwrap());
    match toml::Value::Table(t).try_into::<T>() {
        Err(e) => format!("parse: {e}"),
        Ok(c) => match c.validate() {
            Ok(()) => panic!("accepted: {change}"),
            Err(e) => {
                assert!(!e.reason.is_empty());
                e.key
            }
        },
    }
}

/// Every change of `cases` refused: with the key given, or (for a
/// parser error) with a message containing what follows `parse: `.
fn refuses<T: serde::de::DeserializeOwned + Validate>(base: &str, cases: &[(&str, &str)]) {
    for (change, want) in cases {
        let got = refused::<T>(base, change);
        let ok = match want.strip_prefix("parse: ") {
            Some(part) => got.starts_with("parse: ") && got.contains(part),
            None => got == *want,
        };
        assert!(ok, "{change}: got {got}, want {want}");
    }
}

const CLASSIFY: &str = r#"
local_ia = "1-ff00:0:110"
sv = "000102030405060708090a0b0c0d0e0f"
epoch = [0, 4000000000]
capacity_bps = 100000000
rates = [{ as = "1-ff00:0:111", bps = 1000000 }, { isd = 2 }]
"#;

#[test]
fn classify_validation_names_the_key() {
    refuses::<RouterConfig>(
        CLASSIFY,
        &[
            ("epoch = [5, 5]", "epoch"),
            ("epoch = [6, 5]", "epoch"),
            ("mu_g = 1.5", "mu_g"),
            ("mu_g = -0.1", "mu_g"),
            ("mu_g = nan", "mu_g"),
            ("capacity_bps = 0", "capacity_bps"),
            ("burst = 1000", "burst"),
            ("host_key_cache = 0", "host_key_cache"),
            ("replay_pps = 0", "replay_pps"),
            ("replay_pps = 100000000000", "replay_pps"),
            ("freshness = { past_ns = 3600000000000 }", "freshness.past_ns"),
            (r#"rates = [{ as = "1-ff00:0:111", bps = 0 }]"#, "rates[0].bps"),
            (r#"rates = [{ isd = 3, bps = 99999 }]"#, "rates[0].bps"),
            (r#"rates = [{ isd = 3, percent_of_g = 0.0 }]"#, "rates[0].percent_of_g"),
            (r#"rates = [{ isd = 3, percent_of_g = 101.0 }]"#, "rates[0].percent_of_g"),
            (
                r#"rates = [{ isd = 3, percent_of_g = 60.0 }, { isd = 4, percent_of_g = 60.0 }]"#,
                "rates",
            ),
            // Over mu_G x capacity (20 Mbit/s).
            (r#"rates = [{ isd = 3, bps = 30000000 }]"#, "rates"),
            (r#"rates = [{ isd = 3 }, { isd = 3, bps = 1000000 }]"#, "rates[1]"),
            // An AS of ISD 3 is policed with ISD 3's bucket: configured twice.
            (r#"rates = [{ isd = 3 }, { as = "3-ff00:0:1" }]"#, "rates[1]"),
            // What the explicit rates leave is less than one bucket unit each.
            (r#"rates = [{ isd = 3, bps = 20000000 }, { isd = 4 }]"#, "rates[1]"),
            (r#"rates = [{ bps = 1000000 }]"#, "parse: exactly one of `as`, `isd`"),
            (r#"rates = [{ isd = 2, bps = 1, percent_of_g = 1.0 }]"#, "parse: at most one"),
            ("sv = \"0011\"", "parse: 32 hex digits"),
            ("local_ia = \"nope\"", "parse: not an ISD-AS"),
            ("unknown = 1", "parse: unknown field"),
        ],
    );
    let mut no_sv: toml::Table = toml::from_str(CLASSIFY).unwrap();
    no_sv.remove("sv");
    let e = toml::Value::Table(no_sv).try_into::<RouterConfig>().unwrap_err();
    assert!(e.to_string().contains("missing field `sv`"), "{e}");
}

const GATEWAY: &str = r#"
prefixes = [{ prefix = "10.0.0.0/24", bps = 1000000 }]
hosts = [{ host = "10.0.0.1", bps = 2000000 }]
as_keys = [{ ia = "1-ff00:0:110", key = "000102030405060708090a0b0c0d0e0f" }]
hops = [{ mac = "0102030405ff", ia = "1-ff00:0:110" }]
"#;

const KEY: &str = "000102030405060708090a0b0c0d0e0f";

#[test]
fn gateway_validation_names_the_key() {
    let two_keys =
        format!(r#"as_keys = [{{ ia = "1-1", key = "{KEY}" }}, {{ ia = "1-1", key = "{KEY}" }}]"#);
    refuses::<GatewayConfig>(
        GATEWAY,
        &[
            ("host_capacity = 0", "host_capacity"),
            ("host_capacity = 100000000", "host_capacity"),
            ("burst = 100", "burst"),
            ("default_rate_bps = 7000000000", "default_rate_bps"),
            (r#"prefixes = [{ prefix = "10.0.0.0/8", bps = 7000000000 }]"#, "prefixes[0].bps"),
            (
                r#"prefixes = [{ prefix = "10.0.0.0/8", bps = 1 }, { prefix = "10.0.0.0/8", bps = 2 }]"#,
                "prefixes[1].prefix",
            ),
            (
                r#"hosts = [{ host = "10.0.0.1", bps = 1 }, { host = "10.0.0.1", bps = 2 }]"#,
                "hosts[1].host",
            ),
            (
                "host_capacity = 1\nhosts = [{ host = \"10.0.0.1\", bps = 1 }, { host = \"10.0.0.2\", bps = 1 }]",
                "hosts",
            ),
            (&two_keys, "as_keys[1].ia"),
            (r#"hops = [{ mac = "0102030405ff", ia = "1-ff00:0:111" }]"#, "hops[0].ia"),
            (
                r#"hops = [{ mac = "0102030405ff", ia = "1-ff00:0:110" }, { mac = "0102030405FF", ia = "1-ff00:0:110" }]"#,
                "hops[1].mac",
            ),
            (r#"hops = [{ mac = "0102", ia = "1-ff00:0:110" }]"#, "parse: 12 hex digits"),
            (r#"prefixes = [{ prefix = "10.0.0.0/33", bps = 1 }]"#, "parse: prefix"),
            (r#"overuse = "shout""#, "parse: unknown variant"),
        ],
    );
}

#[test]
fn scheduler_validation_names_the_key() {
    refuses::<SchedulerConfig>(
        "",
        &[
            ("capacity_bps = 0", "capacity_bps"),
            ("bounds = { r = 0.5, n = 0.5, g = 0.2, a = 0.15, u = 0.05 }", "bounds"),
            ("bounds = { r = 0.5, n = 0.1, g = 1.2, a = 0.0, u = 0.0 }", "bounds.g"),
            ("bounds = { r = 0.5, n = 0.1, g = 0.2, a = -0.1, u = 0.0 }", "bounds.a"),
            ("queue_packets = [1, 1, 0, 1, 1]", "queue_packets[2]"),
            ("queue_packets = [1, 1, 1, 1, 100000000]", "queue_packets[4]"),
            ("burst_bytes = 1000", "burst_bytes"),
            ("g_burst_bytes = 0", "g_burst_bytes"),
            ("quantum_bytes = 64", "quantum_bytes"),
            ("bounds = { r = 0.5 }", "parse: missing field"),
        ],
    );
    assert_eq!(Bounds::default().validate(), Ok(()));
}

#[test]
fn prefixes_have_no_host_bits() {
    assert_eq!("10.0.0.0/8".parse::<HostPrefix>().unwrap(), HostPrefix::v4([10, 1, 2, 3], 8));
    assert!("10.1.2.3/8".parse::<HostPrefix>().unwrap_err().contains("host bits"));
    assert_eq!("0.0.0.0/0".parse::<HostPrefix>().unwrap(), HostPrefix::v4([9, 9, 9, 9], 0));
    let v6: HostPrefix = "2001:db8::1/128".parse().unwrap();
    assert_eq!(v6.addr[15], 1);
    assert!("2001:db8::1/64".parse::<HostPrefix>().is_err());
    assert!("10.0.0.0".parse::<HostPrefix>().is_err());
    assert!("2001:db8::/129".parse::<HostPrefix>().is_err());
}
