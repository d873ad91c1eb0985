//! The stage configurations: the example router configurations parse and
//! validate, and each bad value is refused with its key.
#![cfg(feature = "serde")]

use fair::config::{
    FairDestinationConfig, FairSourceConfig, FairTransitConfig, Prefix, SuspiciousBitConfig,
};
use pipeline::Validate;
use serde::de::DeserializeOwned;

/// The parameter tables of the stages of `kind` in `config/<file>`.
fn stages(file: &str, kind: &str) -> Vec<toml::Table> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let cfg: toml::Table = toml::from_str(&text).unwrap();
    let pipeline = cfg["pipeline"].as_array().unwrap();
    pipeline
        .iter()
        .filter_map(|s| s.as_table())
        .filter(|s| s["kind"].as_str() == Some(kind))
        .map(|s| {
            let mut t = s.clone();
            t.remove("kind");
            t
        })
        .collect()
}

fn parse<C: DeserializeOwned + Validate>(text: &str) -> Result<C, String> {
    let c: C = toml::from_str(text).map_err(|e| e.message().to_string())?;
    c.validate().map_err(|e| e.key)?;
    Ok(c)
}

#[test]
fn example_configurations_parse() {
    let t = stages("fair-transit.toml", "fair-transit");
    assert_eq!(t.len(), 1);
    let c: FairTransitConfig = t[0].clone().try_into().unwrap();
    c.validate().unwrap();
    assert_eq!((c.key_period_s, c.seed, c.keys_until - c.keys_from), (60, 0x0fa1_5eed, 86_400));
    assert_eq!(c.key_ring().unwrap().len(), 1440);
    let d = stages("fair-destination.toml", "fair-destination");
    let c: FairDestinationConfig = d[0].clone().try_into().unwrap();
    c.validate().unwrap();
    assert_eq!(c.channels.len(), 2);
    assert_eq!(c.channels[0].src_prefix, "10.1.0.0/16".parse::<Prefix>().unwrap());
    assert_eq!(c.channels[0].class(), (64500, 0, 2));
    assert!(c.strip_ipv6 && c.store_dir.is_none());
    let s = stages("fair-destination.toml", "suspicious-bit");
    let c: SuspiciousBitConfig = s[0].clone().try_into().unwrap();
    c.validate().unwrap();
    assert_eq!(c.settings().external_ports, 1);
    assert_eq!(c.suspicious_sources.len(), 1);
}

const TRANSIT: &str = "data_key = \"000102030405060708090a0b0c0d0e0f\"\n\
    keys_from = 1767225000\nkeys_until = 1767312000\n";

#[test]
fn transit_values_are_refused_with_their_key() {
    let bad = |extra: &str| parse::<FairTransitConfig>(&format!("{TRANSIT}{extra}")).err();
    assert_eq!(bad(""), None);
    assert_eq!(bad("key_period_s = 4").as_deref(), Some("key_period_s"));
    assert_eq!(bad("key_period_s = 100000").as_deref(), Some("key_period_s"));
    assert_eq!(bad("protocol = 17").as_deref(), Some("protocol"));
    assert!(bad("binding = \"loose\"").unwrap().contains("paper"));
    let reversed = TRANSIT.replace("keys_until = 1767312000", "keys_until = 1");
    assert_eq!(parse::<FairTransitConfig>(&reversed).err().as_deref(), Some("keys_until"));
    let long = TRANSIT.replace("keys_until = 1767312000", "keys_until = 1777225000");
    assert_eq!(parse::<FairTransitConfig>(&long).err().as_deref(), Some("keys_until"));
    let short_key = TRANSIT.replace("0e0f\"", "\"");
    assert!(parse::<FairTransitConfig>(&short_key).unwrap_err().contains("32 hex digits"));
    // Key material never shows in Debug output.
    let c = parse::<FairTransitConfig>(TRANSIT).unwrap();
    assert!(!format!("{c:?}").contains("0001020304"), "{c:?}");
}

fn channel(prefix: &str, extra: &str) -> String {
    format!(
        "{{ prefix = \"{prefix}\", k_sd = \"0f0e0d0c0b0a09080706050403020100\", m = 2, \
         cir_bps = 8000000, cbs_bytes = 15000{extra} }}"
    )
}

#[test]
fn source_values_are_refused_with_their_key() {
    let bad = |chans: Vec<String>, extra: &str| {
        parse::<FairSourceConfig>(&format!("channels = [{}]\n{extra}", chans.join(", "))).err()
    };
    let ok = channel("10.2.0.0/16", "");
    assert_eq!(bad(vec![ok.clone()], ""), None);
    assert_eq!(
        bad(vec![ok.clone(), channel("10.2.0.0/16", "")], "").as_deref(),
        Some("channels[1].prefix")
    );
    assert_eq!(bad(vec![ok.clone()], "mtu = 40").as_deref(), Some("mtu"));
    assert_eq!(bad(vec![ok.clone()], "v4_spare = 126").as_deref(), Some("channels[0].m"));
    assert_eq!(bad(vec![ok.clone()], "v4_spare = 200").as_deref(), Some("v4_spare"));
    let low_cbs = ok.replace("cbs_bytes = 15000", "cbs_bytes = 1000");
    assert_eq!(bad(vec![low_cbs], "").as_deref(), Some("channels[0].cbs_bytes"));
    let zero_cir = ok.replace("cir_bps = 8000000", "cir_bps = 0");
    assert_eq!(bad(vec![zero_cir], "").as_deref(), Some("channels[0].cir_bps"));
    let host_bits = channel("10.2.0.1/16", "");
    assert!(bad(vec![host_bits], "").unwrap().contains("host bits"));
    let too_long = channel("10.2.0.0/33", "");
    assert!(bad(vec![too_long], "").unwrap().contains("above 32"));
}

fn dest_channel(extra: &str) -> String {
    format!(
        "{{ src_prefix = \"10.1.0.0/16\", src_asn = 1, k_sd = \"0f0e0d0c0b0a09080706050403020100\", \
         m = 2, cir_bps = 8000000, cbs_bytes = 100000{extra} }}"
    )
}

#[test]
fn destination_values_are_refused_with_their_key() {
    let bad = |chans: Vec<String>, extra: &str| {
        parse::<FairDestinationConfig>(&format!("channels = [{}]\n{extra}", chans.join(", "))).err()
    };
    assert_eq!(bad(vec![dest_channel("")], ""), None);
    assert_eq!(
        bad(vec![dest_channel(", n_slots = 1")], "").as_deref(),
        Some("channels[0].n_slots")
    );
    assert_eq!(
        bad(vec![dest_channel(", n_slots = 128")], "").as_deref(),
        Some("channels[0].n_slots")
    );
    assert_eq!(
        bad(vec![dest_channel(", dup_window = 10")], "").as_deref(),
        Some("channels[0].dup_window")
    );
    assert_eq!(bad(vec![dest_channel(""), dest_channel("")], "").as_deref(), Some("channels[1]"));
    // Another slot count of the same source: a channel of its own.
    assert_eq!(bad(vec![dest_channel(""), dest_channel(", n_slots = 3")], ""), None);
    let other_as = dest_channel(", n_slots = 3").replace("src_asn = 1", "src_asn = 2");
    assert_eq!(
        bad(vec![dest_channel(""), other_as], "").as_deref(),
        Some("channels[1].src_prefix")
    );
    assert_eq!(bad(vec![dest_channel("")], "retention_s = 1").as_deref(), Some("retention_s"));
    let ports = "port_neighbors = [{ port = 0, asn = 1 }, { port = 0, asn = 2 }]";
    assert_eq!(bad(vec![dest_channel("")], ports).as_deref(), Some("port_neighbors[1].port"));
    assert!(bad(vec![dest_channel("")], "unknown_channel = \"keep\"").unwrap().contains("deliver"));
}

#[test]
fn suspicious_bit_values_are_refused_with_their_key() {
    let bad = |text: &str| parse::<SuspiciousBitConfig>(text).err();
    assert_eq!(bad("suspicious_sources = [\"10.66.0.0/16\"]"), None);
    assert_eq!(bad("external_ports = [64]").as_deref(), Some("external_ports[0]"));
    assert_eq!(bad("external_ports = [1, 1]").as_deref(), Some("external_ports[1]"));
    assert_eq!(bad("sus_ttl_s = 0").as_deref(), Some("sus_ttl_s"));
    let twice = "suspicious_sources = [\"10.66.0.0/16\", \"10.66.0.0/16\"]";
    assert_eq!(bad(twice).as_deref(), Some("suspicious_sources[1]"));
    assert!(bad("action = \"delay\"").unwrap().contains("low-priority"));
    assert!(bad("port_clear = \"require-flagged-source\"").is_none());
}
