//! SCION host addresses and their 4-bit type/length code.

use crate::{Error, Result};

/// A SCION host address as carried in the address header.
///
/// The 4-bit code is `DT << 2 | DL` (or `ST << 2 | SL`) of the common header:
/// IPv4 is `0b0000`, IPv6 `0b0011`, a service address `0b0100`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum HostAddr {
    /// IPv4 host (DT=0, DL=0), 4 bytes.
    V4([u8; 4]),
    /// IPv6 host (DT=0, DL=3), 16 bytes.
    V6([u8; 16]),
    /// Service address (DT=1, DL=0): 2-byte service number followed by 2 reserved bytes.
    Svc(u16),
}

impl HostAddr {
    /// The 4-bit type/length code (`T << 2 | L`).
    pub const fn type_len(&self) -> u8 {
        match self {
            HostAddr::V4(_) => 0b0000,
            HostAddr::V6(_) => 0b0011,
            HostAddr::Svc(_) => 0b0100,
        }
    }

    /// The number of address bytes on the wire (`(L + 1) * 4`).
    pub const fn wire_len(&self) -> usize {
        match self {
            HostAddr::V4(_) | HostAddr::Svc(_) => 4,
            HostAddr::V6(_) => 16,
        }
    }

    /// Writes the wire bytes into `out` (which must hold [`wire_len`](Self::wire_len)
    /// bytes) and returns how many were written.
    pub fn write(&self, out: &mut [u8]) -> usize {
        match self {
            HostAddr::V4(a) => out[..4].copy_from_slice(a),
            HostAddr::V6(a) => out[..16].copy_from_slice(a),
            HostAddr::Svc(s) => {
                out[..2].copy_from_slice(&s.to_be_bytes());
                out[2..4].fill(0);
            }
        }
        self.wire_len()
    }

    /// The wire bytes, zero-padded to 16 bytes, and their length.
    pub fn to_padded(&self) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        let n = self.write(&mut b);
        (b, n)
    }

    /// Decodes a host address from its 4-bit type/length code and bytes.
    ///
    /// `bytes` must be exactly `(L + 1) * 4` long. Unknown combinations are
    /// [`Error::Unsupported`]; they are still *parsable* by the address header
    /// view, which exposes raw bytes for every DT/DL combination.
    pub fn from_type_len(code: u8, bytes: &[u8]) -> Result<Self> {
        let want = ((code & 0b11) as usize + 1) * 4;
        if bytes.len() < want {
            return Err(Error::Truncated);
        }
        match code & 0x0f {
            0b0000 => Ok(HostAddr::V4([bytes[0], bytes[1], bytes[2], bytes[3]])),
            0b0011 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&bytes[..16]);
                Ok(HostAddr::V6(a))
            }
            0b0100 => Ok(HostAddr::Svc(u16::from_be_bytes([bytes[0], bytes[1]]))),
            _ => Err(Error::unsupported("host address type/length")),
        }
    }
}

impl From<core::net::Ipv4Addr> for HostAddr {
    fn from(a: core::net::Ipv4Addr) -> Self {
        HostAddr::V4(a.octets())
    }
}

impl From<core::net::Ipv6Addr> for HostAddr {
    fn from(a: core::net::Ipv6Addr) -> Self {
        HostAddr::V6(a.octets())
    }
}

impl From<core::net::IpAddr> for HostAddr {
    fn from(a: core::net::IpAddr) -> Self {
        match a {
            core::net::IpAddr::V4(v) => v.into(),
            core::net::IpAddr::V6(v) => v.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_lengths() {
        let v4 = HostAddr::V4([10, 0, 0, 1]);
        let v6 = HostAddr::V6([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let svc = HostAddr::Svc(0x0001);
        assert_eq!((v4.type_len(), v4.wire_len()), (0, 4));
        assert_eq!((v6.type_len(), v6.wire_len()), (3, 16));
        assert_eq!((svc.type_len(), svc.wire_len()), (4, 4));
        for h in [v4, v6, svc] {
            let (b, n) = h.to_padded();
            assert_eq!(HostAddr::from_type_len(h.type_len(), &b[..n]).unwrap(), h);
        }
    }

    #[test]
    fn short_or_unknown_is_an_error() {
        assert_eq!(HostAddr::from_type_len(3, &[0; 4]), Err(Error::Truncated));
        assert!(matches!(HostAddr::from_type_len(0b1000, &[0; 4]), Err(Error::Unsupported { .. })));
    }
}
