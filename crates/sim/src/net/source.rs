//! The contract of a traffic source attached to a node's ingress port, and
//! what it may use while emitting.

use pipeline::{Frame, Now};

use super::tag::Tag;
use crate::rng::Rng;

/// What a closed-loop source learns about one of its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// The packet reached a sink (an ACK, after the source's feedback delay).
    Delivered(Tag),
    /// The packet was dropped (loss detected, after the feedback delay).
    Dropped(Tag),
}

/// What a source may use while emitting.
pub struct EmitCtx<'a> {
    /// Virtual time of the emission (ns).
    pub now_ns: u64,
    /// The same instant as the stages see it.
    pub now: Now,
    /// The simulation's random generator.
    pub rng: &'a mut Rng,
    /// This source's index (write it into the tag to receive feedback).
    pub index: u16,
    /// Recycled frames.
    pub pool: &'a mut Vec<Frame>,
}

impl EmitCtx<'_> {
    /// A frame holding a copy of `bytes` (from the pool when possible).
    pub fn frame(&mut self, bytes: &[u8]) -> Frame {
        let mut f = self.pool.pop().unwrap_or_default();
        if f.set(bytes).is_err() {
            f.reset();
        }
        f
    }
}

/// A traffic source attached to a node's ingress port.
pub trait Source {
    /// Virtual time (ns) of the next emission, `None` while it waits or is done.
    fn next_ns(&self) -> Option<u64>;
    /// Emits the packet due at `ctx.now_ns` (or `None`) and schedules the next.
    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame>;
    /// Delay after which delivery/drop feedback reaches the source; `None`
    /// (the default) for open-loop sources.
    fn feedback_delay_ns(&self) -> Option<u64> {
        None
    }
    /// Called with due feedback.
    fn on_feedback(&mut self, _fb: Feedback, _now_ns: u64) {}
    /// Called at once with the bytes of each of this source's packets that
    /// reach a sink (before they are recycled), for protocols whose receiver
    /// echoes something the sender needs (e.g. FlowPolice capabilities);
    /// the source applies its own return-path delay.
    fn on_delivered_packet(&mut self, _pkt: &[u8], _now_ns: u64) {}
}
