//! `[control]`: where the control API listens and how it authenticates.
//!
//! ```toml
//! [control]
//! listen = "127.0.0.1:50051"          # gRPC (default; loopback)
//! metrics_listen = "127.0.0.1:9464"   # Prometheus text; "" disables it
//! token_file = "/etc/router/control.token"
//! allow_unauthenticated = false       # only honoured on loopback
//! reflection = true
//! apply_timeout_ms = 2000
//! concurrency_limit = 32
//! [control.fair]                      # a protocol's own table (here: FAIR's
//! asn = 101                           # protest verifier), read by its adapter
//! signing_key_file = "/etc/router/fair.ed25519"
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// Configuration of the control API (the `[control]` table of the router config).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    /// gRPC listen address (default `127.0.0.1:50051`).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Prometheus text endpoint (default `127.0.0.1:9464`); empty string disables it.
    #[serde(default = "default_metrics", deserialize_with = "opt_addr")]
    pub metrics_listen: Option<SocketAddr>,
    /// File holding the bearer token (trimmed; at least 16 bytes, at most 256).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// Serve without authentication (refused unless `listen` is loopback).
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// Serve gRPC reflection (authenticated like the other services).
    #[serde(default = "yes")]
    pub reflection: bool,
    /// How long a change may take to reach every worker (pass
    /// [`ControlConfig::apply_timeout`] to [`crate::Plane::with_timeout`]).
    #[serde(default = "default_apply_timeout")]
    pub apply_timeout_ms: u64,
    /// Concurrent requests per connection (bounds what a flood can queue).
    #[serde(default = "default_concurrency")]
    pub concurrency_limit: usize,
    /// Serve `/metrics` (unauthenticated) on a non-loopback address; refused
    /// without this, so that counters are not published by accident.
    #[serde(default)]
    pub public_metrics: bool,
    /// `[control.<protocol>]` tables (e.g. `[control.fair]`), each read by
    /// that protocol's control service ([`crate::Services`]).
    #[serde(skip)]
    pub protocols: BTreeMap<String, toml::Table>,
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 50051))
}
fn default_metrics() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 9464)))
}
fn yes() -> bool {
    true
}
fn default_apply_timeout() -> u64 {
    2000
}
fn default_concurrency() -> usize {
    32
}

fn opt_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Ok(None);
    }
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            listen: default_listen(),
            metrics_listen: default_metrics(),
            token_file: None,
            allow_unauthenticated: false,
            reflection: true,
            apply_timeout_ms: default_apply_timeout(),
            concurrency_limit: default_concurrency(),
            public_metrics: false,
            protocols: BTreeMap::new(),
        }
    }
}

/// A `[control]` table that does not deserialize or validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("control.{key}: {reason}")]
pub struct ControlConfigError {
    /// Key under `control`.
    pub key: String,
    /// Why it is wrong.
    pub reason: String,
}

impl ControlConfig {
    /// Deserializes and validates the `[control]` table.
    /// Sub-tables (`[control.<protocol>]`) go to [`ControlConfig::protocols`].
    pub fn from_toml(t: &toml::Table) -> Result<Self, ControlConfigError> {
        let (tables, keys): (toml::Table, toml::Table) =
            t.clone().into_iter().partition(|(_, v)| v.is_table());
        let mut c: ControlConfig = keys.try_into().map_err(|e: toml::de::Error| {
            ControlConfigError { key: String::new(), reason: e.message().to_string() }
        })?;
        c.protocols = tables
            .into_iter()
            .filter_map(|(k, v)| match v {
                toml::Value::Table(t) => Some((k, t)),
                _ => None,
            })
            .collect();
        c.validate()?;
        Ok(c)
    }

    /// Checks the combination of settings.
    pub fn validate(&self) -> Result<(), ControlConfigError> {
        let err =
            |key: &str, reason: &str| ControlConfigError { key: key.into(), reason: reason.into() };
        if self.token_file.is_none() {
            if !self.allow_unauthenticated {
                return Err(err(
                    "token_file",
                    "required (or set allow_unauthenticated = true on a loopback address)",
                ));
            }
            if !self.listen.ip().is_loopback() {
                return Err(err(
                    "allow_unauthenticated",
                    "only allowed when `listen` is a loopback address",
                ));
            }
        }
        if !(1..=60_000).contains(&self.apply_timeout_ms) {
            return Err(err("apply_timeout_ms", "must be in 1..=60000"));
        }
        if !(1..=4096).contains(&self.concurrency_limit) {
            return Err(err("concurrency_limit", "must be in 1..=4096"));
        }
        if let Some(m) = self.metrics_listen {
            if !m.ip().is_loopback() && !self.public_metrics {
                return Err(err(
                    "metrics_listen",
                    "serves counters without authentication: use a loopback address, or set \
                     public_metrics = true to publish them on purpose",
                ));
            }
            if m == self.listen && m.port() != 0 {
                return Err(err("metrics_listen", "is the same address as `listen`"));
            }
        }
        Ok(())
    }

    /// Checks what `validate` cannot see from the table: the token file
    /// exists, is readable and holds an acceptable token (what serving
    /// would need; `router check` runs it).
    pub fn check_resources(&self) -> Result<(), ControlConfigError> {
        if let Some(f) = &self.token_file {
            crate::auth::Auth::from_file(f).map_err(|e| ControlConfigError {
                key: "token_file".into(),
                reason: format!("`{}`: {}", e.file, e.reason),
            })?;
        }
        Ok(())
    }

    /// The apply timeout as a duration.
    pub fn apply_timeout(&self) -> Duration {
        Duration::from_millis(self.apply_timeout_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_loopback_and_need_a_token() {
        let t: toml::Table = toml::from_str("").unwrap();
        let e = ControlConfig::from_toml(&t).unwrap_err();
        assert_eq!(e.key, "token_file");
        let t: toml::Table = toml::from_str("allow_unauthenticated = true").unwrap();
        let c = ControlConfig::from_toml(&t).unwrap();
        assert!(c.listen.ip().is_loopback());
        assert_eq!(c.metrics_listen.unwrap().port(), 9464);
    }

    #[test]
    fn unauthenticated_is_refused_off_loopback() {
        let t: toml::Table =
            toml::from_str("listen = \"0.0.0.0:50051\"\nallow_unauthenticated = true").unwrap();
        assert_eq!(ControlConfig::from_toml(&t).unwrap_err().key, "allow_unauthenticated");
    }

    #[test]
    fn metrics_can_be_disabled_and_unknown_keys_are_rejected() {
        let t: toml::Table = toml::from_str("metrics_listen = \"\"\ntoken_file = \"t\"").unwrap();
        assert!(ControlConfig::from_toml(&t).unwrap().metrics_listen.is_none());
        let t: toml::Table = toml::from_str("token_file = \"t\"\nlisten_port = 1").unwrap();
        assert!(ControlConfig::from_toml(&t).unwrap_err().reason.contains("listen_port"));
    }
}
