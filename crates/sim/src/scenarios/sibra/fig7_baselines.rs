//! The schemes Fig. 7 compares SIBRA with, on the population of a SIBRA
//! run (the same legitimate ASes, the same attackers per contaminated AS,
//! the same start times and request size) and the same request channel
//! (`request_share_pct` of each core link), modelled by the egress
//! scheduler of that channel (see the [parent module's docs](super)):
//!
//! * TVA: deficit round robin per path identifier, i.e. per source AS
//!   (`baselines::Drr` keyed by source IA), one queue each;
//! * STRIDE: no protection in the core (FIFO), but an ISD serves its own
//!   ASes' requests before those from another ISD (strict priority);
//! * Portcullis: higher puzzle levels first. Attackers follow the optimal
//!   strategy: all of them solve puzzles at the highest level at which they
//!   still fill the channel; a legitimate request needs the next level,
//!   whose puzzle takes 2^(level + 1) hashes (about attackers / channel
//!   rate in seconds), and is sent once solved.

use std::cell::RefCell;
use std::rc::Rc;

use packet::scion::ScionHeader;
use packet::Ia;
use pipeline::{
    Batch, Class, Egress, Element, Frame, Now, PacketBuf, Pipeline, Stage, StrictPriority,
};

use super::as_b::{EPOCH_UNIX_NS, IF_ATTACK, IF_CORE, IF_LEGIT, IF_OUT};
use super::fig7::{plain_packet, Population, Request, Requester, Stats, G_ATTACK_REQ};
use super::params::Fig7Params;
use crate::baselines::{ClassByPort, Drr, DrrKey, ToPort};
use crate::net::{Endpoint, Link, Node, Pattern, Sim, TemplateSource};
use crate::scenarios::{RunOpts, ScenarioError};

/// The legitimate requests of one scheme at one attacker count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaselineResult {
    /// Requests issued.
    pub sent: u64,
    /// Requests delivered within the timeout (counted from issue).
    pub delivered: u64,
    /// Largest delay of a delivered request (ms).
    pub max_delay_ms: f64,
}

impl BaselineResult {
    /// Delivered within the timeout / sent (what Fig. 7 plots).
    pub fn success(&self) -> f64 {
        self.delivered as f64 / self.sent.max(1) as f64
    }
}

/// TVA, Portcullis and STRIDE at one attacker count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Baselines {
    /// TVA.
    pub tva: BaselineResult,
    /// Portcullis.
    pub portcullis: BaselineResult,
    /// STRIDE.
    pub stride: BaselineResult,
    /// Portcullis: the attackers' puzzle level (0: the channel is not full).
    pub puzzle_level: u32,
    /// Portcullis: time a legitimate host needs for one puzzle (s).
    pub puzzle_s: f64,
}

/// A baseline scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    Tva,
    Portcullis,
    Stride,
}

/// Portcullis' puzzles under the attackers' optimal strategy.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Puzzle {
    /// The attackers' level (0: the channel is not full, no puzzles).
    level: u32,
    /// Requests per second of each attacker.
    attack_rate: f64,
    /// Time a legitimate host needs for the next level's puzzle (s).
    legit_s: f64,
}

/// Portcullis with `attackers` (paper count) over a channel of
/// `channel_rps` requests/s (paper units): the attackers solve at the
/// highest level at which they still fill the channel, a legitimate request
/// at the next one.
fn puzzle(p: &Fig7Params, attackers: u32, channel_rps: f64) -> Puzzle {
    let n = f64::from(attackers);
    if n * p.requests_per_s <= channel_rps {
        return Puzzle { level: 0, attack_rate: p.requests_per_s, legit_s: 0.0 };
    }
    let h = p.baselines.hashes_per_s;
    let level = ((n * h / channel_rps).log2().floor().max(0.0) as u32).min(253);
    Puzzle {
        level,
        attack_rate: (h / 2f64.powi(level as i32)).min(p.requests_per_s),
        legit_s: 2f64.powi(level as i32 + 1) / h,
    }
}

/// Runs TVA, Portcullis and STRIDE on `pop` with requests of `req_len` bytes.
pub(super) fn run(
    p: &Fig7Params,
    pop: &Population,
    req_len: usize,
    opts: &RunOpts,
) -> Result<Baselines, ScenarioError> {
    let puzzle_rps = p.baselines.puzzle_link_gbps * 1e9 * f64::from(p.request_share_pct)
        / 100.0
        / (req_len as f64 * 8.0);
    let pz = puzzle(p, pop.attackers, puzzle_rps);
    Ok(Baselines {
        tva: run_scheme(p, pop, req_len, Scheme::Tva, &pz, opts)?,
        portcullis: run_scheme(p, pop, req_len, Scheme::Portcullis, &pz, opts)?,
        stride: run_scheme(p, pop, req_len, Scheme::Stride, &pz, opts)?,
        puzzle_level: pz.level,
        puzzle_s: pz.legit_s,
    })
}

/// Portcullis routers: a request's class is its puzzle level (carried in
/// the SCION QoS byte).
struct PuzzleLevel;

impl Element for PuzzleLevel {
    fn name(&self) -> &str {
        "puzzle-level"
    }
}

impl<B: PacketBuf> Stage<B> for PuzzleLevel {
    fn process(&mut self, batch: &mut Batch<B>, _now: Now) {
        for i in batch.live() {
            let level = ScionHeader::new_checked(batch.data(i)).map_or(0, |h| h.qos());
            batch.set_class(i, Class(level));
        }
    }
}

/// One scheme: its routers at the request channels of the core links the
/// requests cross. Only the legitimate requests issued in the second half
/// of the sending time count (the queues have filled by then: what a
/// request gets is the steady state's), and the attack lasts until the end
/// of the run, so that the last of them still meet it.
fn run_scheme(
    p: &Fig7Params,
    pop: &Population,
    req_len: usize,
    scheme: Scheme,
    pz: &Puzzle,
    opts: &RunOpts,
) -> Result<BaselineResult, ScenarioError> {
    let channel_bps = p.capacity_gbps * 1e9 / p.scale * f64::from(p.request_share_pct) / 100.0;
    let q = p.baselines.queue_packets;
    let tick_ns = (p.tick_us * 1e3) as u64;
    let stop_ns = (p.duration_s * 1e9) as u64;
    let timeout_ns = (p.request_timeout_s * 1e9) as u64;
    let portcullis = scheme == Scheme::Portcullis;
    let (lead_ns, attack_rate) = if portcullis {
        ((pz.legit_s * 1e9) as u64, pz.attack_rate)
    } else {
        (0, p.requests_per_s)
    };
    // Levels: the attackers' and the legitimate requests' (the next).
    let (attack_level, legit_level) =
        if portcullis { (pz.level as u8, pz.level as u8 + 1) } else { (0, 0) };
    let end_ns =
        stop_ns + if lead_ns > 0 { timeout_ns } else { timeout_ns.min(stop_ns) } + 50_000_000;
    let mut sim = Sim::new(tick_ns, EPOCH_UNIX_NS, p.seed);
    let nodes: Vec<usize> = (0..pop.cores)
        .map(|_| {
            let pl = if portcullis {
                Pipeline::new().with(PuzzleLevel).with(ToPort(IF_OUT))
            } else {
                Pipeline::new().with(ClassByPort).with(ToPort(IF_OUT))
            };
            sim.add_node(Node::new("core", pl))
        })
        .collect();
    for (i, &n) in nodes.iter().enumerate() {
        let egress: Box<dyn Egress<Frame>> = match scheme {
            Scheme::Tva => Box::new(Drr::new(DrrKey::ScionFlow, q, req_len as u64)),
            Scheme::Stride => {
                // The ISD's own requests first (they enter from its ASes),
                // then those from the other ISD's core.
                let mut sp = StrictPriority::new("stride");
                sp.add_queue(q, None, [Class(IF_LEGIT as u8), Class(IF_ATTACK as u8)]);
                sp.add_queue(q, None, [Class(IF_CORE as u8)]);
                Box::new(sp)
            }
            Scheme::Portcullis => {
                // The legitimate requests' level first, the rest after.
                let mut sp = StrictPriority::new("portcullis");
                sp.add_queue(q, None, [Class(legit_level)]);
                sp.add_queue(q, None, [Class(attack_level)]);
                Box::new(sp)
            }
        };
        let dest = match nodes.get(i + 1) {
            Some(&next) => Endpoint::Node { node: next, port: IF_CORE },
            None => Endpoint::Sink,
        };
        sim.connect(n, IF_OUT, egress, Link::new("channel", channel_bps as u64, 1_000_000, dest));
    }

    let stats = Rc::new(RefCell::new(Stats::default()));
    let legit_rate = f64::from(p.legit_sources_per_as) * p.requests_per_s;
    for &(asn, start) in &pop.legit {
        let pkt = plain_packet(Ia::new(1, asn), legit_level, req_len)?;
        let src = Requester::new(
            Request::Fixed(pkt),
            legit_rate,
            start,
            (lead_ns, stop_ns / 2, stop_ns, timeout_ns),
            stats.clone(),
        );
        sim.add_source(nodes[0], IF_LEGIT, Box::new(src));
    }
    for b in pop.bots.iter().filter(|b| b.attackers > 0) {
        let pkt = plain_packet(Ia::new(b.isd, b.asn), attack_level, req_len)?;
        let rate = f64::from(b.attackers) * attack_rate * req_len as f64 * 8.0;
        let src = TemplateSource::new(
            vec![pkt],
            rate,
            Pattern::Poisson,
            G_ATTACK_REQ,
            b.start_ns,
            end_ns,
        );
        sim.add_source(nodes[b.entry], IF_ATTACK, Box::new(src));
    }
    if opts.progress {
        let label = format!("fig7 {scheme:?} n={}", pop.attackers);
        sim.progress = Some(crate::report::stderr_progress(label));
    }
    sim.run(end_ns);
    let st = stats.borrow();
    Ok(BaselineResult {
        sent: st.sent,
        delivered: st.delivered,
        max_delay_ms: st.max_delay_ns as f64 / 1e6,
    })
}
