//! `ScionForwardConfig` from TOML: every `scion-forward` table of the
//! example configurations parses and validates; mistakes are refused with
//! their key.
#![cfg(feature = "serde")]

use std::path::Path;

use mac::Key;
use scion::{IfBinding, ScionForwardConfig, Validate};

fn parse(text: &str) -> Result<ScionForwardConfig, toml::de::Error> {
    toml::from_str(text)
}

/// The `scion-forward` tables of every configuration in `config/`, without `kind`.
fn example_tables() -> Vec<(String, toml::Table)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let file: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        let stages = file.get("pipeline").and_then(|p| p.as_array()).cloned().unwrap_or_default();
        for stage in stages {
            let mut t = stage.as_table().unwrap().clone();
            if t.remove("kind").and_then(|k| k.as_str().map(str::to_owned)).as_deref()
                == Some("scion-forward")
            {
                out.push((path.display().to_string(), t));
            }
        }
    }
    out
}

#[test]
fn example_configs_parse_and_validate() {
    let tables = example_tables();
    assert!(tables.len() >= 2, "{tables:?}");
    for (file, t) in tables {
        let c: ScionForwardConfig = t.try_into().unwrap_or_else(|e| panic!("{file}: {e}"));
        c.validate().unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!c.interfaces.is_empty(), "{file}");
    }
}

#[test]
fn parses_key_and_bindings() {
    let c = parse(
        r#"key = "000102030405060708090a0b0c0d0e0f"
           interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]"#,
    )
    .unwrap();
    assert_eq!(c.key, Key::from_hex("000102030405060708090a0b0c0d0e0f").unwrap());
    assert_eq!(c.interfaces, [IfBinding { ifid: 2, port: 0 }, IfBinding { ifid: 3, port: 1 }]);
}

#[test]
fn refuses_bad_tables_with_their_key() {
    let k = r#"key = "000102030405060708090a0b0c0d0e0f""#;
    for (text, needle) in [
        (format!("{k}\ninterfaces = []\nlocal = 1"), "unknown field `local`"),
        (format!("{k}\ninterfaces = [{{ ifid = 2, port = 0, mtu = 1 }}]"), "unknown field `mtu`"),
        (format!("{k}\ninterfaces = [{{ ifid = 70000, port = 0 }}]"), "interfaces"),
        (k.to_owned(), "missing field `interfaces`"),
        ("key = \"0011\"\ninterfaces = []".to_owned(), "32 hex digits"),
    ] {
        let e = parse(&text).expect_err(&text).to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
    let twice =
        parse(&format!("{k}\ninterfaces = [{{ ifid = 2, port = 0 }}, {{ ifid = 2, port = 1 }}]"))
            .unwrap();
    assert_eq!(twice.validate().unwrap_err().key, "interfaces[1].ifid");
}

#[test]
fn epic_hp_freshness_defaults_to_scions_window() {
    let base = "key = \"000102030405060708090a0b0c0d0e0f\"\ninterfaces = []\n";
    assert_eq!(parse(base).unwrap().epic_hp_freshness, scion::Freshness::EPIC_HP);
    let c = parse(&format!("{base}epic_hp_freshness = {{ future_ns = 5 }}\n")).unwrap();
    let want = scion::Freshness { past_ns: 3_000_000_000, future_ns: 5 };
    assert_eq!(c.epic_hp_freshness, want, "a missing field keeps EPIC-HP's value");
    let bad = parse(&format!("{base}epic_hp_freshness = {{ past = 5 }}\n")).unwrap_err();
    assert!(bad.to_string().contains("past"), "{bad}");
}
