//! Typed configuration of the [`ScionForward`](crate::ScionForward) stage
//! (the router's `scion-forward` kind), with serde behind feature `serde`:
//!
//! ```toml
//! key = "000102030405060708090a0b0c0d0e0f"                     # the AS's hop-field key
//! interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]  # interface -> router port
//! local_ia = "1-ff00:0:110"   # optional: deliver locally by destination ISD-AS, as SCION does
//! epic_hp_freshness = { past_ns = 3_000_000_000, future_ns = 1_000_000_000 }  # optional (SCION's)
//! ```

use std::collections::BTreeMap;

use mac::Key;
use pipeline::{Invalid, Validate};

use crate::epic::Freshness;
use crate::hopmac::ForwardingKey;
use crate::interfaces::{InterfaceTable, INTERNAL_IF, NONE};

/// One external interface of the router: SCION interface `ifid` is reached
/// through router port `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct IfBinding {
    /// SCION interface ID, 1..=65535 (0 is the AS itself).
    pub ifid: u16,
    /// Router port, 0..=65534.
    pub port: u16,
}

/// Configuration of a [`ScionForward`](crate::ScionForward) stage: the AS's
/// hop-field key and the interface → port bindings. Both change in place on
/// a running stage.
///
/// `Debug` does not print the key.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct ScionForwardConfig {
    /// The AS's hop-field (forwarding) key; 32 hex digits in a file.
    pub key: Key,
    /// The external interfaces and their ports.
    pub interfaces: Vec<IfBinding>,
    /// This AS (optional). With it, local delivery follows the destination
    /// ISD-AS and the addresses are checked against the path, as SCION's
    /// border router does; without it, a path whose last hop has egress
    /// interface 0 ends here.
    #[cfg_attr(feature = "serde", serde(default))]
    pub local_ia: Option<packet::Ia>,
    /// Accepted age of EPIC-HP packets where their HVFs are checked
    /// (default SCION's: 3 s old, 1 s ahead).
    #[cfg_attr(
        feature = "serde",
        serde(default = "epic_hp_freshness", deserialize_with = "de_epic_hp_freshness")
    )]
    pub epic_hp_freshness: Freshness,
}

#[cfg(feature = "serde")]
fn epic_hp_freshness() -> Freshness {
    Freshness::EPIC_HP
}

/// `{ past_ns, future_ns }`, each defaulting to EPIC-HP's value (the type's
/// own `Default` is EPIC-Z's).
#[cfg(feature = "serde")]
fn de_epic_hp_freshness<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Freshness, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Window {
        past_ns: Option<u64>,
        future_ns: Option<u64>,
    }
    let w = <Window as serde::Deserialize>::deserialize(d)?;
    let hp = Freshness::EPIC_HP;
    Ok(Freshness {
        past_ns: w.past_ns.unwrap_or(hp.past_ns),
        future_ns: w.future_ns.unwrap_or(hp.future_ns),
    })
}

impl ScionForwardConfig {
    /// A configuration with `key` and no interfaces.
    pub fn new(key: Key) -> Self {
        ScionForwardConfig {
            key,
            interfaces: Vec::new(),
            local_ia: None,
            epic_hp_freshness: Freshness::EPIC_HP,
        }
    }

    /// Adds interface `ifid` on `port`.
    #[must_use]
    pub fn with_interface(mut self, ifid: u16, port: u16) -> Self {
        self.interfaces.push(IfBinding { ifid, port });
        self
    }

    /// The key with its CMAC subkeys expanded.
    pub fn forwarding_key(&self) -> ForwardingKey {
        ForwardingKey::new(&self.key)
    }

    /// The interface tables of the bindings.
    pub fn interface_table(&self) -> InterfaceTable {
        InterfaceTable::from_bindings(&self.interfaces)
    }
}

impl Validate for ScionForwardConfig {
    fn validate(&self) -> Result<(), Invalid> {
        validate_bindings(&self.interfaces).map_err(|e| e.under("interfaces"))
    }

    /// The interface tables: one slot per interface ID, one per port up to
    /// the highest bound.
    fn footprint(&self) -> u64 {
        let ports = self.interfaces.iter().map(|b| u64::from(b.port) + 1).max().unwrap_or(0);
        ((1 << 16) + ports) * core::mem::size_of::<u16>() as u64
    }
}

/// Checks interface bindings: interface IDs 1..=65535, ports 0..=65534,
/// each interface and each port bound once (the stage finds a packet's
/// ingress interface by its arrival port). Keys are relative to the list
/// (`[1].ifid`); [`Invalid::under`] puts the list's own key in front.
pub fn validate_bindings(bindings: &[IfBinding]) -> Result<(), Invalid> {
    let mut ifids = BTreeMap::new();
    let mut ports = BTreeMap::new();
    for (i, b) in bindings.iter().enumerate() {
        if b.ifid == INTERNAL_IF {
            return Err(Invalid::at(
                format!("[{i}].ifid"),
                "0 is the AS itself; external interfaces are 1..=65535",
            ));
        }
        if b.port == NONE {
            return Err(Invalid::at(
                format!("[{i}].port"),
                "65535 is reserved; ports are 0..=65534",
            ));
        }
        if let Some(j) = ifids.insert(b.ifid, i) {
            return Err(Invalid::at(
                format!("[{i}].ifid"),
                format!("interface {} is already bound in [{j}]", b.ifid),
            ));
        }
        if let Some(j) = ports.insert(b.port, i) {
            return Err(Invalid::at(
                format!("[{i}].port"),
                format!(
                    "port {} is already bound to interface {} in [{j}] (one interface per port: \
                     the port tells the ingress interface)",
                    b.port, bindings[j].ifid
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(bindings: &[(u16, u16)]) -> ScionForwardConfig {
        bindings
            .iter()
            .fold(ScionForwardConfig::new(Key::from([1; 16])), |c, &(i, p)| c.with_interface(i, p))
    }

    fn refused(bindings: &[(u16, u16)]) -> Invalid {
        cfg(bindings).validate().expect_err("invalid")
    }

    #[test]
    fn accepts_distinct_bindings_and_none() {
        assert_eq!(cfg(&[]).validate(), Ok(()));
        assert_eq!(cfg(&[(2, 0), (3, 1), (65535, 65534)]).validate(), Ok(()));
    }

    #[test]
    fn refuses_each_bad_binding_with_its_key() {
        let e = refused(&[(2, 0), (0, 1)]);
        assert_eq!(e.key, "interfaces[1].ifid");
        assert!(e.reason.contains("1..=65535"), "{e}");
        let e = refused(&[(2, 65535)]);
        assert_eq!(e.key, "interfaces[0].port");
        assert!(e.reason.contains("0..=65534"), "{e}");
        let e = refused(&[(2, 0), (3, 1), (2, 4)]);
        assert_eq!(
            (e.key.as_str(), e.reason.as_str()),
            ("interfaces[2].ifid", "interface 2 is already bound in [0]")
        );
        let e = refused(&[(2, 0), (3, 1), (4, 1)]);
        assert_eq!(e.key, "interfaces[2].port");
        assert!(e.reason.starts_with("port 1 is already bound to interface 3 in [1]"), "{e}");
    }

    #[test]
    fn footprint_counts_both_tables() {
        assert_eq!(cfg(&[]).footprint(), 2 << 16);
        assert_eq!(cfg(&[(2, 0), (3, 9)]).footprint(), (2 << 16) + 20);
    }

    #[test]
    fn builds_the_tables_it_describes() {
        let t = cfg(&[(2, 0), (3, 1)]).interface_table();
        assert_eq!((t.port(2), t.port(3), t.port(4)), (Some(0), Some(1), None));
        assert_eq!((t.ingress_if(1), t.ingress_if(2)), (3, INTERNAL_IF));
    }

    #[test]
    fn debug_does_not_print_the_key() {
        let c = ScionForwardConfig::new(Key::from([0xab; 16]));
        let printed = format!("{c:?}");
        assert!(!printed.contains("171") && !printed.contains("abab"), "{printed}");
    }
}
