//! Routers: a real pipeline and one egress scheduler per connected port,
//! with the counts of what they received, dropped and delivered locally.

use std::collections::VecDeque;

use pipeline::{Batch, DropReason, Egress, Frame, Now, PacketBuf, Pipeline};

use super::meter::Meter;

/// A connected port: its egress scheduler and the link it feeds.
pub(super) struct Port {
    pub(super) egress: Box<dyn Egress<Frame>>,
    pub(super) link: usize,
}

/// A router: a real pipeline and one egress scheduler per connected port.
pub struct Node {
    /// Name for reports.
    pub name: String,
    /// The data-plane stages.
    pub pipeline: Pipeline<Frame>,
    pub(super) ports: Vec<Option<Port>>,
    /// Arrivals of the current tick: (time, packet, ingress port).
    pub(super) inbox: VecDeque<(u64, Frame, u16)>,
    /// Packets forwarded to a port without egress (delivered inside the AS).
    pub local: Meter,
    /// Packets that entered the pipeline, by group.
    pub received: Meter,
    /// Packets dropped here (pipeline or egress), by group.
    pub dropped: Meter,
    /// Packets rejected by a check (any drop reason but congestion or rate:
    /// `QueueFull`, `OverRate`, `ChannelCap`), by group.
    pub rejected: Meter,
    /// Drops by reason (pipeline and egress).
    pub drop_reasons: [u64; DropReason::COUNT],
    /// Packets handed to the control plane (and recycled).
    pub to_control: u64,
}

impl Node {
    /// A node running `pipeline`.
    pub fn new(name: &str, pipeline: Pipeline<Frame>) -> Self {
        Node {
            name: name.into(),
            pipeline,
            ports: Vec::new(),
            inbox: VecDeque::new(),
            local: Meter::default(),
            received: Meter::default(),
            dropped: Meter::default(),
            rejected: Meter::default(),
            drop_reasons: [0; DropReason::COUNT],
            to_control: 0,
        }
    }

    /// The egress of `port`, if connected.
    pub fn egress(&self, port: u16) -> Option<&dyn Egress<Frame>> {
        self.ports.get(usize::from(port))?.as_ref().map(|p| &*p.egress)
    }

    /// Drops with `reason` so far.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drop_reasons[reason.index()]
    }

    /// Connects `port` through `egress` to link number `link`.
    pub(super) fn attach(&mut self, port: u16, egress: Box<dyn Egress<Frame>>, link: usize) {
        let p = usize::from(port);
        if self.ports.len() <= p {
            self.ports.resize_with(p + 1, || None);
        }
        self.ports[p] = Some(Port { egress, link });
    }
}

/// A stage behind a mutex, so that a scenario can read its state (tables,
/// captured records) after the run. The lock is uncontended (one thread).
pub struct Shared<S>(pub std::sync::Arc<std::sync::Mutex<S>>);

impl<S: Send> pipeline::Element for Shared<S> {
    fn name(&self) -> &str {
        "shared"
    }
}

impl<B: PacketBuf, S: pipeline::Stage<B>> pipeline::Stage<B> for Shared<S> {
    fn process(&mut self, batch: &mut Batch<B>, now: Now) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).process(batch, now);
    }
}
