//! Parsing helpers shared by the adapters: AS numbers, error keys.

use runtime::ConfigError;

/// An ISD-AS such as `1-ff00:0:110` (at `key`).
#[cfg_attr(not(feature = "scion"), allow(dead_code))]
pub(crate) fn ia(key: &str, s: &str) -> Result<packet::Ia, ConfigError> {
    s.parse().map_err(|_| ConfigError::at(key, format!("`{s}` is not an ISD-AS")))
}

/// A configuration error at `key` from any error.
pub(crate) fn config_err(key: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::at(key, e.to_string())
}
