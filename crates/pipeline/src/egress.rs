//! Egress: the per-port queueing discipline after the pipeline.
//!
//! The runtime hands every forwarded packet to its port's [`Egress`] with the
//! packet's traffic class, then asks it for the packets that may leave now
//! and transmits them. Protocols plug in their schedulers (Z-Lane's five
//! queues, FlowPolice's priority-with-caps) by implementing this trait.

use std::collections::VecDeque;

use crate::buf::PacketBuf;
use crate::time::Now;
use crate::verdict::{Class, DropReason};

/// A queueing discipline for one egress port.
pub trait Egress<B: PacketBuf>: Send {
    /// A short name for counters and logs.
    fn name(&self) -> &str;

    /// Queues a forwarded packet of `class`. A full queue gives the packet back
    /// with the reason, so the caller can count and recycle it.
    fn enqueue(&mut self, buf: B, class: Class, now: Now) -> Result<(), (B, DropReason)>;

    /// Moves up to `max` packets that may leave at `now` into `out`; returns how many.
    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize;

    /// Packets currently queued.
    fn queued(&self) -> usize;

    /// The discipline as `Any`, for the control plane (see
    /// [`Stage::as_any_mut`](crate::Stage::as_any_mut)); `None` by default.
    fn as_any_mut(&mut self) -> Option<&mut dyn core::any::Any> {
        None
    }

    /// Reports named counters (e.g. per queue) to `out` when the worker
    /// publishes its counters; none by default.
    fn named_counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let _ = out;
    }
}

/// A bounded first-in first-out queue that sends at line rate (no shaping).
pub struct Fifo<B> {
    queue: VecDeque<B>,
    capacity: usize,
}

impl<B> Fifo<B> {
    /// A FIFO holding at most `capacity` packets; storage is allocated up front.
    pub fn new(capacity: usize) -> Self {
        Fifo { queue: VecDeque::with_capacity(capacity), capacity }
    }
}

impl<B: PacketBuf + Send> Egress<B> for Fifo<B> {
    fn name(&self) -> &str {
        "fifo"
    }

    fn enqueue(&mut self, buf: B, _class: Class, _now: Now) -> Result<(), (B, DropReason)> {
        if self.queue.len() >= self.capacity {
            return Err((buf, DropReason::QueueFull));
        }
        self.queue.push_back(buf);
        Ok(())
    }

    fn dequeue(&mut self, _now: Now, max: usize, out: &mut Vec<B>) -> usize {
        let n = max.min(self.queue.len());
        out.extend(self.queue.drain(..n));
        n
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_tail_drops_and_preserves_order() {
        let mut q: Fifo<Vec<u8>> = Fifo::new(2);
        let now = Now::default();
        q.enqueue(vec![1], Class(0), now).unwrap();
        q.enqueue(vec![2], Class(0), now).unwrap();
        let (b, r) = q.enqueue(vec![3], Class(0), now).unwrap_err();
        assert_eq!((b, r), (vec![3], DropReason::QueueFull));
        let mut out = Vec::new();
        assert_eq!(q.dequeue(now, 8, &mut out), 2);
        assert_eq!(out, vec![vec![1], vec![2]]);
        assert_eq!(q.queued(), 0);
    }
}
