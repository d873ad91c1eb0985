//! The run-to-completion worker loop.
//!
//! ```text
//! loop {
//!     apply queued commands            (configuration changes, between bursts)
//!     now = io.now()                   (one clock read per burst)
//!     for each RX port:
//!         rx burst -> pipeline -> verdicts -> egress enqueue / free
//!     for each port: egress dequeue -> tx burst
//!     publish counters every `publish_every` bursts
//! }
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam_channel::Receiver;
use pipeline::{Batch, DropReason, Egress, PacketBuf, Pipeline, Verdict, BURST};

use crate::io::WorkerIo;
use crate::stats::{LocalCounters, PortCounters, WorkerStats};
use crate::RuntimeError;

/// A change applied by a worker between two bursts.
pub type Apply<B> = Box<dyn FnOnce(&mut Pipeline<B>, &mut [Box<dyn Egress<B>>]) + Send>;

/// A change applied between two bursts that also needs the worker's clock
/// (e.g. to reconfigure a token bucket without crediting or losing tokens).
pub type ApplyNow<B> =
    Box<dyn FnOnce(&mut Pipeline<B>, &mut [Box<dyn Egress<B>>], pipeline::Now) + Send>;

/// A message to one worker's command queue.
pub enum Command<B> {
    /// Run a closure on the worker's pipeline and egress disciplines
    /// (e.g. replace a stage's table), between two bursts.
    Apply(Apply<B>),
    /// Same, with the worker's current time (one extra clock read).
    ApplyNow(ApplyNow<B>),
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
    pub commands: Receiver<Command<I::Buf>>,
    /// Set by the router to stop every worker.
    pub stop: Arc<AtomicBool>,
    /// Self-imposed limits.
    pub limits: Limits,
    /// Bursts between two counter publications.
    pub publish_every: u32,
    /// Core to pin to, if any.
    pub core: Option<usize>,
    /// Per port: send forwarded packets straight to TX at the end of the
    /// burst, bypassing the egress discipline (an unshaped `fifo` would only
    /// pass them through; this saves a queue round trip per packet).
    pub direct: Vec<bool>,
}

/// Transmits `v` on port `port`, counting packets, bytes and TX-ring drops.
#[inline]
fn transmit<I: WorkerIo>(
    io: &mut I,
    port: u16,
    v: &mut Vec<I::Buf>,
    pc: &mut PortCounters,
    now: pipeline::Now,
) -> usize {
    let n = v.len();
    let mut bytes: u64 = v.iter().map(|b| b.len() as u64).sum();
    let sent = io.tx_burst(port, v, now);
    pc.tx += sent as u64;
    if !v.is_empty() {
        // The TX ring was full: the rest is dropped here.
        pc.drops.add(DropReason::QueueFull, v.len() as u64);
        for b in v.drain(..) {
            bytes -= b.len() as u64;
            io.free(b);
        }
    }
    pc.tx_bytes += bytes;
    n
}

impl<I: WorkerIo> Worker<I> {
    /// Runs until stopped, out of input, or at a limit.
    pub fn run(self) -> Result<(), RuntimeError> {
        let Worker {
            index: _,
            mut io,
            mut pipeline,
            mut egress,
            port_ids,
            stats,
            commands,
            stop,
            limits,
            publish_every,
            core,
            direct,
        } = self;
        let mut staged: Vec<Vec<I::Buf>> =
            port_ids.iter().map(|_| Vec::with_capacity(BURST)).collect();
        if let Some(core) = core {
            // Pinning is best effort: a container may forbid it; the worker still runs.
            let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
        }
        io.attach()?;
        let max_port = port_ids.iter().copied().max().map_or(0, usize::from);
        let mut slot = vec![usize::MAX; max_port + 1];
        for (i, p) in port_ids.iter().enumerate() {
            slot[usize::from(*p)] = i;
        }
        let mut local = LocalCounters {
            ports: vec![PortCounters::default(); port_ids.len()],
            ..Default::default()
        };
        let rx_ports: Vec<(u16, usize)> = io
            .rx_ports()
            .iter()
            .filter_map(|p| {
                slot.get(usize::from(*p)).filter(|s| **s != usize::MAX).map(|s| (*p, *s))
            })
            .collect();
        let mut batch: Batch<I::Buf> = Batch::new();
        let mut txv: Vec<I::Buf> = Vec::with_capacity(BURST);
        let mut rx_total = 0u64;
        let start = io.now();
        let publish_every = publish_every.max(1);
        // Counts down to the next publication (no division per burst).
        let mut publish_in = publish_every;
        // Ports whose egress discipline is used (the others bypass it).
        let shaped: Vec<usize> = (0..egress.len()).filter(|&e| !direct[e]).collect();

        loop {
            // Commands are rare: the empty check is one atomic load.
            while let Ok(cmd) = commands.try_recv() {
                match cmd {
                    Command::Apply(f) => f(&mut pipeline, &mut egress),
                    Command::ApplyNow(f) => f(&mut pipeline, &mut egress, io.now()),
                    Command::Publish => {
                        io.io_counters(&mut local);
                        stats.publish(&local, pipeline.counters().map(|(_, c)| c));
                        stats.publish_named(&pipeline, &egress);
                    }
                    Command::Stop => stop.store(true, Ordering::Relaxed),
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let now = io.now();
            local.elapsed_ns = now.mono_ns.saturating_sub(start.mono_ns);
            // The burst that reaches the time limit is still processed, so a
            // generator that clamps its clock to the limit offers its full load.
            let last = limits.duration_ns.is_some_and(|d| local.elapsed_ns >= d);
            let rx_open = limits.packets.is_none_or(|p| rx_total < p);
            let exhausted = io.exhausted();
            let mut moved = 0usize;

            if rx_open && !exhausted {
                for &(port, pslot) in &rx_ports {
                    let n = io.rx_burst(port, &mut batch);
                    if n == 0 {
                        continue;
                    }
                    local.ports[pslot].rx += n as u64;
                    rx_total += n as u64;
                    moved += n;
                    pipeline.run(&mut batch, now);
                    // Most bursts go to one port: remember its slot.
                    let (mut last_port, mut last_slot) = (u16::MAX, usize::MAX);
                    batch.drain(|buf, meta| match meta.verdict {
                        Verdict::Forward { port, class } => {
                            if port != last_port {
                                last_port = port;
                                last_slot =
                                    slot.get(usize::from(port)).copied().unwrap_or(usize::MAX);
                            }
                            let s = last_slot;
                            if s == usize::MAX {
                                local.ports[pslot].drops.inc(DropReason::NoRoute);
                                io.free(buf);
                            } else if direct[s] {
                                staged[s].push(buf);
                                if staged[s].len() == BURST {
                                    transmit(
                                        &mut io,
                                        port_ids[s],
                                        &mut staged[s],
                                        &mut local.ports[s],
                                        now,
                                    );
                                }
                            } else if let Err((buf, reason)) = egress[s].enqueue(buf, class, now) {
                                local.ports[s].drops.inc(reason);
                                io.free(buf);
                            }
                        }
                        Verdict::Drop(_) => io.free(buf),
                        Verdict::ToControl => {
                            // No control-plane consumer is attached to the
                            // runtime yet; the pipeline counted the packet.
                            local.to_control += 1;
                            io.free(buf);
                        }
                    });
                }
            }

            let mut queued = 0usize;
            for (e, v) in staged.iter_mut().enumerate() {
                if !v.is_empty() {
                    moved += transmit(&mut io, port_ids[e], v, &mut local.ports[e], now);
                }
            }
            for &e in &shaped {
                let eg = &mut egress[e];
                if eg.queued() > 0 {
                    let n = eg.dequeue(now, BURST, &mut txv);
                    if n > 0 {
                        moved += transmit(&mut io, port_ids[e], &mut txv, &mut local.ports[e], now);
                    }
                }
                let q = eg.queued();
                local.ports[e].queued = q as u64;
                queued += q;
            }

            local.bursts += 1;
            if last {
                break;
            }
            publish_in -= 1;
            if publish_in == 0 {
                publish_in = publish_every;
                io.io_counters(&mut local);
                stats.publish(&local, pipeline.counters().map(|(_, c)| c));
                stats.publish_named(&pipeline, &egress);
            }
            if moved == 0 {
                // Out of input: a replay's clock stops with its input, so
                // what is still queued stays queued; a generator's clock runs
                // on, so shaped queues drain first.
                if exhausted || (!rx_open && queued == 0) {
                    break;
                }
                io.idle();
            }
        }
        io.io_counters(&mut local);
        stats.publish(&local, pipeline.counters().map(|(_, c)| c));
        stats.publish_named(&pipeline, &egress);
        let res = io.finish();
        stats.set_done();
        res
    }
}
