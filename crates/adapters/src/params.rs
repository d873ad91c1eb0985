//! Parsing helpers shared by the adapters: key material, AS numbers.

use runtime::ConfigError;

/// Parses 16 bytes of key material from hex (at `key`).
pub(crate) fn key16(key: &str, hex_str: &str) -> Result<[u8; 16], ConfigError> {
    let v = hex::decode(hex_str.trim()).map_err(|e| config_err(key, e))?;
    v.try_into().map_err(|_| ConfigError::at(key, "needs 32 hex digits (16 bytes)"))
}

/// An ISD-AS such as `1-ff00:0:110` (at `key`).
#[cfg_attr(not(feature = "scion"), allow(dead_code))]
pub(crate) fn ia(key: &str, s: &str) -> Result<packet::Ia, ConfigError> {
    s.parse().map_err(|_| ConfigError::at(key, format!("`{s}` is not an ISD-AS")))
}

/// A configuration error at `key` from any error.
pub(crate) fn config_err(key: &str, e: impl std::fmt::Display) -> ConfigError {
    ConfigError::at(key, e.to_string())
}
