//! The run-to-completion worker loop.
//!
//! ```text
//! loop {
//!     apply queued commands            (configuration changes, between bursts;
//!                                       looked for every `COMMAND_EVERY` busy iterations
//!                                       and after every idle one)
//!     now = io.now()                   (one clock read per burst)
//!     for each RX port: receive -> pipeline -> dispatch (TX vectors, egress queues, free list)
//!     transmit: staged TX vectors, then what each egress discipline releases
//!     publish counters every `publish_every` bursts
//! }
//! ```
//!
//! Verdicts are applied per burst, not per packet, where possible: a burst
//! whose packets all go to one pass-through port (known from the batch's
//! [`egress_port`](pipeline::Batch::egress_port) hint, or from one pass over
//! the verdicts) goes to TX as a whole vector; otherwise one pass partitions
//! it into per-port TX vectors and egress queues, and everything dropped is
//! returned with one [`WorkerIo::free_bulk`] call. Counters are plain local
//! integers, published every `publish_every` bursts and when the worker
//! stops, from one place ([`Loop::publish`]).
//!
//! Commands ([`Command`]) reach the worker's stages and egress disciplines
//! through [`Elements`], which does not name the buffer type: the control
//! plane drives every backend the same way.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Receiver;
use pipeline::{
    Batch, DropReason, Egress, Element, Meta, Now, PacketBuf, Pipeline, Reconfigured, Refused,
    Verdict, BURST,
};

use crate::io::WorkerIo;
use crate::stats::{LocalCounters, PortCounters, WorkerStats};
use crate::RuntimeError;

/// What a command sees of a worker: its stages and egress disciplines as
/// [`Element`]s, whatever buffer type the backend uses.
pub trait Elements {
    /// Index of the worker.
    fn worker(&self) -> usize;

    /// Number of pipeline stages.
    fn stages(&self) -> usize;

    /// Stage `index` of the pipeline.
    fn stage(&mut self, index: usize) -> Option<&mut dyn Element>;

    /// Whether `index` names one of these stages: a worker's stages are
    /// `0..stages()`, the slow path's are numbered from
    /// [`crate::slowpath::STAGE_BASE`], so one list of indices can reach
    /// both and each skips the other's.
    fn has_stage(&self, index: usize) -> bool {
        index < self.stages()
    }

    /// The egress discipline of the port at `slot` (its index in `[[ports]]`).
    fn egress(&mut self, slot: usize) -> Option<&mut dyn Element>;

    /// Applies a typed configuration to stage `index` in place.
    fn reconfigure_stage(
        &mut self,
        index: usize,
        config: &dyn Any,
        now: Now,
    ) -> Result<Reconfigured, Refused> {
        let s = self.stage(index).ok_or_else(|| no_element("stage", index))?;
        s.reconfigure(config, now)
    }

    /// Applies a typed configuration to the egress discipline at `slot` in
    /// place; packets it discards count as drops of that port
    /// ([`DropReason::Reconfigured`]).
    fn reconfigure_egress(
        &mut self,
        slot: usize,
        config: &dyn Any,
        now: Now,
    ) -> Result<Reconfigured, Refused>;
}

fn no_element(what: &str, index: usize) -> Refused {
    Refused::Invalid(pipeline::Invalid::at("", format!("this worker has no {what} {index}")))
}

/// A command body: runs on a worker between two bursts, with the time of
/// its latest burst (no extra clock read, so a virtual clock does not move).
pub type Apply = Box<dyn FnOnce(&mut dyn Elements, Now) + Send>;

/// A message to one worker's command queue.
pub enum Command {
    /// Run a closure on the worker's stages and egress disciplines (change
    /// parameters in place, read or change a protocol's tables).
    Apply(Apply),
    /// Publish counters now.
    Publish,
    /// Stop after the current burst.
    Stop,
}

/// When a worker stops by itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Stop once the worker's clock has advanced this far.
    pub duration_ns: Option<u64>,
    /// Stop after receiving this many packets.
    pub packets: Option<u64>,
}

/// Everything one worker owns.
pub struct Worker<I: WorkerIo> {
    /// Index of the worker.
    pub index: usize,
    /// Its I/O queues, pool and clock.
    pub io: I,
    /// Its pipeline (its own stage instances and state shard).
    pub pipeline: Pipeline<I::Buf>,
    /// One egress discipline per port, in `[[ports]]` order.
    pub egress: Vec<Box<dyn Egress<I::Buf>>>,
    /// Port ids in `[[ports]]` order.
    pub port_ids: Vec<u16>,
    /// Its published counters.
    pub stats: Arc<WorkerStats>,
    /// Its command queue.
    pub commands: Receiver<Command>,
    /// Set by the router to stop every worker.
    pub stop: Arc<AtomicBool>,
    /// Self-imposed limits.
    pub limits: Limits,
    /// Bursts between two counter publications.
    pub publish_every: u32,
    /// Core to pin to, if any.
    pub core: Option<usize>,
    /// Its end of the slow path (`[slow_path]`), if there is one.
    pub slow: Option<crate::slowpath::WorkerLink<I::Buf>>,
}

/// Transmits `v` on port `port`, counting packets, bytes and TX-ring drops.
#[inline(always)]
fn transmit<I: WorkerIo>(
    io: &mut I,
    port: u16,
    v: &mut Vec<I::Buf>,
    pc: &mut PortCounters,
    now: Now,
) -> usize {
    let n = v.len();
    let mut bytes = I::bytes(v);
    let sent = io.tx_burst(port, v, now);
    pc.tx += sent as u64;
    if !v.is_empty() {
        // The TX ring was full: the rest is dropped here.
        pc.drops.add(DropReason::QueueFull, v.len() as u64);
        bytes -= I::bytes(v);
        io.free_bulk(v);
    }
    pc.tx_bytes += bytes;
    n
}

/// The port every packet of a burst is forwarded to, if there is one.
///
/// The common case (a burst from one RX queue routed as a whole) then goes
/// to TX as one vector instead of packet by packet; the check is one pass
/// over the verdicts without early exit, so it compiles to a tight loop.
#[inline]
fn common_port(metas: &[Meta]) -> Option<u16> {
    let Some(Verdict::Forward { port, .. }) = metas.first().map(|m| m.verdict) else {
        return None;
    };
    let mut same = true;
    for m in metas {
        same &= matches!(m.verdict, Verdict::Forward { port: p, .. } if p == port);
    }
    same.then_some(port)
}

/// Loop iterations that moved packets between two looks at the command
/// queue (after an iteration that moved nothing, the next one looks): a
/// command waits for at most this many bursts per RX port, microseconds
/// under load. An empty check of the queue costs about 30 instructions,
/// more than the rest of an iteration's bookkeeping.
pub const COMMAND_EVERY: u32 = 8;

/// How long a stopping worker waits for its packets on the slow path.
const SLOW_DRAIN: std::time::Duration = std::time::Duration::from_millis(100);

/// Port id → slot in `[[ports]]` order; `NO_SLOT` for unknown ports.
const NO_SLOT: usize = usize::MAX;

/// A worker's state while it runs.
struct Loop<I: WorkerIo> {
    index: usize,
    io: I,
    pipeline: Pipeline<I::Buf>,
    egress: Vec<Box<dyn Egress<I::Buf>>>,
    port_ids: Vec<u16>,
    stats: Arc<WorkerStats>,
    commands: Receiver<Command>,
    stop: Arc<AtomicBool>,
    limits: Limits,
    /// Port id → slot.
    slot: Vec<usize>,
    /// RX ports with their slots.
    rx_ports: Vec<(u16, usize)>,
    /// Per slot: whether the egress discipline is a pass-through (forwarded
    /// packets go straight to TX at the end of the burst).
    direct: Vec<bool>,
    /// Slots whose egress discipline queues.
    shaped: Vec<usize>,
    /// Port id → slot if the port's egress discipline is a pass-through,
    /// `NO_SLOT` otherwise (one look-up for a burst that goes to TX whole).
    direct_slot: Vec<usize>,
    /// Per slot: packets bound for TX in this burst.
    staged: Vec<Vec<I::Buf>>,
    /// Whether a `staged` vector may hold packets (set when one is pushed
    /// to, cleared when [`Loop::transmit`] has sent them all), so that an
    /// iteration whose bursts went to TX whole does not visit every port.
    staged_any: bool,
    batch: Batch<I::Buf>,
    /// What an egress discipline released, on its way to TX.
    txv: Vec<I::Buf>,
    /// Buffers of one burst to free in bulk (dropped, to control, unroutable).
    dead: Vec<I::Buf>,
    local: LocalCounters,
    rx_total: u64,
    start: Now,
    /// The time of the latest burst: what commands see, so that they cost
    /// no clock read (which would advance a virtual clock).
    last_now: Now,
    publish_every: u32,
    /// Counts down to the next publication (no division per burst).
    publish_in: u32,
    /// Counts down to the next look at the command queue.
    commands_in: u32,
    slow: Option<crate::slowpath::WorkerLink<I::Buf>>,
}

impl<I: WorkerIo> Worker<I> {
    /// Runs until stopped, out of input, or at a limit.
    pub fn run(self) -> Result<(), RuntimeError> {
        let mut w = Loop::start(self)?;
        loop {
            w.commands_in -= 1;
            if w.commands_in == 0 {
                w.commands_in = COMMAND_EVERY;
                w.apply_commands();
            }
            if w.stop.load(Ordering::Relaxed) {
                break;
            }
            let now = w.io.now();
            w.last_now = now;
            w.local.elapsed_ns = now.mono_ns.saturating_sub(w.start.mono_ns);
            // The burst that reaches the time limit is still processed, so a
            // generator that clamps its clock to the limit offers its full load.
            let last = w.limits.duration_ns.is_some_and(|d| w.local.elapsed_ns >= d);
            let rx_open = w.limits.packets.is_none_or(|p| w.rx_total < p);
            let exhausted = w.io.exhausted();
            let mut moved = 0;
            if rx_open && !exhausted {
                moved += w.receive(now);
            }
            if w.slow.is_some() {
                w.slow_returns(now);
            }
            let (sent, queued) = w.transmit(now);
            moved += sent;
            w.local.bursts += 1;
            if last {
                break;
            }
            w.publish_in -= 1;
            if w.publish_in == 0 {
                w.publish_in = w.publish_every;
                w.publish();
            }
            if moved == 0 {
                // Out of input: a replay's clock stops with its input, so
                // what is still queued stays queued; a generator's clock runs
                // on, so shaped queues drain first.
                if exhausted || (!rx_open && queued == 0) {
                    break;
                }
                // An idle worker looks at its commands every iteration.
                w.commands_in = 1;
                w.io.idle();
            }
        }
        w.drain_slow_path();
        w.publish();
        let res = w.io.finish();
        w.stats.set_done();
        res
    }
}

impl<I: WorkerIo> Loop<I> {
    /// Pins the thread, attaches the I/O and sets up the per-burst buffers.
    fn start(w: Worker<I>) -> Result<Self, RuntimeError> {
        let Worker {
            index,
            mut io,
            pipeline,
            egress,
            port_ids,
            stats,
            commands,
            stop,
            limits,
            publish_every,
            core,
            slow,
        } = w;
        if let Some(core) = core {
            // Pinning is best effort: a container may forbid it; the worker still runs.
            let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
        }
        io.attach()?;
        let max_port = port_ids.iter().copied().max().map_or(0, usize::from);
        let mut slot = vec![NO_SLOT; max_port + 1];
        for (i, p) in port_ids.iter().enumerate() {
            slot[usize::from(*p)] = i;
        }
        let rx_ports = io
            .rx_ports()
            .iter()
            .filter_map(|p| slot.get(usize::from(*p)).filter(|s| **s != NO_SLOT).map(|s| (*p, *s)))
            .collect();
        let start = io.now();
        let publish_every = publish_every.max(1);
        let mut w = Loop {
            index,
            io,
            pipeline,
            staged: port_ids.iter().map(|_| Vec::with_capacity(BURST)).collect(),
            staged_any: false,
            local: LocalCounters {
                ports: vec![PortCounters::default(); port_ids.len()],
                ..Default::default()
            },
            direct: Vec::new(),
            shaped: Vec::new(),
            direct_slot: Vec::new(),
            egress,
            port_ids,
            stats,
            commands,
            stop,
            limits,
            slot,
            rx_ports,
            batch: Batch::new(),
            txv: Vec::with_capacity(BURST),
            dead: Vec::with_capacity(BURST),
            rx_total: 0,
            start,
            last_now: start,
            publish_every,
            publish_in: publish_every,
            // The first iteration looks.
            commands_in: 1,
            slow,
        };
        w.configured();
        Ok(w)
    }

    /// Derives what the hot path keeps from the configuration: at the start
    /// and after every live change.
    fn configured(&mut self) {
        self.classify_egress();
        self.io.pipeline_reads_packets(self.pipeline.reads_packets());
    }

    /// Which ports bypass their egress discipline (asked again after every
    /// command, since a live change may add or remove shaping).
    fn classify_egress(&mut self) {
        self.direct = self.egress.iter().map(|e| e.is_pass_through()).collect();
        self.shaped = (0..self.egress.len()).filter(|&e| !self.direct[e]).collect();
        let direct = &self.direct;
        self.direct_slot = self
            .slot
            .iter()
            .map(|&s| if s != NO_SLOT && direct[s] { s } else { NO_SLOT })
            .collect();
    }

    /// Runs the queued commands. Commands are rare: the empty check is two
    /// atomic loads.
    fn apply_commands(&mut self) {
        // Two loads; an empty `try_recv` costs several times that per burst.
        if self.commands.is_empty() {
            return;
        }
        let mut changed = false;
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Apply(f) => {
                    let mut view = View {
                        index: self.index,
                        pipeline: &mut self.pipeline,
                        egress: &mut self.egress,
                        ports: &mut self.local.ports,
                    };
                    f(&mut view, self.last_now);
                    changed = true;
                }
                Command::Publish => self.publish(),
                Command::Stop => self.stop.store(true, Ordering::Relaxed),
            }
        }
        if changed {
            self.configured();
        }
    }

    /// Publishes every counter of the worker (the only place that does).
    fn publish(&mut self) {
        self.io.io_counters(&mut self.local);
        self.stats.publish(&self.local, self.pipeline.counters().map(|(_, c)| c));
        self.stats.publish_named(&self.pipeline, &self.egress);
    }

    /// Receives a burst from every RX port, runs the pipeline over it and
    /// dispatches the verdicts; returns the packets received.
    #[inline]
    fn receive(&mut self, now: Now) -> usize {
        let mut moved = 0;
        for k in 0..self.rx_ports.len() {
            let (port, pslot) = self.rx_ports[k];
            let n = self.io.rx_burst(port, &mut self.batch);
            if n == 0 {
                continue;
            }
            self.local.ports[pslot].rx += n as u64;
            self.rx_total += n as u64;
            moved += n;
            self.pipeline.run(&mut self.batch, now);
            self.dispatch(pslot, now);
        }
        moved
    }

    /// Applies the verdicts of the batch: TX vectors, egress queues, and one
    /// bulk free of everything else.
    #[inline]
    fn dispatch(&mut self, pslot: usize, now: Now) {
        // The batch may already know that every packet goes to one port.
        let hint = if self.batch.all_live() { self.batch.egress_port() } else { None };
        let Loop {
            io,
            slot,
            direct,
            direct_slot,
            staged,
            staged_any,
            egress,
            local,
            dead,
            port_ids,
            batch,
            slow,
            ..
        } = self;
        batch.drain_with(|bufs, metas| {
            // Fast path: the whole burst leaves on one pass-through port;
            // packets staged for it earlier go first.
            if let Some(port) = hint.or_else(|| common_port(metas)) {
                let s = direct_slot.get(usize::from(port)).copied().unwrap_or(NO_SLOT);
                if s != NO_SLOT {
                    let pc = &mut local.ports[s];
                    if *staged_any && !staged[s].is_empty() {
                        transmit(io, port, &mut staged[s], pc, now);
                    }
                    transmit(io, port, bufs, pc, now);
                    return;
                }
            }
            // Mixed verdicts: one pass partitions the burst into per-port TX
            // vectors, egress queues and a free list.
            let (mut last_port, mut last_slot) = (u16::MAX, NO_SLOT);
            // The wall time of this burst's punts, read at the first one.
            let mut punted_at = None;
            for (buf, meta) in bufs.drain(..).zip(metas) {
                match meta.verdict {
                    Verdict::Forward { port, class } => {
                        if port != last_port {
                            last_port = port;
                            last_slot = slot.get(usize::from(port)).copied().unwrap_or(NO_SLOT);
                        }
                        let s = last_slot;
                        if s == NO_SLOT {
                            local.ports[pslot].drops.inc(DropReason::NoRoute);
                            dead.push(buf);
                        } else if direct[s] {
                            staged[s].push(buf);
                            *staged_any = true;
                            if staged[s].len() == BURST {
                                transmit(io, port_ids[s], &mut staged[s], &mut local.ports[s], now);
                            }
                        } else if let Err((buf, reason)) = egress[s].enqueue(buf, class, now) {
                            local.ports[s].drops.inc(reason);
                            dead.push(buf);
                        }
                    }
                    Verdict::Drop(_) => dead.push(buf),
                    Verdict::ToControl => match slow {
                        // Without a slow path the count is all there is.
                        None => {
                            local.to_control += 1;
                            dead.push(buf);
                        }
                        Some(link) => {
                            let at = *punted_at.get_or_insert_with(std::time::Instant::now);
                            match link.punt(buf, *meta, now, at) {
                                Ok(()) => local.to_control += 1,
                                Err(buf) => {
                                    local.ports[pslot].drops.inc(DropReason::SlowPathFull);
                                    dead.push(buf);
                                }
                            }
                        }
                    },
                }
            }
            if !dead.is_empty() {
                io.free_bulk(dead);
            }
        });
    }

    /// At the end of a run: waits a little for the packets still on the
    /// slow path (replies a stopping router can still send) and transmits
    /// them; what is not back within [`SLOW_DRAIN`] is freed by the slow path.
    fn drain_slow_path(&mut self) {
        let deadline = std::time::Instant::now() + SLOW_DRAIN;
        while self.slow.as_ref().is_some_and(|l| l.in_flight() > 0)
            && std::time::Instant::now() < deadline
        {
            self.slow_returns(self.last_now);
            self.transmit(self.last_now);
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        self.slow_returns(self.last_now);
        self.transmit(self.last_now);
    }

    /// Takes back what the slow path has finished with: forwarded packets
    /// join this burst's TX vectors or egress queues, the rest is freed.
    fn slow_returns(&mut self, now: Now) {
        let Some(link) = self.slow.as_mut() else { return };
        while let Some(r) = link.returned() {
            let in_slot = self.slot.get(usize::from(r.in_port)).copied().unwrap_or(NO_SLOT);
            let Verdict::Forward { port, class } = r.verdict else {
                self.dead.push(r.buf);
                continue;
            };
            let s = self.slot.get(usize::from(port)).copied().unwrap_or(NO_SLOT);
            if s == NO_SLOT {
                if let Some(pc) = self.local.ports.get_mut(in_slot) {
                    pc.drops.inc(DropReason::NoRoute);
                }
                self.dead.push(r.buf);
            } else if self.direct[s] {
                self.staged[s].push(r.buf);
                self.staged_any = true;
                if self.staged[s].len() >= BURST {
                    let pc = &mut self.local.ports[s];
                    transmit(&mut self.io, port, &mut self.staged[s], pc, now);
                }
            } else if let Err((buf, reason)) = self.egress[s].enqueue(r.buf, class, now) {
                self.local.ports[s].drops.inc(reason);
                self.dead.push(buf);
            }
        }
        if !self.dead.is_empty() {
            self.io.free_bulk(&mut self.dead);
        }
    }

    /// Sends the staged TX vectors, then what each queueing egress
    /// discipline releases now; returns (packets sent, packets still queued).
    #[inline(always)]
    fn transmit(&mut self, now: Now) -> (usize, usize) {
        // Nothing staged and no queueing discipline: nothing to do (the
        // usual case when whole bursts go to TX).
        if !self.staged_any && self.shaped.is_empty() {
            return (0, 0);
        }
        self.transmit_all(now)
    }

    /// [`Loop::transmit`] with something to look at.
    #[inline(never)]
    fn transmit_all(&mut self, now: Now) -> (usize, usize) {
        let mut moved = 0;
        if self.staged_any {
            for (e, v) in self.staged.iter_mut().enumerate() {
                if !v.is_empty() {
                    let pc = &mut self.local.ports[e];
                    moved += transmit(&mut self.io, self.port_ids[e], v, pc, now);
                }
            }
            self.staged_any = false;
        }
        let mut queued = 0;
        for &e in &self.shaped {
            let eg = &mut self.egress[e];
            if eg.queued() > 0 && eg.dequeue(now, BURST, &mut self.txv) > 0 {
                let (port, pc) = (self.port_ids[e], &mut self.local.ports[e]);
                moved += transmit(&mut self.io, port, &mut self.txv, pc, now);
            }
            let q = eg.queued();
            self.local.ports[e].queued = q as u64;
            queued += q;
        }
        (moved, queued)
    }
}

/// [`Elements`] over a worker's pipeline and egress disciplines.
struct View<'a, B: PacketBuf> {
    index: usize,
    pipeline: &'a mut Pipeline<B>,
    egress: &'a mut [Box<dyn Egress<B>>],
    ports: &'a mut [PortCounters],
}

impl<B: PacketBuf + 'static> Elements for View<'_, B> {
    fn worker(&self) -> usize {
        self.index
    }

    fn stages(&self) -> usize {
        self.pipeline.len()
    }

    fn stage(&mut self, index: usize) -> Option<&mut dyn Element> {
        self.pipeline.stage_mut(index).map(|s| s as &mut dyn Element)
    }

    fn egress(&mut self, slot: usize) -> Option<&mut dyn Element> {
        self.egress.get_mut(slot).map(|e| &mut **e as &mut dyn Element)
    }

    fn reconfigure_egress(
        &mut self,
        slot: usize,
        config: &dyn Any,
        now: Now,
    ) -> Result<Reconfigured, Refused> {
        let e = self.egress.get_mut(slot).ok_or_else(|| no_element("egress", slot))?;
        let r = e.reconfigure(config, now)?;
        let pc = &mut self.ports[slot];
        pc.drops.add(DropReason::Reconfigured, r.lost());
        pc.queued = e.queued() as u64;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::stats::Snapshot;
    use pipeline::{Class, Fifo, Now, Stage};

    /// A FIFO the worker bypasses (what an unshaped `fifo` port is).
    struct PassThrough(Fifo<Vec<u8>>);
    impl Element for PassThrough {
        fn name(&self) -> &str {
            "pass-through"
        }
    }
    impl Egress<Vec<u8>> for PassThrough {
        fn enqueue(&mut self, b: Vec<u8>, c: Class, now: Now) -> Result<(), (Vec<u8>, DropReason)> {
            self.0.enqueue(b, c, now)
        }
        fn dequeue(&mut self, now: Now, max: usize, out: &mut Vec<Vec<u8>>) -> usize {
            self.0.dequeue(now, max, out)
        }
        fn queued(&self) -> usize {
            self.0.queued()
        }
        fn is_pass_through(&self) -> bool {
            true
        }
    }

    /// What the mock backend saw.
    #[derive(Default)]
    struct Rec {
        sent: Vec<(u16, Vec<u8>)>,
        freed: Vec<Vec<u8>>,
        bulk_frees: usize,
        /// What the worker said of its pipeline reading packet bytes.
        reads: Vec<bool>,
    }

    /// A scripted backend: fixed bursts per RX port and a TX ring that takes
    /// at most `tx_room` packets per call.
    struct Mock {
        ports: Vec<u16>,
        input: Vec<(u16, Vec<Vec<u8>>)>,
        tx_room: usize,
        t: u64,
        rec: Arc<Mutex<Rec>>,
    }

    impl WorkerIo for Mock {
        type Buf = Vec<u8>;
        fn rx_ports(&self) -> &[u16] {
            &self.ports
        }
        fn pipeline_reads_packets(&mut self, reads: bool) {
            self.rec.lock().unwrap().reads.push(reads);
        }
        fn rx_burst(&mut self, port: u16, batch: &mut Batch<Vec<u8>>) -> usize {
            let Some(k) = self.input.iter().position(|(p, _)| *p == port) else { return 0 };
            let (_, burst) = self.input.remove(k);
            batch.extend_with(port, |v| v.extend(burst)).len()
        }
        fn tx_burst(&mut self, port: u16, pkts: &mut Vec<Vec<u8>>, _now: Now) -> usize {
            let n = pkts.len().min(self.tx_room);
            self.rec.lock().unwrap().sent.extend(pkts.drain(..n).map(|p| (port, p)));
            n
        }
        fn free(&mut self, buf: Vec<u8>) {
            self.rec.lock().unwrap().freed.push(buf);
        }
        fn free_bulk(&mut self, bufs: &mut Vec<Vec<u8>>) {
            let mut r = self.rec.lock().unwrap();
            r.bulk_frees += 1;
            r.freed.append(bufs);
        }
        fn now(&mut self) -> Now {
            self.t += 1000;
            Now::from_unix_ns(self.t)
        }
        fn exhausted(&self) -> bool {
            self.input.is_empty()
        }
    }

    /// Routes by the first byte: 0 drop, 1 control, 255 leave as is (back
    /// out of the ingress port), any other value forward to that port (class
    /// 1 for port 3).
    struct ByFirstByte;
    impl Element for ByFirstByte {
        fn name(&self) -> &str {
            "by-first-byte"
        }
    }
    impl Stage<Vec<u8>> for ByFirstByte {
        fn process(&mut self, batch: &mut Batch<Vec<u8>>, _now: Now) {
            for i in batch.live() {
                match batch.data(i)[0] {
                    0 => batch.drop_packet(i, DropReason::Policy),
                    1 => batch.to_control(i),
                    255 => {}
                    p => batch.forward(i, u16::from(p), Class(u8::from(p == 3))),
                }
            }
        }
    }

    /// Runs one worker over ports 2, 3, 4 (port 3 behind a FIFO if `shaped`).
    fn run(input: Vec<(u16, Vec<Vec<u8>>)>, tx_room: usize, shaped: bool) -> (Rec, Snapshot) {
        run_with(Pipeline::new().with(ByFirstByte), input, tx_room, shaped)
    }

    /// [`run`] with another pipeline.
    fn run_with(
        pipeline: Pipeline<Vec<u8>>,
        input: Vec<(u16, Vec<Vec<u8>>)>,
        tx_room: usize,
        shaped: bool,
    ) -> (Rec, Snapshot) {
        let port_ids = vec![2u16, 3, 4];
        let stats = Arc::new(WorkerStats::new(1, port_ids.len(), 0));
        let (_tx, rx) = crossbeam_channel::unbounded();
        let rec = Arc::new(Mutex::new(Rec::default()));
        let io = Mock { ports: port_ids.clone(), input, tx_room, t: 0, rec: rec.clone() };
        let w = Worker {
            index: 0,
            io,
            pipeline,
            egress: port_ids
                .iter()
                .map(|&p| {
                    if p == 3 && shaped {
                        Box::new(Fifo::new(64)) as Box<dyn Egress<Vec<u8>>>
                    } else {
                        Box::new(PassThrough(Fifo::new(64)))
                    }
                })
                .collect(),
            port_ids: port_ids.clone(),
            stats: stats.clone(),
            commands: rx,
            stop: Arc::new(AtomicBool::new(false)),
            limits: Limits::default(),
            publish_every: 1,
            core: None,
            slow: None,
        };
        w.run().unwrap();
        let snap = Snapshot::collect(&[stats], &["by-first-byte".into()], &port_ids, &[]);
        let rec = std::mem::take(&mut *rec.lock().unwrap());
        (rec, snap)
    }

    #[test]
    fn the_io_learns_whether_the_pipeline_reads_packets() {
        let (rec, _) = run(vec![(2, vec![vec![4, 0]])], 32, false);
        assert_eq!(rec.reads, [true]);
        // A pipeline that routes on metadata alone.
        let ctx = crate::registry::BuildContext { worker: 0, workers: 1, ports: vec![2, 3, 4] };
        let map = crate::stages::PortForwardConfig { port: None, map: vec![[2, 4]] };
        let forward = crate::stages::PortForward::new(&ctx, map).unwrap();
        let (rec, _) = run_with(Pipeline::new().with(forward), vec![(2, vec![vec![9]])], 32, false);
        assert_eq!(rec.reads, [false]);
        assert_eq!(rec.sent, [(4, vec![9])]);
    }

    /// Forwards like [`ByFirstByte`]; at the packet whose second byte is
    /// `at`, queues a command that records the time it runs at.
    struct Cue {
        at: u8,
        commands: crossbeam_channel::Sender<Command>,
        seen: Arc<Mutex<Vec<(&'static str, u64)>>>,
    }
    impl Element for Cue {
        fn name(&self) -> &str {
            "cue"
        }
    }
    impl Stage<Vec<u8>> for Cue {
        fn process(&mut self, batch: &mut Batch<Vec<u8>>, now: Now) {
            if batch.live().any(|i| batch.data(i)[1] == self.at) {
                self.seen.lock().unwrap().push(("sent", now.mono_ns));
                let seen = self.seen.clone();
                let _ = self.commands.send(Command::Apply(Box::new(move |_, now: Now| {
                    seen.lock().unwrap().push(("applied", now.mono_ns));
                })));
            }
            ByFirstByte.process(batch, now);
        }
    }

    #[test]
    fn commands_are_applied_within_command_every_busy_bursts() {
        // 40 bursts on port 2 keep the worker busy; the mock clock advances
        // 1000 ns per loop iteration. A command queued before the start runs
        // before the first burst; one queued at burst 10 within
        // COMMAND_EVERY iterations.
        let port_ids = vec![2u16, 3, 4];
        let stats = Arc::new(WorkerStats::new(1, port_ids.len(), 0));
        let (tx, rx) = crossbeam_channel::unbounded();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s1 = seen.clone();
        let _ = tx.send(Command::Apply(Box::new(move |_, now: Now| {
            s1.lock().unwrap().push(("first", now.mono_ns));
        })));
        let rec = Arc::new(Mutex::new(Rec::default()));
        let input = (0..40).map(|i| (2, vec![pkt(4, i, 60)])).collect();
        let io = Mock { ports: port_ids.clone(), input, tx_room: 64, t: 0, rec: rec.clone() };
        let w = Worker {
            index: 0,
            io,
            pipeline: Pipeline::new().with(Cue { at: 10, commands: tx, seen: seen.clone() }),
            egress: port_ids
                .iter()
                .map(|_| Box::new(PassThrough(Fifo::new(64))) as Box<dyn Egress<Vec<u8>>>)
                .collect(),
            port_ids: port_ids.clone(),
            stats,
            commands: rx,
            stop: Arc::new(AtomicBool::new(false)),
            limits: Limits::default(),
            publish_every: 1,
            core: None,
            slow: None,
        };
        w.run().unwrap();
        let seen = seen.lock().unwrap().clone();
        // The start reads the clock once (1000 ns), the first burst at 2000.
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert_eq!(seen[0], ("first", 1000));
        let (("sent", sent), ("applied", applied)) = (seen[1], seen[2]) else { panic!("{seen:?}") };
        assert_eq!(sent, 12_000);
        assert!(applied >= sent && applied < sent + u64::from(COMMAND_EVERY) * 1000, "{seen:?}");
        assert_eq!(rec.lock().unwrap().sent.len(), 40);
    }

    fn pkt(first: u8, id: u8, len: usize) -> Vec<u8> {
        let mut v = vec![id; len];
        v[0] = first;
        v
    }

    #[test]
    fn uniform_bursts_go_to_tx_whole_and_in_order() {
        // Two full bursts from port 2 to port 4, one from port 4 back to itself.
        let a: Vec<_> = (0..32).map(|i| pkt(4, i, 60)).collect();
        let b: Vec<_> = (32..64).map(|i| pkt(4, i, 61)).collect();
        let c: Vec<_> = (0..20).map(|i| pkt(255, i, 62)).collect();
        let (rec, snap) = run(vec![(2, a.clone()), (4, c.clone()), (2, b.clone())], 64, false);
        let to4: Vec<_> =
            rec.sent.iter().filter(|(p, _)| *p == 4).map(|(_, v)| v.clone()).collect();
        let expect: Vec<_> = a.iter().chain(&c).chain(&b).cloned().collect();
        assert_eq!(to4, expect);
        assert_eq!(rec.sent.len(), 84);
        assert!(rec.freed.is_empty());
        assert_eq!(snap.ports[2].counters.tx, 84);
        assert_eq!(snap.ports[2].counters.tx_bytes, 32 * 60 + 32 * 61 + 20 * 62);
        assert_eq!(snap.rx(), 84);
    }

    #[test]
    fn mixed_bursts_are_partitioned_and_counted() {
        // One burst: drops, control, two ports, an unknown port (9), a full TX ring.
        let burst = vec![
            pkt(0, 0, 50),
            pkt(3, 1, 51),
            pkt(1, 2, 52),
            pkt(4, 3, 53),
            pkt(9, 4, 54),
            pkt(3, 5, 55),
            pkt(4, 6, 56),
            pkt(4, 7, 57),
        ];
        for shaped in [false, true] {
            // Port 4's ring takes 2 packets per call: the third is a QueueFull drop.
            let (rec, snap) = run(vec![(2, burst.clone())], 2, shaped);
            let ids = |port| {
                rec.sent.iter().filter(|(p, _)| *p == port).map(|(_, v)| v[1]).collect::<Vec<_>>()
            };
            assert_eq!(ids(3), [1, 5], "shaped {shaped}");
            assert_eq!(ids(4), [3, 6]);
            let mut freed: Vec<u8> = rec.freed.iter().map(|v| v[1]).collect();
            freed.sort();
            assert_eq!(freed, [0, 2, 4, 7]);
            // The burst's dead packets (drop, control, no route) went back in one call.
            assert!(rec.bulk_frees >= 1);
            let p = |i: usize| &snap.ports[i].counters;
            assert_eq!((p(1).tx, p(1).tx_bytes), (2, 51 + 55));
            assert_eq!((p(2).tx, p(2).tx_bytes), (2, 53 + 56));
            assert_eq!(p(2).drops.get(DropReason::QueueFull), 1);
            assert_eq!(p(0).drops.get(DropReason::NoRoute), 1);
            assert_eq!(snap.to_control, 1);
            assert_eq!(snap.stages[0].1.drops.get(DropReason::Policy), 1);
            assert_eq!(snap.stages[0].1.to_control, 1);
        }
    }
}
