//! The simulation's event queues: when each source emits next, and the
//! delivery/drop feedback due to closed-loop sources.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::source::Feedback;
use super::tag::Tag;

/// Kind of a feedback event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum FbKind {
    Delivered,
    Dropped,
}

/// Due time, insertion order, source, kind, tag.
type FbEvent = (u64, u64, usize, FbKind, Tag);

/// Both queues, earliest first.
#[derive(Default)]
pub(super) struct Events {
    /// (time, source) of planned emissions; an entry is stale when the
    /// source's `next_ns` no longer names its time.
    emissions: BinaryHeap<Reverse<(u64, usize)>>,
    feedback: BinaryHeap<Reverse<FbEvent>>,
    fb_seq: u64,
}

impl Events {
    /// Plans an emission of `source` at `t`.
    pub(super) fn emit_at(&mut self, t: u64, source: usize) {
        self.emissions.push(Reverse((t, source)));
    }

    /// Plans an emission of `source` at `after` if its next emission time
    /// changed from `before` (e.g. a waiting source woke up).
    pub(super) fn emit_if_moved(&mut self, before: Option<u64>, after: Option<u64>, source: usize) {
        if let Some(n) = after.filter(|&n| Some(n) != before) {
            self.emit_at(n, source);
        }
    }

    /// Takes the earliest planned emission before `end`.
    pub(super) fn next_emission(&mut self, end: u64) -> Option<(u64, usize)> {
        let Reverse((t, s)) = self.emissions.peek().copied()?;
        if t >= end {
            return None;
        }
        self.emissions.pop();
        Some((t, s))
    }

    /// Feedback about `tag` of `kind` for `source`, due at `due`.
    pub(super) fn feedback_at(&mut self, due: u64, source: usize, kind: FbKind, tag: Tag) {
        self.fb_seq += 1;
        self.feedback.push(Reverse((due, self.fb_seq, source, kind, tag)));
    }

    /// Takes the earliest feedback due by `end` (inclusive): (due time, source, feedback).
    pub(super) fn next_feedback(&mut self, end: u64) -> Option<(u64, usize, Feedback)> {
        let Reverse((t, _, s, kind, tag)) = self.feedback.peek().copied()?;
        if t > end {
            return None;
        }
        self.feedback.pop();
        let fb = match kind {
            FbKind::Delivered => Feedback::Delivered(tag),
            FbKind::Dropped => Feedback::Dropped(tag),
        };
        Some((t, s, fb))
    }
}
