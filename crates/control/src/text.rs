//! Parsing and validating request fields shared by every service: ISD-AS
//! numbers, bit rates, prefixes, hex, TOML text.

use std::net::{Ipv4Addr, Ipv6Addr};

use packet::Ia;

use crate::error::CtlError;

/// Parses an ISD-AS (`1-ff00:0:110` or `1-64512`); ISD and AS must be non-zero.
pub fn parse_ia(field: &str, s: &str) -> Result<Ia, CtlError> {
    let ia: Ia = s.parse().map_err(|_| {
        CtlError::invalid(format!("{field}: `{s}` is not an ISD-AS (e.g. `1-ff00:0:110`)"))
    })?;
    if ia.isd() == 0 || ia.asn() == 0 {
        return Err(CtlError::invalid(format!(
            "{field}: `{s}` is a wildcard; name one ISD and AS"
        )));
    }
    Ok(ia)
}

/// Most a single rate may be (1 Tbit/s): larger values are typos.
pub const MAX_BPS: u64 = 1_000_000_000_000;

/// Validates a bit rate: in 1..=[`MAX_BPS`].
pub fn bps(field: &str, b: u64) -> Result<u64, CtlError> {
    if (1..=MAX_BPS).contains(&b) {
        Ok(b)
    } else {
        Err(CtlError::invalid(format!("{field}: {b} bit/s is not in 1..={MAX_BPS}")))
    }
}

/// An IPv4 or IPv6 prefix in `addr/len` form, host bits zero.
pub fn prefix(field: &str, s: &str) -> Result<String, CtlError> {
    let bad = |why: &str| CtlError::invalid(format!("{field}: `{s}` {why}"));
    let (addr, len) = s.split_once('/').ok_or_else(|| bad("is not `address/length`"))?;
    let len: u8 = len.parse().map_err(|_| bad("has no valid prefix length"))?;
    if let Ok(a) = addr.parse::<Ipv4Addr>() {
        if len > 32 {
            return Err(bad("has a prefix length above 32"));
        }
        let v = u32::from(a);
        if len < 32 && v << len != 0 {
            return Err(bad("has host bits set"));
        }
    } else if let Ok(a) = addr.parse::<Ipv6Addr>() {
        if len > 128 {
            return Err(bad("has a prefix length above 128"));
        }
        let v = u128::from(a);
        if len < 128 && v << len != 0 {
            return Err(bad("has host bits set"));
        }
    } else {
        return Err(bad("has no valid IPv4 or IPv6 address"));
    }
    Ok(s.to_string())
}

/// Decodes exactly `n` bytes of hex.
pub fn hex_bytes(field: &str, s: &str, n: usize) -> Result<Vec<u8>, CtlError> {
    if s.len() != 2 * n {
        return Err(CtlError::invalid(format!(
            "{field}: expected {} hex digits, got {}",
            2 * n,
            s.len()
        )));
    }
    hex_any(field, s)
}

/// Decodes hex of any even length.
pub fn hex_any(field: &str, s: &str) -> Result<Vec<u8>, CtlError> {
    // Byte slicing below needs ASCII (a multi-byte character would split).
    if let Some(i) = s.bytes().position(|b| !b.is_ascii()) {
        return Err(CtlError::invalid(format!("{field}: not hex at position {i}")));
    }
    if !s.len().is_multiple_of(2) {
        return Err(CtlError::invalid(format!("{field}: odd number of hex digits")));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16)
                .map_err(|_| CtlError::invalid(format!("{field}: not hex at position {i}")))
        })
        .collect()
}

/// Parses a TOML table given as text; `INVALID_ARGUMENT` names the field.
pub fn toml_table(field: &str, s: &str) -> Result<toml::Table, CtlError> {
    let t: toml::Table =
        toml::from_str(s).map_err(|e| CtlError::invalid(format!("{field}: {}", e.message())))?;
    if t.is_empty() {
        return Err(CtlError::invalid(format!("{field}: no keys given")));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_hex() {
        assert!(prefix("p", "10.0.0.0/8").is_ok());
        assert!(prefix("p", "2001:db8::/32").is_ok());
        assert!(prefix("p", "10.0.0.1/8").unwrap_err().to_string().contains("host bits"));
        assert!(prefix("p", "10.0.0.0/33").is_err());
        assert!(prefix("p", "10.0.0.0").is_err());
        assert_eq!(hex_bytes("k", "00ff", 2).unwrap(), vec![0, 255]);
        assert!(hex_bytes("k", "00ff", 3).is_err());
        assert!(hex_bytes("k", "0g", 1).is_err());
        assert!(toml_table("t", "").is_err());
        assert!(toml_table("t", "a = ").unwrap_err().to_string().starts_with("t: "));
    }

    #[test]
    fn hex_with_multibyte_characters_is_an_error_not_a_panic() {
        // "aéb" has an even byte length and a character across bytes 1..3.
        assert!(hex_any("h", "a\u{e9}b").unwrap_err().to_string().contains("position 1"));
        assert_eq!(hex_any("h", "00ff").unwrap(), vec![0, 0xff]);
    }
}
