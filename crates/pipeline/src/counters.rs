//! Per-stage counters: packets seen, handed to control, and drops by reason.

use crate::verdict::DropReason;

/// One counter per [`DropReason`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropCounters([u64; DropReason::COUNT]);

impl Default for DropCounters {
    fn default() -> Self {
        DropCounters([0; DropReason::COUNT])
    }
}

impl DropCounters {
    /// Counts one drop.
    #[inline]
    pub fn inc(&mut self, reason: DropReason) {
        self.0[reason.index()] += 1;
    }

    /// Counts `n` drops.
    #[inline]
    pub fn add(&mut self, reason: DropReason, n: u64) {
        self.0[reason.index()] += n;
    }

    /// Drops counted for `reason`.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Non-zero counters with their reasons.
    pub fn nonzero(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|r| (*r, self.get(*r))).filter(|(_, n)| *n > 0)
    }

    /// Adds another set of counters (summing workers).
    pub fn merge(&mut self, other: &DropCounters) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
}

/// Counters of one stage in one worker; the runtime sums workers on read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageCounters {
    /// Live packets handed to the stage.
    pub packets: u64,
    /// Packets the stage handed to the control plane.
    pub to_control: u64,
    /// Packets the stage dropped, by reason.
    pub drops: DropCounters,
}

impl StageCounters {
    /// Adds another stage's counters (summing workers).
    pub fn merge(&mut self, other: &StageCounters) {
        self.packets += other.packets;
        self.to_control += other.to_control;
        self.drops.merge(&other.drops);
    }
}
