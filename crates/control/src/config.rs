//! `[control]`: where the control API listens, how it authenticates and
//! authorizes callers, what it records, and how it protects itself.
//!
//! ```toml
//! [control]
//! listen = "127.0.0.1:50051"          # gRPC (default; loopback)
//! metrics_listen = "127.0.0.1:9464"   # Prometheus text; "" disables it
//! token_file = "/etc/router/control.token"          # admin bearer token
//! read_token_file = "/etc/router/control-read.token" # read-only bearer token
//! allow_unauthenticated = false       # only honoured on loopback
//! allow_plaintext = false             # serve without TLS off loopback
//! audit_log = "/var/log/router/audit.jsonl"   # default: standard error
//! # relative file paths are resolved against the configuration file's directory
//! reflection = true
//! apply_timeout_ms = 2000
//! concurrency_limit = 32
//! max_connections = 64
//! handshake_timeout_ms = 10000
//! idle_timeout_ms = 300000
//! max_connection_age_ms = 3600000
//! keepalive_interval_ms = 30000
//! keepalive_timeout_ms = 10000
//! shutdown_timeout_ms = 2000
//! mutations_per_second = 20           # per caller; 0 = no limit
//! mutation_burst = 40
//! [control.tls]                       # gRPC and /metrics over TLS (rustls)
//! cert_chain = "/etc/router/control.crt"   # PEM, leaf first
//! key = "/etc/router/control.key"          # PEM (PKCS#8, PKCS#1 or SEC1)
//! client_ca = "/etc/router/clients-ca.crt" # optional: require client certificates
//! [[control.clients]]                 # with client_ca: certificate subject -> role
//! subject = "CN=ops"
//! role = "admin"
//! [[control.clients]]
//! subject = "CN=prometheus"
//! role = "read"
//! [control.fair]                      # a protocol's own table (here: FAIR's
//! asn = 101                           # protest verifier), read by its adapter
//! signing_key_file = "/etc/router/fair.ed25519"
//! ```
//!
//! Roles: `read` may call the methods that only read (status, counters,
//! list/get calls, reflection, `/metrics`); `admin` may call every method.
//! A caller's role is the highest its credentials give: the admin token
//! (`token_file`), the read token (`read_token_file`), or its client
//! certificate's `[[control.clients]]` entry. Token files are re-read when
//! they change (checked at most once per second, on a request).

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
    /// File holding the admin bearer token (trimmed; at least 16 bytes, at most 256).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// File holding the read-only bearer token (same rules; must differ
    /// from the admin token).
    #[serde(default)]
    pub read_token_file: Option<PathBuf>,
    /// Serve without authentication (refused unless `listen` is loopback and
    /// no credential is configured); every caller is then admin.
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// TLS for gRPC and `/metrics` (`[control.tls]`).
    #[serde(default)]
    pub tls: Option<TlsConfig>,
    /// Serve without TLS on a non-loopback address (refused without this).
    #[serde(default)]
    pub allow_plaintext: bool,
    /// Client-certificate subjects and their roles (`[[control.clients]]`;
    /// needs `tls.client_ca`).
    #[serde(default)]
    pub clients: Vec<ClientRule>,
    /// Where audit lines go (JSON lines, appended); standard error without it.
    #[serde(default)]
    pub audit_log: Option<PathBuf>,
    /// Serve gRPC reflection (a caller without a credential sees only health).
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
    /// without this (or `metrics_auth`, or client certificates), so that
    /// counters are not published by accident.
    #[serde(default)]
    pub public_metrics: bool,
    /// `/metrics` asks for a read or admin credential: a bearer token, or a
    /// client certificate listed in `[[control.clients]]`.
    #[serde(default)]
    pub metrics_auth: bool,
    /// Connections open at once, per listener (gRPC, metrics); further
    /// clients wait in the kernel's backlog.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Time a new connection has to finish its TLS handshake and send its
    /// first request.
    #[serde(default = "default_handshake_timeout")]
    pub handshake_timeout_ms: u64,
    /// A connection with no request in flight for this long is closed.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_ms: u64,
    /// gRPC connections are closed (gracefully) after this long; 0 = never.
    #[serde(default = "default_max_age")]
    pub max_connection_age_ms: u64,
    /// HTTP/2 keepalive pings every this long; 0 = none.
    #[serde(default = "default_keepalive_interval")]
    pub keepalive_interval_ms: u64,
    /// A keepalive ping not answered in this time closes the connection.
    #[serde(default = "default_keepalive_timeout")]
    pub keepalive_timeout_ms: u64,
    /// On shutdown, in-flight requests get this long; then every connection
    /// is closed.
    #[serde(default = "default_shutdown_timeout")]
    pub shutdown_timeout_ms: u64,
    /// Mutating calls per second per caller (token bucket); 0 = no limit.
    #[serde(default = "default_mutation_rate")]
    pub mutations_per_second: u32,
    /// Mutating calls a caller may make at once before the rate applies.
    #[serde(default = "default_mutation_burst")]
    pub mutation_burst: u32,
    /// `[control.<protocol>]` tables (e.g. `[control.fair]`), each read by
    /// that protocol's control service ([`crate::Services`]).
    #[serde(skip)]
    pub protocols: BTreeMap<String, toml::Table>,
}

/// `[control.tls]`: the server's certificate and, for mutual TLS, the CA
/// that signs client certificates.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, leaf first.
    pub cert_chain: PathBuf,
    /// PEM private key of the leaf (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificate(s): with it, every client (gRPC and `/metrics`)
    /// must present a certificate it signed that is valid now.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

/// A caller's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Status, counters, list and get calls, reflection, metrics.
    Read,
    /// Every call, including changes.
    Admin,
}

impl Role {
    /// `read` or `admin`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[[control.clients]]`: client certificates whose subject matches get `role`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientRule {
    /// Subject pattern, e.g. `"CN=ops"` (see [`crate::subject`]).
    pub subject: String,
    /// `read` or `admin`.
    pub role: Role,
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
fn default_max_connections() -> usize {
    64
}
fn default_handshake_timeout() -> u64 {
    10_000
}
fn default_idle_timeout() -> u64 {
    300_000
}
fn default_max_age() -> u64 {
    3_600_000
}
fn default_keepalive_interval() -> u64 {
    30_000
}
fn default_keepalive_timeout() -> u64 {
    10_000
}
fn default_shutdown_timeout() -> u64 {
    2000
}
fn default_mutation_rate() -> u32 {
    20
}
fn default_mutation_burst() -> u32 {
    40
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
            read_token_file: None,
            allow_unauthenticated: false,
            tls: None,
            allow_plaintext: false,
            clients: Vec::new(),
            audit_log: None,
            reflection: true,
            apply_timeout_ms: default_apply_timeout(),
            concurrency_limit: default_concurrency(),
            public_metrics: false,
            metrics_auth: false,
            max_connections: default_max_connections(),
            handshake_timeout_ms: default_handshake_timeout(),
            idle_timeout_ms: default_idle_timeout(),
            max_connection_age_ms: default_max_age(),
            keepalive_interval_ms: default_keepalive_interval(),
            keepalive_timeout_ms: default_keepalive_timeout(),
            shutdown_timeout_ms: default_shutdown_timeout(),
            mutations_per_second: default_mutation_rate(),
            mutation_burst: default_mutation_burst(),
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

/// Sub-tables of `[control]` that are its own keys, not a protocol's table.
const OWN_TABLES: &[&str] = &["tls"];

impl ControlConfig {
    /// Resolves the relative file paths of the section (token files, audit
    /// log, TLS files) with `resolve`, e.g. against the directory of the
    /// configuration file, as every other path of a router configuration.
    pub fn resolve_paths(&mut self, resolve: impl Fn(&std::path::Path) -> PathBuf) {
        for p in [&mut self.token_file, &mut self.read_token_file, &mut self.audit_log]
            .into_iter()
            .flatten()
        {
            *p = resolve(p);
        }
        if let Some(t) = &mut self.tls {
            t.cert_chain = resolve(&t.cert_chain);
            t.key = resolve(&t.key);
            if let Some(ca) = &mut t.client_ca {
                *ca = resolve(ca);
            }
        }
    }

    /// Deserializes and validates the `[control]` table.
    /// Sub-tables (`[control.<protocol>]`) go to [`ControlConfig::protocols`].
    pub fn from_toml(t: &toml::Table) -> Result<Self, ControlConfigError> {
        let (tables, keys): (toml::Table, toml::Table) = t
            .clone()
            .into_iter()
            .partition(|(k, v)| v.is_table() && !OWN_TABLES.contains(&k.as_str()));
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

    /// Whether any credential (token file, client-certificate roles) is configured.
    pub fn has_credentials(&self) -> bool {
        self.token_file.is_some() || self.read_token_file.is_some() || !self.clients.is_empty()
    }

    /// Whether clients must present certificates (`tls.client_ca` is set).
    pub fn mutual_tls(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.client_ca.is_some())
    }

    /// Checks the combination of settings.
    pub fn validate(&self) -> Result<(), ControlConfigError> {
        let err =
            |key: &str, reason: &str| ControlConfigError { key: key.into(), reason: reason.into() };
        if !self.has_credentials() {
            if !self.allow_unauthenticated {
                return Err(err(
                    "token_file",
                    "required (or client certificates with [[control.clients]], or set \
                     allow_unauthenticated = true on a loopback address)",
                ));
            }
            if !self.listen.ip().is_loopback() {
                return Err(err(
                    "allow_unauthenticated",
                    "only allowed when `listen` is a loopback address",
                ));
            }
        }
        if self.tls.is_none() && !self.allow_plaintext {
            for (key, addr) in
                [("listen", Some(self.listen)), ("metrics_listen", self.metrics_listen)]
            {
                if let Some(a) = addr.filter(|a| !a.ip().is_loopback()) {
                    return Err(ControlConfigError {
                        key: key.into(),
                        reason: format!(
                            "{a} is not a loopback address: serve TLS ([control.tls] cert_chain \
                             and key), or set allow_plaintext = true to serve plaintext on purpose"
                        ),
                    });
                }
            }
        }
        if !self.clients.is_empty() && !self.mutual_tls() {
            return Err(err(
                "clients",
                "client-certificate roles need client certificates: set tls.client_ca",
            ));
        }
        for (i, c) in self.clients.iter().enumerate() {
            let p: crate::subject::SubjectPattern = c.subject.parse().map_err(|e| {
                ControlConfigError { key: format!("clients[{i}].subject"), reason: e }
            })?;
            if let Some(j) = self.clients[..i].iter().position(|o| {
                o.subject.parse::<crate::subject::SubjectPattern>().ok() == Some(p.clone())
            }) {
                return Err(ControlConfigError {
                    key: format!("clients[{i}].subject"),
                    reason: format!("the same subject as clients[{j}]"),
                });
            }
        }
        if self.token_file.is_some() && self.token_file == self.read_token_file {
            return Err(err("read_token_file", "is the same file as token_file"));
        }
        if !(1..=60_000).contains(&self.apply_timeout_ms) {
            return Err(err("apply_timeout_ms", "must be in 1..=60000"));
        }
        if !(1..=4096).contains(&self.concurrency_limit) {
            return Err(err("concurrency_limit", "must be in 1..=4096"));
        }
        if !(1..=65_536).contains(&self.max_connections) {
            return Err(err("max_connections", "must be in 1..=65536"));
        }
        let ranges: [(&str, u64, u64, u64); 6] = [
            ("handshake_timeout_ms", self.handshake_timeout_ms, 100, 600_000),
            ("idle_timeout_ms", self.idle_timeout_ms, 1000, 86_400_000),
            ("keepalive_timeout_ms", self.keepalive_timeout_ms, 100, 600_000),
            ("shutdown_timeout_ms", self.shutdown_timeout_ms, 0, 60_000),
            ("max_connection_age_ms", self.max_connection_age_ms, 0, 30 * 86_400_000),
            ("keepalive_interval_ms", self.keepalive_interval_ms, 0, 86_400_000),
        ];
        for (key, v, lo, hi) in ranges {
            if !(lo..=hi).contains(&v) {
                return Err(ControlConfigError {
                    key: key.into(),
                    reason: format!("must be in {lo}..={hi}"),
                });
            }
        }
        if self.max_connection_age_ms != 0 && self.max_connection_age_ms < 1000 {
            return Err(err("max_connection_age_ms", "must be 0 (no limit) or at least 1000"));
        }
        if self.keepalive_interval_ms != 0 && self.keepalive_interval_ms < 1000 {
            return Err(err("keepalive_interval_ms", "must be 0 (no pings) or at least 1000"));
        }
        if self.mutations_per_second > 100_000 {
            return Err(err("mutations_per_second", "must be in 0..=100000 (0: no limit)"));
        }
        if self.mutations_per_second > 0 && !(1..=100_000).contains(&self.mutation_burst) {
            return Err(err("mutation_burst", "must be in 1..=100000"));
        }
        if let Some(m) = self.metrics_listen {
            if !m.ip().is_loopback() && !self.public_metrics && !self.metrics_auth {
                return Err(err(
                    "metrics_listen",
                    "serves counters without authentication: use a loopback address, set \
                     metrics_auth = true to ask for a credential, or set public_metrics = true \
                     to publish them on purpose",
                ));
            }
            if m == self.listen && m.port() != 0 {
                return Err(err("metrics_listen", "is the same address as `listen`"));
            }
        }
        if self.metrics_auth && !self.has_credentials() {
            return Err(err(
                "metrics_auth",
                "needs a credential: token_file, read_token_file or [[control.clients]]",
            ));
        }
        Ok(())
    }

    /// Checks what `validate` cannot see from the table: the token files
    /// exist, are readable and hold acceptable (and distinct) tokens, the TLS
    /// files hold a matching certificate chain and key, the audit log can be
    /// written (what serving would need; `router check` runs it).
    pub fn check_resources(&self) -> Result<(), ControlConfigError> {
        crate::auth::Auth::from_config(self).map_err(|e| ControlConfigError {
            key: e.key.to_string(),
            reason: format!("`{}`: {}", e.file, e.reason),
        })?;
        if let Some(t) = &self.tls {
            crate::tls::load(t).map_err(|e| ControlConfigError {
                key: e.key.to_string(),
                reason: format!("`{}`: {}", e.file, e.reason),
            })?;
        }
        if let Some(p) = &self.audit_log {
            crate::audit::check_path(p).map_err(|reason| ControlConfigError {
                key: "audit_log".into(),
                reason: format!("`{}`: {reason}", p.display()),
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
    fn plaintext_off_loopback_needs_tls_or_allow_plaintext() {
        let t: toml::Table =
            toml::from_str("listen = \"0.0.0.0:50051\"\ntoken_file = \"t\"").unwrap();
        let e = ControlConfig::from_toml(&t).unwrap_err();
        assert_eq!(e.key, "listen");
        assert!(e.reason.contains("allow_plaintext") && e.reason.contains("control.tls"), "{e}");
        let t: toml::Table = toml::from_str(
            "listen = \"0.0.0.0:50051\"\ntoken_file = \"t\"\nallow_plaintext = true",
        )
        .unwrap();
        assert!(ControlConfig::from_toml(&t).is_ok());
        let t: toml::Table = toml::from_str(
            "listen = \"0.0.0.0:50051\"\ntoken_file = \"t\"\n[tls]\ncert_chain = \"c\"\nkey = \"k\"",
        )
        .unwrap();
        let c = ControlConfig::from_toml(&t).unwrap();
        assert!(c.protocols.is_empty() && c.tls.is_some() && !c.mutual_tls());
        let t: toml::Table = toml::from_str(
            "token_file = \"t\"\nmetrics_listen = \"0.0.0.0:9464\"\npublic_metrics = true",
        )
        .unwrap();
        assert_eq!(ControlConfig::from_toml(&t).unwrap_err().key, "metrics_listen");
    }

    #[test]
    fn client_roles_need_client_certificates_and_valid_subjects() {
        let base = "[tls]\ncert_chain = \"c\"\nkey = \"k\"\n";
        let t: toml::Table =
            toml::from_str(&format!("{base}[[clients]]\nsubject = \"CN=ops\"\nrole = \"admin\""))
                .unwrap();
        assert_eq!(ControlConfig::from_toml(&t).unwrap_err().key, "clients");
        let ca = "[tls]\ncert_chain = \"c\"\nkey = \"k\"\nclient_ca = \"ca\"\n";
        let t: toml::Table = toml::from_str(&format!(
            "{ca}[[clients]]\nsubject = \"CN=ops\"\nrole = \"admin\"\n\
             [[clients]]\nsubject = \"CN=prom\"\nrole = \"read\""
        ))
        .unwrap();
        let c = ControlConfig::from_toml(&t).unwrap();
        assert_eq!(c.clients[1].role, Role::Read);
        assert!(c.has_credentials() && c.mutual_tls());
        let t: toml::Table =
            toml::from_str(&format!("{ca}[[clients]]\nsubject = \"XN=ops\"\nrole = \"admin\""))
                .unwrap();
        assert_eq!(ControlConfig::from_toml(&t).unwrap_err().key, "clients[0].subject");
        let t: toml::Table =
            toml::from_str(&format!("{ca}[[clients]]\nsubject = \"CN=ops\"\nrole = \"root\""))
                .unwrap();
        assert!(ControlConfig::from_toml(&t).unwrap_err().reason.contains("root"));
    }

    #[test]
    fn availability_settings_are_bounded() {
        for bad in [
            "max_connections = 0",
            "idle_timeout_ms = 10",
            "shutdown_timeout_ms = 100000",
            "max_connection_age_ms = 10",
            "keepalive_interval_ms = 5",
            "mutations_per_second = 1000000",
            "mutation_burst = 0",
        ] {
            let t: toml::Table = toml::from_str(&format!("token_file = \"t\"\n{bad}")).unwrap();
            let e = ControlConfig::from_toml(&t).unwrap_err();
            assert_eq!(e.key, bad.split(' ').next().unwrap(), "{bad}: {e}");
        }
    }

    #[test]
    fn metrics_can_be_disabled_and_unknown_keys_are_rejected() {
        let t: toml::Table = toml::from_str("metrics_listen = \"\"\ntoken_file = \"t\"").unwrap();
        assert!(ControlConfig::from_toml(&t).unwrap().metrics_listen.is_none());
        let t: toml::Table = toml::from_str("token_file = \"t\"\nlisten_port = 1").unwrap();
        assert!(ControlConfig::from_toml(&t).unwrap_err().reason.contains("listen_port"));
    }
}
