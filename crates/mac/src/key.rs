//! Key material that never outlives its use.

use zeroize::{Zeroize, ZeroizeOnDrop};

/// A 128-bit secret key, zeroized on drop and never printed.
#[derive(Clone, PartialEq, Eq, Zeroize, ZeroizeOnDrop)]
pub struct Key([u8; 16]);

impl Key {
    /// The raw key bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Parses a 32-digit hex string (configuration files, test vectors).
    pub fn from_hex(s: &str) -> Option<Self> {
        let s = s.as_bytes();
        if s.len() != 32 {
            return None;
        }
        let mut k = [0u8; 16];
        for (i, pair) in s.chunks_exact(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            k[i] = (hi * 16 + lo) as u8;
        }
        Some(Key(k))
    }
}

impl From<[u8; 16]> for Key {
    fn from(k: [u8; 16]) -> Self {
        Key(k)
    }
}

impl core::fmt::Debug for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Key(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_and_redaction() {
        let k = Key::from_hex("000102030405060708090a0b0c0d0e0f").unwrap();
        assert_eq!(k.as_bytes()[15], 15);
        assert!(Key::from_hex("00").is_none());
        assert!(Key::from_hex("zz0102030405060708090a0b0c0d0e0f").is_none());
        let mut s = [0u8; 32];
        let mut w = Writer(&mut s, 0);
        core::fmt::write(&mut w, format_args!("{k:?}")).unwrap();
        let n = w.1;
        assert_eq!(&s[..n], b"Key(<redacted>)");
    }

    struct Writer<'a>(&'a mut [u8], usize);
    impl core::fmt::Write for Writer<'_> {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            self.0[self.1..self.1 + s.len()].copy_from_slice(s.as_bytes());
            self.1 += s.len();
            Ok(())
        }
    }
}

/// A key in a configuration file: 32 hex digits (16 bytes). Keys are never
/// serialized back (status replies and logs must not carry them).
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str("32 hex digits (16 bytes)")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Key, E> {
                Key::from_hex(s.trim()).ok_or_else(|| E::custom("needs 32 hex digits (16 bytes)"))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(all(test, feature = "serde"))]
mod serde_tests {
    use super::Key;

    #[test]
    fn keys_deserialize_from_hex_only() {
        #[derive(serde::Deserialize)]
        struct C {
            k: Key,
        }
        let c: C = serde_json::from_str(r#"{"k":"000102030405060708090a0b0c0d0e0f"}"#).unwrap();
        assert_eq!(c.k.as_bytes()[15], 15);
        let e = serde_json::from_str::<C>(r#"{"k":"0001"}"#).err().unwrap();
        assert!(e.is_data() || e.is_syntax(), "{e}");
    }
}
