//! The `Stage` trait and the `Pipeline` that runs stages in order.

use crate::batch::{Batch, Indices};
use crate::buf::PacketBuf;
use crate::counters::StageCounters;
use crate::element::Element;
use crate::time::Now;
use crate::verdict::Verdict;

/// One step of packet processing with one job (parse, verify, police, mark...).
///
/// A stage handles a whole burst at once so that it can prefetch table
/// entries and pipeline AES across packets. It must only touch live packets
/// (`batch.live()`), and it must never panic on packet contents: bad packets
/// are dropped with a reason. Its name, named counters and live control
/// hooks come from [`Element`], which does not depend on the buffer type.
pub trait Stage<B: PacketBuf>: Element {
    /// Processes the live packets of `batch` at time `now`.
    fn process(&mut self, batch: &mut Batch<B>, now: Now);

    /// Whether the stage reads or writes packet bytes (most do). A pipeline
    /// whose stages all answer `false` (pure port forwarding) decides on
    /// metadata alone, so the I/O backend need not prefetch packet data.
    fn reads_packets(&self) -> bool {
        true
    }
}

/// Stages run in order over each burst, with per-stage counters.
///
/// After each stage the pipeline attributes every packet that left the live
/// set to that stage's counters (by drop reason, or as handed to control), so
/// stages need not count their own drops and nothing is dropped silently.
pub struct Pipeline<B> {
    stages: Vec<Box<dyn Stage<B>>>,
    counters: Vec<StageCounters>,
}

impl<B: PacketBuf> Default for Pipeline<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: PacketBuf> Pipeline<B> {
    /// An empty pipeline (forwards everything as it came).
    pub fn new() -> Self {
        Pipeline { stages: Vec::new(), counters: Vec::new() }
    }

    /// Appends a stage.
    pub fn push(&mut self, stage: Box<dyn Stage<B>>) {
        self.stages.push(stage);
        self.counters.push(StageCounters::default());
    }

    /// Appends a stage (builder style).
    pub fn with(mut self, stage: impl Stage<B> + 'static) -> Self {
        self.push(Box::new(stage));
        self
    }

    /// Whether any stage reads packet bytes ([`Stage::reads_packets`]).
    pub fn reads_packets(&self) -> bool {
        self.stages.iter().any(|s| s.reads_packets())
    }

    /// Number of stages.
    pub fn len(&self) -> usize {
        self.stages.len()
    }

    /// Whether the pipeline has no stages.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Runs every stage over `batch`; stops early once no packet is live.
    #[inline(always)]
    pub fn run(&mut self, batch: &mut Batch<B>, now: Now) {
        batch.forget_stage_notes();
        // One stage (a plain forwarder): no loop over stages.
        if let ([stage], [counters]) = (&mut self.stages[..], &mut self.counters[..]) {
            let before = batch.live_mask();
            if before != 0 {
                let live = live_count(batch, before);
                run_stage(&mut **stage, counters, batch, now, before, live);
            }
        } else {
            self.run_stages(batch, now);
        }
        batch.forget_stage_notes();
    }

    /// [`run`](Self::run) for any number of stages (the general path).
    fn run_stages(&mut self, batch: &mut Batch<B>, now: Now) {
        let mut before = batch.live_mask();
        let mut live = live_count(batch, before);
        for (stage, counters) in self.stages.iter_mut().zip(self.counters.iter_mut()) {
            if before == 0 {
                break;
            }
            let after = run_stage(&mut **stage, counters, batch, now, before, live);
            if after != before {
                live = after.count_ones();
                before = after;
            }
        }
    }

    /// Stage names with their counters, in pipeline order.
    pub fn counters(&self) -> impl Iterator<Item = (&str, &StageCounters)> {
        self.stages.iter().map(|s| s.name()).zip(self.counters.iter())
    }

    /// The stages (e.g. to read their named counters).
    pub fn stages(&self) -> impl Iterator<Item = &dyn Stage<B>> {
        self.stages.iter().map(|s| &**s)
    }

    /// The stages, mutable (for reconfiguration between bursts).
    pub fn stages_mut(&mut self) -> impl Iterator<Item = &mut Box<dyn Stage<B>>> {
        self.stages.iter_mut()
    }

    /// Stage `index`, mutable (for reconfiguration between bursts).
    pub fn stage_mut(&mut self, index: usize) -> Option<&mut (dyn Stage<B> + 'static)> {
        self.stages.get_mut(index).map(|s| &mut **s)
    }
}

/// The number of live packets, `live` being the batch's live mask: counted
/// only when some packet is not live (without POPCNT in the baseline target
/// a count costs about 15 instructions).
#[inline(always)]
fn live_count<B: PacketBuf>(batch: &Batch<B>, live: u32) -> u32 {
    if batch.all_live() {
        batch.len() as u32
    } else {
        live.count_ones()
    }
}

/// Runs `stage` over `batch`, whose live set is `before` (`live` packets),
/// and counts them in `counters`, with the packets the stage took out of the
/// live set by drop reason or as handed to control; returns the live set
/// after the stage.
#[inline(always)]
fn run_stage<B: PacketBuf>(
    stage: &mut dyn Stage<B>,
    counters: &mut StageCounters,
    batch: &mut Batch<B>,
    now: Now,
    before: u32,
    live: u32,
) -> u32 {
    counters.packets += u64::from(live);
    batch.begin_stage();
    stage.process(batch, now);
    let after = batch.live_mask();
    for i in Indices::of(before & !after) {
        match batch.meta(i).verdict {
            Verdict::Drop(reason) => counters.drops.inc(reason),
            Verdict::ToControl => counters.to_control += 1,
            Verdict::Forward { .. } => {}
        }
    }
    after
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::BURST;
    use crate::verdict::{Class, DropReason};

    /// Drops packets whose first byte is odd.
    struct DropOdd;
    impl Element for DropOdd {
        fn name(&self) -> &str {
            "drop-odd"
        }
    }
    impl<B: PacketBuf> Stage<B> for DropOdd {
        fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
            for i in batch.live() {
                if batch.data(i)[0] % 2 == 1 {
                    batch.drop_packet(i, DropReason::Policy);
                }
            }
        }
    }

    /// Records which packets it saw; sends multiples of 4 to control.
    struct Recorder(Vec<u8>);
    impl Element for Recorder {
        fn name(&self) -> &str {
            "recorder"
        }
    }
    impl<B: PacketBuf> Stage<B> for Recorder {
        fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
            for i in batch.live() {
                let v = batch.data(i)[0];
                self.0.push(v);
                if v.is_multiple_of(4) {
                    batch.to_control(i);
                } else {
                    batch.forward(i, 9, Class(2));
                }
            }
        }
    }

    /// Appends one packet (a stage that generates traffic, e.g. a reply).
    struct AddOne;
    impl Element for AddOne {
        fn name(&self) -> &str {
            "add-one"
        }
    }
    impl Stage<Vec<u8>> for AddOne {
        fn process(&mut self, batch: &mut Batch<Vec<u8>>, _now: Now) {
            batch.push(vec![2], 1).unwrap();
        }
    }

    /// Passes everything on unchanged.
    struct Pass;
    impl Element for Pass {
        fn name(&self) -> &str {
            "pass"
        }
    }
    impl<B: PacketBuf> Stage<B> for Pass {
        fn process(&mut self, _batch: &mut Batch<B>, _now: Now) {}
    }

    #[test]
    fn each_stage_counts_the_packets_live_when_it_runs() {
        let mut p: Pipeline<Vec<u8>> = Pipeline::new()
            .with(Pass)
            .with(DropOdd)
            .with(Pass)
            .with(AddOne)
            .with(Pass)
            .with(Recorder(Vec::new()))
            .with(DropOdd);
        let mut batch = Batch::new();
        for v in 0..7u8 {
            batch.push(vec![v], 1).unwrap();
        }
        p.run(&mut batch, Now::default());
        let packets: Vec<u64> = p.counters().map(|(_, c)| c.packets).collect();
        // 7 in; 1, 3 and 5 dropped; one packet added; 0 and 4 to control,
        // so 2, 6 and the added packet reach the last stage.
        assert_eq!(packets, [7, 7, 4, 4, 5, 5, 3]);
        // Nothing live: the stages after it do not run and count nothing.
        let mut empty = Batch::new();
        p.run(&mut empty, Now::default());
        assert_eq!(p.counters().map(|(_, c)| c.packets).collect::<Vec<_>>(), packets);
    }

    #[test]
    fn stages_skip_dropped_packets_and_count() {
        let mut p: Pipeline<Vec<u8>> = Pipeline::new().with(DropOdd).with(Recorder(Vec::new()));
        let mut batch = Batch::new();
        for v in 0..10u8 {
            batch.push(vec![v], 1).unwrap();
        }
        p.run(&mut batch, Now::default());
        let c: Vec<_> = p.counters().map(|(n, c)| (n.to_string(), c.clone())).collect();
        assert_eq!(c[0].0, "drop-odd");
        assert_eq!(c[0].1.packets, 10);
        assert_eq!(c[0].1.drops.get(DropReason::Policy), 5);
        assert_eq!(c[1].1.packets, 5);
        assert_eq!(c[1].1.to_control, 3); // 0, 4, 8
        assert_eq!(c[1].1.drops.total(), 0);
        assert_eq!(batch.meta(2).verdict, Verdict::Forward { port: 9, class: Class(2) });
    }

    /// Applies a fixed plan to each live packet: 0 leaves it, 1 hands it to
    /// control, 2 forwards it on port 5, anything else drops it for the
    /// reason of that index.
    struct Plan(Vec<u8>);
    impl Element for Plan {
        fn name(&self) -> &str {
            "plan"
        }
    }
    impl<B: PacketBuf> Stage<B> for Plan {
        fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
            for i in batch.live() {
                match self.0[i] {
                    0 => {}
                    1 => batch.to_control(i),
                    2 => batch.forward(i, 5, Class(1)),
                    r => {
                        let reason = DropReason::ALL[usize::from(r) % DropReason::COUNT];
                        batch.drop_packet(i, reason);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// A one-stage pipeline (its own path in `run`) leaves the batch and
        /// the counters as the general path over the same stage does, over
        /// several bursts, whatever was live before.
        #[test]
        fn one_stage_run_equals_the_general_path(
            bursts in proptest::collection::vec(
                (0usize..=BURST, proptest::num::u32::ANY,
                 proptest::collection::vec(0u8..12, BURST)),
                1..4,
            ),
        ) {
            let mut seen_fast = StageCounters::default();
            let mut seen_general = StageCounters::default();
            for (n, dead, plan) in bursts {
                let mut fast: Pipeline<Vec<u8>> = Pipeline::new().with(Plan(plan.clone()));
                let mut general: Pipeline<Vec<u8>> = Pipeline::new().with(Plan(plan));
                fast.counters[0] = seen_fast;
                general.counters[0] = seen_general;
                let (mut a, mut b) = (Batch::new(), Batch::new());
                for k in 0..n {
                    a.push(vec![k as u8], 3).unwrap();
                    b.push(vec![k as u8], 3).unwrap();
                }
                // Some packets left before the pipeline (e.g. a backend's drop).
                for i in Indices::of(dead & a.live_mask()) {
                    a.drop_packet(i, DropReason::Policy);
                    b.drop_packet(i, DropReason::Policy);
                }
                fast.run(&mut a, Now::default());
                general.run_stages(&mut b, Now::default());
                proptest::prop_assert_eq!(a.live_mask(), b.live_mask());
                proptest::prop_assert_eq!(a.metas(), b.metas());
                proptest::prop_assert_eq!(a.egress_port(), b.egress_port());
                proptest::prop_assert_eq!(&fast.counters, &general.counters);
                seen_fast = fast.counters[0].clone();
                seen_general = general.counters[0].clone();
            }
        }
    }
}
