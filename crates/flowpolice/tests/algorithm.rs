//! Algorithm 1 and the attacks of thesis §4, driven through `Router` with the
//! end-host helpers and simulated time.

use std::collections::VecDeque;

use flowpolice::host::Sender;
use flowpolice::{Capability, Feedback, Mark, OverWindow, Params, Reject, Router};
use mac::Key;
use proptest::prelude::*;

const FLOW: u64 = 0x0a00_0001;

/// One sender → router → (lossy bottleneck) → receiver loop.
struct Sim {
    r: Router,
    sender: Sender,
    /// Echoes in flight back to the sender: (arrival ms, capability).
    echoes: VecDeque<(u64, Capability)>,
    t: u64,
    rtt_ms: u64,
    sent: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct PeriodLog {
    privileged: u32,
    best_effort: u32,
    /// Dropped at the router over the window (misbehaving flows).
    dropped: u32,
    /// Re-requests after the sender's capability expired.
    requests: u32,
}

impl Sim {
    /// A flow right after its request at t = 1000 ms (the sender got the capability).
    fn bare(p: Params) -> Self {
        let mut r = Router::new(p, &Key::from([3u8; 16]), 4096, 16, [11, 12]).unwrap();
        let mut sender = Sender::new();
        let t = 1_000;
        sender.on_returned(r.on_request(FLOW, t).unwrap().capability);
        Sim { r, sender, echoes: VecDeque::new(), t, rtt_ms: 40, sent: 0 }
    }

    /// A flow that also sent 20 packets without loss in its first period.
    fn new(p: Params) -> Self {
        let mut s = Self::bare(p);
        let d = u64::from(p.period_ms);
        s.run(1_001, 20, 0.0);
        s.t = 1_000 + d;
        s
    }

    fn run(&mut self, start: u64, n: u32, loss: f64) -> PeriodLog {
        let d = u64::from(self.params().period_ms);
        let mut log = PeriodLog::default();
        for k in 0..n {
            let t = start + u64::from(k) * (d - 1) / u64::from(n.max(1));
            self.packet(t, loss, &mut log);
        }
        log
    }

    fn params(&self) -> Params {
        *self.r.params()
    }

    /// Runs one whole period starting 1 ms after the current one ended: `n` packets
    /// evenly spread over the period, a fraction `loss` of them lost downstream
    /// (deterministically spread). Returns the marking counts.
    fn period(&mut self, n: u32, loss: f64) -> PeriodLog {
        let d = u64::from(self.params().period_ms);
        let start = self.r.flow(FLOW).map_or(self.t, |e| u64::from(e.t_a)) + d + 1;
        let log = self.run(start, n, loss);
        self.t = start + d - 1;
        log
    }

    fn packet(&mut self, t: u64, loss: f64, log: &mut PeriodLog) {
        while self.echoes.front().is_some_and(|(at, _)| *at <= t) {
            let (_, c) = self.echoes.pop_front().unwrap();
            self.sender.on_returned(c);
        }
        let cap = self.sender.next_capability().expect("sender has a capability");
        let a = match self.r.on_regular(&cap, t) {
            Ok(a) => a,
            Err(Reject::OverWindow) => {
                log.dropped += 1;
                return;
            }
            // Dropped packets get no fresh capability: a sender whose latest
            // one expired re-requests (the flow keeps its state).
            Err(Reject::Expired) => {
                log.requests += 1;
                self.sender.on_returned(self.r.on_request(FLOW, t).unwrap().capability);
                return;
            }
            Err(e) => panic!("honest packet rejected: {e}"),
        };
        match a.mark {
            Mark::Privileged => log.privileged += 1,
            Mark::BestEffort => log.best_effort += 1,
            Mark::Dropped => unreachable!("drops are errors"),
        }
        let carried = a.restamp.unwrap_or(cap);
        let k = self.sent;
        self.sent += 1;
        let lost = ((k + 1) as f64 * loss).floor() > (k as f64 * loss).floor();
        if !lost {
            self.echoes.push_back((t + self.rtt_ms, carried));
        }
    }

    fn w_r(&self) -> u32 {
        self.r.flow(FLOW).unwrap().w_r
    }

    fn policed(&self) -> bool {
        self.r.flow(FLOW).unwrap().rate_limited()
    }
}

#[test]
fn first_period_is_best_effort_then_policing_starts_at_p_r() {
    let mut s = Sim::bare(Params::default());
    // The request's own period: packets are best effort.
    let mut log = PeriodLog::default();
    for k in 0..30 {
        s.packet(1_001 + k * 40, 0.0, &mut log);
    }
    assert_eq!((log.privileged, log.best_effort), (0, 30));
    assert_eq!(s.r.flow(FLOW).unwrap().unverified(), 1, "the last capability is in flight");
    // A packet in the second half presents it and gets no new capability.
    s.packet(2_600, 0.0, &mut log);
    let e = s.r.flow(FLOW).unwrap();
    assert_eq!((e.p_r, e.p_id), (32, 31)); // request + 31 packets; IDs for request + 30
    assert_eq!(e.unverified(), 0, "every capability came back");
    assert_eq!(log.best_effort, 31);
    // Period 2: policing starts at P_R of period 1 plus Δ (no loss).
    let log = s.period(20, 0.0);
    assert!(s.policed());
    assert_eq!(s.w_r(), 32 + 3);
    assert_eq!(log.privileged, 20);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A flow that keeps losing more than L↓ has its window halved at every period
    /// start until it reaches the floor, and stays policed.
    #[test]
    fn persistent_loss_halves_window_down_to_floor(
        n in 40u32..120,
        loss in 0.2f64..0.9,
        w_min in 1u32..4,
    ) {
        let p = Params { w_min, ..Params::default() };
        let mut s = Sim::new(p);
        s.period(n, loss); // first full period (policing starts after it)
        let mut prev = s.w_r();
        for _ in 0..14 {
            let log = s.period(n, loss);
            let w = s.w_r();
            prop_assert!(s.policed());
            prop_assert_eq!(w, ((prev as f64 * 0.5) as u32).max(w_min));
            // Only the window's worth of packets is privileged.
            prop_assert!(log.privileged <= w);
            prev = w;
        }
        prop_assert_eq!(prev, w_min);
    }

    /// A flow whose loss stays below L↑ is released exactly when more than S_Th
    /// consecutive low-loss periods were seen, and then sends only privileged packets.
    #[test]
    fn low_loss_releases_after_s_th_periods(s_th in 1u32..25, n in 20u32..60) {
        let p = Params { s_th, ..Params::default() };
        let mut s = Sim::new(p);
        // Periods 2..=S_Th+1 are policed (S_T = 1..=S_Th); the next one releases.
        for k in 1..=s_th {
            s.period(n, 0.0);
            prop_assert!(s.policed(), "released too early at low-loss period {}", k);
            prop_assert_eq!(u32::from(s.r.flow(FLOW).unwrap().s_t), k);
        }
        let log = s.period(n, 0.0);
        prop_assert!(!s.policed());
        prop_assert_eq!(log.best_effort, 0);
        // One lossy period turns policing back on, starting from the last P_R.
        let p_r_clean = s.r.flow(FLOW).unwrap().p_r;
        s.period(n, 0.5);
        s.period(n, 0.5);
        prop_assert!(s.policed());
        prop_assert!(s.w_r() <= p_r_clean);
    }

    /// The lockout of new flows: a TCP-like flow classified
    /// misbehaving on losses others caused (a flood not yet throttled) backs
    /// off to its minimum rate, which is still over its window. Under the
    /// default policy it is released as soon as a period shows the back-off
    /// and from then on nothing of it is dropped (its excess is best effort);
    /// a flow that backs off by less than β stays dropped; under
    /// `DropWhileLossy` its own counted drops keep it locked out.
    #[test]
    fn backed_off_flow_leaves_the_drop_state(
        attack_rate in 60u32..300,
        attack_loss in 0.2f64..0.8,
        floor in 3u32..40,
        w_min in 1u32..3,
    ) {
        prop_assume!(floor * 2 <= attack_rate);
        let run = |policy: OverWindow, rate: u32| {
            let mut s = Sim::new(Params { over_window: policy, w_min, ..Params::default() });
            // Two periods under the unthrottled flood: heavy downstream loss.
            s.period(attack_rate, attack_loss);
            s.period(attack_rate, attack_loss);
            let classified = s.r.flow(FLOW).unwrap().misbehaving();
            // The flood is throttled (no downstream loss); the flow sends at
            // `rate` per period whatever its window.
            let logs: Vec<PeriodLog> = (0..8).map(|_| s.period(rate, 0.0)).collect();
            (classified, logs, s.r.flow(FLOW).unwrap().misbehaving())
        };
        let (classified, logs, still) = run(OverWindow::DropWhenMisbehaving, floor);
        prop_assert!(classified);
        prop_assert!(!still);
        // The period that shows the back-off is judged when the next starts:
        // at most one more period with drops.
        for (k, log) in logs.iter().enumerate().skip(2) {
            prop_assert_eq!(log.dropped, 0, "period {}: {:?}", k, log);
            prop_assert_eq!(log.privileged + log.best_effort + log.requests, floor);
        }
        // Backing off by less than β is not enough.
        let stubborn = (attack_rate * 3).div_ceil(4);
        let (_, logs, still) = run(OverWindow::DropWhenMisbehaving, stubborn);
        prop_assert!(still);
        prop_assert!(logs.iter().all(|l| l.dropped > 0));
        // The earlier policy: locked out while the flow sends.
        if floor > w_min + 1 {
            let (_, logs, still) = run(OverWindow::DropWhileLossy, floor);
            prop_assert!(still);
            prop_assert!(logs[7].dropped > 0);
        }
    }

    /// Flow regeneration (thesis §4): however a fresh flow times its packets, none
    /// is privileged before its first period ended.
    #[test]
    fn regenerated_flows_get_no_privileged_packets_in_first_period(
        flows in 1u64..40,
        gaps in proptest::collection::vec(0u64..200, 1..60),
    ) {
        let mut r = Router::new(Params::default(), &Key::from([4u8; 16]), 4096, 16, [1, 2]).unwrap();
        let start = 10_000u64;
        for f in 0..flows {
            let id = 1_000 + f;
            let created = start + f * 37;
            let mut cap = r.on_request(id, created).unwrap().capability;
            let mut t = created;
            for g in &gaps {
                t += g;
                if t > created + u64::from(r.params().period_ms) {
                    break;
                }
                let a = r.on_regular(&cap, t).unwrap();
                prop_assert_eq!(a.mark, Mark::BestEffort);
                if let Some(c) = a.restamp { cap = c; }
            }
        }
    }
}

/// On-off shrew (thesis §4): a flow that floods in period k and sends a clean
/// trickle in period k+1 does not get its window back for period k+2.
#[test]
fn shrew_on_off_does_not_regain_window() {
    shrew(Params::default());
    // Also with the thesis' marking only (no drops over the window).
    shrew(Params { over_window: OverWindow::Demote, ..Params::default() });
}

fn shrew(p: Params) {
    let mut s = Sim::new(p);
    for _ in 0..5 {
        s.period(60, 0.0); // well-behaved warm-up
    }
    let mut w_on_prev = u32::MAX;
    for cycle in 0..4 {
        // On: flood with heavy loss. The window it gets was fixed at its start.
        let on = s.period(600, 0.6);
        let w_on = s.w_r();
        assert!(
            on.privileged <= w_on,
            "cycle {cycle}: {} privileged > window {w_on}",
            on.privileged
        );
        // Off: a trickle without any loss.
        s.period(10, 0.0);
        let w_off = s.w_r();
        assert!(s.policed(), "cycle {cycle}: policing must stay on");
        assert!(w_off < w_on || w_off == 1, "cycle {cycle}: off period regained {w_on} -> {w_off}");
        if cycle > 0 {
            // The next flood gets at most half of the previous one's window.
            assert!(w_on * 2 <= w_on_prev || w_on == 1, "cycle {cycle}: {w_on_prev} -> {w_on}");
        }
        w_on_prev = w_on;
    }
    // The loss history stays above L↓ after the clean period.
    assert!(f64::from(s.r.flow(FLOW).unwrap().l_r) > s.params().l_down);
}

#[test]
fn capability_misuse_is_rejected() {
    let mut r = Router::new(Params::default(), &Key::from([5u8; 16]), 1024, 8, [3, 4]).unwrap();
    let c1 = r.on_request(FLOW, 0).unwrap().capability;
    let c2 = r.on_regular(&c1, 10).unwrap().restamp.unwrap();
    // Forged MAC.
    assert_eq!(r.on_regular(&Capability { mac: [1; 8], ..c2 }, 20), Err(Reject::BadMac));
    // Capability C(i,k) used to vouch for packet j: the MAC covers P_id.
    assert_eq!(r.on_regular(&Capability { p_id: 7, ..c2 }, 20), Err(Reject::BadMac));
    // Another flow's ID with this MAC.
    assert_eq!(r.on_regular(&Capability { flow_id: FLOW + 1, ..c2 }, 20), Err(Reject::BadMac));
    // Next period: the old capability is a ticket, not feedback: W_V stays empty.
    let a = r.on_regular(&c2, 3_001).unwrap();
    assert_eq!(a.feedback, Feedback::Previous);
    assert_eq!(r.flow(FLOW).unwrap().w_v, 0);
    // Two periods later it is rejected.
    assert_eq!(r.on_regular(&c2, 6_002), Err(Reject::Expired));
    assert_eq!(r.on_regular(&c1, 6_003), Err(Reject::Expired));
}

/// The default over-window policy: a flow that keeps flooding far over its
/// window is classified misbehaving, its excess is dropped at the router and
/// counts as loss, so its window stays at the floor; once it backs off it is
/// released (the back-off release), and once its history has decayed its
/// window grows again. Under `DropWhileLossy` the release waits for the
/// history to decay.
#[test]
fn flooding_flow_is_dropped_and_recovers_once_it_complies() {
    for (policy, release_within) in
        [(OverWindow::DropWhenMisbehaving, 2), (OverWindow::DropWhileLossy, 9)]
    {
        let mut s = Sim::new(Params { over_window: policy, ..Params::default() });
        s.period(20, 0.0);
        let mut log = PeriodLog::default();
        for _ in 0..8 {
            // 300 packets per period, a quarter lost downstream.
            log = s.period(300, 0.25);
        }
        let e = s.r.flow(FLOW).unwrap();
        assert!(e.misbehaving() && e.rate_limited());
        assert_eq!(e.w_r, 1, "window at the floor");
        assert!(log.dropped > 250, "{log:?}");
        assert!(log.privileged <= 1 && log.best_effort == 0, "{log:?}");
        // Complying: its one privileged packet early in the period, and one
        // packet in the second half that carries the returned capability back
        // (no new capability is issued there, so it costs no loss).
        let d = u64::from(s.params().period_ms);
        let complying_period = |s: &mut Sim| {
            let start = u64::from(s.r.flow(FLOW).unwrap().t_a) + d + 1;
            let mut log = PeriodLog::default();
            s.packet(start, 0.0, &mut log);
            s.packet(start + d * 3 / 4, 0.0, &mut log);
            s.t = start + d - 1;
            log
        };
        // (A period is judged when the next one starts: the first complying
        // period ends the flooding one.)
        let mut periods = 0;
        while s.r.flow(FLOW).unwrap().misbehaving() {
            complying_period(&mut s);
            periods += 1;
            assert!(periods <= release_within, "{policy:?}: misbehaving after {periods} periods");
        }
        assert_eq!(s.r.flow(FLOW).unwrap().unverified(), 0);
        // The window holds while the history (λ = 0.5 per period) is between
        // L↑ and L↓, then grows by Δ per period; nothing is dropped any more.
        let w = s.w_r();
        let mut grown = 0;
        for _ in 0..12 {
            let log = complying_period(&mut s);
            assert_eq!(log.dropped, 0, "{log:?}");
            grown = s.w_r() - w;
        }
        assert!(grown >= 3 * 4, "{policy:?}: window grew by {grown} only");
    }
}
