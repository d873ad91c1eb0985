//! Packet and byte counts per statistics group, over the whole run and
//! inside the measurement window.

/// Packet and byte counts of one statistics group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Packets over the whole run.
    pub pkts: u64,
    /// Bytes over the whole run.
    pub bytes: u64,
    /// Packets inside the measurement window.
    pub win_pkts: u64,
    /// Bytes inside the measurement window.
    pub win_bytes: u64,
}

/// Counts per statistics group.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    groups: Vec<Count>,
}

impl Meter {
    /// Records one packet of `bytes` for `group`.
    pub fn record(&mut self, group: u16, bytes: usize, in_window: bool) {
        let g = usize::from(group);
        if self.groups.len() <= g {
            self.groups.resize(g + 1, Count::default());
        }
        let c = &mut self.groups[g];
        c.pkts += 1;
        c.bytes += bytes as u64;
        if in_window {
            c.win_pkts += 1;
            c.win_bytes += bytes as u64;
        }
    }

    /// The counts of `group`.
    pub fn get(&self, group: u16) -> Count {
        self.groups.get(usize::from(group)).copied().unwrap_or_default()
    }

    /// Sum over all groups.
    pub fn total(&self) -> Count {
        self.groups.iter().fold(Count::default(), |a, c| Count {
            pkts: a.pkts + c.pkts,
            bytes: a.bytes + c.bytes,
            win_pkts: a.win_pkts + c.win_pkts,
            win_bytes: a.win_bytes + c.win_bytes,
        })
    }
}
