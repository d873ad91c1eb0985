//! ISD-AS identifiers (`IA`) as SCION encodes and prints them.

use core::fmt;
use core::str::FromStr;

use crate::{Error, Result};

/// A SCION ISD-AS pair: 16-bit ISD then 48-bit AS number, packed into 64 bits
/// exactly as in the SCION address header (big-endian on the wire).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ia(u64);

/// Largest AS number (48 bits).
pub const MAX_AS: u64 = (1 << 48) - 1;
/// AS numbers up to this value are BGP-compatible and printed in decimal.
const MAX_BGP_AS: u64 = u32::MAX as u64;

impl Ia {
    /// Builds an IA from its ISD and (48-bit) AS number; the AS is truncated to 48 bits.
    pub const fn new(isd: u16, asn: u64) -> Self {
        Ia(((isd as u64) << 48) | (asn & MAX_AS))
    }

    /// The IA from its 64-bit packed form.
    pub const fn from_u64(raw: u64) -> Self {
        Ia(raw)
    }

    /// The 64-bit packed form (ISD in the top 16 bits).
    pub const fn to_u64(self) -> u64 {
        self.0
    }

    /// The 8-byte big-endian wire encoding.
    pub const fn to_bytes(self) -> [u8; 8] {
        self.0.to_be_bytes()
    }

    /// Decodes the 8-byte big-endian wire encoding.
    pub const fn from_bytes(b: [u8; 8]) -> Self {
        Ia(u64::from_be_bytes(b))
    }

    /// The isolation domain.
    pub const fn isd(self) -> u16 {
        (self.0 >> 48) as u16
    }

    /// The 48-bit AS number.
    pub const fn asn(self) -> u64 {
        self.0 & MAX_AS
    }
}

impl fmt::Display for Ia {
    /// Formats as SCION does: `1-64512` for BGP-range AS numbers, else `1-ff00:0:111`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let asn = self.asn();
        if asn <= MAX_BGP_AS {
            write!(f, "{}-{}", self.isd(), asn)
        } else {
            write!(
                f,
                "{}-{:x}:{:x}:{:x}",
                self.isd(),
                (asn >> 32) & 0xffff,
                (asn >> 16) & 0xffff,
                asn & 0xffff
            )
        }
    }
}

impl fmt::Debug for Ia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Ia {
    type Err = Error;

    /// Parses `ISD-AS` where AS is decimal (BGP range) or three colon-separated
    /// 16-bit hex groups.
    fn from_str(s: &str) -> Result<Self> {
        const BAD: Error = Error::malformed("ISD-AS string");
        let (isd, asn) = s.split_once('-').ok_or(BAD)?;
        let isd: u16 = isd.parse().map_err(|_| BAD)?;
        let asn = if asn.contains(':') {
            let mut groups = asn.split(':');
            let mut v = 0u64;
            for _ in 0..3 {
                let g = groups.next().ok_or(BAD)?;
                if g.is_empty() || g.len() > 4 {
                    return Err(BAD);
                }
                v = (v << 16) | u64::from(u16::from_str_radix(g, 16).map_err(|_| BAD)?);
            }
            if groups.next().is_some() {
                return Err(BAD);
            }
            v
        } else {
            let v: u64 = asn.parse().map_err(|_| BAD)?;
            if v > MAX_BGP_AS {
                return Err(BAD);
            }
            v
        };
        Ok(Ia::new(isd, asn))
    }
}

/// An ISD-AS in a configuration file: its text form, e.g. `"1-ff00:0:110"`.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Ia {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Ia;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an ISD-AS such as \"1-ff00:0:110\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> core::result::Result<Ia, E> {
                s.parse().map_err(|_| E::custom(format_args!("`{s}` is not an ISD-AS")))
            }
        }
        d.deserialize_str(V)
    }
}

/// An ISD-AS as its text form.
#[cfg(feature = "serde")]
impl serde::Serialize for Ia {
    fn serialize<S: serde::Serializer>(&self, s: S) -> core::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn parse_and_print_hex_form() {
        let ia: Ia = "1-ff00:0:111".parse().unwrap();
        assert_eq!(ia.isd(), 1);
        assert_eq!(ia.asn(), 0xff00_0000_0111);
        assert_eq!(ia.to_bytes(), [0, 1, 0xff, 0, 0, 0, 0x01, 0x11]);
        assert_eq!(ia.to_string(), "1-ff00:0:111");
    }

    #[test]
    fn parse_and_print_bgp_form() {
        let ia: Ia = "64-559".parse().unwrap();
        assert_eq!((ia.isd(), ia.asn()), (64, 559));
        assert_eq!(ia.to_string(), "64-559");
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "",
            "1",
            "1-",
            "-1",
            "1-ff00:0",
            "1-ff00:0:1:2",
            "70000-1",
            "1-4294967296",
            "1-fffff:0:1",
        ] {
            assert!(s.parse::<Ia>().is_err(), "{s}");
        }
    }
}
