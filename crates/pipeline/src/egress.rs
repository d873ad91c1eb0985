//! Egress: the per-port queueing discipline after the pipeline.
//!
//! The runtime hands every forwarded packet to its port's [`Egress`] with the
//! packet's traffic class, then asks it for the packets that may leave now
//! and transmits them. Protocols plug in their schedulers (Z-Lane's five
//! queues, FlowPolice's priority-with-caps) by implementing this trait.

use std::collections::VecDeque;

use crate::buf::PacketBuf;
use crate::element::Element;
use crate::time::Now;
use crate::verdict::{Class, DropReason};

/// A queueing discipline for one egress port. Its name, named counters and
/// live control hooks come from [`Element`].
pub trait Egress<B: PacketBuf>: Element {
    /// Queues a forwarded packet of `class`. A full queue gives the packet back
    /// with the reason, so the caller can count and recycle it.
    fn enqueue(&mut self, buf: B, class: Class, now: Now) -> Result<(), (B, DropReason)>;

    /// Moves up to `max` packets that may leave at `now` into `out`; returns how many.
    fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<B>) -> usize;

    /// Packets currently queued.
    fn queued(&self) -> usize;

    /// Whether the discipline hands every packet straight back (an unshaped
    /// FIFO): the worker then sends forwarded packets to TX directly and
    /// skips the queue round trip. Asked again after every live change.
    fn is_pass_through(&self) -> bool {
        false
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

    /// The queue length limit in packets.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Changes the length limit in place; packets beyond a smaller limit
    /// (the newest) are dropped. Returns how many.
    pub fn set_capacity(&mut self, capacity: usize) -> u64 {
        self.capacity = capacity;
        let lost = self.queue.len().saturating_sub(capacity);
        self.queue.truncate(capacity);
        // Room for the new length now, not on the packet path.
        self.queue.reserve(capacity - self.queue.len());
        lost as u64
    }
}

impl<B: Send> Element for Fifo<B> {
    fn name(&self) -> &str {
        "fifo"
    }
}

impl<B: PacketBuf + Send> Egress<B> for Fifo<B> {
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
