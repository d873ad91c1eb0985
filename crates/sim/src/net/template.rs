//! Open-loop sources: copies of template packets at a rate, constant or
//! Poisson, optionally rotating the SCION FlowID and refreshing the
//! templates over time.

use pipeline::{Frame, PacketBuf};

use super::source::{EmitCtx, Source};
use super::tag::Tag;
use crate::rng::Rng;

/// How a [`TemplateSource`] spaces its packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Constant bit rate; each gap is stretched or shrunk by up to `jitter` (fraction).
    Cbr {
        /// Jitter as a fraction of the gap (0 = perfectly periodic).
        jitter: f64,
    },
    /// Exponential gaps (Poisson arrivals).
    Poisson,
}

/// Rebuilds a source's templates at a given Unix time (ns), e.g. to keep
/// timestamps fresh.
pub type Refresh = Box<dyn FnMut(u64) -> Vec<Vec<u8>>>;

/// Mean time (ns) between packets of `len` bytes sent at `rate_bps`.
pub fn mean_gap_ns(len: usize, rate_bps: f64) -> f64 {
    len as f64 * 8.0 * 1e9 / rate_bps
}

/// An open-loop source sending copies of template packets at a rate.
///
/// Each packet is a template (round robin over the list), with the tag
/// written into its last bytes, and optionally the SCION FlowID rotated
/// over `flows` values (to appear as many flows).
pub struct TemplateSource {
    templates: Vec<Vec<u8>>,
    rate_bps: f64,
    pattern: Pattern,
    group: u16,
    next: Option<u64>,
    stop_ns: u64,
    seq: u32,
    rr: usize,
    flows: Option<(u32, u32)>,
    refresh: Option<(u64, u64, Refresh)>,
    epoch_unix_ns: u64,
}

impl TemplateSource {
    /// `templates` (non-empty) sent at `rate_bps` from `start_ns` to `stop_ns`, tagged `group`.
    pub fn new(
        templates: Vec<Vec<u8>>,
        rate_bps: f64,
        pattern: Pattern,
        group: u16,
        start_ns: u64,
        stop_ns: u64,
    ) -> Self {
        let ok = rate_bps > 0.0 && !templates.is_empty() && start_ns < stop_ns;
        TemplateSource {
            templates,
            rate_bps,
            pattern,
            group,
            next: ok.then_some(start_ns),
            stop_ns,
            seq: 0,
            rr: 0,
            flows: None,
            refresh: None,
            epoch_unix_ns: 0,
        }
    }

    /// Builder: rotate the SCION FlowID over `count` values from `base`.
    pub fn with_flows(mut self, base: u32, count: u32) -> Self {
        self.flows = Some((base, count.max(1)));
        self
    }

    /// Builder: call `f(unix_ns)` every `period_ns` for new templates (Unix
    /// time = `epoch_unix_ns` + virtual time).
    pub fn with_refresh(mut self, period_ns: u64, epoch_unix_ns: u64, f: Refresh) -> Self {
        self.refresh = Some((period_ns.max(1), 0, f));
        self.epoch_unix_ns = epoch_unix_ns;
        self
    }

    fn gap_ns(&self, len: usize, rng: &mut Rng) -> u64 {
        let mean = mean_gap_ns(len, self.rate_bps);
        let g = match self.pattern {
            Pattern::Cbr { jitter } => mean * (1.0 + jitter * (2.0 * rng.unit() - 1.0)),
            Pattern::Poisson => rng.exp(mean),
        };
        (g.max(1.0)) as u64
    }
}

impl Source for TemplateSource {
    fn next_ns(&self) -> Option<u64> {
        self.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let t = ctx.now_ns;
        if let Some((period, last, f)) = self.refresh.as_mut() {
            if t >= *last + *period {
                *last = t - t % *period;
                let fresh = f(self.epoch_unix_ns + t);
                if !fresh.is_empty() {
                    self.templates = fresh;
                }
            }
        }
        let i = self.rr % self.templates.len();
        self.rr = self.rr.wrapping_add(1);
        let mut frame = ctx.frame(&self.templates[i]);
        let len = frame.len();
        Tag { group: self.group, source: ctx.index, seq: self.seq }.write(frame.data_mut());
        if let Some((base, count)) = self.flows {
            let flow = base + self.seq % count;
            if let Ok(mut h) = packet::scion::ScionHeader::new_checked(frame.data_mut()) {
                h.set_flow_id(flow & 0xf_ffff);
            }
        }
        self.seq = self.seq.wrapping_add(1);
        let n = t + self.gap_ns(len, ctx.rng);
        self.next = (n < self.stop_ns).then_some(n);
        Some(frame)
    }
}
