//! A simulated FlowPolice end-host pair, shared by the FlowPolice scenarios:
//! the sender's capability state, capability requests (with
//! Portcullis-style retries at harder puzzle levels), and the receiver's
//! capability echoes, which reach the sender half an RTT after delivery
//! ([`CapClient`]); and what every scenario host does with it as a traffic
//! source: its packets, tags and schedule ([`HostPair`]).

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use ::flowpolice::host::{ipv4_packet, Receiver, Sender};
use ::flowpolice::puzzle::{self, PuzzlePolicy, SeedChain};
use ::flowpolice::{Capability, Puzzle};
use packet::flowpolice::{FlowPolice as ShimView, PacketType, REGULAR_LEN, REQUEST_LEN};
use pipeline::{Frame, PacketBuf};
use serde::Deserialize;

use crate::net::{mean_gap_ns, EmitCtx, Tag};
use crate::rng::Rng;

const IP_PROTO_UDP: u8 = 17;

/// What a delivered packet's FlowPolice mark tells the sender.
pub(crate) enum Mark {
    /// Forwarded as privileged.
    Privileged,
    /// Best effort after privileged packets of the same router period
    /// (wire timestamp `ts`, ms): the flow's window W_R is used up.
    WindowExhausted(u32),
    /// Anything else.
    Other,
}

/// Capability state of one host pair.
pub(crate) struct CapClient {
    /// Source address (the flow's identity at the router).
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// The sending host's capability logic.
    pub sender: Sender,
    receiver: Receiver,
    /// Echoed capabilities and when they reach the sender.
    echoes: VecDeque<(u64, Capability)>,
    /// Round-trip time.
    pub rtt_ns: u64,
    /// The router's period D_p.
    pub period_ns: u64,
    last_echo: u64,
    /// When the unanswered request was sent.
    pub request_sent: Option<u64>,
    seeds: SeedChain,
    policy: PuzzlePolicy,
    level: u8,
    base_level: u8,
    level_step: u8,
    max_level: u8,
    /// Router period (wire timestamp) in which a privileged packet arrived.
    priv_ts: Option<u32>,
}

/// Puzzle levels of a [`CapClient`]'s requests.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PuzzleLevels {
    /// Level of a first request.
    pub base: u8,
    /// Added per unanswered retry.
    pub step: u8,
    /// Highest level tried.
    pub max: u8,
}

impl CapClient {
    /// A host pair `src → dst` without capabilities.
    pub fn new(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        rtt_ns: u64,
        period_ns: u64,
        seeds: SeedChain,
        policy: PuzzlePolicy,
        levels: PuzzleLevels,
    ) -> Self {
        CapClient {
            src,
            dst,
            sender: Sender::new(),
            receiver: Receiver::new(),
            echoes: VecDeque::new(),
            rtt_ns,
            period_ns,
            last_echo: 0,
            request_sent: None,
            seeds,
            policy,
            level: levels.base,
            base_level: levels.base,
            level_step: levels.step,
            max_level: levels.max,
            priv_ts: None,
        }
    }

    /// Forgets every capability: the next packet starts a new flow.
    pub fn reset_flow(&mut self) {
        self.sender = Sender::new();
        self.receiver = Receiver::new();
        self.request_sent = None;
        self.echoes.clear();
        self.priv_ts = None;
    }

    /// Hands the sender every echo that has arrived by `now`.
    pub fn apply_echoes(&mut self, now: u64) {
        while self.echoes.front().is_some_and(|e| e.0 <= now) {
            if let Some((_, c)) = self.echoes.pop_front() {
                self.sender.on_returned(c);
                self.last_echo = now;
                self.request_sent = None;
            }
        }
    }

    /// While a request is unanswered: when to wake up (the retry after three
    /// RTTs, or the next echo, whichever is first).
    pub fn request_wake(&self, now: u64) -> Option<u64> {
        let r = self.request_sent?;
        let echo = self.echoes.front().map_or(u64::MAX, |e| e.0);
        Some((r + 3 * self.rtt_ns).min(echo).max(now))
    }

    /// The next FlowPolice packet: `regular` (an IPv4 packet with a zeroed
    /// regular shim after the 20-byte header) carrying the latest capability,
    /// or a request of `request_len` bytes; `None` while waiting for a
    /// request's answer.
    pub fn next_frame(
        &mut self,
        ctx: &mut EmitCtx<'_>,
        regular: &[u8],
        request_len: usize,
    ) -> Option<Frame> {
        let now = ctx.now_ns;
        // No capability back for two periods: the latest one has expired.
        if self.sender.has_capability() && now > self.last_echo + 2 * self.period_ns {
            self.sender = Sender::new();
        }
        if self.sender.has_capability() {
            let mut f = ctx.frame(regular);
            let shim = &mut f.data_mut()[20..20 + REGULAR_LEN];
            self.sender.write_regular(shim, IP_PROTO_UDP)?;
            Some(f)
        } else if self.request_sent.is_none_or(|r| now >= r + 3 * self.rtt_ns) {
            self.level = if self.request_sent.is_some() {
                // Unanswered: retry with a harder puzzle (a higher-priority
                // request sub-queue), as Portcullis senders do.
                (self.level + self.level_step).min(self.max_level)
            } else {
                self.base_level
            };
            self.request_sent = Some(now);
            self.last_echo = now;
            Some(self.request(ctx, request_len))
        } else {
            None
        }
    }

    fn request(&mut self, ctx: &mut EmitCtx<'_>, len: usize) -> Frame {
        let epoch = self.policy.epoch_at(ctx.now.unix_ms());
        let nonce = self
            .seeds
            .seed(epoch)
            .and_then(|s| puzzle::solve(s, &self.src.octets(), &self.dst.octets(), self.level, 0))
            .unwrap_or(0);
        let mut shim = [0u8; REQUEST_LEN];
        let puzzle = Puzzle { epoch, level: self.level, nonce };
        let _ = Sender::write_request(&mut shim, IP_PROTO_UDP, puzzle);
        let payload = vec![0u8; len - 20 - REQUEST_LEN];
        ctx.frame(&ipv4_packet(self.src, self.dst, &shim, &payload))
    }

    /// The receiver side of a packet delivered at `now`: its capability is
    /// echoed (due half an RTT later). Returns the packet's mark and, while a
    /// request is unanswered, when the sender should wake up for the echo.
    pub fn on_delivered(&mut self, pkt: &[u8], now: u64) -> (Mark, Option<u64>) {
        let mut mark = Mark::Other;
        if let Some(shim) = pkt.get(20..) {
            self.receiver.on_packet(shim);
            if let Ok(v) = ShimView::new_checked(shim) {
                let ts = v.ts();
                match v.packet_type() {
                    Some(PacketType::Privileged) => {
                        self.priv_ts = Some(ts);
                        mark = Mark::Privileged;
                    }
                    Some(PacketType::BestEffort) if self.priv_ts == Some(ts) => {
                        mark = Mark::WindowExhausted(ts);
                    }
                    _ => {}
                }
            }
        }
        let due = now + self.rtt_ns / 2;
        for c in self.receiver.take_echoes() {
            self.echoes.push_back((due, c));
        }
        (mark, self.request_sent.map(|_| due))
    }
}

/// The part of a scenario host that is the same for every strategy: its
/// capability client, its regular packet, its tags and its schedule.
pub(crate) struct HostPair {
    /// Statistics group.
    pub group: u16,
    /// Capabilities and requests.
    pub fp: CapClient,
    /// The regular packet (IPv4, zeroed regular shim after the header).
    pub regular: Vec<u8>,
    /// Next emission (or wake-up).
    pub next: Option<u64>,
    /// Time of the last packet sent (for pacing).
    pub last_send: u64,
    /// No emission at or after this time.
    pub stop_ns: u64,
    /// Sequence number of the next tag.
    pub(super) seq: u32,
    /// Reacts to a best-effort mark after privileged packets of the same
    /// period (legitimate senders, if the scenario says so).
    pub mark_aware: bool,
}

impl HostPair {
    /// Plans the next emission (or wake-up) at `t`, unless it is at or after the stop time.
    pub fn plan(&mut self, t: Option<u64>) {
        self.next = t.filter(|&t| t < self.stop_ns);
    }

    /// The next FlowPolice packet of the size of the regular packet
    /// ([`CapClient::next_frame`]).
    pub fn next_frame(&mut self, ctx: &mut EmitCtx<'_>) -> Option<Frame> {
        self.fp.next_frame(ctx, &self.regular, self.regular.len())
    }

    /// Writes the next tag into `f` (source `index`).
    pub fn tag(&mut self, mut f: Frame, index: u16) -> Frame {
        Tag { group: self.group, source: index, seq: self.seq }.write(f.data_mut());
        self.seq = self.seq.wrapping_add(1);
        f
    }

    /// Time between regular packets at `rate_bps`.
    pub fn pace_ns(&self, rate_bps: f64) -> u64 {
        mean_gap_ns(self.regular.len(), rate_bps) as u64
    }

    /// The gap after a packet of a flat flood at `rate_bps` (±10 % jitter).
    pub fn flood_gap_ns(&self, rate_bps: f64, rng: &mut Rng) -> u64 {
        let mean = mean_gap_ns(self.regular.len(), rate_bps);
        (mean * (0.9 + 0.2 * rng.unit())) as u64
    }

    /// The gap after a regular packet at `rate_bps` with a uniform relative
    /// jitter of ±`jitter` (the mean stays the exact pace); no random draw
    /// when `jitter` is 0.
    pub fn jittered_gap_ns(&self, rate_bps: f64, jitter: f64, rng: &mut Rng) -> u64 {
        let mean = mean_gap_ns(self.regular.len(), rate_bps);
        if jitter > 0.0 {
            (mean * (1.0 - jitter + 2.0 * jitter * rng.unit())) as u64
        } else {
            mean as u64
        }
    }

    /// A host waiting for its request's answer wakes up for the echo due
    /// at `due` ([`CapClient::on_delivered`]).
    pub fn wake(&mut self, due: Option<u64>) {
        if let Some(due) = due {
            let n = self.next.map_or(due, |n| n.min(due));
            self.next = (n < self.stop_ns).then_some(n);
        }
    }

    /// Sends from `src` from now on (a new flow at the router); the packets
    /// keep their size.
    pub fn set_source(&mut self, src: Ipv4Addr) {
        self.fp.src = src;
        let payload = &self.regular[20 + REGULAR_LEN..];
        self.regular = ipv4_packet(src, self.fp.dst, &[0; REGULAR_LEN], payload);
    }
}

/// How a TCP-like sender of the FlowPolice scenarios learns of its losses
/// and recovers from them.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum LossRecovery {
    /// Every loss is learnt individually half an RTT after it (an ideal
    /// SACK): the lost segment is re-sent and the window halved at most
    /// once per RTT; the retransmission timer fires only when nothing was
    /// ACKed for an RTT or the window is below four packets. The model of
    /// Figs. 5.3/5.4 (and the default).
    #[default]
    #[serde(rename = "sack")]
    Sack,
    /// NewReno with cumulative ACKs ([`NewReno`]): losses are learnt from
    /// three duplicate ACKs or the retransmission timer only.
    #[serde(rename = "newreno")]
    NewReno,
}

/// Largest retransmission timeout (ns; RFC 6298 (2.5): at least 60 s).
const MAX_RTO_NS: u64 = 60_000_000_000;
/// Retransmission timeout before the first RTT sample (ns; RFC 6298 (2.1)).
const INITIAL_RTO_NS: u64 = 1_000_000_000;

/// A NewReno sender of a file of `segments` segments (RFC 5681, RFC 6582,
/// RFC 6298), counting in whole segments.
///
/// * The receiver acknowledges cumulatively: every ACK carries the first
///   segment it still misses ([`CumAckReceiver`]); the sender knows nothing
///   else about its losses.
/// * Slow start (+1 segment per ACK below `ssthresh`, i.e. doubling per
///   RTT), then congestion avoidance (+1/cwnd per ACK). The window starts
///   at two segments, `ssthresh` arbitrarily high.
/// * Three duplicate ACKs: fast retransmit of the first unacknowledged
///   segment, `ssthresh = max(flight/2, 2)`, `cwnd = ssthresh + 3`,
///   inflated by one per further duplicate ACK. A partial ACK re-sends the
///   next hole (one per RTT) and deflates the window by the segments it
///   acknowledges; the ACK of everything sent before the recovery ends it
///   with `cwnd = ssthresh`. No new recovery starts before that point is
///   acknowledged (RFC 6582 `recover`).
/// * Retransmission timer (RFC 6298): `RTO = max(rto_min, SRTT + 4·RTTVAR)`
///   (1 s before the first sample), doubled per timeout up to 60 s, kept
///   until a new RTT sample; samples only from segments sent once (Karn).
///   On expiry: `ssthresh = max(flight/2, 2)` (kept on a repeated timeout),
///   `cwnd = 1`, slow start again, and go-back-N from the first
///   unacknowledged segment.
#[derive(Clone, Debug)]
pub struct NewReno {
    segments: u32,
    snd_una: u32,
    snd_nxt: u32,
    snd_max: u32,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    in_recovery: bool,
    /// `snd_max` when the last recovery or timeout started.
    recover: u32,
    /// The first unacknowledged segment is to be re-sent now.
    retransmit: bool,
    /// Reset the timer on the next partial ACK (the first of a recovery).
    first_partial: bool,
    /// No new window reduction on a congestion mark before this is acknowledged.
    mark_recover: u32,
    sent_at: Vec<u64>,
    resent: Vec<bool>,
    srtt: Option<f64>,
    rttvar: f64,
    rto_min_ns: u64,
    backoff: u32,
    timer: Option<u64>,
    fast_retransmits: u32,
    timeouts: u32,
    retransmissions: u32,
}

impl NewReno {
    /// A sender of `segments` segments whose retransmission timeout is at
    /// least `rto_min_ns`.
    pub fn new(segments: u32, rto_min_ns: u64) -> Self {
        NewReno {
            segments,
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd: 2.0,
            ssthresh: f64::INFINITY,
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            retransmit: false,
            first_partial: false,
            mark_recover: 0,
            sent_at: vec![0; segments as usize],
            resent: vec![false; segments as usize],
            srtt: None,
            rttvar: 0.0,
            rto_min_ns,
            backoff: 0,
            timer: None,
            fast_retransmits: 0,
            timeouts: 0,
            retransmissions: 0,
        }
    }

    /// The segment to send now, if any: a due retransmission of the first
    /// unacknowledged segment, else the next segment if the window allows it.
    pub fn next_segment(&self) -> Option<u32> {
        if self.done() {
            None
        } else if self.retransmit {
            Some(self.snd_una)
        } else {
            let wnd = self.cwnd.floor().max(1.0) as u32;
            (self.snd_nxt < self.segments && self.snd_nxt < self.snd_una.saturating_add(wnd))
                .then_some(self.snd_nxt)
        }
    }

    /// Segment `seg` (from [`NewReno::next_segment`]) was sent at `now_ns`.
    pub fn on_sent(&mut self, seg: u32, now_ns: u64) {
        let Some(i) = usize::try_from(seg).ok().filter(|&i| i < self.sent_at.len()) else {
            return;
        };
        if self.retransmit && seg == self.snd_una {
            self.retransmit = false;
        }
        if seg < self.snd_max {
            self.resent[i] = true;
            self.retransmissions += 1;
        }
        self.sent_at[i] = now_ns;
        if seg == self.snd_nxt {
            self.snd_nxt += 1;
        }
        self.snd_max = self.snd_max.max(seg + 1);
        if self.timer.is_none() {
            self.timer = Some(now_ns + self.rto_ns());
        }
    }

    /// A cumulative ACK at `now_ns`: every segment below `ack` arrived.
    pub fn on_ack(&mut self, ack: u32, now_ns: u64) {
        let ack = ack.min(self.segments);
        if ack > self.snd_una {
            let newly = ack - self.snd_una;
            let last = (ack - 1) as usize;
            if !self.resent[last] {
                // Karn: only segments sent once give RTT samples.
                self.sample(now_ns.saturating_sub(self.sent_at[last]));
            }
            self.snd_una = ack;
            self.snd_nxt = self.snd_nxt.max(ack);
            if self.in_recovery && ack < self.recover {
                // Partial ACK: the next hole goes out at once.
                self.retransmit = true;
                self.cwnd = (self.cwnd - f64::from(newly) + 1.0).max(1.0);
                if self.first_partial {
                    self.first_partial = false;
                    self.timer = Some(now_ns + self.rto_ns());
                }
                return;
            }
            if self.in_recovery {
                // Full ACK: the recovery ends, the window deflates.
                self.in_recovery = false;
                self.retransmit = false;
                self.cwnd = self.ssthresh;
            } else if self.cwnd < self.ssthresh {
                self.cwnd += 1.0;
            } else {
                self.cwnd += 1.0 / self.cwnd;
            }
            self.dupacks = 0;
            self.timer = (self.snd_una < self.snd_max).then(|| now_ns + self.rto_ns());
        } else if ack == self.snd_una && self.snd_max > self.snd_una {
            self.dupacks += 1;
            if self.in_recovery {
                self.cwnd += 1.0;
            } else if self.dupacks == 3 && self.snd_una >= self.recover {
                // Fast retransmit and fast recovery.
                self.ssthresh = self.half_flight();
                self.cwnd = self.ssthresh + 3.0;
                self.recover = self.snd_max;
                self.in_recovery = true;
                self.first_partial = true;
                self.retransmit = true;
                self.fast_retransmits += 1;
            }
        }
    }

    /// Fires the retransmission timer if it is due at `now_ns`; returns
    /// whether it fired.
    pub fn on_timer(&mut self, now_ns: u64) -> bool {
        if self.timer.is_none_or(|t| now_ns < t) || self.done() || self.snd_una >= self.snd_max {
            return false;
        }
        if self.backoff == 0 {
            // A repeated timeout of the same segment keeps ssthresh (RFC 5681).
            self.ssthresh = self.half_flight();
        }
        self.cwnd = 1.0;
        self.backoff += 1;
        self.snd_nxt = self.snd_una;
        self.recover = self.snd_max;
        self.in_recovery = false;
        self.retransmit = false;
        self.dupacks = 0;
        self.timer = None; // re-armed with the backed-off RTO by the retransmission
        self.timeouts += 1;
        true
    }

    /// A congestion mark (ECN-like, RFC 3168): the window is halved, at
    /// most once per window of data, and not during a recovery.
    pub fn on_congestion_mark(&mut self) {
        if self.in_recovery || self.snd_una < self.mark_recover {
            return;
        }
        self.ssthresh = (self.cwnd / 2.0).max(2.0);
        self.cwnd = self.ssthresh;
        self.mark_recover = self.snd_max;
    }

    /// When the retransmission timer expires, if it runs.
    pub fn timer(&self) -> Option<u64> {
        self.timer.filter(|_| !self.done())
    }

    /// The current retransmission timeout (ns), back-off included.
    pub fn rto_ns(&self) -> u64 {
        let base = self.srtt.map_or(INITIAL_RTO_NS, |s| (s + 4.0 * self.rttvar) as u64);
        let rto = base.max(self.rto_min_ns);
        rto.saturating_mul(1 << self.backoff.min(16)).min(MAX_RTO_NS.max(self.rto_min_ns))
    }

    fn sample(&mut self, r: u64) {
        let r = r as f64;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        self.backoff = 0;
    }

    fn half_flight(&self) -> f64 {
        (f64::from(self.snd_max - self.snd_una) / 2.0).max(2.0)
    }

    /// Every segment is acknowledged.
    pub fn done(&self) -> bool {
        self.snd_una >= self.segments
    }

    /// The first unacknowledged segment.
    pub fn snd_una(&self) -> u32 {
        self.snd_una
    }

    /// The next new segment (go-back-N moves it back to [`NewReno::snd_una`]).
    pub fn snd_nxt(&self) -> u32 {
        self.snd_nxt
    }

    /// The congestion window (segments).
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The slow-start threshold (segments).
    pub fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    /// In fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Fast retransmits so far.
    pub fn fast_retransmits(&self) -> u32 {
        self.fast_retransmits
    }

    /// Retransmission timeouts so far.
    pub fn timeouts(&self) -> u32 {
        self.timeouts
    }

    /// Segments sent more than once so far (every re-sending counted).
    pub fn retransmissions(&self) -> u32 {
        self.retransmissions
    }
}

/// The receiver of a [`NewReno`] transfer: it acknowledges the first
/// segment it still misses (cumulative ACKs, no SACK).
#[derive(Clone, Debug)]
pub struct CumAckReceiver {
    got: Vec<bool>,
    next: u32,
}

impl CumAckReceiver {
    /// A receiver of `segments` segments.
    pub fn new(segments: u32) -> Self {
        CumAckReceiver { got: vec![false; segments as usize], next: 0 }
    }

    /// Segment `seg` arrived; returns the ACK it triggers.
    pub fn on_segment(&mut self, seg: u32) -> u32 {
        if let Some(g) = self.got.get_mut(seg as usize) {
            *g = true;
        }
        while self.got.get(self.next as usize).is_some_and(|&g| g) {
            self.next += 1;
        }
        self.next
    }
}
