//! Per-worker counters, published lock-free and summed on read.
//!
//! Each worker counts in plain local integers on the fast path and, every
//! `workers.publish_every` bursts (and when it stops), stores them into its
//! own [`WorkerStats`] block with relaxed atomic stores. Only that worker ever
//! writes its block, so there is no contention and no read-modify-write; a
//! reader sums the blocks of all workers into a [`Snapshot`].
//!
//! A block is read as one publication, never half of one: the worker bumps
//! the block's sequence number to odd before its stores and to even after
//! them (a seqlock), and a reader that saw the number change or odd reads
//! the block again. So, per worker, a snapshot's counters agree with each
//! other (e.g. rx = tx + drops + queued for a forwarding pipeline); the
//! worker never waits for a reader.
//!
//! Named counters and levels (a stage's per-class counts, a scheduler's
//! per-queue counts, a table's occupancy; see
//! [`pipeline::Element::named_counters`] and
//! [`pipeline::Element::named_gauges`]) vary by stage kind, so
//! they are published as a list behind a mutex that the worker only
//! `try_lock`s: if a reader holds it at that moment, the worker skips that
//! publication rather than wait (the next one, `publish_every` bursts later,
//! catches up). The list is refilled in place, so publishing allocates
//! nothing once its length is stable.

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering, Ordering::Relaxed};
use std::sync::Mutex;

use pipeline::{DropCounters, DropReason, Egress, PacketBuf, Pipeline, StageCounters};

/// Counters of one stage, as atomics.
struct AtomicStage {
    packets: AtomicU64,
    to_control: AtomicU64,
    drops: Vec<AtomicU64>,
}

impl AtomicStage {
    fn new() -> Self {
        AtomicStage {
            packets: AtomicU64::new(0),
            to_control: AtomicU64::new(0),
            drops: (0..DropReason::COUNT).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn store(&self, c: &StageCounters) {
        self.packets.store(c.packets, Relaxed);
        self.to_control.store(c.to_control, Relaxed);
        for r in DropReason::ALL {
            self.drops[r.index()].store(c.drops.get(*r), Relaxed);
        }
    }

    fn load_into(&self, c: &mut StageCounters) {
        c.packets += self.packets.load(Relaxed);
        c.to_control += self.to_control.load(Relaxed);
        for r in DropReason::ALL {
            c.drops.add(*r, self.drops[r.index()].load(Relaxed));
        }
    }
}

/// Counters of one port as seen by one worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Packets received on the port.
    pub rx: u64,
    /// Packets transmitted on the port.
    pub tx: u64,
    /// Bytes transmitted on the port.
    pub tx_bytes: u64,
    /// Packets queued in the port's egress discipline right now.
    pub queued: u64,
    /// Packets dropped by the runtime for this port (egress queue full, TX failure,
    /// forward to an unknown port).
    pub drops: DropCounters,
}

/// What a worker counts locally between two publications.
#[derive(Clone, Debug, Default)]
pub struct LocalCounters {
    /// Bursts processed (including empty polls that received nothing).
    pub bursts: u64,
    /// Per port, in `[[ports]]` order.
    pub ports: Vec<PortCounters>,
    /// Packets offered per synthetic traffic group (by the generator).
    pub group_rx: Vec<u64>,
    /// Packets delivered per synthetic traffic group (seen by the TX sink).
    pub group_tx: Vec<u64>,
    /// Packets handed to control (to the slow path, or counted and freed
    /// without one; a full slow-path ring's refusals are port drops).
    pub to_control: u64,
    /// Time the worker has run, on its own clock (virtual or wall), in ns.
    pub elapsed_ns: u64,
}

/// One worker's published counters (written only by that worker).
pub struct WorkerStats {
    /// Odd while the worker is publishing (see the module docs).
    seq: AtomicU64,
    bursts: AtomicU64,
    to_control: AtomicU64,
    elapsed_ns: AtomicU64,
    done: AtomicBool,
    stages: Vec<AtomicStage>,
    port_rx: Vec<AtomicU64>,
    port_tx: Vec<AtomicU64>,
    port_tx_bytes: Vec<AtomicU64>,
    port_queued: Vec<AtomicU64>,
    port_drops: Vec<AtomicStage>,
    group_rx: Vec<AtomicU64>,
    group_tx: Vec<AtomicU64>,
    named: Mutex<Vec<Named>>,
}

/// Where a named counter lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// A pipeline stage, by index.
    Stage(usize),
    /// A port's egress discipline, by index in `[[ports]]`.
    Egress(usize),
}

/// What a named value measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A monotonic count of events ([`pipeline::Element::named_counters`]):
    /// only grows; monitoring takes its rate.
    #[default]
    Counter,
    /// A level ([`pipeline::Element::named_gauges`]): goes up and down
    /// (table entries, reservations held); monitoring reads it as it is.
    Gauge,
}

/// One named counter or level of one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Named {
    /// Its stage or egress discipline.
    pub scope: Scope,
    /// The value's name (e.g. `"class_g"`).
    pub name: &'static str,
    /// Counter or level.
    pub kind: Kind,
    /// Its value (summed over workers in a [`Snapshot`]).
    pub value: u64,
}

/// Fills `out` with the named counters, then the named levels, of each
/// stage of `pipeline` and each discipline of `egress`.
pub fn collect_named<B: PacketBuf>(
    pipeline: &Pipeline<B>,
    egress: &[Box<dyn Egress<B>>],
    out: &mut Vec<Named>,
) {
    out.clear();
    for (i, s) in pipeline.stages().enumerate() {
        let scope = Scope::Stage(i);
        s.named_counters(&mut |name, value| {
            out.push(Named { scope, name, kind: Kind::Counter, value })
        });
        s.named_gauges(&mut |name, value| {
            out.push(Named { scope, name, kind: Kind::Gauge, value })
        });
    }
    for (i, e) in egress.iter().enumerate() {
        let scope = Scope::Egress(i);
        e.named_counters(&mut |name, value| {
            out.push(Named { scope, name, kind: Kind::Counter, value })
        });
        e.named_gauges(&mut |name, value| {
            out.push(Named { scope, name, kind: Kind::Gauge, value })
        });
    }
}

fn zeros(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl WorkerStats {
    /// A zeroed block for `stages` stages, `ports` ports and `groups` traffic groups.
    pub fn new(stages: usize, ports: usize, groups: usize) -> Self {
        WorkerStats {
            seq: AtomicU64::new(0),
            bursts: AtomicU64::new(0),
            to_control: AtomicU64::new(0),
            elapsed_ns: AtomicU64::new(0),
            done: AtomicBool::new(false),
            stages: (0..stages).map(|_| AtomicStage::new()).collect(),
            port_rx: zeros(ports),
            port_tx: zeros(ports),
            port_tx_bytes: zeros(ports),
            port_queued: zeros(ports),
            port_drops: (0..ports).map(|_| AtomicStage::new()).collect(),
            group_rx: zeros(groups),
            group_tx: zeros(groups),
            named: Mutex::new(Vec::new()),
        }
    }

    /// Publishes named counters (called by the owning worker only); skipped
    /// if a reader holds the list right now.
    pub fn publish_named<B: PacketBuf>(
        &self,
        pipeline: &Pipeline<B>,
        egress: &[Box<dyn Egress<B>>],
    ) {
        if let Ok(mut v) = self.named.try_lock() {
            collect_named(pipeline, egress, &mut v);
        }
    }

    /// Publishes the worker's counters (called by the owning worker only).
    pub fn publish<'a>(
        &self,
        local: &LocalCounters,
        stages: impl Iterator<Item = &'a StageCounters>,
    ) {
        // Seqlock write: odd, stores, even.
        let seq = self.seq.load(Relaxed);
        self.seq.store(seq.wrapping_add(1), Relaxed);
        fence(Ordering::Release);
        self.bursts.store(local.bursts, Relaxed);
        self.to_control.store(local.to_control, Relaxed);
        self.elapsed_ns.store(local.elapsed_ns, Relaxed);
        for (a, c) in self.stages.iter().zip(stages) {
            a.store(c);
        }
        for (i, p) in local.ports.iter().enumerate() {
            self.port_rx[i].store(p.rx, Relaxed);
            self.port_tx[i].store(p.tx, Relaxed);
            self.port_tx_bytes[i].store(p.tx_bytes, Relaxed);
            self.port_queued[i].store(p.queued, Relaxed);
            self.port_drops[i].store(&StageCounters { packets: 0, to_control: 0, drops: p.drops });
        }
        for (a, v) in self.group_rx.iter().zip(&local.group_rx) {
            a.store(*v, Relaxed);
        }
        for (a, v) in self.group_tx.iter().zip(&local.group_tx) {
            a.store(*v, Relaxed);
        }
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Adds one publication of this block to `s` (shaped like it, summing
    /// over workers); reads again while the worker is publishing, so the
    /// counters added belong to one publication.
    fn add_consistent(&self, s: &mut Snapshot) {
        // A reader is overtaken only while a publication is under way (a
        // few hundred ns every `publish_every` bursts): it spins a little,
        // then yields to the worker. Only a worker stopped in the middle of
        // a publication (it panicked) can keep it waiting; after this many
        // tries the last read is taken as it is.
        const SPINS: u32 = 64;
        const MAX_TRIES: u32 = 100_000;
        let mut one = s.zeroed();
        for tries in 0..=MAX_TRIES {
            let seq = self.seq.load(Ordering::Acquire);
            self.add_to(&mut one);
            fence(Ordering::Acquire);
            let whole = seq & 1 == 0 && self.seq.load(Relaxed) == seq;
            if whole || tries == MAX_TRIES {
                break;
            }
            one = s.zeroed();
            if tries < SPINS {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        s.add(&one);
    }

    /// Adds this block's counters to `s`, without the named list.
    fn add_to(&self, s: &mut Snapshot) {
        s.bursts += self.bursts.load(Relaxed);
        s.to_control += self.to_control.load(Relaxed);
        s.elapsed_ns = s.elapsed_ns.max(self.elapsed_ns.load(Relaxed));
        for (a, (_, c)) in self.stages.iter().zip(s.stages.iter_mut()) {
            a.load_into(c);
        }
        for (i, p) in s.ports.iter_mut().enumerate() {
            p.counters.rx += self.port_rx[i].load(Relaxed);
            p.counters.tx += self.port_tx[i].load(Relaxed);
            p.counters.tx_bytes += self.port_tx_bytes[i].load(Relaxed);
            p.counters.queued += self.port_queued[i].load(Relaxed);
            let mut d = StageCounters::default();
            self.port_drops[i].load_into(&mut d);
            p.counters.drops.merge(&d.drops);
        }
        for (i, g) in s.groups.iter_mut().enumerate() {
            g.offered += self.group_rx[i].load(Relaxed);
            g.delivered += self.group_tx[i].load(Relaxed);
        }
    }

    /// Marks the worker as finished (after its last publication).
    pub fn set_done(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the worker has finished.
    pub fn is_done(&self) -> bool {
        self.done.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Counters of one port, summed over workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnapshot {
    /// The port id.
    pub id: u16,
    /// Counters.
    pub counters: PortCounters,
}

/// Offered and delivered packets of one synthetic traffic group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The group's name from the configuration.
    pub name: String,
    /// Packets generated.
    pub offered: u64,
    /// Packets transmitted on some port.
    pub delivered: u64,
}

/// Counters of all workers, summed.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Bursts processed by all workers.
    pub bursts: u64,
    /// Longest time any worker has run (virtual or wall), ns.
    pub elapsed_ns: u64,
    /// Stage names with counters, in pipeline order.
    pub stages: Vec<(String, StageCounters)>,
    /// Ports in `[[ports]]` order.
    pub ports: Vec<PortSnapshot>,
    /// Synthetic traffic groups (empty for other backends).
    pub groups: Vec<GroupSnapshot>,
    /// Packets handed to control.
    pub to_control: u64,
    /// Whether every worker has stopped.
    pub all_done: bool,
    /// The slow path's counters, latency and rate (with `[slow_path]`).
    pub slow_path: Option<crate::slowpath::SlowPathSnapshot>,
    /// Named counters and levels of stages and egress disciplines, summed
    /// over workers (a level's sum is the router's total, e.g. the entries
    /// of all workers' tables), ordered by scope then first appearance
    /// (each element's counters before its levels).
    pub named: Vec<Named>,
}

impl Snapshot {
    /// The same shape (stage, port and group names) with every counter zero.
    fn zeroed(&self) -> Snapshot {
        Snapshot {
            stages: self
                .stages
                .iter()
                .map(|(n, _)| (n.clone(), StageCounters::default()))
                .collect(),
            ports: self
                .ports
                .iter()
                .map(|p| PortSnapshot { id: p.id, counters: PortCounters::default() })
                .collect(),
            groups: self
                .groups
                .iter()
                .map(|g| GroupSnapshot { name: g.name.clone(), ..Default::default() })
                .collect(),
            ..Default::default()
        }
    }

    /// Adds the counters of `o` (of the same shape) to these.
    fn add(&mut self, o: &Snapshot) {
        self.bursts += o.bursts;
        self.to_control += o.to_control;
        self.elapsed_ns = self.elapsed_ns.max(o.elapsed_ns);
        for ((_, a), (_, b)) in self.stages.iter_mut().zip(&o.stages) {
            a.packets += b.packets;
            a.to_control += b.to_control;
            a.drops.merge(&b.drops);
        }
        for (a, b) in self.ports.iter_mut().zip(&o.ports) {
            let (a, b) = (&mut a.counters, &b.counters);
            a.rx += b.rx;
            a.tx += b.tx;
            a.tx_bytes += b.tx_bytes;
            a.queued += b.queued;
            a.drops.merge(&b.drops);
        }
        for (a, b) in self.groups.iter_mut().zip(&o.groups) {
            a.offered += b.offered;
            a.delivered += b.delivered;
        }
    }

    /// Sums the published blocks of all workers.
    pub fn collect(
        workers: &[std::sync::Arc<WorkerStats>],
        stage_names: &[String],
        port_ids: &[u16],
        group_names: &[String],
    ) -> Snapshot {
        let mut s = Snapshot {
            stages: stage_names.iter().map(|n| (n.clone(), StageCounters::default())).collect(),
            ports: port_ids
                .iter()
                .map(|&id| PortSnapshot { id, counters: PortCounters::default() })
                .collect(),
            groups: group_names
                .iter()
                .map(|n| GroupSnapshot { name: n.clone(), ..Default::default() })
                .collect(),
            all_done: true,
            ..Default::default()
        };
        for w in workers {
            s.all_done &= w.is_done();
            w.add_consistent(&mut s);
            let named = w.named.lock().unwrap_or_else(|p| p.into_inner());
            for n in named.iter() {
                match s
                    .named
                    .iter_mut()
                    .find(|m| m.scope == n.scope && m.kind == n.kind && m.name == n.name)
                {
                    Some(m) => m.value += n.value,
                    None => s.named.push(*n),
                }
            }
        }
        s.named.sort_by_key(|n| n.scope);
        s
    }

    /// The summed value of named counter or level `name` of pipeline stage `stage`.
    pub fn stage_named(&self, stage: usize, name: &str) -> Option<u64> {
        self.named
            .iter()
            .find(|n| n.scope == Scope::Stage(stage) && n.name == name)
            .map(|n| n.value)
    }

    /// Packets received on all ports.
    pub fn rx(&self) -> u64 {
        self.ports.iter().map(|p| p.counters.rx).sum()
    }

    /// Packets transmitted on all ports.
    pub fn tx(&self) -> u64 {
        self.ports.iter().map(|p| p.counters.tx).sum()
    }

    /// All drops (stages and runtime), by reason.
    pub fn drops(&self) -> DropCounters {
        let mut d = DropCounters::default();
        for (_, c) in &self.stages {
            d.merge(&c.drops);
        }
        for p in &self.ports {
            d.merge(&p.counters.drops);
        }
        d
    }

    /// Packets still queued in egress disciplines.
    pub fn queued(&self) -> u64 {
        self.ports.iter().map(|p| p.counters.queued).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_snapshot_never_mixes_two_publications() {
        // The worker publishes rx = tx = stage packets = k for k = 1, 2, ...;
        // every snapshot must see the three equal.
        let w = Arc::new(WorkerStats::new(1, 1, 0));
        let writer = {
            let w = w.clone();
            std::thread::spawn(move || {
                let mut local =
                    LocalCounters { ports: vec![PortCounters::default()], ..Default::default() };
                for k in 1..=200_000u64 {
                    local.bursts = k;
                    local.ports[0].rx = k;
                    local.ports[0].tx = k;
                    let stage = StageCounters { packets: k, ..Default::default() };
                    w.publish(&local, std::iter::once(&stage));
                    // A worker publishes between bursts, not back to back.
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                }
                w.set_done();
            })
        };
        let (names, ports) = (vec!["s".to_string()], vec![0u16]);
        let mut seen = 0;
        loop {
            let s = Snapshot::collect(std::slice::from_ref(&w), &names, &ports, &[]);
            let p = &s.ports[0].counters;
            assert_eq!((p.rx, p.tx, s.stages[0].1.packets), (s.bursts, s.bursts, s.bursts));
            seen += 1;
            if s.all_done && s.bursts == 200_000 {
                break;
            }
        }
        writer.join().unwrap();
        assert!(seen > 1);
    }
}
