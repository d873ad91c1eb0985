//! Client-certificate subjects: read from a verified certificate, and the
//! patterns of `[[control.clients]]` that map them to roles.
//!
//! A pattern is a comma-separated list of `ATTRIBUTE=value` pairs
//! (`"CN=ops"`, `"CN=prometheus, O=Example"`); a certificate matches when
//! its subject holds every listed attribute with exactly that value, in any
//! order and beside any other attributes. Attribute names: `CN`, `O`, `OU`,
//! `C`, `L`, `ST`, `DC`, `UID`, `SERIALNUMBER`, `EMAILADDRESS`, or a dotted
//! OID (`2.5.4.3`). A `\` escapes a comma or backslash inside a value.

use std::fmt;

/// Attribute names by OID (what certificates carry, what patterns say).
const NAMES: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.5", "SERIALNUMBER"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("1.2.840.113549.1.9.1", "EMAILADDRESS"),
];

/// The subject of a client certificate: its attributes in certificate order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    attrs: Vec<(String, String)>,
}

impl Subject {
    /// The attributes, as (name, value): `CN`, `O`, `OU`... or a dotted OID.
    pub fn attributes(&self) -> &[(String, String)] {
        &self.attrs
    }

    /// Reads the subject of a DER certificate; `None` if it is not one.
    pub fn of_certificate(der: &[u8]) -> Option<Subject> {
        let (tag, cert, _) = tlv(der)?;
        if tag != 0x30 {
            return None;
        }
        let (tag, tbs, _) = tlv(cert)?;
        if tag != 0x30 {
            return None;
        }
        let mut rest = tbs;
        // [0] version (optional), serial, signature algorithm, issuer, validity, subject.
        let (tag, _, r) = tlv(rest)?;
        rest = if tag == 0xa0 { tlv(r)?.2 } else { r };
        for _ in 0..3 {
            rest = tlv(rest)?.2;
        }
        let (tag, name, _) = tlv(rest)?;
        if tag != 0x30 {
            return None;
        }
        Subject::of_name(name)
    }

    /// Reads the contents of a DER `Name` (a sequence of RDN sets).
    fn of_name(mut name: &[u8]) -> Option<Subject> {
        let mut attrs = Vec::new();
        while !name.is_empty() {
            let (tag, mut set, rest) = tlv(name)?;
            name = rest;
            if tag != 0x31 {
                return None;
            }
            while !set.is_empty() {
                let (tag, atv, rest) = tlv(set)?;
                set = rest;
                if tag != 0x30 {
                    return None;
                }
                let (tag, oid, rest) = tlv(atv)?;
                if tag != 0x06 {
                    return None;
                }
                let (vtag, value, _) = tlv(rest)?;
                let oid = dotted(oid)?;
                let key = NAMES
                    .iter()
                    .find(|(o, _)| *o == oid)
                    .map_or(oid.clone(), |(_, n)| (*n).to_string());
                attrs.push((key, string_value(vtag, value)));
            }
        }
        Some(Subject { attrs })
    }

    /// Whether this subject holds every attribute of `pattern`.
    pub fn matches(&self, pattern: &SubjectPattern) -> bool {
        pattern.attrs.iter().all(|(k, v)| self.attrs.iter().any(|(sk, sv)| sk == k && sv == v))
    }
}

impl fmt::Display for Subject {
    /// `CN=ops,O=Example` (certificate order; commas and backslashes in
    /// values escaped, control characters shown as `?`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.attrs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}=")?;
            for c in v.chars() {
                match c {
                    ',' | '\\' | '+' => write!(f, "\\{c}")?,
                    c if c.is_control() => f.write_str("?")?,
                    c => write!(f, "{c}")?,
                }
            }
        }
        Ok(())
    }
}

/// A `[[control.clients]]` subject pattern (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectPattern {
    attrs: Vec<(String, String)>,
}

impl std::str::FromStr for SubjectPattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut cur = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(n) => cur.push(n),
                    None => return Err("ends with a lone `\\`".into()),
                },
                ',' => parts.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        parts.push(cur);
        let mut attrs = Vec::new();
        for p in parts {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("`{}` is not ATTRIBUTE=value (e.g. CN=ops)", p.trim()))?;
            let k = k.trim().to_ascii_uppercase();
            let v = v.trim();
            let known = NAMES.iter().any(|(_, n)| *n == k);
            let oid = !k.is_empty()
                && k.split('.').all(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()));
            if !known && !oid {
                let names: Vec<&str> = NAMES.iter().map(|(_, n)| *n).collect();
                return Err(format!(
                    "unknown attribute `{k}` (known: {}, or a dotted OID)",
                    names.join(", ")
                ));
            }
            if v.is_empty() {
                return Err(format!("`{k}` has an empty value"));
            }
            attrs.push((k, v.to_string()));
        }
        Ok(SubjectPattern { attrs })
    }
}

impl fmt::Display for SubjectPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Subject { attrs: self.attrs.clone() }.fmt(f)
    }
}

/// One DER tag-length-value: (tag, contents, what follows). `None` on
/// anything malformed or truncated (never panics).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1f == 0x1f {
        // High tag numbers do not occur in certificate names.
        return None;
    }
    let (&len0, rest) = rest.split_first()?;
    let (len, rest) = if len0 < 0x80 {
        (usize::from(len0), rest)
    } else {
        let n = usize::from(len0 & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |l, &b| (l << 8) | usize::from(b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let (contents, after) = rest.split_at(len);
    Some((tag, contents, after))
}

/// An OID's dotted form.
fn dotted(oid: &[u8]) -> Option<String> {
    let mut arcs: Vec<u64> = Vec::new();
    let mut v: u64 = 0;
    for (i, &b) in oid.iter().enumerate() {
        v = v.checked_mul(128)?.checked_add(u64::from(b & 0x7f))?;
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (v / 40).min(2);
                arcs.push(first);
                arcs.push(v - first * 40);
            } else {
                arcs.push(v);
            }
            v = 0;
        } else if i + 1 == oid.len() {
            return None;
        }
    }
    if arcs.is_empty() {
        return None;
    }
    Some(arcs.iter().map(u64::to_string).collect::<Vec<_>>().join("."))
}

/// A directory string's text (UTF-8, printable, IA5, BMP, universal...);
/// other encodings as `#hex`.
fn string_value(tag: u8, v: &[u8]) -> String {
    match tag {
        // UTF8String, NumericString, PrintableString, IA5String, VisibleString.
        0x0c | 0x12 | 0x13 | 0x16 | 0x1a => String::from_utf8_lossy(v).into_owned(),
        // TeletexString: Latin-1 in practice.
        0x14 => v.iter().map(|&b| char::from(b)).collect(),
        // BMPString: UTF-16BE.
        0x1e => {
            let units: Vec<u16> =
                v.chunks(2).map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])).collect();
            String::from_utf16_lossy(&units)
        }
        // UniversalString: UTF-32BE.
        0x1c => v
            .chunks(4)
            .map(|c| {
                let mut b = [0u8; 4];
                b[..c.len()].copy_from_slice(c);
                char::from_u32(u32::from_be_bytes(b)).unwrap_or('\u{fffd}')
            })
            .collect(),
        _ => {
            let mut s = String::from("#");
            for b in v {
                s.push_str(&format!("{b:02x}"));
            }
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DER of `tag` around `contents` (short or long length form).
    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if contents.len() < 0x80 {
            v.push(contents.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(contents.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(contents);
        v
    }

    fn atv(oid: &[u8], tag: u8, value: &[u8]) -> Vec<u8> {
        der(0x31, &der(0x30, &[der(0x06, oid), der(tag, value)].concat()))
    }

    fn name() -> Vec<u8> {
        [
            atv(&[0x55, 0x04, 0x06], 0x13, b"CH"),
            atv(&[0x55, 0x04, 0x0a], 0x0c, b"Example, Inc"),
            atv(&[0x55, 0x04, 0x03], 0x0c, b"ops"),
            atv(&[0x2a, 0x03, 0x04], 0x1e, &[0, b'x', 0, b'y']),
        ]
        .concat()
    }

    #[test]
    fn reads_a_certificate_subject_and_matches_patterns() {
        let tbs = [
            der(0xa0, &der(0x02, &[2])),
            der(0x02, &[1]),
            der(0x30, &[]),
            der(0x30, &atv(&[0x55, 0x04, 0x03], 0x0c, b"issuer")),
            der(0x30, &[]),
            der(0x30, &name()),
            der(0x30, &[]),
        ]
        .concat();
        let cert = der(0x30, &[der(0x30, &tbs), der(0x30, &[]), der(0x03, &[0])].concat());
        let s = Subject::of_certificate(&cert).unwrap();
        assert_eq!(s.to_string(), "C=CH,O=Example\\, Inc,CN=ops,1.2.3.4=xy");
        let p = |t: &str| t.parse::<SubjectPattern>().unwrap();
        assert!(s.matches(&p("CN=ops")));
        assert!(s.matches(&p("cn = ops , O=Example\\, Inc")));
        assert!(s.matches(&p("1.2.3.4=xy")));
        assert!(!s.matches(&p("CN=op")));
        assert!(!s.matches(&p("CN=ops,OU=x")));
        assert!(!s.matches(&p("CN=issuer")));
    }

    #[test]
    fn bad_patterns_say_why() {
        assert!("CN".parse::<SubjectPattern>().unwrap_err().contains("ATTRIBUTE=value"));
        assert!("XX=1".parse::<SubjectPattern>().unwrap_err().contains("unknown attribute"));
        assert!("CN=".parse::<SubjectPattern>().unwrap_err().contains("empty"));
        assert!("CN=a\\".parse::<SubjectPattern>().is_err());
    }

    #[test]
    fn malformed_der_is_none_never_a_panic() {
        let n = name();
        for cut in 0..n.len() {
            let _ = Subject::of_name(&n[..cut]);
            let _ = Subject::of_certificate(&n[..cut]);
        }
        assert!(Subject::of_certificate(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_none());
        assert!(Subject::of_certificate(&[]).is_none());
        assert!(dotted(&[0x80]).is_none());
        let mut x = 0x1234_5678u32;
        for len in 0..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x & 0xff) as u8
                })
                .collect();
            let _ = Subject::of_certificate(&bytes);
            let _ = Subject::of_name(&bytes);
        }
    }
}
