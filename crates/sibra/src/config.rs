//! Typed configuration of the SIBRA stage kinds, shaped like their tables in
//! the router's TOML (`[[pipeline]]` entries of kind `sibra-transit` and
//! `sibra-control`), with serde behind the `serde` feature and
//! [`Validate`] checks that name the offending key.
//!
//! ```toml
//! [[pipeline]]
//! kind = "sibra-transit"
//! key = "2b7e151628aed2a6abf7158809cf4f3c"      # the AS's SOF key
//! interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]
//! # local_port = 0, class = 1, requests = "skip" | "to-control",
//! # monitor = { rows, width, window_ms, margin_pct, burst_ms, max_suspects, max_blacklist, seed }
//!
//! [[pipeline]]
//! kind = "sibra-control"
//! key = "2b7e151628aed2a6abf7158809cf4f3c"
//! interfaces = [{ ifid = 1, port = 0, capacity_bps = 1_000_000_000 }]
//! # local_port = 0, class = 1, split = { ephemeral = 80, best_effort = 15, steady = 5 },
//! # max_steady = 4096, max_ephemeral = 65536, hand_off = false,
//! # request_limit = { enabled = true, share_pct = 5, burst_ms = 1000, per_path = true, max_paths = 65536 }
//! ```
//!
//! Parts the crate already has a type for are those types: the overuse
//! monitor's [`CoreConfig`] (its times in milliseconds in the file), the
//! capacity [`Split`], the [`RequestPolicy`]. The request channel of
//! `sibra-control` is [`RequestLimit`] (on by default: ephemeral setup
//! requests may use 5% of each egress interface, weighted by steady path;
//! `request_limit = { enabled = false }` switches it off). Which parameters a running
//! stage can change in place is documented on
//! [`SibraTransit`](crate::stage::SibraTransit) and
//! [`SibraControl`](crate::stage::SibraControl).

use mac::Key;
use pipeline::{Class, Invalid, Validate};
use scion::{validate_bindings, IfBinding, InterfaceTable};

use crate::admission::{AdmissionConfig, IfaceConfig, RequestLimitConfig, Split};
use crate::monitor::CoreConfig;
#[cfg(feature = "serde")]
use crate::stage::CLASS_R;
use crate::stage::{RequestPolicy, RouterConfig};

/// Largest interface capacity accepted: 1 Pbit/s.
pub const MAX_CAPACITY_BPS: u64 = 1_000_000_000_000_000;
/// Largest steady reservation table.
pub const MAX_STEADY: usize = 1 << 20;
/// Largest ephemeral reservation table.
pub const MAX_EPHEMERAL: usize = 1 << 24;
/// Longest monitoring window or burst allowance: one hour, in ns.
pub const MAX_WINDOW_NS: u64 = 3_600 * 1_000_000_000;
/// Largest overuse margin, percent.
pub const MAX_MARGIN_PCT: u32 = 10_000;
/// Largest suspect or blacklist table.
pub const MAX_MONITOR_TABLE: usize = 1 << 24;
/// Largest request bucket table (`request_limit.max_paths`): one bucket
/// per steady path and egress interface, as many as [`MAX_STEADY`].
pub const MAX_REQUEST_PATHS: usize = MAX_STEADY;
/// Longest request burst (`request_limit.burst_ms`): one minute, in ns.
pub const MAX_REQUEST_BURST_NS: u64 = 60 * 1_000_000_000;

/// `sibra-transit`: verify, monitor and forward data packets.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct TransitConfig {
    /// The AS's SOF key (32 hex digits in the file).
    pub key: Key,
    /// Interface ↔ port bindings (as `scion-forward`'s).
    pub interfaces: Vec<IfBinding>,
    /// Port for packets whose path ends in this AS.
    #[cfg_attr(feature = "serde", serde(default))]
    pub local_port: u16,
    /// Traffic class of verified packets (default 1: Z-Lane's R).
    #[cfg_attr(feature = "serde", serde(default = "class_r"))]
    pub class: u8,
    /// Reservation requests: `skip` (left for `sibra-control`) or `to-control`.
    #[cfg_attr(feature = "serde", serde(default))]
    pub requests: RequestPolicy,
    /// The overuse monitor (every field optional, defaults as [`CoreConfig`]).
    #[cfg_attr(feature = "serde", serde(default))]
    pub monitor: CoreConfig,
}

/// One interface of `sibra-control`: its binding and admission capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct ControlInterface {
    /// SCION interface ID (non-zero).
    pub ifid: u16,
    /// Router port (below 65535).
    pub port: u16,
    /// Capacity per direction, bit/s (1..=[`MAX_CAPACITY_BPS`]).
    pub capacity_bps: u64,
}

/// `sibra-control`: reservation requests (admission and SOF insertion in
/// place, or hand-off to the control plane) with this AS's admission state.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(deny_unknown_fields))]
pub struct ControlConfig {
    /// The AS's SOF key (32 hex digits in the file).
    pub key: Key,
    /// Interfaces with their capacities.
    pub interfaces: Vec<ControlInterface>,
    /// Port for requests whose path ends in this AS.
    #[cfg_attr(feature = "serde", serde(default))]
    pub local_port: u16,
    /// Traffic class of forwarded requests (default 1: Z-Lane's R).
    #[cfg_attr(feature = "serde", serde(default = "class_r"))]
    pub class: u8,
    /// Capacity split of every interface (default 80/15/5).
    #[cfg_attr(feature = "serde", serde(default))]
    pub split: Split,
    /// Most steady reservations held (1..=[`MAX_STEADY`]).
    #[cfg_attr(feature = "serde", serde(default = "max_steady"))]
    pub max_steady: usize,
    /// Most ephemeral reservations held (1..=[`MAX_EPHEMERAL`]).
    #[cfg_attr(feature = "serde", serde(default = "max_ephemeral"))]
    pub max_ephemeral: usize,
    /// Hand every request to the control plane instead of admitting in place.
    #[cfg_attr(feature = "serde", serde(default))]
    pub hand_off: bool,
    /// The request channel (every field optional, defaults as
    /// [`RequestLimit`]: on, 5%).
    #[cfg_attr(feature = "serde", serde(default))]
    pub request_limit: RequestLimit,
}

/// The request channel of `sibra-control` (its `request_limit` table, every
/// field optional): ephemeral setup requests leaving on an interface may
/// use at most `share_pct` of its capacity, each steady path its part
/// weighted by its steady bandwidth (the
/// [`RequestLimiter`](crate::admission::RequestLimiter)); requests over
/// their path's rate are dropped before admission (`channel_cap`).
///
/// ```toml
/// request_limit = { share_pct = 5, burst_ms = 1000, per_path = true, max_paths = 65536 }
/// request_limit = { enabled = false }   # no request channel
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize), serde(default, deny_unknown_fields))]
pub struct RequestLimit {
    /// Police requests at all (default true).
    pub enabled: bool,
    /// Share of each interface's capacity for requests, percent (1..=100,
    /// default 5).
    pub share_pct: u32,
    /// Burst a path may save up, as time at its rate (`burst_ms` in the
    /// file, 1 ms..=60 s, default 1 s). It must hold one request at the
    /// path's rate, or the path never passes one.
    #[cfg_attr(
        feature = "serde",
        serde(rename = "burst_ms", deserialize_with = "crate::config::ms_as_ns")
    )]
    pub burst_ns: u64,
    /// Weight the share by steady path (default true); `false` enforces
    /// only the aggregate per interface, first come, first served.
    pub per_path: bool,
    /// Most buckets held, one per steady path and egress interface
    /// (1..=[`MAX_REQUEST_PATHS`], default 65536).
    pub max_paths: usize,
}

impl Default for RequestLimit {
    fn default() -> Self {
        let d = RequestLimitConfig::default();
        RequestLimit {
            enabled: true,
            share_pct: u32::from(d.share_pct),
            burst_ns: d.burst_ns,
            per_path: d.per_path,
            max_paths: d.max_paths,
        }
    }
}

impl RequestLimit {
    /// The limiter's configuration (a validated share fits its percent;
    /// larger values saturate, which the limiter refuses).
    pub fn limiter_config(&self) -> RequestLimitConfig {
        RequestLimitConfig {
            share_pct: u8::try_from(self.share_pct).unwrap_or(u8::MAX),
            burst_ns: self.burst_ns,
            per_path: self.per_path,
            max_paths: self.max_paths,
        }
    }
}

#[cfg(feature = "serde")]
fn class_r() -> u8 {
    CLASS_R.0
}

#[cfg(feature = "serde")]
fn max_steady() -> usize {
    AdmissionConfig::default().max_steady
}

#[cfg(feature = "serde")]
fn max_ephemeral() -> usize {
    AdmissionConfig::default().max_ephemeral
}

/// Deserializes a time given in milliseconds into nanoseconds (refusing
/// what does not fit).
#[cfg(feature = "serde")]
pub(crate) fn ms_as_ns<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let ms = <u64 as serde::Deserialize>::deserialize(d)?;
    ms.checked_mul(1_000_000).ok_or_else(|| {
        <D::Error as serde::de::Error>::custom(format!("{ms} ms does not fit in 64-bit ns"))
    })
}

impl TransitConfig {
    /// The interface table and forwarding parameters of the stage.
    pub fn router(&self) -> RouterConfig {
        router(&self.interfaces, self.local_port, self.class)
    }

    /// Every port the configuration names, with its key (to check them
    /// against the router's ports).
    pub fn ports(&self) -> Vec<(String, u16)> {
        keyed_ports(self.interfaces.iter().map(|b| b.port), self.local_port)
    }
}

impl ControlConfig {
    /// The interface table and forwarding parameters of the stage.
    pub fn router(&self) -> RouterConfig {
        router(&self.bindings(), self.local_port, self.class)
    }

    /// The interface ↔ port bindings.
    pub fn bindings(&self) -> Vec<IfBinding> {
        self.interfaces.iter().map(|i| IfBinding { ifid: i.ifid, port: i.port }).collect()
    }

    /// The admission configuration: every interface with its capacity and
    /// the split; the table bounds.
    pub fn admission(&self) -> AdmissionConfig {
        AdmissionConfig {
            interfaces: self.admission_interfaces(),
            max_steady: self.max_steady,
            max_ephemeral: self.max_ephemeral,
            ..AdmissionConfig::default()
        }
    }

    /// The admission interfaces (capacity and split of each).
    pub fn admission_interfaces(&self) -> Vec<IfaceConfig> {
        let split = self.split;
        self.interfaces
            .iter()
            .map(|i| IfaceConfig { ifid: i.ifid, capacity_bps: i.capacity_bps, split })
            .collect()
    }

    /// Every port the configuration names, with its key.
    pub fn ports(&self) -> Vec<(String, u16)> {
        keyed_ports(self.interfaces.iter().map(|i| i.port), self.local_port)
    }
}

fn router(bindings: &[IfBinding], local_port: u16, class: u8) -> RouterConfig {
    RouterConfig {
        ifaces: InterfaceTable::from_bindings(bindings),
        local_port,
        class: Class(class),
    }
}

fn keyed_ports(ports: impl Iterator<Item = u16>, local_port: u16) -> Vec<(String, u16)> {
    let mut v: Vec<(String, u16)> =
        ports.enumerate().map(|(i, p)| (format!("interfaces[{i}].port"), p)).collect();
    v.push(("local_port".into(), local_port));
    v
}

fn in_bounds(key: &str, v: usize, lo: usize, hi: usize) -> Result<(), Invalid> {
    if (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err(Invalid::at(key, format!("{v} is not in {lo}..={hi}")))
    }
}

fn ms_in(key: &str, ns: u64, lo_ns: u64) -> Result<(), Invalid> {
    if (lo_ns..=MAX_WINDOW_NS).contains(&ns) {
        Ok(())
    } else {
        let ms = |v: u64| v / 1_000_000;
        Err(Invalid::at(
            key,
            format!("{} ms is not in {}..={} ms", ms(ns), ms(lo_ns), ms(MAX_WINDOW_NS)),
        ))
    }
}

impl Validate for CoreConfig {
    /// Keys as in the file (`window_ms`, `burst_ms`).
    fn validate(&self) -> Result<(), Invalid> {
        in_bounds("rows", self.rows, 1, 4)?;
        if !self.width.is_power_of_two() || self.width > 1 << 16 {
            return Err(Invalid::at(
                "width",
                format!("{} is not a power of two in 1..=65536", self.width),
            ));
        }
        ms_in("window_ms", self.window_ns, 1_000_000)?;
        ms_in("burst_ms", self.burst_ns, 0)?;
        if self.margin_pct > MAX_MARGIN_PCT {
            let m = self.margin_pct;
            return Err(Invalid::at("margin_pct", format!("{m} is not in 0..={MAX_MARGIN_PCT}")));
        }
        in_bounds("max_suspects", self.max_suspects, 1, MAX_MONITOR_TABLE)?;
        in_bounds("max_blacklist", self.max_blacklist, 1, MAX_MONITOR_TABLE)
    }
}

impl Validate for Split {
    /// Keys as in the file (`ephemeral`, `best_effort`, `steady`).
    fn validate(&self) -> Result<(), Invalid> {
        let parts = [
            ("ephemeral", self.ephemeral_pct),
            ("best_effort", self.best_effort_pct),
            ("steady", self.steady_pct),
        ];
        for (key, v) in parts {
            if v > 100 {
                return Err(Invalid::at(key, format!("{v}% is not in 0..=100")));
            }
        }
        if self.total() > 100 {
            return Err(Invalid::at(
                "",
                format!("the shares sum to {}%, more than 100%", self.total()),
            ));
        }
        Ok(())
    }
}

impl Validate for RequestLimit {
    /// Keys as in the file (`share_pct`, `burst_ms`, `max_paths`); checked
    /// when switched off too, so that switching it on cannot fail.
    fn validate(&self) -> Result<(), Invalid> {
        if !(1..=100).contains(&self.share_pct) {
            let v = self.share_pct;
            return Err(Invalid::at("share_pct", format!("{v}% is not in 1..=100")));
        }
        if !(1_000_000..=MAX_REQUEST_BURST_NS).contains(&self.burst_ns) {
            let ms = |v: u64| v / 1_000_000;
            return Err(Invalid::at(
                "burst_ms",
                format!("{} ms is not in 1..={} ms", ms(self.burst_ns), ms(MAX_REQUEST_BURST_NS)),
            ));
        }
        in_bounds("max_paths", self.max_paths, 1, MAX_REQUEST_PATHS)
    }
}

impl Validate for TransitConfig {
    fn validate(&self) -> Result<(), Invalid> {
        validate_bindings(&self.interfaces).map_err(|e| e.under("interfaces"))?;
        self.monitor.validate().map_err(|e| e.under("monitor"))
    }
}

impl Validate for ControlConfig {
    fn validate(&self) -> Result<(), Invalid> {
        validate_bindings(&self.bindings()).map_err(|e| e.under("interfaces"))?;
        for (i, c) in self.interfaces.iter().enumerate() {
            if !(1..=MAX_CAPACITY_BPS).contains(&c.capacity_bps) {
                return Err(Invalid::at(
                    format!("interfaces[{i}].capacity_bps"),
                    format!("{} is not in 1..={MAX_CAPACITY_BPS} bit/s", c.capacity_bps),
                ));
            }
        }
        self.split.validate().map_err(|e| e.under("split"))?;
        in_bounds("max_steady", self.max_steady, 1, MAX_STEADY)?;
        in_bounds("max_ephemeral", self.max_ephemeral, 1, MAX_EPHEMERAL)?;
        self.request_limit.validate().map_err(|e| e.under("request_limit"))
    }
}

#[cfg(all(test, feature = "serde"))]
mod tests {
    use super::*;

    fn parse<C: serde::de::DeserializeOwned>(s: &str) -> Result<C, String> {
        let t: toml::Table = toml::from_str(s).map_err(|e| e.to_string())?;
        toml::Value::Table(t).try_into::<C>().map_err(|e| e.to_string())
    }

    /// The `[[pipeline]]` tables of `kind` in a router configuration file,
    /// without their `kind` key.
    fn stages(file: &str, kind: &str) -> Vec<toml::Table> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let t: toml::Table = toml::from_str(&text).unwrap();
        let mut out = Vec::new();
        for s in t["pipeline"].as_array().unwrap() {
            let mut s = s.as_table().unwrap().clone();
            if s.remove("kind").and_then(|k| k.as_str().map(str::to_owned)).as_deref() == Some(kind)
            {
                out.push(s);
            }
        }
        out
    }

    const TRANSIT: &str = r#"
        key = "2b7e151628aed2a6abf7158809cf4f3c"
        interfaces = [{ ifid = 2, port = 0 }, { ifid = 3, port = 1 }]
    "#;
    const CONTROL: &str = r#"
        key = "000102030405060708090a0b0c0d0e0f"
        interfaces = [{ ifid = 1, port = 0, capacity_bps = 1000000000 }, { ifid = 2, port = 1, capacity_bps = 1000000000 }]
    "#;

    #[test]
    fn example_configs_parse_and_validate() {
        let mut n = 0;
        for file in ["config/sibra-transit.toml", "config/scion-border.toml"] {
            for t in stages(file, "sibra-transit") {
                let c: TransitConfig = toml::Value::Table(t).try_into().unwrap();
                c.validate().unwrap();
                assert_eq!(
                    c.interfaces,
                    [IfBinding { ifid: 2, port: 0 }, IfBinding { ifid: 3, port: 1 }]
                );
                // The SIBRA example hands requests to its slow path.
                let requests = if file.contains("sibra-transit") {
                    RequestPolicy::ToControl
                } else {
                    RequestPolicy::Skip
                };
                assert_eq!((c.class, c.requests, c.monitor), (1, requests, CoreConfig::default()));
                n += 1;
            }
        }
        assert_eq!(n, 2);
        // The tables of the end-to-end control tests.
        let c: TransitConfig = parse(TRANSIT).unwrap();
        c.validate().unwrap();
        let c: ControlConfig = parse(CONTROL).unwrap();
        c.validate().unwrap();
        assert_eq!(
            (c.split, c.max_steady, c.max_ephemeral, c.hand_off),
            (Split::default(), 4096, 65_536, false)
        );
        // The request channel is on by default, at the 5% share.
        assert_eq!(c.request_limit, RequestLimit::default());
        assert_eq!(c.request_limit.limiter_config(), RequestLimitConfig::default());
        assert!(c.request_limit.enabled);
        assert_eq!(
            c.admission().interfaces[1],
            IfaceConfig { ifid: 2, capacity_bps: 1_000_000_000, split: Split::default() }
        );
    }

    #[test]
    fn every_field_parses() {
        let c: TransitConfig = parse(&format!(
            "{TRANSIT}\nlocal_port = 1\nclass = 3\nrequests = \"to-control\"\n\
             monitor = {{ rows = 2, width = 64, window_ms = 500, margin_pct = 20, burst_ms = 4, \
             max_suspects = 10, max_blacklist = 20, seed = 7 }}"
        ))
        .unwrap();
        c.validate().unwrap();
        let m = CoreConfig {
            rows: 2,
            width: 64,
            window_ns: 500_000_000,
            margin_pct: 20,
            burst_ns: 4_000_000,
            max_suspects: 10,
            max_blacklist: 20,
            seed: 7,
        };
        assert_eq!(
            (c.local_port, c.class, c.requests, c.monitor),
            (1, 3, RequestPolicy::ToControl, m)
        );
        assert_eq!(
            c.ports(),
            [
                ("interfaces[0].port".into(), 0),
                ("interfaces[1].port".into(), 1),
                ("local_port".into(), 1)
            ]
        );
        let c: ControlConfig = parse(&format!(
            "{CONTROL}\nsplit = {{ ephemeral = 70, best_effort = 20, steady = 10 }}\n\
             max_steady = 8\nmax_ephemeral = 9\nhand_off = true"
        ))
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.split, Split { ephemeral_pct: 70, best_effort_pct: 20, steady_pct: 10 });
        assert_eq!((c.max_steady, c.max_ephemeral, c.hand_off), (8, 9, true));
        let c: ControlConfig = parse(&format!(
            "{CONTROL}\nrequest_limit = {{ enabled = false, share_pct = 10, burst_ms = 250, \
             per_path = false, max_paths = 7 }}"
        ))
        .unwrap();
        c.validate().unwrap();
        let want = RequestLimit {
            enabled: false,
            share_pct: 10,
            burst_ns: 250_000_000,
            per_path: false,
            max_paths: 7,
        };
        assert_eq!(c.request_limit, want);
        assert_eq!(
            c.request_limit.limiter_config(),
            RequestLimitConfig {
                share_pct: 10,
                burst_ns: 250_000_000,
                per_path: false,
                max_paths: 7
            }
        );
        // Only the switch: the rest keeps its defaults.
        let c: ControlConfig =
            parse(&format!("{CONTROL}\nrequest_limit = {{ enabled = false }}")).unwrap();
        assert_eq!(c.request_limit, RequestLimit { enabled: false, ..RequestLimit::default() });
        // Secrets stay out of debug output.
        let dbg = format!("{c:?}{:?}", CoreConfig { seed: 0x1234_5678, ..CoreConfig::default() });
        assert!(!dbg.contains("000102") && !dbg.contains("305419896"), "{dbg}");
    }

    /// Each bad value is refused with its key.
    #[test]
    fn bad_values_name_their_key() {
        let transit = |extra: &str| -> String {
            match parse::<TransitConfig>(&format!("{TRANSIT}\n{extra}")) {
                Ok(c) => c.validate().unwrap_err().key,
                Err(e) => e,
            }
        };
        assert_eq!(transit("monitor = { rows = 0 }"), "monitor.rows");
        assert_eq!(transit("monitor = { rows = 5 }"), "monitor.rows");
        assert_eq!(transit("monitor = { width = 100 }"), "monitor.width");
        assert_eq!(transit("monitor = { width = 131072 }"), "monitor.width");
        assert_eq!(transit("monitor = { window_ms = 0 }"), "monitor.window_ms");
        assert_eq!(transit("monitor = { window_ms = 3600001 }"), "monitor.window_ms");
        assert_eq!(transit("monitor = { burst_ms = 3600001 }"), "monitor.burst_ms");
        assert_eq!(transit("monitor = { margin_pct = 10001 }"), "monitor.margin_pct");
        assert_eq!(transit("monitor = { max_suspects = 0 }"), "monitor.max_suspects");
        assert_eq!(transit("monitor = { max_blacklist = 0 }"), "monitor.max_blacklist");
        let bad_if = |ifs: &str| -> String {
            let c: TransitConfig =
                parse(&format!("key = \"2b7e151628aed2a6abf7158809cf4f3c\"\ninterfaces = {ifs}"))
                    .unwrap();
            c.validate().unwrap_err().key
        };
        assert_eq!(bad_if("[{ ifid = 0, port = 0 }]"), "interfaces[0].ifid");
        assert_eq!(bad_if("[{ ifid = 1, port = 65535 }]"), "interfaces[0].port");
        assert_eq!(
            bad_if("[{ ifid = 1, port = 0 }, { ifid = 1, port = 1 }]"),
            "interfaces[1].ifid"
        );
        assert_eq!(
            bad_if("[{ ifid = 1, port = 0 }, { ifid = 2, port = 0 }]"),
            "interfaces[1].port"
        );
        // Syntax and types: serde names the key.
        assert!(transit("requests = \"drop\"").contains("unknown variant"));
        assert!(transit("colour = 1").contains("unknown field"));
        assert!(parse::<TransitConfig>("key = \"00\"\ninterfaces = []")
            .unwrap_err()
            .contains("32 hex digits"));
        assert!(transit("monitor = { window_ms = 18446744073709551 }").contains("does not fit"));

        let control = |extra: &str| -> String {
            match parse::<ControlConfig>(&format!("{CONTROL}\n{extra}")) {
                Ok(c) => c.validate().unwrap_err().key,
                Err(e) => e,
            }
        };
        assert_eq!(control("split = { ephemeral = 90, best_effort = 15, steady = 5 }"), "split");
        assert_eq!(
            control("split = { ephemeral = 101, best_effort = 0, steady = 0 }"),
            "split.ephemeral"
        );
        assert_eq!(control("max_steady = 0"), "max_steady");
        assert_eq!(control("max_steady = 1048577"), "max_steady");
        assert_eq!(control("max_ephemeral = 0"), "max_ephemeral");
        for bad in [
            ("share_pct = 0", "share_pct"),
            ("share_pct = 101", "share_pct"),
            ("burst_ms = 0", "burst_ms"),
            ("burst_ms = 60001", "burst_ms"),
            ("max_paths = 0", "max_paths"),
            ("max_paths = 1048577", "max_paths"),
            // Checked when off too, so that switching it on cannot fail.
            ("enabled = false, share_pct = 0", "share_pct"),
        ] {
            let key = control(&format!("request_limit = {{ {} }}", bad.0));
            assert_eq!(key, format!("request_limit.{}", bad.1), "{}", bad.0);
        }
        assert!(control("request_limit = { share = 5 }").contains("unknown field"));
        assert!(control("request_limit = { share_pct = -1 }").contains("invalid value"));
        let e =
            parse::<ControlConfig>(&format!("{CONTROL}\nrequest_limit = {{ share_pct = 300 }}"))
                .unwrap()
                .validate()
                .unwrap_err();
        assert_eq!(e.to_string(), "`request_limit.share_pct`: 300% is not in 1..=100");
        let e = parse::<ControlConfig>(&format!("{CONTROL}\nrequest_limit = {{ burst_ms = 0 }}"))
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(e.to_string(), "`request_limit.burst_ms`: 0 ms is not in 1..=60000 ms");
        assert!(control("split = { steady = 5 }").contains("missing field"));
        let cap = |bps: u64| -> String {
            let c: ControlConfig = parse(&format!(
                "key = \"000102030405060708090a0b0c0d0e0f\"\ninterfaces = [{{ ifid = 1, port = 0, capacity_bps = {bps} }}]"
            ))
            .unwrap();
            c.validate().map_or_else(|e| e.key, |_| String::new())
        };
        assert_eq!(cap(0), "interfaces[0].capacity_bps");
        assert_eq!(cap(MAX_CAPACITY_BPS + 1), "interfaces[0].capacity_bps");
        assert_eq!(cap(MAX_CAPACITY_BPS), "");
        let e = parse::<ControlConfig>(&format!(
            "{CONTROL}\nsplit = {{ ephemeral = 95, best_effort = 5, steady = 5 }}"
        ))
        .unwrap()
        .validate()
        .unwrap_err();
        assert_eq!(e.to_string(), "`split`: the shares sum to 105%, more than 100%");
    }
}
