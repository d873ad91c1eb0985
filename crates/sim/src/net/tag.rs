//! The tag every simulated packet carries in its last bytes.

/// Length of the tag at the end of every simulated packet.
pub const TAG_LEN: usize = 8;
/// Source index meaning "no source wants feedback".
pub const NO_SOURCE: u16 = u16::MAX;

/// Identifies a simulated packet: who sent it and which statistics it feeds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    /// Statistics group (e.g. "source AS S", "attack").
    pub group: u16,
    /// Index of the emitting source in the simulation ([`NO_SOURCE`] if none).
    pub source: u16,
    /// Per-source sequence number.
    pub seq: u32,
}

impl Tag {
    /// Writes the tag into the last [`TAG_LEN`] bytes of `pkt` (no-op if shorter).
    pub fn write(&self, pkt: &mut [u8]) {
        let n = pkt.len();
        if n < TAG_LEN {
            return;
        }
        let t = &mut pkt[n - TAG_LEN..];
        t[0..2].copy_from_slice(&self.group.to_be_bytes());
        t[2..4].copy_from_slice(&self.source.to_be_bytes());
        t[4..8].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// Reads the tag from the last bytes of `pkt` (group 0, no source if shorter).
    pub fn read(pkt: &[u8]) -> Tag {
        let n = pkt.len();
        if n < TAG_LEN {
            return Tag { group: 0, source: NO_SOURCE, seq: 0 };
        }
        let t = &pkt[n - TAG_LEN..];
        Tag {
            group: u16::from_be_bytes([t[0], t[1]]),
            source: u16::from_be_bytes([t[2], t[3]]),
            seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        }
    }

    fn key(&self) -> (u16, u16, u32) {
        (self.group, self.source, self.seq)
    }
}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trip() {
        let mut b = vec![0u8; 20];
        let t = Tag { group: 3, source: 9, seq: 0xdead_beef };
        t.write(&mut b);
        assert_eq!(Tag::read(&b), t);
        assert_eq!(Tag::read(&[1, 2]).source, NO_SOURCE);
    }
}
