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
