//! Closed-loop, TCP-like senders: the congestion window ([`Cwnd`], also
//! used by the FlowPolice scenarios' hosts) and a sender of template copies
//! driven by it ([`AimdSource`]).

use pipeline::{Frame, PacketBuf};

use super::source::{EmitCtx, Feedback, Source};
use super::tag::Tag;
use super::template::mean_gap_ns;

/// A congestion window of packets in flight: +1/cwnd per acknowledged
/// packet (additive increase), halved at most once per RTT (multiplicative
/// decrease), never below one packet. Below `ssthresh` the window grows by
/// one packet per acknowledged packet instead (TCP slow start, opt-in with
/// [`Cwnd::slow_start`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cwnd {
    /// The window (packets).
    pub cwnd: f64,
    /// Packets sent and not yet acknowledged or lost.
    pub in_flight: u32,
    /// When the window was last cut (ns).
    pub last_cut: u64,
    /// Slow-start threshold (packets): below it the window doubles per RTT.
    /// 0 (the default): congestion avoidance only.
    pub ssthresh: f64,
    /// Smallest retransmission timeout (ns); 0 (the default): no timer,
    /// every loss only halves the window.
    pub rto_min_ns: u64,
    /// Last acknowledgement (ns), for the retransmission timer.
    pub last_ack: u64,
    /// Consecutive retransmission timeouts.
    pub backoff: u32,
    /// No sending before this (a retransmission timeout runs).
    pub resume_at: u64,
}

impl Default for Cwnd {
    /// Two packets, nothing in flight, no slow start.
    fn default() -> Self {
        Cwnd {
            cwnd: 2.0,
            in_flight: 0,
            last_cut: 0,
            ssthresh: 0.0,
            rto_min_ns: 0,
            last_ack: 0,
            backoff: 0,
            resume_at: 0,
        }
    }
}

impl Cwnd {
    /// Two packets in slow start until the first loss (RFC 5681: the
    /// initial threshold is arbitrarily high).
    pub fn slow_start() -> Self {
        Cwnd { ssthresh: f64::INFINITY, ..Cwnd::default() }
    }

    /// This window with a retransmission timer of at least `rto_min_ns`
    /// ([`Cwnd::on_loss`]), for a flow starting at `start_ns`.
    pub fn with_rto(self, rto_min_ns: u64, start_ns: u64) -> Self {
        Cwnd { rto_min_ns, last_ack: start_ns, ..self }
    }

    /// An acknowledgement at `now_ns`: additive increase (up to `max`
    /// packets) and the retransmission timer's back-off is reset.
    pub fn on_ack(&mut self, now_ns: u64, max: f64) {
        self.last_ack = now_ns;
        self.backoff = 0;
        self.grow(max);
    }

    /// A loss learnt at `now_ns`. With a retransmission timer, when nothing
    /// was acknowledged for an RTT there are no duplicate ACKs for a fast
    /// retransmit: the timer fires (RFC 6298): the window drops to one
    /// packet and nothing is sent for `rto_min_ns · 2^backoff`. Otherwise the
    /// window is halved ([`Cwnd::cut`]); losses during a timeout are ignored.
    pub fn on_loss(&mut self, now_ns: u64, rtt_ns: u64) {
        if now_ns < self.resume_at {
            return;
        }
        // Fast retransmit needs three duplicate ACKs (RFC 5681), i.e. three
        // segments sent after the lost one: below four packets of window,
        // or with nothing acknowledged for an RTT, only the timer is left.
        let no_dupacks = self.cwnd < 4.0 || now_ns >= self.last_ack + rtt_ns;
        if self.rto_min_ns > 0 && no_dupacks {
            let rto = self.rto_min_ns.saturating_mul(1 << self.backoff.min(8));
            self.resume_at = now_ns + rto;
            self.backoff += 1;
            self.cwnd = 1.0;
            self.last_cut = now_ns;
            if self.ssthresh > 0.0 {
                self.ssthresh = 2.0;
            }
        } else {
            self.cut(now_ns, rtt_ns);
        }
    }

    /// Whether the window allows another packet in flight.
    pub fn open(&self) -> bool {
        f64::from(self.in_flight) < self.cwnd.floor().max(1.0)
    }

    /// Additive increase for one acknowledged packet, up to `max` packets.
    pub fn grow(&mut self, max: f64) {
        let step = if self.cwnd < self.ssthresh { 1.0 } else { 1.0 / self.cwnd };
        self.cwnd = (self.cwnd + step).min(max);
    }

    /// Multiplicative decrease at `now_ns`, unless the window was cut less
    /// than `rtt_ns` ago.
    pub fn cut(&mut self, now_ns: u64, rtt_ns: u64) {
        if now_ns >= self.last_cut + rtt_ns {
            self.cwnd = (self.cwnd / 2.0).max(1.0);
            self.last_cut = now_ns;
            if self.ssthresh > 0.0 {
                // Slow start ends at the first loss.
                self.ssthresh = self.cwnd;
            }
        }
    }
}

/// A closed-loop, TCP-like sender: a congestion window ([`Cwnd`]) cut on
/// loss, paced at no more than `max_rate_bps`. Feedback arrives one
/// feedback delay (the reverse path) after delivery or drop.
pub struct AimdSource {
    template: Vec<u8>,
    group: u16,
    max_rate_bps: f64,
    rtt_ns: u64,
    window: Cwnd,
    max_cwnd: f64,
    seq: u32,
    next: Option<u64>,
    last_send: u64,
    stop_ns: u64,
    /// Packets acknowledged.
    pub acked: u64,
    /// Packets lost.
    pub lost: u64,
}

impl AimdSource {
    /// A sender of `template` copies from `start_ns` to `stop_ns`.
    pub fn new(
        template: Vec<u8>,
        group: u16,
        max_rate_bps: f64,
        rtt_ns: u64,
        start_ns: u64,
        stop_ns: u64,
    ) -> Self {
        AimdSource {
            template,
            group,
            max_rate_bps,
            rtt_ns,
            window: Cwnd::default(),
            max_cwnd: 1e6,
            seq: 0,
            next: (start_ns < stop_ns).then_some(start_ns),
            last_send: 0,
            stop_ns,
            acked: 0,
            lost: 0,
        }
    }

    /// The congestion window (packets).
    pub fn cwnd(&self) -> f64 {
        self.window.cwnd
    }

    fn pace_ns(&self) -> u64 {
        mean_gap_ns(self.template.len(), self.max_rate_bps) as u64
    }

    fn reschedule(&mut self, now: u64) {
        if self.window.open() {
            let t = (self.last_send + self.pace_ns()).max(now);
            self.next = (t < self.stop_ns).then_some(t);
        } else {
            self.next = None;
        }
    }
}

impl Source for AimdSource {
    fn next_ns(&self) -> Option<u64> {
        self.next
    }

    fn emit(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        let mut f = ctx.frame(&self.template);
        Tag { group: self.group, source: ctx.index, seq: self.seq }.write(f.data_mut());
        self.seq = self.seq.wrapping_add(1);
        self.window.in_flight += 1;
        self.last_send = ctx.now_ns;
        self.reschedule(ctx.now_ns);
        Some(f)
    }

    fn feedback_delay_ns(&self) -> Option<u64> {
        Some(self.rtt_ns / 2)
    }

    fn on_feedback(&mut self, fb: Feedback, now_ns: u64) {
        self.window.in_flight = self.window.in_flight.saturating_sub(1);
        match fb {
            Feedback::Delivered(_) => {
                self.acked += 1;
                self.window.grow(self.max_cwnd);
            }
            Feedback::Dropped(_) => {
                self.lost += 1;
                self.window.cut(now_ns, self.rtt_ns);
            }
        }
        if now_ns < self.stop_ns {
            self.reschedule(now_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::sim::testing::one_link;
    use pipeline::DropReason;

    /// An AIMD sender fills a bottleneck without a queue collapse.
    #[test]
    fn aimd_uses_bottleneck() {
        let mut sim = one_link(20_000, 2, 20, 5_000_000, 0);
        let s = AimdSource::new(vec![0u8; 500], 0, 50e6, 20_000_000, 0, u64::MAX);
        sim.add_source(0, 0, Box::new(s));
        sim.window = (1_000_000_000, 3_000_000_000);
        sim.run(3_000_000_000);
        let rate = sim.links[0].delivered.get(0).win_bytes as f64 * 8.0 / 2.0;
        assert!(rate > 0.8 * 5e6 && rate <= 5.01e6, "{rate}");
        assert!(sim.nodes[0].drops(DropReason::QueueFull) > 0, "AIMD probes until loss");
    }
}
